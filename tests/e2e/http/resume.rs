//! Resumable streams: a waiting `tools/call` or `tasks/result` whose stream is cut after
//! a few progress events is resumed with `GET` + `Last-Event-ID`, on the same instance
//! and (on Postgres) on another one: every later progress event arrives once, in order,
//! and the stream ends with the same result. SIGTERM hands a stream that follows another
//! instance's run over at once. Another tenant's token, a garbage id and a GET without a
//! token are refused without data.

use std::time::Duration;

use serde_json::{Value, json};

use super::{LOCAL, OTHER};
use crate::support::binary::paced;
use crate::support::http_server::{Reply, Server, error_body, read, rpc};
use crate::support::schema::check_frame;

/// Six paced steps: room to cut the stream after two.
fn architect() -> Value {
    json!({"persona": "chief-technology-officer", "workflow": "architect-new-system", "inputs": {"context": "a ledger"}})
}

const STEPS: u64 = 6;
const CUT_AFTER: usize = 2;

/// A live SSE response, read event by event.
struct Events {
    resp: reqwest::Response,
    text: String,
    /// The events read so far, as (id, data).
    seen: Vec<(String, String)>,
    /// The last `retry` field the stream sent.
    retry: Option<String>,
}

impl Events {
    fn new(resp: reqwest::Response) -> Events {
        Events {
            resp,
            text: String::new(),
            seen: Vec::new(),
            retry: None,
        }
    }

