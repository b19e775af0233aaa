//! A task's life beyond the seed's criteria (a handle polled to completion and the run
//! timeout are in `tests/acceptance`): the spec's task door, waiting for the final result,
//! progress, and refusals before a task exists.

use serde_json::json;

use super::{ADR, LOCAL, args, stores};
use crate::support::binary::{Bridge, paced};
use crate::support::{assert_envelope, fixtures, init_params};

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
