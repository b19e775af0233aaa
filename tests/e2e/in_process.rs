//! The library's stdio transport over an in-memory pipe, with fakes behind the ports:
//! the cases the release binary must not be able to stage (a panicking handler, a slow
//! upstream under our control).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio_util::sync::CancellationToken;

use cyberos_mcp_bridge::adapters::unavailable::Unavailable;
use cyberos_mcp_bridge::app::identity::{Identity, StdioToken};
use cyberos_mcp_bridge::app::{App, Settings, ToolErrors, stdio};
use cyberos_mcp_bridge::domain::{Timestamp, Upstream};
use cyberos_mcp_bridge::ports::Ports;

use crate::fakes::{
    Behaviour, FixedClock, InMemoryAudit, InMemoryLedger, ScriptedCuo, StaticSkills, StaticTokens,
};
use crate::schema::check_frame;
use crate::support::{assert_envelope, init_params};

pub(crate) struct Client {
    write: tokio::io::WriteHalf<DuplexStream>,
    read: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    methods: std::collections::HashMap<String, String>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Client {
    pub(crate) async fn start(skills: Behaviour, settings: Settings) -> Client {
        Client::start_as(skills, settings, "full").await
    }

    /// A client whose stdio token is `token` (see `StaticTokens`).
    pub(crate) async fn start_as(skills: Behaviour, settings: Settings, token: &str) -> Client {
        let ports = Ports {
            tasks: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "no task store in this test",
            )),
            cuo: Arc::new(ScriptedCuo),
            memory: Arc::new(InMemoryAudit::default()),
            skills: Arc::new(StaticSkills::new(skills)),
            clock: Arc::new(FixedClock(Timestamp::from_unix_millis(0))),
            ledger: Arc::new(InMemoryLedger::default()),
        };
        let identity = Identity::new(Arc::new(StaticTokens), StdioToken::Literal(token.into()));
        let app = App::new(ports, settings, identity);
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let server = tokio::spawn(stdio::serve(
            app,
            server_read,
            server_write,
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client);
        let mut c = Client {
            write,
            read: BufReader::new(read).lines(),
            methods: Default::default(),
            server,
        };
        let init = c.request(1, "initialize", init_params("2025-11-25")).await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        c
    }

    async fn send(&mut self, msg: Value) {
        if let (Some(id), Some(m)) = (msg.get("id"), msg["method"].as_str()) {
            self.methods.insert(id.to_string(), m.to_owned());
        }
        self.write
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.read.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        let method = frame
            .get("id")
            .and_then(|id| self.methods.get(&id.to_string()))
            .cloned();
        check_frame(&frame, method.as_deref(), false);
        frame
    }

    pub(crate) async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.recv().await
    }

    pub(crate) async fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
            .await
    }
}

#[tokio::test]
async fn a_panic_in_a_handler_becomes_internal_error_and_the_bridge_keeps_serving() {
    let mut c = Client::start(Behaviour::Panic, Settings::default()).await;
    let resp = c.call(2, "cyberos.skill.list_skills", json!({})).await;
    assert_eq!(resp["id"], 2);
    let data = assert_envelope(&resp, -32603, "internal_error");
    assert!(
        !resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scripted"),
        "no panic text leaks: {resp}"
    );
    assert!(data.get("pointer").is_none());
    let pong = c.request(3, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    let personas = c.call(4, "cyberos.cuo.list_personas", json!({})).await;
    assert_eq!(
        personas["result"]["structuredContent"]["personas"][0]["short_name"],
        "CTO"
    );
}

#[tokio::test]
async fn a_slow_call_does_not_block_a_ping() {
    let mut c = Client::start(
        Behaviour::Slow(Duration::from_millis(1500)),
        Settings::default(),
    )
    .await;
    c.send(
        json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                  "params": {"name": "cyberos.skill.list_skills", "arguments": {}}}),
    )
    .await;
    c.send(json!({"jsonrpc": "2.0", "id": "fast", "method": "ping"}))
        .await;
    let first = c.recv().await;
    assert_eq!(
        first["id"], "fast",
        "the ping is answered before the slow call: {first}"
    );
    let second = c.recv().await;
    assert_eq!(second["id"], "slow");
    assert_eq!(
        second["result"]["structuredContent"]["skills"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn a_cancelled_request_gets_no_response() {
    let mut c = Client::start(
        Behaviour::Slow(Duration::from_millis(1500)),
        Settings::default(),
    )
    .await;
    c.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                  "params": {"name": "cyberos.skill.list_skills", "arguments": {}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10, "reason": "user"}}))
        .await;
    // The ping after the slow call's would-be completion time is the next frame.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let pong = c.request(11, "ping", json!({})).await;
    assert_eq!(
        pong["id"], 11,
        "no response for the cancelled request: {pong}"
    );
}

