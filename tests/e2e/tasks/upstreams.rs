//! Upstreams around tasks: the audit row of a finished workflow, a down memory service,
//! and a down task store.

use std::time::Duration;

use serde_json::json;

use super::{ADR, start, wait_status};
use crate::support::binary::Bridge;
use crate::support::{assert_envelope, wait_for};

#[test]
fn a_finished_workflow_appends_a_plugin_invoked_audit_row() {
    let mut b = Bridge::initialized(&[]);
    let id = start(&mut b, ADR());
    wait_status(&mut b, &id, "completed", Duration::from_secs(20));
    let row = wait_for(Duration::from_secs(10), || {
        let page = b.call(
            "cyberos.memory.read_audit",
            json!({"kind": "plugin.invoked"}),
        );
        let entries = page["result"]["structuredContent"]["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        entries
            .into_iter()
            .find(|e| e["subject"] == id.as_str())
            .ok_or_else(|| format!("no plugin.invoked row for {id}"))
    });
    let body = &row["body"];
    assert_eq!(body["plugin_id"], "cyberos");
    assert_eq!(body["tool_name"], "cyberos.cuo.execute_workflow");
    assert_eq!(body["outcome"], "success");
    assert_eq!(
        body["trace_id"], row["trace_id"],
        "the row carries the call's trace"
    );
    assert!(body["duration_ms"].is_u64() && body["plugin_version"].is_string());
}

#[test]
fn a_down_memory_service_does_not_change_a_tasks_outcome() {
    let refused = crate::support::memory_server::refused_url();
    let mut b = Bridge::initialized(&["--memory-url", &refused]);
    let id = start(&mut b, ADR());
    let done = wait_status(&mut b, &id, "completed", Duration::from_secs(20));
    assert_eq!(done["output"]["steps_executed"], 3);
}

#[test]
fn a_down_task_store_fails_task_operations_while_short_tools_keep_working() {
    let refused = crate::support::memory_server::refused_url()
        .replace("http://", "postgres://postgres@")
        + "/nowhere";
    let mut b = Bridge::initialized(&["--database-url", &refused]);
    let resp = b.call("cyberos.cuo.execute_workflow", ADR());
    assert_envelope(&resp, -32050, "upstream_unavailable");
    assert!(
        !resp.to_string().contains("nowhere"),
        "no connection details in messages"
    );
    let listed = b.request("tasks/list", json!({}));
    assert_envelope(&listed, -32050, "upstream_unavailable");
    let skills = b.call("cyberos.skill.list_skills", json!({}));
    assert!(
        skills["result"]["structuredContent"]["skills"].is_array(),
        "{skills}"
    );
    let route = b.call(
        "cyberos.cuo.route",
        json!({"query": "quarterly budget forecast"}),
    );
    assert!(route["result"].is_object(), "{route}");
}
