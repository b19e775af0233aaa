//! The built binary over Streamable HTTP (`--transport http --listen 127.0.0.1:0`), with
//! reqwest as the client: the handshake and the tools, tokens and scopes (401/403 with
//! their challenges), tenancy, Origin/Host/CORS, the order of the transport's checks,
//! tasks across two instances on one data dir, SSE, the load limits, slowloris and
//! SIGTERM. Every JSON-RPC frame that comes back is checked against the MCP schema.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::support::binary::binary;
use crate::support::schema::check_frame;
use crate::support::{assert_envelope, fixtures, init_params};

const LOCAL: &str = "00000000-0000-4000-8000-000000000001";
const OTHER: &str = "bbbbbbbb-0000-4000-8000-00000000000b";
const ALL_SCOPES: &str = "cyberos:cuo:read cyberos:cuo:execute cyberos:memory:read cyberos:memory:write cyberos:skill:read cyberos:skill:invoke";

/// One bridge process serving HTTP.
struct Server {
    child: Child,
    base: String,
    data: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
    _dir: Option<tempfile::TempDir>,
}

/// A response, read whole.
struct Reply {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|_| panic!("not JSON ({}): {:?}", self.status, self.text))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The SSE events as (id, data).
    fn events(&self) -> Vec<(String, String)> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"));
        self.text
            .split("\n\n")
            .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
            .map(|e| {
                let field = |name: &str| {
                    e.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_owned())
                        .unwrap_or_default()
                };
                (field("id:"), field("data:"))
            })
            .collect()
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

impl Server {
    /// `--dev` on a fresh data dir with the fixture skills and `extra` flags.
    fn start(extra: &[&str]) -> Server {
        Server::start_env(extra, &[])
    }

    fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--dev"];
        args.extend_from_slice(extra);
        let mut s = Server::launch(dir.path(), &args, env);
        s._dir = Some(dir);
        s
    }

    /// `--dev` on a data dir the caller keeps (shared by several servers).
    fn start_at(data: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--dev"];
        args.extend_from_slice(extra);
        Server::launch(data, &args, &[])
    }

    /// Exactly `args` (plus transport, data dir and skills).
    fn launch(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let listen = if args.contains(&"--listen") {
            vec![]
        } else {
            vec!["--listen", "127.0.0.1:0"]
        };
        let mut child = Command::new(binary())
            .args(["--transport", "http"])
            .args(listen)
            .arg("--data-dir")
            .arg(data)
            .arg("--skills-dir")
            .arg(fixtures().join("skills"))
            .args(args)
            .env("RUST_LOG", "info")
            .env("CYBEROS_LOG_FORMAT", "text")
            .env_remove("CYBEROS_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the bridge binary starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_owned();
                    let _ = tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("no `listening on` line: {:?}", log.lock().unwrap())
            });
        // A wildcard bind is reached through loopback.
        let addr = addr.replace("0.0.0.0", "127.0.0.1");
        Server {
            child,
            base: format!("http://{addr}"),
            data: data.to_owned(),
            log,
            client: client(),
            _dir: None,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A dev token for `tenant` from this server's data dir (every scope unless given).
    fn token(&self, tenant: &str, scopes: Option<&str>) -> String {
        let mut cmd = Command::new(binary());
        cmd.arg("--data-dir")
            .arg(&self.data)
            .args(["dev-token", "--tenant", tenant]);
        if let Some(s) = scopes {
            cmd.args(["--scopes", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// POSTs `body` to /mcp as an MCP client does (JSON + SSE accepted).
    async fn post(&self, token: Option<&str>, body: &Value) -> Reply {
        self.post_with(token, body.to_string(), &[]).await
    }

    async fn post_with(
        &self,
        token: Option<&str>,
        body: String,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self
            .client
            .post(self.url("/mcp"))
            .header("content-type", "application/json")
            .body(body);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
        {
            req = req.header("accept", "application/json, text/event-stream");
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send().await.expect("a response")).await
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        read(req.send().await.expect("a response")).await
    }

    /// A request's response frame, checked against the schema.
    async fn rpc(&self, token: &str, id: i64, method: &str, params: Value) -> Value {
        let reply = self
            .post(
                Some(token),
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .await;
        let frame = if reply.header("content-type") == Some("text/event-stream") {
            let events = reply.events();
            serde_json::from_str(&events.last().unwrap().1).unwrap()
        } else {
            reply.json()
        };
        let task = params.get("task").is_some();
        check_frame(&frame, Some(method), task);
        frame
    }

    async fn call(&self, token: &str, tool: &str, arguments: Value) -> Value {
        self.rpc(
            token,
            1,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn sigterm(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Waits (at most 20 s) for the process to exit.
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn read(resp: reqwest::Response) -> Reply {
    Reply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap_or_default(),
    }
}

fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn paced(ms: u64) -> String {
    format!("{} cuo-runner --pace-ms {ms}", binary())
}

fn adr() -> Value {
    json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "x"}})
}

/// Starts `execute_workflow` as a task; returns its id.
async fn start_task(s: &Server, token: &str) -> String {
    let created = s
        .rpc(
            token,
            1,
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr(), "task": {}}),
        )
        .await;
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a CreateTaskResult: {created}"))
        .to_owned()
}

async fn task_status(s: &Server, token: &str, id: &str) -> String {
    let got = s.rpc(token, 2, "tasks/get", json!({"taskId": id})).await;
    got["result"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_owned()
}

/// An error frame of an HTTP error response: the envelope, and no id unless expected.
fn error_body(reply: &Reply, status: u16, code: i64, class: &str) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let frame = reply.json();
    check_frame(&frame, None, false);
    assert_envelope(&frame, code, class);
    frame
}

#[tokio::test]
async fn the_binary_serves_health_the_handshake_the_tools_and_a_call() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let health = s.send(s.client.get(s.url("/healthz"))).await;
    assert_eq!(
        (health.status, health.json()),
        (200, json!({"status": "ok"}))
    );
    assert_eq!(s.send(s.client.get(s.url("/readyz"))).await.status, 200);

    let init = s.rpc(&t, 1, "initialize", init_params("2025-11-25")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "cyberos-mcp-bridge");
    let note = s
        .post(
            Some(&t),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert_eq!((note.status, note.text.as_str()), (202, ""));
    assert!(
        note.header("mcp-session-id").is_none(),
        "stateless: no session"
    );

    let list = s.rpc(&t, 2, "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 8);
    let call = s
        .call(&t, "cyberos.skill.list_skills", json!({"query": "release"}))
        .await;
    assert_eq!(
        call["result"]["structuredContent"]["skills"][0]["name"], "release-notes",
        "{call}"
    );
    // The well-known header is accepted; ping needs nothing else.
    let ping = s
        .post_with(
            Some(&t),
            rpc(3, "ping", json!({})).to_string(),
            &[("mcp-protocol-version", "2025-11-25")],
        )
        .await;
    assert_eq!((ping.status, &ping.json()["result"]), (200, &json!({})));
}

#[tokio::test]
async fn missing_and_bad_tokens_get_401_with_the_rfc_9728_challenge() {
    let s = Server::start(&[]);
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", s.base);

    let none = s.post(None, &rpc(7, "tools/list", json!({}))).await;
    let frame = error_body(&none, 401, -32000, "authz_denied");
    assert_eq!(frame["id"], 7, "the request id is echoed");
    assert_eq!(
        none.header("www-authenticate").unwrap(),
        format!("Bearer resource_metadata=\"{metadata}\", scope=\"{ALL_SCOPES}\"")
    );

    let bad = s
        .post(
            Some("not.a.jwt"),
            &rpc(8, "initialize", init_params("2025-11-25")),
        )
        .await;
    error_body(&bad, 401, -32000, "authz_denied");
    let challenge = bad.header("www-authenticate").unwrap();
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");

    // A notification carries no id, so the 401 carries none either.
    let note = s
        .post(
            None,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert!(
        error_body(&note, 401, -32000, "authz_denied")
            .get("id")
            .is_none()
    );

    // A token of another key (another data dir) is refused too.
    let elsewhere = Server::start(&[]);
    let foreign = elsewhere.token(LOCAL, None);
    let reply = s
        .post(Some(&foreign), &rpc(9, "tools/list", json!({})))
        .await;
    error_body(&reply, 401, -32000, "authz_denied");

    let doc = s
        .send(
            s.client
                .get(s.url("/.well-known/oauth-protected-resource/mcp")),
        )
        .await;
    assert_eq!(doc.status, 200);
    let doc = doc.json();
    assert_eq!(doc["resource"], format!("{}/mcp", s.base));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    assert_eq!(doc["scopes_supported"].as_array().unwrap().len(), 6);
    assert!(doc["authorization_servers"].is_array());
    let root = s
        .send(s.client.get(s.url("/.well-known/oauth-protected-resource")))
        .await;
    assert_eq!(root.json(), doc);
}

#[tokio::test]
async fn a_read_only_token_gets_403_insufficient_scope_for_a_write() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, Some("cyberos:memory:read cyberos:skill:read"));
    let reply = s
        .post(
            Some(&t),
            &rpc(
                4,
                "tools/call",
                json!({
                    "name": "cyberos.memory.append_audit",
                    "arguments": {"kind": "test.note", "body": {"x": 1}},
                    "_meta": {"com.cyberos/confirmed": true}
                }),
            ),
        )
        .await;
    let frame = error_body(&reply, 403, -32000, "authz_denied");
    assert_eq!(frame["id"], 4);
    assert_eq!(
        frame["error"]["data"]["missing_scopes"],
        json!(["cyberos:memory:write"])
    );
    let challenge = reply.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"cyberos:memory:write\""),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata=\""), "{challenge}");
    // What the token does allow still works.
    let ok = s.call(&t, "cyberos.skill.list_skills", json!({})).await;
    assert!(ok.get("result").is_some(), "{ok}");
}

