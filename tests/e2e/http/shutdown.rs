//! SIGTERM over HTTP: requests that wait for a run of this instance get the run's
//! outcome (it finishes, or is killed and failed, within the grace), the server drains,
//! spans are flushed, exit 0. (A stream that follows a run of another instance is handed
//! over at once: `resume.rs`.)

use std::time::Duration;

use serde_json::{Value, json};

use super::{LOCAL, adr, start_task};
use crate::support::binary::paced;
use crate::support::collector::{Collector, hex};
use crate::support::http_server::{Server, held_task_result, read, rpc};
use crate::support::schema::check_frame;
use crate::support::wait_for_async;

/// Starts a plain `tools/call` of a long tool that waits for its run (no progress token:
/// answered as JSON) and returns once its task exists.
async fn held_plain_call(s: &Server, token: &str) -> tokio::task::JoinHandle<Value> {
    let body = rpc(
        9,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr()}),
    );
    let req = s
        .client
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string());
    let call = tokio::spawn(async move {
        let reply = read(req.send().await.expect("a response")).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.header("content-type"), Some("application/json"));
        reply.json()
    });
    wait_for_async(Duration::from_secs(10), async || {
        let listed = s.rpc(token, 3, "tasks/list", json!({})).await;
        if listed["result"]["tasks"].as_array().unwrap().len() == 2 {
            return Ok(());
        }
        Err(format!("the plain call's task: {listed}"))
    })
    .await;
    call
}

#[tokio::test]
async fn sigterm_lets_waits_on_runs_that_end_within_the_grace_answer_with_their_results() {
    // Three steps of a second: done well within the 5 s grace.
    let paced = paced(1000);
    let mut s = Server::start(&["--cuo-command", &paced, "--long-running", "wait"]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    // Signal only once the server holds both: the stream's SSE head is in, and the plain
    // call's task exists.
    let streamed = held_task_result(&s, &t, &id).await;
    let plain = held_plain_call(&s, &t).await;
    s.sigterm();
    let streamed = tokio::time::timeout(Duration::from_secs(15), streamed)
        .await
        .expect("the stream ends")
        .unwrap();
    let last: Value = serde_json::from_str(&streamed.events().last().unwrap().1).unwrap();
    check_frame(&last, Some("tasks/result"), false);
    assert_eq!(
        last["result"]["structuredContent"]["steps_executed"], 3,
        "{last}"
    );
    let plain = tokio::time::timeout(Duration::from_secs(15), plain)
        .await
        .expect("the plain call is answered")
        .unwrap();
    check_frame(&plain, Some("tools/call"), false);
    assert_eq!(
        plain["result"]["structuredContent"]["steps_executed"], 3,
        "{plain}"
    );
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", s.log());
    assert!(s.log().contains("draining"), "{}", s.log());
}

#[tokio::test]
async fn sigterm_fails_a_run_that_outlasts_the_grace_and_its_waiting_stream_says_so() {
    // Three steps of three seconds: past the 5 s grace.
    let paced = paced(3000);
    let mut s = Server::start(&["--cuo-command", &paced]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let waiting = held_task_result(&s, &t, &id).await;
    s.sigterm();
    let reply = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the stream ends")
        .unwrap();
    let last: Value = serde_json::from_str(&reply.events().last().unwrap().1).unwrap();
    check_frame(&last, Some("tasks/result"), false);
    assert!(
        last.to_string()
            .contains("the bridge running the task stopped"),
        "{last}"
    );
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", s.log());
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