#[tokio::test]
async fn tool_errors_result_mode_turns_fixable_errors_into_error_results() {
    let settings = Settings {
        tool_errors: ToolErrors::Result,
        ..Settings::default()
    };
    let mut c = Client::start(Behaviour::Down, settings).await;
    let down = c.call(2, "cyberos.skill.list_skills", json!({})).await;
    let result = &down["result"];
    assert_eq!(result["isError"], true, "{down}");
    assert_eq!(result["structuredContent"]["class"], "upstream_unavailable");
    assert_eq!(
        result["structuredContent"]["trace_id"]
            .as_str()
            .unwrap()
            .len(),
        32
    );
    let bad = c.call(3, "cyberos.cuo.route", json!({"query": ""})).await;
    assert_eq!(
        bad["result"]["structuredContent"]["class"], "input_validation",
        "{bad}"
    );
    assert_eq!(bad["result"]["structuredContent"]["pointer"], "/query");
    // Authorization and unknown tools stay JSON-RPC errors.
    let denied = c
        .call(
            4,
            "cyberos.memory.append_audit",
            json!({"kind": "decision", "body": {}}),
        )
        .await;
    assert_envelope(&denied, -32000, "authz_denied");
    let unknown = c.call(5, "cyberos.cuo.nope", json!({})).await;
    assert_envelope(&unknown, -32602, "input_validation");
}

#[tokio::test]
async fn a_confirmed_audit_append_reaches_the_memory_port() {
    let mut c = Client::start(Behaviour::Answer, Settings::default()).await;
    let resp = c
        .request(
            2,
            "tools/call",
            json!({"name": "cyberos.memory.append_audit",
            "arguments": {"kind": "decision", "body": {"x": 1}, "subject": "s"},
            "_meta": {"com.cyberos/confirmed": true}}),
        )
        .await;
    let receipt = &resp["result"]["structuredContent"];
    assert_eq!(receipt["audit_id"], "a-1", "{resp}");
    assert_eq!(receipt["recorded_at"], "2023-11-14T22:13:20.000Z");
    let seed = c
        .request(
            3,
            "tools/call",
            json!({"name": "cyberos.memory.append_audit",
            "arguments": {"kind": "decision", "body": {}}, "mcp/sampling/elicit_confirm": true}),
        )
        .await;
    assert_eq!(
        seed["result"]["structuredContent"]["audit_id"], "a-2",
        "{seed}"
    );
    let read = c
        .call(4, "cyberos.memory.read_audit", json!({"audit_id": "a-1"}))
        .await;
    let entry = &read["result"]["structuredContent"]["entries"][0];
    assert_eq!(entry["body"], json!({"x": 1}));
    assert_eq!(entry["subject"], "s");
}

#[tokio::test]
async fn eof_ends_serving_cleanly() {
    let c = Client::start(Behaviour::Answer, Settings::default()).await;
    let Client {
        write,
        read,
        server,
        ..
    } = c;
    drop((write, read));
    let outcome = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    assert!(outcome.is_ok());
}