#[tokio::test]
async fn each_token_sees_its_own_tenants_audit_log_only() {
    let s = Server::start(&[]);
    let a = s.token(LOCAL, None);
    let b = s.token(OTHER, None);
    let appended = s
        .rpc(
            &a,
            1,
            "tools/call",
            json!({
                "name": "cyberos.memory.append_audit",
                "arguments": {"kind": "test.note", "body": {"secret": "tenant-a"}},
                "_meta": {"com.cyberos/confirmed": true}
            }),
        )
        .await;
    assert!(
        appended["result"]["structuredContent"]["audit_id"].is_string(),
        "{appended}"
    );
    let read_b = s.call(&b, "cyberos.memory.read_audit", json!({})).await;
    assert_eq!(
        read_b["result"]["structuredContent"]["entries"],
        json!([]),
        "{read_b}"
    );
    let read_a = s.call(&a, "cyberos.memory.read_audit", json!({})).await;
    let entries = read_a["result"]["structuredContent"]["entries"]
        .as_array()
        .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["body"]["secret"], "tenant-a");
}

fn cors_headers(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-") || k == "vary")
        .collect()
}

#[tokio::test]
async fn without_cors_origin_there_are_no_cors_headers_and_preflights_are_refused() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    // A local page may call a loopback bridge, but gets no CORS grant.
    let local = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "http://localhost:5173")],
        )
        .await;
    assert_eq!(local.status, 200);
    assert!(cors_headers(&local).is_empty(), "{:?}", local.headers);
    for origin in ["http://localhost:5173", "https://example.com"] {
        let pre = s
            .send(
                s.client
                    .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                    .header("origin", origin)
                    .header("access-control-request-method", "POST"),
            )
            .await;
        let frame = error_body(&pre, 403, -32600, "input_validation");
        assert!(
            frame["error"]["message"]
                .as_str()
                .unwrap()
                .contains("origin"),
            "{frame}"
        );
        assert!(cors_headers(&pre).is_empty());
    }
    let evil = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://evil.example")],
        )
        .await;
    let frame = error_body(&evil, 403, -32600, "input_validation");
    assert_eq!(frame["error"]["message"], "origin not allowed");
    // Refused before the token is even looked at.
    let evil = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "null")],
        )
        .await;
    assert_eq!(evil.status, 403);
}

