//! The four error classes: criteria 9, 10, 11, 12, 13 and 22.

use std::collections::HashSet;

use serde_json::json;

use crate::harness::{Adapters, Memory, READ_ONLY, Stack};
use crate::support::assert_envelope;
use crate::support::fakes::Behaviour;

/// Criterion 9: Input validation rejects malformed arguments: execute_workflow without the
/// required `persona` is `input_validation`, pointing at it, and nothing reaches the CUO.
pub async fn c09_a_missing_required_argument_is_input_validation(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().stdio().await;
    let resp = b
        .call_tool(
            "cyberos.cuo.execute_workflow",
            json!({"workflow": "adr-quick-capture", "inputs": {}}),
        )
        .await;
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert_eq!(data["pointer"], "/persona", "{resp}");
    assert!(!stack.cuo_touched(), "the upstream was called");
    let listed = b.request("tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
}

/// Criterion 10: Authorization is denied on a missing scope: append_audit with a read-only
/// token is `authz_denied` naming `cyberos:memory:write` in `missing_scopes`.
pub async fn c10_a_read_only_token_is_denied_a_write_with_missing_scopes(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().scopes(READ_ONLY).stdio().await;
    let resp = b
        .call_confirmed(
            "cyberos.memory.append_audit",
            json!({"kind": "decision", "body": {}}),
        )
        .await;
    let data = assert_envelope(&resp, -32000, "authz_denied");
    assert_eq!(data["missing_scopes"], json!(["cyberos:memory:write"]));
    // What the token holds still works.
    let read = b.call_tool("cyberos.memory.read_audit", json!({})).await;
    assert!(
        read["result"]["structuredContent"]["entries"].is_array(),
        "{read}"
    );
}

/// Criterion 11: A memory service that cannot be reached is `upstream_unavailable`, not
/// `internal_error`; tools on other upstreams keep working.
pub async fn c11_unreachable_memory_is_upstream_unavailable(adapters: Adapters) {
    let stack = Stack::new(adapters).memory(Memory::Down).up();
    let mut b = stack.bridge().stdio().await;
    let resp = b.call_tool("cyberos.memory.read_audit", json!({})).await;
    assert_envelope(&resp, -32050, "upstream_unavailable");
    let skills = b.call_tool("cyberos.skill.list_skills", json!({})).await;
    assert!(
        skills["result"]["structuredContent"]["skills"].is_array(),
        "{skills}"
    );
}

/// Criterion 12: A bug in a handler is `internal_error`: a panic is caught, its text does
/// not leak, and the bridge keeps serving. A panic needs a scripted fault, so this runs in
/// memory only: the release binary has no way to panic on request.
pub async fn c12_a_panicking_handler_is_internal_error() {
    let stack = Stack::new(Adapters::InMemory).skills(Behaviour::Panic).up();
    let mut b = stack.bridge().stdio().await;
    let resp = b.call_tool("cyberos.skill.list_skills", json!({})).await;
    let data = assert_envelope(&resp, -32603, "internal_error");
    assert!(
        !resp.to_string().contains("scripted"),
        "panic text leaked: {resp}"
    );
    assert!(data.get("pointer").is_none());
    assert_eq!(b.request("ping", json!({})).await["result"], json!({}));
    let personas = b.call_tool("cyberos.cuo.list_personas", json!({})).await;
    assert_eq!(
        personas["result"]["structuredContent"]["personas"][0]["id"],
        "chief-technology-officer"
    );
}

/// Criterion 13: Every error carries a trace id: one of each of the four classes, each with
/// its own.
pub async fn c13_each_error_class_carries_a_trace_id(adapters: Adapters) {
    let stack = Stack::new(adapters).paced(1000).memory(Memory::Down).up();
    let mut b = stack.bridge().stdio().await;
    let invalid = b.call_tool("cyberos.cuo.route", json!({"query": ""})).await;
    let denied = b
        .call_tool(
            "cyberos.memory.append_audit",
            json!({"kind": "decision", "body": {}}),
        )
        .await;
    let unavailable = b.call_tool("cyberos.memory.read_audit", json!({})).await;
    // The result of a cancelled task is an internal error: there is none.
    let handle = b
        .call_tool(
            "cyberos.cuo.execute_workflow",
            json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
                   "inputs": {"title": "t"}}),
        )
        .await;
    let id = handle["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {handle}"))
        .to_owned();
    b.request("tasks/cancel", json!({"taskId": id})).await;
    let internal = b.request("tasks/result", json!({"taskId": id})).await;
    let traces: HashSet<String> = [
        (&invalid, -32602, "input_validation"),
        (&denied, -32000, "authz_denied"),
        (&unavailable, -32050, "upstream_unavailable"),
        (&internal, -32603, "internal_error"),
    ]
    .into_iter()
    .map(|(frame, code, class)| {
        assert_envelope(frame, code, class)["trace_id"]
            .as_str()
            .unwrap()
            .to_owned()
    })
    .collect();
    assert_eq!(traces.len(), 4, "each error has a trace of its own");
}

/// Criterion 22: A tool error does not leak audit content: read_audit of a missing entry
/// says "audit entry not found" with a trace id, and nothing of the log or the request.
pub async fn c22_a_missing_audit_entry_leaks_nothing(adapters: Adapters) {
    let stack = Stack::new(adapters).memory(Memory::Service).up();
    let mut b = stack.bridge().stdio().await;
    let stored = b
        .call_confirmed(
            "cyberos.memory.append_audit",
            json!({"kind": "decision", "subject": "payroll",
                   "body": {"salary": "SECRET-BODY-BYTES"}}),
        )
        .await;
    let stored_id = stored["result"]["structuredContent"]["audit_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a receipt: {stored}"))
        .to_owned();
    let resp = b
        .call_tool(
            "cyberos.memory.read_audit",
            json!({"audit_id": "m-does-not-exist"}),
        )
        .await;
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert_eq!(data["message"], "audit entry not found");
    let text = resp.to_string();
    let ours = [
        "SECRET-BODY-BYTES",
        "payroll",
        "m-does-not-exist",
        &stored_id,
    ];
    for leak in ours.iter().chain(&stack.upstream_secrets()) {
        assert!(!text.contains(leak), "{leak} leaked: {text}");
    }
}
