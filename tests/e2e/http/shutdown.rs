//! SIGTERM over HTTP: waiting streams end, the server drains, spans are flushed, exit 0.

use std::time::Duration;

use serde_json::{Value, json};

use super::{LOCAL, start_task};
use crate::support::assert_envelope;
use crate::support::binary::paced;
use crate::support::collector::{Collector, hex};
use crate::support::http_server::{Server, held_task_result, rpc};

#[tokio::test]
async fn sigterm_ends_waiting_streams_drains_and_exits_zero() {
    let paced = paced(3000);
    let mut s = Server::start(&["--cuo-command", &paced]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    // Signal only once the server holds the waiting request: its SSE head is in.
    let waiting = held_task_result(&s, &t, &id).await;
    s.sigterm();
    let reply = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the stream ends")
        .unwrap();
    let last: Value = serde_json::from_str(&reply.events().last().unwrap().1).unwrap();
    assert_envelope(&last, -32050, "upstream_unavailable");
    assert_eq!(
        last["error"]["data"]["message"],
        "the bridge is shutting down"
    );
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", s.log());
    assert!(s.log().contains("draining"), "{}", s.log());
}

/// SIGTERM on HTTP drains, then flushes the spans: a call answered just before is at the
/// collector when the process has exited, well inside the exporter's 1 s batch delay.
#[tokio::test]
async fn sigterm_on_http_flushes_the_spans_before_exit() {
    let collector = Collector::start();
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
            .any(|r| hex(&r.span.trace_id) == trace),
        "the call's span was flushed before exit"
    );
}