#[tokio::test]
async fn a_cors_origin_is_granted_exactly_and_others_are_refused() {
    let s = Server::start(&["--cors-origin", "https://example.com"]);
    let t = s.token(LOCAL, None);
    let ok = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://example.com")],
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    assert_eq!(ok.header("vary"), Some("Origin"));
    assert_eq!(
        ok.header("access-control-expose-headers"),
        Some("WWW-Authenticate")
    );
    // A browser client can read the 401 challenge.
    let denied = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://example.com")],
        )
        .await;
    assert_eq!(denied.status, 401);
    assert_eq!(
        denied.header("access-control-allow-origin"),
        Some("https://example.com")
    );

    let pre = s
        .send(
            s.client
                .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                .header("origin", "https://example.com")
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                ),
        )
        .await;
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    assert_eq!(
        pre.header("access-control-allow-methods"),
        Some("POST, GET, DELETE, OPTIONS")
    );
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("Authorization, Content-Type, MCP-Protocol-Version, Last-Event-ID, Mcp-Session-Id")
    );
    for origin in [
        "https://other.example",
        "http://example.com",
        "https://a.example.com",
    ] {
        let post = s
            .post_with(
                Some(&t),
                rpc(1, "ping", json!({})).to_string(),
                &[("origin", origin)],
            )
            .await;
        error_body(&post, 403, -32600, "input_validation");
        assert!(post.header("access-control-allow-origin").is_none());
        let pre = s
            .send(
                s.client
                    .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                    .header("origin", origin),
            )
            .await;
        error_body(&pre, 403, -32600, "input_validation");
    }
}

#[tokio::test]
async fn a_foreign_host_header_on_a_loopback_bind_is_refused() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let evil = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("host", &format!("attacker.example:{port}"))],
        )
        .await;
    let frame = error_body(&evil, 403, -32600, "input_validation");
    assert_eq!(frame["error"]["message"], "host not allowed");
    let local = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("host", &format!("localhost:{port}"))],
        )
        .await;
    assert_eq!(local.status, 200);
}

#[tokio::test]
async fn transport_errors_come_in_order_with_json_rpc_bodies() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    // A 2026 client's probe learns "legacy server", not "unauthorized".
    let probe = s
        .post_with(
            None,
            rpc(1, "server/discover", json!({})).to_string(),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "server/discover"),
            ],
        )
        .await;
    let frame = error_body(&probe, 400, -32600, "input_validation");
    assert!(frame.get("id").is_none());
    // Without the header it reaches the dispatcher: 400 with method-not-found.
    let discover = s
        .post(Some(&t), &rpc(2, "server/discover", json!({})))
        .await;
    assert_eq!(
        error_body(&discover, 400, -32601, "input_validation")["id"],
        2
    );

    let batch = s
        .post_with(Some(&t), format!("[{}]", rpc(1, "ping", json!({}))), &[])
        .await;
    assert!(
        error_body(&batch, 400, -32600, "input_validation")
            .get("id")
            .is_none()
    );
    let junk = s.post_with(Some(&t), "{\"jsonrpc\":".into(), &[]).await;
    error_body(&junk, 400, -32700, "input_validation");

    let text = s
        .send(
            s.client
                .post(s.url("/mcp"))
                .header("content-type", "text/plain")
                .header("authorization", format!("Bearer {t}"))
                .body(rpc(1, "ping", json!({})).to_string()),
        )
        .await;
    error_body(&text, 415, -32600, "input_validation");
    let html = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("accept", "text/html")],
        )
        .await;
    error_body(&html, 406, -32600, "input_validation");

    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let reply = s.send(s.client.request(method, s.url("/mcp"))).await;
        error_body(&reply, 405, -32600, "input_validation");
        assert_eq!(reply.header("allow"), Some("POST, OPTIONS"));
    }
    let missing = s.send(s.client.get(s.url("/nope"))).await;
    error_body(&missing, 404, -32600, "input_validation");

    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(4 * 1024 * 1024)
    );
    let reply = s.post_with(Some(&t), big, &[]).await;
    error_body(&reply, 413, -32600, "input_validation");
    // The bridge still serves.
    assert_eq!(
        s.post(Some(&t), &rpc(1, "ping", json!({}))).await.status,
        200
    );
}

