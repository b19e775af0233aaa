//! The dispatcher through the library's stdio transport over an in-memory pipe, with
//! fakes behind the ports: the cases the release binary must not be able to stage (a slow
//! upstream under our control; a panicking handler is criterion 12 of
//! `tests/acceptance`), cancellation, the tool-error mode, a confirmed append, and EOF.

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use cyberos_mcp_bridge::app::{Settings, ToolErrors};

use crate::support::assert_envelope;
use crate::support::fakes::{Behaviour, Phase};
use crate::support::in_process::Client;

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
async fn a_client_that_does_not_read_its_answers_stops_being_read_and_loses_none() {
    let c = Client::start(Behaviour::Answer, Settings::default()).await;
    // Far more than the pipes, the writer's queue and the requests in flight hold together
    // (1 MiB each way, 1024 frames, 1024 requests): unread answers must stop the bridge
    // reading, not pile up in it.
    let pings = 200_000;
    let mut input = Vec::new();
    for id in 0..pings {
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes(),
        );
    }
    let mut write = c.write;
    let writer = tokio::spawn(async move {
        write.write_all(&input).await.unwrap();
        write
    });
    // A negative, so a real wait: the writer must still be blocked after the bridge had
    // ample time to read everything, had it kept reading.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !writer.is_finished(),
        "the bridge kept reading although nobody read its answers"
    );
    // Once the client reads, every request is answered.
    let mut read = c.read;
    let mut answered = vec![false; pings];
    for _ in 0..pings {
        let line = tokio::time::timeout(Duration::from_secs(10), read.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let frame: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(frame["result"], json!({}), "{frame}");
        let id = frame["id"].as_u64().unwrap() as usize;
        assert!(
            !std::mem::replace(&mut answered[id], true),
            "{id} answered twice"
        );
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn a_cancelled_request_gets_no_response() {
    // Far slower than the test's deadlines: only the cancel can end this call in time.
    let mut c = Client::start(
        Behaviour::Slow(Duration::from_secs(60)),
        Settings::default(),
    )
    .await;
    c.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                  "params": {"name": "cyberos.skill.list_skills", "arguments": {}}}))
        .await;
    c.skills_phase(|p| p == Phase::Running).await;
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10, "reason": "user"}}))
        .await;
    let ended = c.skills_phase(|p| p != Phase::Running).await;
    assert_eq!(ended, Phase::Dropped, "the cancel abandons the call");
    // Nothing can answer it any more: the next frame is the ping's.
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
