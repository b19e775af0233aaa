//! Server-sent events: a waiting `tasks/result` and progress of a plain call stream
//! over SSE and end with the result.

use serde_json::{Value, json};

use super::{LOCAL, adr, start_task};
use crate::support::binary::paced;
use crate::support::http_server::{Server, rpc};
use crate::support::schema::check_frame;

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