#[tokio::test]
async fn a_task_augmented_workflow_is_polled_to_completion_and_its_result_fetched() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = task_status(&s, &t, &id).await;
        if status == "completed" {
            break;
        }
        assert_eq!(status, "working");
        assert!(Instant::now() < deadline, "the task never completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let result = s.rpc(&t, 3, "tasks/result", json!({"taskId": id})).await;
    let r = &result["result"];
    assert!(
        r["structuredContent"]["steps_executed"].as_u64().unwrap() > 0,
        "{result}"
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id
    );
    // Another tenant cannot see it.
    let other = s.token(OTHER, None);
    let foreign = s.rpc(&other, 4, "tasks/get", json!({"taskId": id})).await;
    assert_envelope(&foreign, -32602, "input_validation");
}

#[tokio::test]
async fn a_waiting_tasks_result_streams_sse_and_ends_with_the_result() {
    let paced = paced(300);
    let s = Server::start(&["--cuo-command", &paced]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let reply = s
        .post(Some(&t), &rpc(9, "tasks/result", json!({"taskId": id})))
        .await;
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert!(events.len() >= 2, "{}", reply.text);
    let (priming_id, priming_data) = &events[0];
    assert!(
        !priming_id.is_empty() && priming_data.is_empty(),
        "{}",
        reply.text
    );
    let last: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    check_frame(&last, Some("tasks/result"), false);
    assert_eq!(last["id"], 9);
    assert!(
        last["result"]["structuredContent"]["steps_executed"].is_number(),
        "{last}"
    );
    let ids: Vec<&String> = events.iter().map(|(i, _)| i).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "event ids are unique");
}

#[tokio::test]
async fn a_plain_call_with_a_progress_token_streams_progress_then_the_result() {
    let paced = paced(300);
    let s = Server::start(&["--cuo-command", &paced, "--long-running", "wait"]);
    let t = s.token(LOCAL, None);
    let reply = s
        .post(
            Some(&t),
            &rpc(
                5,
                "tools/call",
                json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr(), "_meta": {"progressToken": "p-1"}}),
            ),
        )
        .await;
    assert_eq!(reply.status, 200);
    let frames: Vec<Value> = reply
        .events()
        .into_iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    let (last, progress) = frames.split_last().unwrap();
    check_frame(last, Some("tools/call"), false);
    assert_eq!(last["id"], 5);
    assert!(
        last["result"]["structuredContent"]["steps_executed"].is_number(),
        "{last}"
    );
    assert!(
        !progress.is_empty(),
        "progress precedes the result: {}",
        reply.text
    );
    for p in progress {
        check_frame(p, None, false);
        assert_eq!(p["method"], "notifications/progress");
        assert_eq!(p["params"]["progressToken"], "p-1");
    }
    // A client that accepts JSON only gets the same answer as JSON.
    let reply = s
        .post_with(
            Some(&t),
            rpc(6, "tools/call", json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr(), "_meta": {"progressToken": "p-2"}})).to_string(),
            &[("accept", "application/json")],
        )
        .await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(reply.json()["result"]["structuredContent"]["steps_executed"].is_number());
}

#[tokio::test]
async fn two_instances_on_one_data_dir_share_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let paced = paced(3000);
    let a = Server::start_at(dir.path(), &["--cuo-command", &paced]);
    let b = Server::start_at(dir.path(), &["--cuo-command", &paced]);
    let t = a.token(LOCAL, None);
    for (i, s) in [&a, &b, &a, &b].into_iter().enumerate() {
        let list = s.rpc(&t, i as i64, "tools/list", json!({})).await;
        assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 8);
    }
    let id = start_task(&a, &t).await;
    assert_eq!(task_status(&b, &t, &id).await, "working");
    let listed = b.rpc(&t, 3, "tasks/list", json!({})).await;
    assert!(
        listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["taskId"] == id),
        "{listed}"
    );
    let cancelled = b.rpc(&t, 4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(task_status(&a, &t, &id).await, "cancelled");
    // The owner notices within its poll interval and stops the run.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(task_status(&a, &t, &id).await, "cancelled");
}

