//! Tasks over HTTP: polling to completion, tenancy, and two instances on one data dir.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{LOCAL, OTHER, start_task, task_status};
use crate::support::assert_envelope;
use crate::support::binary::paced;
use crate::support::http_server::Server;

#[tokio::test]
async fn a_task_augmented_workflow_is_polled_to_completion_and_its_result_fetched() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = task_status(&s, &t, &id).await;
        if status == "completed" {
            break;
        }
        assert_eq!(status, "working");
        assert!(Instant::now() < deadline, "the task never completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

#[tokio::test]
async fn two_instances_on_one_data_dir_share_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let paced = paced(3000);
    let a = Server::start_at(dir.path(), &["--cuo-command", &paced]);
    let b = Server::start_at(dir.path(), &["--cuo-command", &paced]);
    let t = a.token(LOCAL, None);
    for (i, s) in [&a, &b, &a, &b].into_iter().enumerate() {
        let list = s.rpc(&t, i as i64, "tools/list", json!({})).await;
        assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 8);
    }
    let id = start_task(&a, &t).await;
    assert_eq!(task_status(&b, &t, &id).await, "working");
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
    // The owner notices within its poll interval and stops the run.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(task_status(&a, &t, &id).await, "cancelled");
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
        assert_eq!(frame["error"]["message"], "task not found");
        assert_eq!(frame["error"]["data"]["class"], "input_validation");
    }
    let cancel = s.rpc(&b, 4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel["error"]["message"], "task not found");
    let own = s.rpc(&a, 5, "tasks/get", json!({"taskId": id})).await;
    assert!(own["result"]["status"].is_string(), "{own}");
}
