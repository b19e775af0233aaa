//! Tasks over HTTP: polling to completion, tenancy, and two instances on one data dir
//! (a cancel on one stops the run on the other: its child dies, it never finishes).

use std::time::Duration;

use serde_json::{Value, json};

use super::{LOCAL, OTHER, start_task, task_status};
use crate::support::cuo_children::{child_pids, recording_runner, wait_children, wait_gone};
use crate::support::http_server::Server;
use crate::support::{alive, assert_envelope, wait_for_async};

#[tokio::test]
async fn a_task_augmented_workflow_is_polled_to_completion_and_its_result_fetched() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    wait_for_async(Duration::from_secs(30), async || {
        let status = task_status(&s, &t, &id).await;
        if status == "completed" {
            return Ok(());
        }
        assert_eq!(status, "working");
        Err("the task never completed".to_owned())
    })
    .await;
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

/// Each step of the runs in `two_instances_on_one_data_dir_share_tasks`: a run cancelled
/// after its first step has about `2 * PACE_MS` left, more than `DIES_WITHIN`.
const PACE_MS: u64 = 2000;
/// How long the owner may take to notice a cancel made elsewhere (its stop poll runs once
/// a second) and kill the child.
const DIES_WITHIN: Duration = Duration::from_millis(2500);

#[tokio::test]
async fn two_instances_on_one_data_dir_share_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (pids_a, pids_b) = (dir.path().join("pids-a"), dir.path().join("pids-b"));
    let (cuo_a, cuo_b) = (
        recording_runner(PACE_MS, &pids_a),
        recording_runner(PACE_MS, &pids_b),
    );
    let a = Server::start_at(dir.path(), &["--cuo-command", &cuo_a]);
    let b = Server::start_at(dir.path(), &["--cuo-command", &cuo_b]);
    let t = a.token(LOCAL, None);
    for (i, s) in [&a, &b, &a, &b].into_iter().enumerate() {
        let list = s.rpc(&t, i as i64, "tools/list", json!({})).await;
        assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 8);
    }
    // The shared child for short calls starts first; then each run gets its own.
    let personas = a.call(&t, "cyberos.cuo.list_personas", json!({})).await;
    assert!(personas["result"].is_object(), "{personas}");
    let shared = wait_children(&pids_a, 1, Duration::from_secs(10))[0];
    let id = start_task(&a, &t).await;
    let child = wait_children(&pids_a, 2, Duration::from_secs(10))[1];
    wait_first_step(&b, &t, &id).await;
    // A sibling on the owner with the same pacing, started later and never cancelled:
    // once it is finished and audited, a run that survived the cancel would be too.
    let sibling = start_task(&a, &t).await;
    let sibling_child = wait_children(&pids_a, 3, Duration::from_secs(10))[2];
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
    // The owner notices within its poll interval and kills the run's child, long before
    // the run's remaining steps would end; the sibling's child lives on.
    wait_gone(&[child], DIES_WITHIN);
    assert!(
        alive(sibling_child) && alive(shared),
        "the cancel killed other children too"
    );
    assert!(
        child_pids(&pids_b).is_empty(),
        "the other instance ran nothing"
    );
    let rows = wait_for_async(Duration::from_secs(30), async || {
        let rows = audited(&b, &t).await;
        if rows.contains(&json!(sibling)) {
            return Ok(rows);
        }
        Err("the sibling was never audited".to_owned())
    })
    .await;
    assert!(
        !rows.contains(&json!(id)),
        "the cancelled run went on and finished: {rows:?}"
    );
    // The sibling's audit row comes before its outcome's log line.
    let finished = format!("task_id={sibling} status=\"completed\"");
    let log = a.log_with(&finished, Duration::from_secs(5));
    assert!(log.contains(&finished), "{log}");
    assert!(
        !log.contains(&format!("task_id={id} status=")),
        "the owner stored an outcome for the cancelled run: {log}"
    );
    assert_eq!(task_status(&a, &t, &id).await, "cancelled");
}

/// Waits until the run has reported its first step (its message moves on from "started").
async fn wait_first_step(s: &Server, token: &str, id: &str) {
    wait_for_async(Duration::from_secs(20), async || {
        let got = s.rpc(token, 2, "tasks/get", json!({"taskId": id})).await;
        let message = &got["result"]["statusMessage"];
        if message.is_string() && message != "started" {
            return Ok(());
        }
        Err(format!("no first step: {got}"))
    })
    .await;
}

/// The subjects of the `plugin.invoked` audit rows: one per workflow run that finished.
async fn audited(s: &Server, token: &str) -> Vec<Value> {
    let page = s
        .call(
            token,
            "cyberos.memory.read_audit",
            json!({"kind": "plugin.invoked"}),
        )
        .await;
    page["result"]["structuredContent"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("audit entries: {page}"))
        .iter()
        .map(|e| e["subject"].clone())
        .collect()
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
        assert_eq!(frame["error"]["data"]["message"], "task not found");
        assert_eq!(frame["error"]["data"]["class"], "input_validation");
    }
    let cancel = s.rpc(&b, 4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel["error"]["data"]["message"], "task not found");
    let own = s.rpc(&a, 5, "tasks/get", json!({"taskId": id})).await;
    assert!(own["result"]["status"].is_string(), "{own}");
}
