//! The library as a program embeds it: `Bridge`'s builder with ports given in code,
//! served over an in-memory pipe and on a bound HTTP listener, and the
//! `examples/custom_memory.rs` program over its real stdin and stdout.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::memory::AuditQuery;
use cyberos_mcp_bridge::domain::task::TaskStatus;
use cyberos_mcp_bridge::{Bridge, BridgeBuilder, MemoryClient, ServeError, TaskStore, TenantId};

use crate::support::binary::{self, Bridge as Process};
use crate::support::fakes::{InMemoryAudit, StaticTokens};
use crate::support::http_server::{client, read};
use crate::support::schema::check_frame;
use crate::support::{call_ctx, fixtures};
use crate::tasks::{ADR, LOCAL};

fn newest(limit: u32) -> AuditQuery {
    AuditQuery {
        kind: None,
        since: None,
        limit,
        cursor: None,
    }
}

/// `tools/call` params appending one entry, confirmed by the host.
fn append() -> Value {
    json!({"name": "cyberos.memory.append_audit",
           "arguments": {"kind": "decision", "subject": "embedding", "body": {"adr": 7}},
           "_meta": {"com.cyberos/confirmed": true}})
}

/// A builder on `dir/data` whose stdio token, `full`, `StaticTokens` verifies; the CUO
/// is the bundled runner of the bridge binary (this test program has no `cuo-runner`).
fn builder(dir: &Path) -> BridgeBuilder {
    let token = dir.join("token");
    std::fs::write(&token, "full").unwrap();
    Bridge::builder()
        .data_dir(dir.join("data"))
        .skills_dir(fixtures().join("skills"))
        .cuo_command([binary::binary(), "cuo-runner"])
        .verifier(Arc::new(StaticTokens))
        .token_file(token)
}

/// One client of a `Bridge` served by `serve_io` over an in-memory pipe.
struct Pipe {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    read: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Pipe {
    /// Serves `bridge` and completes the handshake.
    async fn over(bridge: Bridge) -> Pipe {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let stop = CancellationToken::new();
        let server = tokio::spawn(bridge.serve_io(server_read, server_write, stop));
        let (read, write) = tokio::io::split(client);
        let read = BufReader::new(read).lines();
        let mut pipe = Pipe {
            write,
            read,
            server,
        };
        let init = pipe
            .request(1, "initialize", crate::support::init_params("2025-11-25"))
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        pipe.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        pipe
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends a request and returns its answer (notifications before it are checked and
    /// dropped); every frame is checked against the schema.
    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.read.next_line());
            let line = line.await.expect("an answer in time").unwrap();
            let frame: Value = serde_json::from_str(&line.expect("a line")).unwrap();
            if frame.get("method").is_some() {
                check_frame(&frame, None, false);
                continue;
            }
            assert_eq!(frame["id"], id, "{frame}");
            check_frame(&frame, Some(method), false);
            return frame;
        }
    }

    async fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        self.request(id, "tools/call", params).await
    }

    /// Closes the input; the server must then end cleanly, running tasks finished.
    async fn finish(self) {
        drop((self.write, self.read));
        let served = tokio::time::timeout(Duration::from_secs(20), self.server).await;
        served.expect("the server stops at EOF").unwrap().unwrap();
    }
}

fn audit_id(frame: &Value) -> String {
    let id = frame["result"]["structuredContent"]["audit_id"].as_str();
    id.unwrap_or_else(|| panic!("no receipt: {frame}"))
        .to_owned()
}

#[tokio::test]
async fn a_memory_adapter_given_in_code_is_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let audit = Arc::new(InMemoryAudit::default());
    let bridge = builder(dir.path()).memory(audit.clone()).build().await;
    let mut c = Pipe::over(bridge.unwrap()).await;
    let id = audit_id(&c.request(2, "tools/call", append()).await);
    let read = c
        .call(3, "cyberos.memory.read_audit", json!({"audit_id": id}))
        .await;
    let entry = &read["result"]["structuredContent"]["entries"][0];
    assert_eq!(entry["subject"], "embedding", "{read}");
    c.finish().await;

    let given = audit.list(&call_ctx(LOCAL), &newest(50)).await.unwrap();
    let ids: Vec<&str> = given.entries.iter().map(|e| e.audit_id.as_str()).collect();
    assert_eq!(ids, [id.as_str()], "the entry is in the given log");
    // The embedded file, opened for the tasks, holds no audit entry.
    let file = dir.path().join("data/bridge.sqlite3");
    let store = SqliteStore::open(&file, Arc::new(SystemClock))
        .await
        .unwrap();
    let embedded = MemoryClient::list(&store, &call_ctx(LOCAL), &newest(50)).await;
    let embedded = embedded.unwrap();
    assert!(embedded.entries.is_empty(), "{:?}", embedded.entries);
}