    /// Reads until `enough` says stop (`true`) or the stream ends (`false`).
    async fn until(&mut self, enough: impl Fn(&[(String, String)]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let field = |name: &str| {
                    event
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_owned())
                };
                if let Some(retry) = field("retry:") {
                    self.retry = Some(retry);
                }
                if field("id:").is_none() && field("data:").is_none() {
                    continue;
                }
                let (id, data) = (field("id:"), field("data:"));
                self.seen
                    .push((id.unwrap_or_default(), data.unwrap_or_default()));
                if enough(&self.seen) {
                    return true;
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("the stream moves within a minute")
                .expect("the stream reads");
            let Some(chunk) = chunk else { return false };
            self.text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

/// Reads SSE events (id, data) from a live response until `enough` says stop or the
/// stream ends; then drops the connection.
async fn read_events(
    resp: reqwest::Response,
    enough: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let mut events = Events::new(resp);
    events.until(enough).await;
    events.seen
}

fn progress_count(events: &[(String, String)]) -> usize {
    events
        .iter()
        .filter(|(_, d)| d.contains("notifications/progress"))
        .count()
}

/// POSTs `body` and reads its stream until `CUT_AFTER` progress events are in, then cuts
/// it. Returns the events read.
async fn cut_stream(s: &Server, token: &str, body: &Value) -> Vec<(String, String)> {
    let resp =
        crate::support::http_server::open_stream(&s.client, s.url("/mcp"), token, body).await;
    assert_eq!(resp.status(), 200);
    let events = read_events(resp, |e| progress_count(e) == CUT_AFTER).await;
    assert_eq!(progress_count(&events), CUT_AFTER, "{events:?}");
    events
}

async fn resume(s: &Server, token: &str, last: &str, extra: &[(&str, &str)]) -> Reply {
    resume_as(s, token, last, "text/event-stream", extra).await
}

async fn resume_as(
    s: &Server,
    token: &str,
    last: &str,
    accept: &str,
    extra: &[(&str, &str)],
) -> Reply {
    let mut req = s
        .client
        .get(s.url("/mcp"))
        .header("accept", accept)
        .header("authorization", format!("Bearer {token}"))
        .header("last-event-id", last);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    read(req.send().await.expect("a response")).await
}

/// The progress steps of a resumed stream's `events` and its final frame: nothing else.
fn steps_and_answer(events: &[(String, String)], token: &Value) -> (Vec<u64>, Value) {
    let (last, progress) = events.split_last().expect("an answer");
    let answer: Value = serde_json::from_str(&last.1).unwrap();
    assert!(
        last.0.is_empty(),
        "the answer ends the stream without an id"
    );
    (steps(progress, token), answer)
}

/// The steps of progress events (each a schema-valid notification with `token`, whose id
/// names its task and step); a priming event (empty data) is skipped.
fn steps(events: &[(String, String)], token: &Value) -> Vec<u64> {
    let frames: Vec<(String, Value)> = events
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(id, d)| (id.clone(), serde_json::from_str(d).unwrap()))
        .collect();
    frames
        .iter()
        .map(|(id, p)| {
            check_frame(p, None, false);
            assert_eq!(p["method"], "notifications/progress", "{p}");
            assert_eq!(&p["params"]["progressToken"], token);
            let step = p["params"]["progress"].as_u64().unwrap();
            let task = p["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
                .as_str()
                .unwrap();
            assert!(
                id.starts_with(&format!("{task}.{step}.")),
                "{id} names step {step}"
            );
            step
        })
        .collect()
}

/// A waiting call cut after two progress events, resumed on `resumer` (the same server,
/// or another on the same store): the rest once each, then the same result.
async fn a_cut_call_resumes(runner: &Server, resumer: &Server) {
    let t = runner.token(LOCAL, None);
    let body = rpc(
        41,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": architect(), "_meta": {"progressToken": "p-41"}}),
    );
    let seen = cut_stream(runner, &t, &body).await;
    let (priming, _) = &seen[0];
    assert!(seen[0].1.is_empty(), "a priming event first: {seen:?}");
    assert_eq!(steps(&seen, &json!("p-41")), [1, 2]);
    let last = &seen.last().unwrap().0;

    let t = resumer.token(LOCAL, None);
    let resumed = resume(resumer, &t, last, &[]).await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    let (steps, answer) = steps_and_answer(&resumed.events(), &json!("p-41"));
    assert_eq!(
        steps,
        (CUT_AFTER as u64 + 1..=STEPS).collect::<Vec<_>>(),
        "each later step once, in order"
    );
    check_frame(&answer, Some("tools/call"), false);
    assert_eq!(answer["id"], 41);
    assert_eq!(
        answer["result"]["structuredContent"]["steps_executed"], STEPS,
        "{answer}"
    );

    // The priming event resumes too: every step, then the same result.
    let again = resume(resumer, &t, priming, &[]).await;
    let (steps, same) = steps_and_answer(&again.events(), &json!("p-41"));
    assert_eq!(steps, (1..=STEPS).collect::<Vec<_>>());
    assert_eq!(same, answer);
}

#[tokio::test]
async fn a_waiting_call_cut_mid_way_resumes_on_the_same_instance() {
    let paced = paced(400);
    let s = Server::start(&["--cuo-command", &paced, "--long-running", "wait"]);
    a_cut_call_resumes(&s, &s).await;
}

#[tokio::test]
async fn a_stream_whose_first_progress_comes_at_once_is_resumable_from_it() {
    // The first step well inside the time a quick answer is waited for, so the stream
    // starts with a progress event the handler sent before it named its task.
    let paced = paced(100);
    let s = Server::start(&["--cuo-command", &paced, "--long-running", "wait"]);
    let t = s.token(LOCAL, None);
    let body = rpc(
        42,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": architect(), "_meta": {"progressToken": "p-42"}}),
    );
    let resp = crate::support::http_server::open_stream(&s.client, s.url("/mcp"), &t, &body).await;
    assert_eq!(resp.status(), 200);
    let seen = read_events(resp, |e| progress_count(e) == 1).await;
    // Every event carries a resumable id: the priming one and the first step's.
    assert!(seen[0].1.is_empty(), "a priming event first: {seen:?}");
    assert!(seen[0].0.starts_with("t-"), "{seen:?}");
    assert_eq!(steps(&seen, &json!("p-42")), [1], "{seen:?}");
    let resumed = resume(&s, &t, &seen.last().unwrap().0, &[]).await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    let (steps, answer) = steps_and_answer(&resumed.events(), &json!("p-42"));
    assert_eq!(steps, (2..=STEPS).collect::<Vec<_>>());
    assert_eq!(answer["id"], 42);
}

#[tokio::test]
async fn a_stream_answered_before_its_task_is_named_carries_no_plain_id() {
    // An SSE-only client's `tasks/result` for a task that does not exist: a stream of a
    // waiting kind, answered with an error before any task is named.
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let body = rpc(
        8,
        "tasks/result",
        json!({"taskId": "t-aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
    );
    let reply = s
        .send(
            s.client
                .post(s.url("/mcp"))
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .bearer_auth(&t)
                .body(body.to_string()),
        )
        .await;
    let events = reply.events();
    let (last, before) = events.split_last().expect("an answer");
    let answer: Value = serde_json::from_str(&last.1).unwrap();
    assert_eq!(answer["id"], 8, "{answer}");
    assert!(answer["error"].is_object(), "{answer}");
    // Every id a resumable stream sends resumes; the answer ends it without one.
    assert!(last.0.is_empty(), "the answer's id: {:?}", last.0);
    for (id, _) in before {
        assert!(id.is_empty() || id.starts_with("t-"), "{events:?}");
    }
}

#[tokio::test]
async fn a_waiting_call_cut_mid_way_resumes_on_another_instance_of_the_same_postgres() {
    let Some(url) = std::thread::spawn(crate::support::pg::database_url)
        .join()
        .unwrap()
    else {
        return;
    };
    let paced = paced(400);
    let dir = tempfile::tempdir().unwrap();
    let store = ["--database-url", url.as_str(), "--long-running", "wait"];
    // Only A runs CUO children: B serves the resumed stream from the store alone.
    let a = Server::start_at(
        dir.path(),
        &[&store[..], &["--cuo-command", &paced]].concat(),
    );
    let b = Server::start_at(dir.path(), &store);
    a_cut_call_resumes(&a, &b).await;
}

/// Starts the six-step workflow as a task on `s` and returns `tasks/result` of it (id 7,
/// progress token 70) and the task id.
async fn architect_task_result(s: &Server, token: &str) -> (Value, String) {
    let created = s
        .rpc(
            token,
            1,
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": architect(), "task": {}}),
        )
        .await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = rpc(
        7,
        "tasks/result",
        json!({"taskId": task, "_meta": {"progressToken": 70}}),
    );
    (body, task)
}

/// A resumed `tasks/result` stream of [`architect_task_result`]: each step after `after`
/// once, in order, then the result; returns the answer.
fn resumed_result(resumed: &Reply, after: u64) -> Value {
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    let (steps, answer) = steps_and_answer(&resumed.events(), &json!(70));
    assert_eq!(
        steps,
        (after + 1..=STEPS).collect::<Vec<_>>(),
        "each later step once, in order"
    );
    check_frame(&answer, Some("tasks/result"), false);
    assert_eq!(answer["id"], 7);
    assert_eq!(
        answer["result"]["structuredContent"]["steps_executed"],
        STEPS
    );
    answer
}

#[tokio::test]
async fn a_waiting_tasks_result_streams_progress_and_resumes() {
    let paced = paced(400);
    let s = Server::start(&[
        "--cuo-command",
        &paced,
        "--cors-origin",
        "https://app.example",
    ]);
    let t = s.token(LOCAL, None);
    let (body, task) = architect_task_result(&s, &t).await;
    let seen = cut_stream(&s, &t, &body).await;
    let last = &seen.last().unwrap().0;
    assert!(last.starts_with(&format!("{task}.{CUT_AFTER}.")), "{last}");

    let resumed = resume(&s, &t, last, &[("origin", "https://app.example")]).await;
    // A browser page on a --cors-origin origin may resume and read the session header.
    assert_eq!(
        resumed.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        resumed.header("access-control-expose-headers"),
        Some("WWW-Authenticate, MCP-Session-Id")
    );
    let answer = resumed_result(&resumed, CUT_AFTER as u64);
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
}

/// SIGTERM on an instance whose stream follows a run of another instance hands the
/// stream over at once (a `retry`, no response), though the run ends within the grace:
/// resumed on the run's instance, it gets every later step once, then the result.
#[tokio::test]
async fn sigterm_hands_a_stream_that_follows_another_instances_run_over_at_once() {
    let Some(url) = std::thread::spawn(crate::support::pg::database_url)
        .join()
        .unwrap()
    else {
        return;
    };
    // Six steps of a second: the run ends about 4 s after the signal, within LAST_CALL.
    let paced = paced(1000);
    let dir = tempfile::tempdir().unwrap();
    let store = ["--database-url", url.as_str()];
    let a = Server::start_at(
        dir.path(),
        &[&store[..], &["--cuo-command", &paced]].concat(),
    );
    let mut b = Server::start_at(dir.path(), &store);
    let t = a.token(LOCAL, None);
    let (body, _) = architect_task_result(&a, &t).await;
    let resp = crate::support::http_server::open_stream(&b.client, b.url("/mcp"), &t, &body).await;
    assert_eq!(resp.status(), 200);
    let mut events = Events::new(resp);
    assert!(events.until(|e| progress_count(e) == CUT_AFTER).await);
    b.sigterm();
    assert!(!events.until(|_| false).await, "B ends the stream");
    assert_eq!(events.retry.as_deref(), Some("1000"), "{:?}", events.seen);
    // Progress only: the response is left for the resumed stream.
    let on_b = steps(&events.seen, &json!(70));
    assert_eq!(on_b, (1..=on_b.len() as u64).collect::<Vec<_>>());
    assert!(on_b.len() < STEPS as usize, "{on_b:?}");
    assert_eq!(b.wait_exit().code(), Some(0), "{}", b.log());

    let last = &events.seen.last().unwrap().0;
    let resumed = resume(&a, &t, last, &[]).await;
    resumed_result(&resumed, on_b.len() as u64);
}

#[tokio::test]
async fn foreign_unknown_and_garbage_ids_are_refused_without_data() {
    let paced = paced(300);
    let s = Server::start(&["--cuo-command", &paced, "--long-running", "wait"]);
    let t = s.token(LOCAL, None);
    let body = rpc(
        5,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": architect(), "_meta": {"progressToken": "p"}}),
    );
    let seen = cut_stream(&s, &t, &body).await;
    let last = seen.last().unwrap().0.clone();

    // Another tenant: answered exactly as a task that does not exist.
    let other = s.token(OTHER, None);
    let foreign = resume(&s, &other, &last, &[]).await;
    let frame = error_body(&foreign, 404, -32602, "input_validation");
    assert!(
        frame["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("task not found")
    );
    let task = last.split('.').next().unwrap();
    let unknown_task = last.replacen(task, &format!("t-{}", "a".repeat(26)), 1);
    let unknown = resume(&s, &t, &unknown_task, &[]).await;
    let unknown = error_body(&unknown, 404, -32602, "input_validation");
    // The same answer but for the trace id.
    let strip = |mut v: Value| {
        let trace = v["error"]["data"]["trace_id"].as_str().unwrap().to_owned();
        let message = v["error"]["message"].as_str().unwrap().replace(&trace, "");
        v["error"]["message"] = message.into();
        v["error"]["data"]["trace_id"] = Value::Null;
        v
    };
    assert_eq!(strip(frame), strip(unknown));
    assert!(!foreign.text.contains("notifications/progress") && !foreign.text.contains(task));

    for garbage in [
        "garbage",
        "0123-4",
        &format!("{last}.9"),
        &last.replacen(".2.", ".x.", 1),
    ] {
        let bad = resume(&s, &t, garbage, &[]).await;
        error_body(&bad, 400, -32600, "input_validation");
    }
    // A token is needed, and a stream is all a GET gets.
    let anonymous = s
        .send(
            s.client
                .get(s.url("/mcp"))
                .header("accept", "text/event-stream")
                .header("last-event-id", &last),
        )
        .await;
    error_body(&anonymous, 401, -32000, "authz_denied");
    let json_only = resume_as(&s, &t, &last, "application/json", &[]).await;
    assert_eq!(json_only.status, 406);
    // A session the GET names must open, as for a POST.
    let forged = resume(&s, &t, &last, &[("mcp-session-id", "forged")]).await;
    assert_eq!(forged.status, 404, "{}", forged.text);
    // Without Last-Event-ID there is no GET stream.
    let plain = s
        .send(
            s.client
                .get(s.url("/mcp"))
                .header("accept", "text/event-stream")
                .header("authorization", format!("Bearer {t}")),
        )
        .await;
    error_body(&plain, 405, -32600, "input_validation");
}
