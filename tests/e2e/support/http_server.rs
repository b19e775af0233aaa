//! The built binary serving Streamable HTTP (`--transport http --listen 127.0.0.1:0`),
//! with reqwest as the client. Every JSON-RPC frame that comes back through `rpc` is
//! checked against the MCP schema.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::support::binary::binary;
use crate::support::schema::check_frame;
use crate::support::{assert_envelope, fixtures};

/// One bridge process serving HTTP.
pub struct Server {
    child: Child,
    pub base: String,
    data: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
    pub client: reqwest::Client,
    _dir: Option<tempfile::TempDir>,
}

/// A response, read whole.
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|_| panic!("not JSON ({}): {:?}", self.status, self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The JSON-RPC frame answering the request: the body, or the last SSE event.
    pub fn frame(&self) -> Value {
        if self.header("content-type") == Some("text/event-stream") {
            let events = self.events();
            serde_json::from_str(&events.last().expect("an event").1).unwrap()
        } else {
            self.json()
        }
    }

    /// The SSE events as (id, data).
    pub fn events(&self) -> Vec<(String, String)> {
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

/// A reqwest client with the ring provider installed and a generous timeout.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

impl Server {
    /// `--dev` on a fresh data dir with the fixture skills and `extra` flags.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_env(extra, &[])
    }

    pub fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--dev"];
        args.extend_from_slice(extra);
        let mut s = Server::launch(dir.path(), &args, env);
        s._dir = Some(dir);
        s
    }

    /// `--dev` on a data dir the caller keeps (shared by several servers).
    pub fn start_at(data: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--dev"];
        args.extend_from_slice(extra);
        Server::launch(data, &args, &[])
    }

    /// Exactly `args` (plus transport, data dir and skills).
    pub fn launch(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
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

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A dev token for `tenant` from this server's data dir (every scope unless given).
    pub fn token(&self, tenant: &str, scopes: Option<&str>) -> String {
        self.token_with(tenant, &scopes.map_or(Vec::new(), |s| vec!["--scopes", s]))
    }

    /// A dev token for `tenant` with more `dev-token` flags (e.g. `--sub`).
    pub fn token_with(&self, tenant: &str, flags: &[&str]) -> String {
        let mut cmd = Command::new(binary());
        cmd.arg("--data-dir")
            .arg(&self.data)
            .args(["dev-token", "--tenant", tenant])
            .args(flags);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// POSTs `body` to /mcp as an MCP client does (JSON + SSE accepted).
    pub async fn post(&self, token: Option<&str>, body: &Value) -> Reply {
        self.post_with(token, body.to_string(), &[]).await
    }

    pub async fn post_with(
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

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        read(req.send().await.expect("a response")).await
    }

    /// A request's response frame, checked against the schema.
    pub async fn rpc(&self, token: &str, id: i64, method: &str, params: Value) -> Value {
        let reply = self
            .post(
                Some(token),
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .await;
        let frame = reply.frame();
        let task = params.get("task").is_some();
        check_frame(&frame, Some(method), task);
        frame
    }

    pub async fn call(&self, token: &str, tool: &str, arguments: Value) -> Value {
        self.rpc(
            token,
            1,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn sigterm(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Waits (at most 20 s) for the process to exit.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        crate::support::poll(Duration::from_secs(20), || {
            self.child.try_wait().unwrap().ok_or_else(String::new)
        })
        .unwrap_or_else(|_| panic!("still running: {}", self.log()))
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The log once it holds `needle`, or as it is after `within`: a serving bridge
    /// writes its log lines in batches, a few milliseconds after the event.
    pub fn log_with(&self, needle: &str, within: Duration) -> String {
        crate::support::poll(within, || {
            let log = self.log();
            if log.contains(needle) {
                Ok(log)
            } else {
                Err(log)
            }
        })
        .unwrap_or_else(|log| log)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn read(resp: reqwest::Response) -> Reply {
    Reply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap_or_default(),
    }
}

/// POSTs `body` to `url` as an MCP client does and returns once the response head is in,
/// its body unread: for a request that may wait, a `text/event-stream` head shows the
/// server holds it (a waiting request is answered as SSE only after a short while).
pub async fn open_stream(
    client: &reqwest::Client,
    url: String,
    token: &str,
    body: &Value,
) -> reqwest::Response {
    open_stream_with(client, url, token, body, &[]).await
}

/// [`open_stream`] with more headers (e.g. `MCP-Session-Id`).
pub async fn open_stream_with(
    client: &reqwest::Client,
    url: String,
    token: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("a response head")
}

/// Opens `tasks/result` for task `id` as `token` and returns once the server holds it (its
/// `text/event-stream` head is in); the handle yields the whole reply when it ends.
pub async fn held_task_result(s: &Server, token: &str, id: &str) -> tokio::task::JoinHandle<Reply> {
    let (head_tx, head) = tokio::sync::oneshot::channel();
    let (client, url, token) = (s.client.clone(), s.url("/mcp"), token.to_owned());
    let body = rpc(1, "tasks/result", json!({"taskId": id}));
    let waiting = tokio::spawn(async move {
        let resp = open_stream(&client, url, &token, &body).await;
        let _ = head_tx.send(resp.headers().get("content-type").cloned());
        read(resp).await
    });
    let head = tokio::time::timeout(Duration::from_secs(10), head)
        .await
        .expect("the response head in time")
        .unwrap();
    assert_eq!(
        head.as_ref().map(|v| v.as_bytes()),
        Some(&b"text/event-stream"[..])
    );
    waiting
}

pub fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// An error frame of an HTTP error response: the envelope, and no id unless expected.
pub fn error_body(reply: &Reply, status: u16, code: i64, class: &str) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let frame = reply.json();
    check_frame(&frame, None, false);
    assert_envelope(&frame, code, class);
    frame
}