#[tokio::test]
async fn tools_calls_beyond_the_tenant_rate_get_429_with_retry_after() {
    let s = Server::start_env(&[], &[("CYBEROS_HTTP_CALL_RATE", "1/2")]);
    let t = s.token(LOCAL, None);
    let call = rpc(
        3,
        "tools/call",
        json!({"name": "cyberos.skill.list_skills", "arguments": {}}),
    );
    for _ in 0..2 {
        assert_eq!(s.post(Some(&t), &call).await.status, 200);
    }
    let limited = s.post(Some(&t), &call).await;
    let frame = error_body(&limited, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 3);
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1);
    // Other methods and other tenants are not limited.
    assert_eq!(
        s.post(Some(&t), &rpc(1, "tools/list", json!({})))
            .await
            .status,
        200
    );
    let other = s.token(OTHER, None);
    assert_eq!(s.post(Some(&other), &call).await.status, 200);
}

#[tokio::test]
async fn requests_beyond_the_concurrency_limit_are_shed_with_503() {
    let paced = paced(2000);
    let s = Arc::new(Server::start_env(
        &["--cuo-command", &paced],
        &[("CYBEROS_HTTP_MAX_INFLIGHT", "1")],
    ));
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    // A waiting tasks/result holds the only slot.
    let waiting = {
        let (s, t) = (Arc::clone(&s), t.clone());
        tokio::spawn(async move {
            s.post(Some(&t), &rpc(1, "tasks/result", json!({"taskId": id})))
                .await
                .status
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let shed = s.post(Some(&t), &rpc(2, "tools/list", json!({}))).await;
    error_body(&shed, 503, -32050, "upstream_unavailable");
    assert_eq!(shed.header("retry-after"), Some("1"));
    waiting.abort();
}

#[tokio::test]
async fn a_plain_request_past_the_deadline_gets_504() {
    // A CUO that never answers: the short call would wait for its own 10 s timeout.
    let s = Server::start_env(
        &["--cuo-command", "sleep 60"],
        &[("CYBEROS_HTTP_REQUEST_TIMEOUT_MS", "500")],
    );
    let t = s.token(LOCAL, None);
    let started = Instant::now();
    let reply = s
        .post(
            Some(&t),
            &rpc(
                5,
                "tools/call",
                json!({"name": "cyberos.cuo.list_personas", "arguments": {}}),
            ),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let frame = error_body(&reply, 504, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 5);
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let s = Server::start(&[]);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = conn.read_to_end(&mut buf);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(20),
        "closed after {waited:?}"
    );
}

#[tokio::test]
async fn sigterm_ends_waiting_streams_drains_and_exits_zero() {
    let paced = paced(3000);
    let mut s = Server::start(&["--cuo-command", &paced]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let client = s.client.clone();
    let url = s.url("/mcp");
    let body = rpc(1, "tasks/result", json!({"taskId": id})).to_string();
    let waiting = tokio::spawn({
        let t = t.clone();
        async move {
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("authorization", format!("Bearer {t}"))
                .body(body)
                .send()
                .await
                .unwrap();
            read(resp).await
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    s.sigterm();
    let reply = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the stream ends")
        .unwrap();
    let last: Value = serde_json::from_str(&reply.events().last().unwrap().1).unwrap();
    assert_envelope(&last, -32050, "upstream_unavailable");
    assert_eq!(last["error"]["message"], "the bridge is shutting down");
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", s.log());
    assert!(s.log().contains("draining"), "{}", s.log());
}

/// SIGTERM on HTTP drains, then flushes the spans: a call answered just before is at the
/// collector when the process has exited, well inside the exporter's 1 s batch delay.
#[tokio::test]
async fn sigterm_on_http_flushes_the_spans_before_exit() {
    let collector = crate::support::collector::Collector::start();
    let mut s = Server::start(&["--otlp-endpoint", &collector.endpoint]);
    let token = s.token(LOCAL, None);
    let call = rpc(
        1,
        "tools/call",
        json!({"name": "cyberos.cuo.route", "arguments": {"query": ""}}),
    );
    let bad = s.post(Some(&token), &call).await;
    let trace = bad.json()["error"]["data"]["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.sigterm();
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", s.log());
    assert!(
        collector
            .spans()
            .iter()
            .any(|r| crate::support::collector::hex(&r.span.trace_id) == trace),
        "the call's span was flushed before exit"
    );
}

/// Seed criterion 21: `--listen 0.0.0.0:…` opens the port and /healthz answers 200 (with
/// a real key source: `--dev` refuses non-loopback binds).
#[tokio::test]
async fn criterion_21_a_wildcard_bind_serves_healthz_and_the_public_url() {
    let dir = tempfile::tempdir().unwrap();
    let key = fixtures().join("keys/rsa.pub");
    let s = Server::launch(
        dir.path(),
        &[
            "--listen",
            "0.0.0.0:0",
            "--jwt-public-key",
            key.to_str().unwrap(),
            "--jwt-issuer",
            "https://issuer.example",
            "--public-url",
            "https://bridge.example.com/mcp",
        ],
        &[],
    );
    let health = s.send(s.client.get(s.url("/healthz"))).await;
    assert_eq!(health.status, 200);
    let doc = s
        .send(
            s.client
                .get(s.url("/.well-known/oauth-protected-resource/mcp")),
        )
        .await
        .json();
    assert_eq!(doc["resource"], "https://bridge.example.com/mcp");
    assert_eq!(
        doc["authorization_servers"],
        json!(["https://issuer.example"])
    );
    // Not loopback: any Host; the public origin may call from a browser.
    let reply = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[
                ("host", "bridge.example.com"),
                ("origin", "https://bridge.example.com"),
            ],
        )
        .await;
    error_body(&reply, 401, -32000, "authz_denied");
    assert!(reply.header("www-authenticate").unwrap().contains(
        "resource_metadata=\"https://bridge.example.com/.well-known/oauth-protected-resource/mcp\""
    ));
    let local = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "http://localhost:3000")],
        )
        .await;
    assert_eq!(
        local.status, 403,
        "local origins are a loopback-only allowance"
    );
}

#[test]
fn a_bad_cors_origin_or_public_url_is_a_usage_error() {
    for (flag, value, says) in [
        ("--cors-origin", "*", "--cors-origin"),
        ("--public-url", "bridge.example.com/mcp", "--public-url"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(binary())
            .args([
                "--dev",
                "--transport",
                "http",
                "--listen",
                "127.0.0.1:0",
                flag,
                value,
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{out:?}"
        );
    }
}

#[tokio::test]
async fn a_tenant_at_its_task_cap_gets_429_with_retry_after() {
    let s = Server::start_env(
        &["--cuo-command", &paced(3000)],
        &[("CYBEROS_MAX_TASKS_PER_TENANT", "1")],
    );
    let t = s.token(LOCAL, None);
    let start = rpc(
        4,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr()}),
    );
    assert_eq!(s.post(Some(&t), &start).await.status, 200);
    let refused = s.post(Some(&t), &start).await;
    let frame = error_body(&refused, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["error"]["message"], "too many running tasks");
    assert!(refused.header("retry-after").is_some());
    // Another tenant is not held back.
    let other = s.token("bbbbbbbb-0000-4000-8000-00000000000b", None);
    assert_eq!(s.post(Some(&other), &start).await.status, 200);
}

#[tokio::test]
async fn another_tenants_task_is_not_found_over_http() {
    let s = Server::start(&[]);
    let a = s.token(LOCAL, None);
    let b = s.token("bbbbbbbb-0000-4000-8000-00000000000b", None);
    let id = start_task(&s, &a).await;
    let foreign = s.rpc(&b, 2, "tasks/get", json!({"taskId": id})).await;
    let missing = s
        .rpc(
            &b,
            3,
            "tasks/get",
            json!({"taskId": "t-aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
        )
        .await;
    for frame in [&foreign, &missing] {
        assert_eq!(frame["error"]["code"], -32602, "{frame}");
        assert_eq!(frame["error"]["message"], "task not found");
        assert_eq!(frame["error"]["data"]["class"], "input_validation");
    }
    let cancel = s.rpc(&b, 4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel["error"]["message"], "task not found");
    let own = s.rpc(&a, 5, "tasks/get", json!({"taskId": id})).await;
    assert!(own["result"]["status"].is_string(), "{own}");
}

#[tokio::test]
async fn a_traceparent_header_continues_the_callers_trace_through_the_bridge_to_memory() {
    use crate::support::collector::{Collector, attr, hex};
    let collector = Collector::start();
    let memory = crate::support::memory_server::MemoryServer::start();
    let s = Server::start(&[
        "--otlp-endpoint",
        &collector.endpoint,
        "--memory-url",
        &memory.url,
    ]);
    let token = s.token(LOCAL, None);
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let caller = format!("00-{trace}-10f067aa0ba902b7-01");
    // Two tracestate fields are one list (RFC 9110); it travels on unchanged.
    let header = [
        ("traceparent", caller.as_str()),
        ("tracestate", "rojo=00f067aa0ba902b7"),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    let state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
    let call = |id: i64, tool: &str, args: Value| {
        rpc(id, "tools/call", json!({"name": tool, "arguments": args})).to_string()
    };
    let read = s
        .post_with(
            Some(&token),
            call(3, "cyberos.memory.read_audit", json!({})),
            &header,
        )
        .await;
    assert_eq!(read.status, 200, "{}", read.text);
    let bad = s
        .post_with(
            Some(&token),
            call(4, "cyberos.cuo.route", json!({"query": ""})),
            &header,
        )
        .await;
    assert_eq!(bad.json()["error"]["data"]["trace_id"], trace);
    let refused = s
        .post_with(
            Some("not.a.jwt"),
            call(5, "cyberos.skill.list_skills", json!({})),
            &header,
        )
        .await;
    let frame = error_body(&refused, 401, -32000, "authz_denied");
    assert_eq!(frame["error"]["data"]["trace_id"], trace);
    // Refusals by the transport itself carry the caller's trace too.
    let not_acceptable = s
        .post_with(
            Some(&token),
            call(6, "cyberos.skill.list_skills", json!({})),
            &[("traceparent", caller.as_str()), ("accept", "text/html")],
        )
        .await;
    let frame = error_body(&not_acceptable, 406, -32600, "input_validation");
    assert_eq!(frame["error"]["data"]["trace_id"], trace);

    let span = |id: &str| {
        collector
            .wait_for(Duration::from_secs(10), |s| {
                attr(s, "jsonrpc.request.id").as_deref() == Some(id)
            })
            .span
    };
    let read_span = span("3");
    assert_eq!(hex(&read_span.trace_id), trace);
    assert_eq!(hex(&read_span.parent_span_id), "10f067aa0ba902b7");
    assert_eq!(read_span.trace_state, state);
    assert_eq!(
        attr(&read_span, "network.transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(
        attr(&read_span, "cyberos.tenant_id").as_deref(),
        Some(LOCAL)
    );
    assert_eq!(
        attr(&read_span, "cyberos.outcome").as_deref(),
        Some("success")
    );
    // The memory request carried the trace on, with the bridge's span as its parent.
    let sent: Vec<String> = memory
        .headers()
        .iter()
        .filter_map(|h| Some(h.get("traceparent")?.to_str().ok()?.to_owned()))
        .collect();
    let expected = format!("00-{trace}-{}-01", hex(&read_span.span_id));
    assert!(
        sent.contains(&expected),
        "{sent:?} should contain {expected}"
    );
    assert!(
        memory
            .headers()
            .iter()
            .any(|h| h.get("tracestate").and_then(|v| v.to_str().ok()) == Some(state)),
        "the memory request carries the caller's tracestate"
    );
    let refused_span = span("5");
    assert_eq!(hex(&refused_span.trace_id), trace);
    assert_eq!(
        attr(&refused_span, "cyberos.tenant_id").as_deref(),
        Some("unknown")
    );
    assert_eq!(
        attr(&refused_span, "cyberos.outcome").as_deref(),
        Some("authz_denied")
    );
    assert_eq!(
        attr(&refused_span, "cyberos.tool_name").as_deref(),
        Some("cyberos.skill.list_skills")
    );
}