#[tokio::test]
async fn a_bridge_given_a_store_and_an_audit_log_opens_neither_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("theirs.sqlite3");
    let store = Arc::new(
        SqliteStore::open(&file, Arc::new(SystemClock))
            .await
            .unwrap(),
    );
    let audit = Arc::new(InMemoryAudit::default());
    let bridge = builder(dir.path())
        .store(store.clone())
        .memory(audit)
        .build()
        .await
        .unwrap();
    let data = dir.path().join("data");
    assert!(!data.exists(), "no data dir is made for a store not used");

    let mut c = Pipe::over(bridge).await;
    let handle = c.call(2, "cyberos.cuo.execute_workflow", ADR()).await;
    let task = handle["result"]["structuredContent"]["task_id"].as_str();
    let task = task
        .unwrap_or_else(|| panic!("no task handle: {handle}"))
        .to_owned();
    // EOF lets the run finish before the server ends.
    c.finish().await;

    let tenant = TenantId::parse(LOCAL).unwrap();
    let page = TaskStore::list(store.as_ref(), &tenant, None, 10)
        .await
        .unwrap();
    let stored: Vec<(String, TaskStatus)> = page
        .tasks
        .iter()
        .map(|t| (t.id.to_string(), t.status))
        .collect();
    assert_eq!(
        stored,
        [(task, TaskStatus::Completed)],
        "the run is in the given store"
    );
    assert!(!data.exists(), "nor later");
}

#[tokio::test]
async fn http_serves_on_a_bound_listener_until_its_shutdown_token() {
    let dir = tempfile::tempdir().unwrap();
    let audit = Arc::new(InMemoryAudit::default());
    let bridge = builder(dir.path())
        .memory(audit.clone())
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let serving = tokio::spawn(bridge.serve_http_on(listener, stop.clone()));

    let client = client();
    let post = |id: i64, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let req = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", "Bearer full")
            .body(body.to_string());
        let method = method.to_owned();
        async move {
            let reply = read(req.send().await.expect("a response")).await;
            assert_eq!(reply.status, 200, "{}", reply.text);
            let frame = reply.frame();
            check_frame(&frame, Some(&method), false);
            frame
        }
    };
    let init = post(1, "initialize", crate::support::init_params("2025-11-25")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let id = audit_id(&post(2, "tools/call", append()).await);
    let read = post(
        3,
        "tools/call",
        json!({"name": "cyberos.memory.read_audit", "arguments": {"audit_id": id}}),
    )
    .await;
    assert_eq!(
        read["result"]["structuredContent"]["entries"][0]["audit_id"], id,
        "{read}"
    );
    let given = audit.list(&call_ctx(LOCAL), &newest(50)).await.unwrap();
    assert_eq!(given.entries.len(), 1);

    stop.cancel();
    let served = tokio::time::timeout(Duration::from_secs(15), serving)
        .await
        .expect("the server stops once its token is cancelled");
    served.unwrap().expect("and stops cleanly");
}

#[tokio::test]
async fn dev_mode_refuses_an_http_listener_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = builder(dir.path()).dev().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let served = bridge
        .serve_http_on(listener, CancellationToken::new())
        .await;
    match served {
        Err(ServeError::Config(e)) => assert!(e.to_string().contains("loopback"), "{e}"),
        other => panic!("served beyond loopback with --dev: {other:?}"),
    }
}

#[tokio::test]
async fn a_cuo_command_without_a_program_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let built = builder(dir.path())
        .cuo_command(Vec::<String>::new())
        .build()
        .await;
    let err = built.err().expect("an empty CUO command is refused");
    assert!(err.to_string().contains("CUO command"), "{err}");
}

/// The example `name` as `cargo test` builds it, in `examples/` beside the directory of
/// this test program. A filtered `cargo test --test e2e` does not build examples, so a
/// missing or stale one fails here, saying so.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join("examples").join(name);
    let build = "`cargo test` builds the examples; or `cargo build --examples` first";
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}: {build}", path.display()));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join("examples").join(format!("{name}.rs"));
    let newest = [source, root.join("src")]
        .iter()
        .map(|p| newest_mtime(p))
        .max()
        .unwrap();
    assert!(
        built >= newest,
        "{} is older than its sources: {build}",
        path.display()
    );
    path
}

fn newest_mtime(path: &Path) -> SystemTime {
    let meta = std::fs::metadata(path).unwrap();
    if !meta.is_dir() {
        return meta.modified().unwrap();
    }
    let entries = std::fs::read_dir(path).unwrap();
    let children = entries.map(|e| newest_mtime(&e.unwrap().path()));
    children.max().unwrap_or(SystemTime::UNIX_EPOCH)
}

#[test]
fn the_custom_memory_example_serves_its_own_adapter_over_stdio() {
    let program = example("custom_memory");
    let dir = tempfile::tempdir().unwrap();
    let (log, lines) = mpsc::channel();
    let mut b = Process::spawn_program(&program, dir.path(), &["--dev"], Some(log));
    b.initialize();
    let receipt = b.request("tools/call", append());
    let id = audit_id(&receipt);
    let read = b.call("cyberos.memory.read_audit", json!({"audit_id": id}));
    assert_eq!(
        read["result"]["structuredContent"]["entries"][0]["subject"], "embedding",
        "{read}"
    );
    // The default CUO command runs this program as `cuo-runner`, which `from_args` serves.
    let personas = b.call("cyberos.cuo.list_personas", json!({}));
    let personas = personas["result"]["structuredContent"]["personas"].as_array();
    assert!(personas.is_some_and(|p| !p.is_empty()), "{personas:?}");
    assert!(b.close().success(), "the example exits 0 at EOF");

    let stderr: Vec<String> = lines.try_iter().collect();
    for said in [
        format!("{LOCAL} appended {id}"),
        format!("{LOCAL} read {id}"),
    ] {
        let line = format!("custom_memory: {said}");
        assert!(stderr.contains(&line), "no {line:?} in {stderr:#?}");
    }
}
