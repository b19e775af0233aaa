//! Long-running tools as tasks: criteria 4, 5, 6, 7, 8 and 17.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Adapters, PATIENCE, Stack, Stdio, text_json};
use crate::support::assert_envelope;

const EXECUTE: &str = "cyberos.cuo.execute_workflow";

/// The seed's workflow call (§5).
fn adr() -> Value {
    json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
           "inputs": {"title": "test"}})
}

/// Calls `execute_workflow` with `arguments`; the id of the task its handle names.
async fn start(b: &mut Stdio, arguments: Value) -> String {
    let resp = b.call_tool(EXECUTE, arguments).await;
    let handle = text_json(&resp);
    assert_eq!(handle["status"], "running", "{resp}");
    assert_eq!(resp["result"]["structuredContent"], handle);
    handle["task_id"].as_str().unwrap().to_owned()
}

/// Waits up to `within` until `holds` (polled), or fails naming `what`.
async fn eventually(within: Duration, what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !holds() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Criterion 4: execute_workflow returns a task id: the response says `running` and names
/// the task within 100 ms, long before the run (three steps of a second) ends.
pub async fn c04_execute_workflow_returns_a_running_task_id_within_100_ms(adapters: Adapters) {
    let stack = Stack::new(adapters).paced(1000).up();
    let mut b = stack.bridge().stdio().await;
    // The first CUO call starts the CUO child for short calls (the catalogue lookup needs
    // it); a short call first keeps that start-up out of the measurement.
    b.call_tool("cyberos.cuo.list_workflows", json!({})).await;
    let mut fastest = Duration::MAX;
    // The best of three: time the machine spends elsewhere only ever adds to a call.
    for _ in 0..3 {
        let started = Instant::now();
        let resp = b.call_tool(EXECUTE, adr()).await;
        let took = started.elapsed();
        fastest = fastest.min(took);
        assert!(took < Duration::from_secs(3), "the call waited for the run");
        let handle = text_json(&resp);
        assert_eq!(handle["status"], "running", "{resp}");
        let id = handle["task_id"].as_str().unwrap();
        assert!(id.starts_with("t-") && id.len() == 28, "{id}");
        assert_eq!(resp["result"]["structuredContent"], handle);
    }
    assert!(
        fastest < Duration::from_millis(100),
        "the handle took {fastest:?} at best"
    );
}

/// Criterion 5: Task status polling works: tasks/get says `running`, then `completed` with
/// the run's output.
pub async fn c05_tasks_get_moves_from_running_to_completed(adapters: Adapters) {
    let stack = Stack::new(adapters).paced(300).up();
    let mut b = stack.bridge().stdio().await;
    let id = start(&mut b, adr()).await;
    let running = b.tasks_get(&id).await;
    assert_eq!(running["result"]["status"], "running", "{running}");
    let done = b.wait_status(&id, "completed").await;
    assert_eq!(done["task_id"], id);
    assert_eq!(done["output"]["steps_executed"], 3);
    assert_eq!(done["output"]["final_artifacts"][0]["name"], "adr.md");
    assert!(
        done["duration_ms"].is_u64() && done["created_at"].is_string(),
        "{done}"
    );
    let spec = b.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(spec["result"]["status"], "completed", "{spec}");
}

/// Criterion 6: Task cancellation works: tasks/cancel stops the run upstream (the run's CUO
/// child dies, seconds before the run would have ended) and marks the task cancelled.
pub async fn c06_tasks_cancel_stops_the_run_and_marks_it_cancelled(adapters: Adapters) {
    // Three steps of 3 s: a run that went on after the cancel would live for seconds.
    let stack = Stack::new(adapters).paced(3000).up();
    let mut b = stack.bridge().stdio().await;
    b.call_tool("cyberos.cuo.list_workflows", json!({})).await;
    let before = stack.cuo_alive();
    let id = start(&mut b, adr()).await;
    eventually(PATIENCE, "the run is under way", || {
        stack.cuo_alive() == before + 1
    })
    .await;
    let cancelled = b.request("tasks/cancel", json!({"id": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    eventually(Duration::from_secs(2), "the run is stopped", || {
        stack.cuo_alive() == before
    })
    .await;
    let got = b.tasks_get(&id).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    assert!(got["result"].get("output").is_none(), "{got}");
}

/// Criterion 7: Reconnect-resume works: after the client disconnects, a new connection
/// finds the task's state in the store.
pub async fn c07_a_reconnecting_client_finds_the_task_in_the_store(adapters: Adapters) {
    let stack = Stack::new(adapters).paced(300).up();
    let mut first = stack.bridge().stdio().await;
    let id = start(&mut first, adr()).await;
    // The host goes away: the bridge finishes the running task, then stops.
    first.disconnect().await;
    let mut second = stack.bridge().stdio().await;
    let got = second.tasks_get(&id).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["output"]["steps_executed"], 3);
}

/// Criterion 8: Cross-tenant access is denied: tenant B's token cannot read or cancel
/// tenant A's task, which looks exactly like a missing one.
pub async fn c08_another_tenants_task_is_not_found(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut a = stack.bridge().tenant("a").stdio().await;
    let id = start(&mut a, adr()).await;
    let mut b = stack.bridge().tenant("b").stdio().await;
    let foreign = b.request("tasks/get", json!({"taskId": id})).await;
    let missing = b
        .request(
            "tasks/get",
            json!({"taskId": "t-aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
        )
        .await;
    let seed_door = b.tasks_get(&id).await;
    let garbage = b.tasks_get("t-abc123").await;
    for resp in [&foreign, &missing, &seed_door, &garbage] {
        assert_envelope(resp, -32602, "input_validation");
        assert_eq!(resp["error"]["data"]["message"], "task not found");
    }
    assert_eq!(
        foreign["error"]["data"]["hint"],
        missing["error"]["data"]["hint"]
    );
    assert!(!foreign.to_string().contains(&id[2..]), "the id is echoed");
    let cancel = b.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel["error"]["data"]["message"], "task not found");
    let listed = b.request("tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
    // The owner still sees it.
    let own = a.tasks_get(&id).await;
    assert!(own["result"]["status"].is_string(), "{own}");
}

/// Criterion 17: The task timeout is enforced: a run past its timeout ends `failed`, class
/// `internal_error`, with a hint that says it timed out.
pub async fn c17_a_task_past_its_timeout_fails_with_internal_error(adapters: Adapters) {
    let stack = Stack::new(adapters).paced(3000).up();
    let mut b = stack.bridge().stdio().await;
    let mut arguments = adr();
    arguments["timeout_s"] = 1.into();
    let id = start(&mut b, arguments).await;
    let failed = b.wait_status(&id, "failed").await;
    assert_eq!(failed["error"]["class"], "internal_error", "{failed}");
    let hint = failed["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("timeout"), "{failed}");
    assert_eq!(failed["error"]["trace_id"].as_str().unwrap().len(), 32);
    let spec = b.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(spec["result"]["status"], "failed");
    assert!(
        spec["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("timeout"),
        "{spec}"
    );
}
