//! A task's life: a plain call's handle, the spec's task door, the run timeout, waiting
//! for the final result, and refusals before a task exists.

use std::time::Duration;

use serde_json::json;

use super::{ADR, LOCAL, args, start, stores, wait_status};
use crate::support::binary::{Bridge, paced};
use crate::support::{assert_envelope, fixtures, init_params};

#[test]
fn a_plain_call_returns_a_handle_and_the_task_completes() {
    for store in stores() {
        let mut b = Bridge::initialized(&args(&store, &[]));
        let id = start(&mut b, ADR());
        assert!(id.starts_with("t-") && id.len() == 28, "{id}");
        let done = wait_status(&mut b, &id, "completed", Duration::from_secs(20));
        assert_eq!(done["task_id"], id);
        assert_eq!(done["output"]["steps_executed"], 3);
        assert_eq!(done["output"]["final_artifacts"][0]["name"], "adr.md");
        assert!(
            done["duration_ms"].is_u64()
                && done["created_at"].is_string()
                && done["updated_at"].is_string()
        );
        let spec = b.request("tasks/get", json!({"taskId": id}));
        assert_eq!(spec["result"]["status"], "completed", "{spec}");
    }
}

#[test]
fn the_spec_door_creates_a_task_and_tasks_result_returns_the_tool_result() {
    for store in stores() {
        let mut b = Bridge::initialized(&args(&store, &["--cuo-command", &paced(300)]));
        let resp = b.request(
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR(), "task": {"ttl": 60000},
                   "_meta": {"progressToken": "p-1"}}),
        );
        let task = &resp["result"]["task"];
        assert_eq!(task["status"], "working", "{resp}");
        assert_eq!(task["ttl"], 60000);
        assert!(
            resp["result"]["_meta"]["io.modelcontextprotocol/model-immediate-response"].is_string()
        );
        let id = task["taskId"].as_str().unwrap().to_owned();
        let result_id = b.send_request("tasks/result", json!({"taskId": id}));
        let mut progress = Vec::new();
        let result = loop {
            let frame = b.recv();
            if frame["method"] == "notifications/progress" {
                assert_eq!(frame["params"]["progressToken"], "p-1");
                assert_eq!(
                    frame["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                    id
                );
                progress.push(frame["params"]["progress"].as_u64().unwrap());
            } else if frame["id"] == result_id {
                break frame;
            }
        };
        assert!(
            !progress.is_empty() && progress.windows(2).all(|w| w[0] < w[1]),
            "{progress:?}"
        );
        assert_eq!(
            result["result"]["structuredContent"]["steps_executed"], 3,
            "{result}"
        );
        assert_eq!(
            result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            id
        );
        let listed = b.request("tasks/list", json!({}));
        assert!(
            listed["result"]["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["taskId"] == id)
        );
        let late = b.request("tasks/cancel", json!({"taskId": id}));
        assert_envelope(&late, -32602, "input_validation");
    }
}

#[test]
fn a_run_past_its_timeout_fails_with_internal_error_and_a_timeout_hint() {
    for store in stores() {
        let mut b = Bridge::initialized(&args(&store, &["--cuo-command", &paced(3000)]));
        let mut arguments = ADR();
        arguments["timeout_s"] = 1.into();
        let id = start(&mut b, arguments);
        let failed = wait_status(&mut b, &id, "failed", Duration::from_secs(15));
        assert_eq!(failed["error"]["class"], "internal_error", "{failed}");
        assert!(
            failed["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("timeout"),
            "{failed}"
        );
        assert_eq!(failed["error"]["trace_id"].as_str().unwrap().len(), 32);
        let spec = b.request("tasks/get", json!({"taskId": id}));
        assert_eq!(spec["result"]["status"], "failed");
        assert!(
            spec["result"]["statusMessage"]
                .as_str()
                .unwrap()
                .contains("timeout")
        );
    }
}

#[test]
fn long_running_wait_returns_the_final_result_to_a_plain_call() {
    let mut b = Bridge::initialized(&["--long-running", "wait"]);
    let resp = b.call("cyberos.cuo.execute_workflow", ADR());
    assert_eq!(
        resp["result"]["structuredContent"]["steps_executed"], 3,
        "{resp}"
    );
}

#[test]
fn unknown_workflows_and_skills_are_refused_before_a_task_exists() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.call(
        "cyberos.cuo.execute_workflow",
        json!({"persona": "chief-technology-officer", "workflow": "nope"}),
    );
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert!(data["hint"].as_str().unwrap().contains("list_workflows"));
    let resp = b.call(
        "cyberos.cuo.execute_workflow",
        json!({"persona": "nobody", "workflow": "x"}),
    );
    assert_envelope(&resp, -32602, "input_validation");
    let resp = b.call("cyberos.skill.invoke_skill", json!({"skill": "nope"}));
    assert_envelope(&resp, -32602, "input_validation");
    let listed = b.request("tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]));
    let _ = (init_params, fixtures, LOCAL);
}

#[test]
fn a_plain_call_answered_with_a_handle_gets_no_progress_after_its_answer() {
    let mut b = Bridge::initialized(&["--cuo-command", &paced(200)]);
    let resp = b.request(
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR(),
               "_meta": {"progressToken": "p-2"}}),
    );
    let id = resp["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{resp}"))
        .to_owned();
    // tasks/result answers once the run has ended, after anything the run sent.
    let result_id = b.send_request("tasks/result", json!({"taskId": id}));
    loop {
        let frame = b.recv();
        assert_ne!(
            frame["method"], "notifications/progress",
            "progress after the call was answered: {frame}"
        );
        if frame["id"] == result_id {
            assert!(frame["result"].is_object(), "{frame}");
            break;
        }
    }
}
