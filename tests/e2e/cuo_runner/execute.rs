//! Workflow runs: progress before the result, refusals, pacing against the deadline, and
//! EOF in the middle of a run.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{adr_params, far_deadline, rfc3339_in, with_ctx};
use crate::support::cuo_runner::{Runner, error_of};

#[test]
fn execute_sends_progress_for_every_step_before_the_result() {
    let mut r = Runner::spawn(&[]);
    let params = with_ctx(json!({
        "persona": "chief-technology-officer", "workflow": "architect-new-system",
        "inputs": {"context": "Payments in Southeast Asia"}, "deadline": far_deadline()
    }));
    let (progress, resp) = r.call("workflow.execute", params);
    let result = &resp["result"];
    let steps = result["steps_executed"].as_u64().expect("steps_executed");
    assert_eq!(progress.len() as u64, steps);
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["method"], "progress");
        assert!(p.get("id").is_none());
        assert_eq!(p["params"]["step"], i as u64 + 1);
        assert_eq!(p["params"]["total"], steps);
        assert!(p["params"]["message"].is_string());
    }
    assert_eq!(progress[0]["params"]["message"], "Gather requirements");
    let artifacts = result["final_artifacts"].as_array().expect("artifacts");
    let requirements = artifacts
        .iter()
        .find(|a| a["name"] == "requirements.md")
        .expect("requirements.md");
    assert_eq!(requirements["media_type"], "text/markdown");
    let content = requirements["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("# Gather requirements\n\n"),
        "{content}"
    );
    assert!(content.contains("Context: Payments in Southeast Asia"));
    assert!(content.contains("Known constraints: (not provided)"));
}

#[test]
fn execute_refuses_unknown_ids_and_inputs_that_break_the_schema() {
    let mut r = Runner::spawn(&[]);
    let deadline = far_deadline();
    let mut params = adr_params(json!({"title": "x"}), &deadline);
    params["persona"] = json!("nobody");
    assert_eq!(r.err("workflow.execute", params).0, -32602);
    let mut params = adr_params(json!({"title": "x"}), &deadline);
    params["workflow"] = json!("nothing");
    let (code, message) = r.err("workflow.execute", params);
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("unknown workflow 'nothing'"),
        "{message}"
    );

    let (_, resp) = r.call("workflow.execute", adr_params(json!({}), &deadline));
    assert_eq!(error_of(&resp).0, -32602);
    assert!(error_of(&resp).1.contains("'/title'"), "{resp}");
    assert_eq!(resp["error"]["data"]["pointer"], "/title");
    let (code, message) = r.err(
        "workflow.execute",
        adr_params(json!({"title": "x", "extra": 1}), &deadline),
    );
    assert_eq!(code, -32602);
    assert!(message.contains("'/extra'"), "{message}");
    let (code, _) = r.err(
        "workflow.execute",
        adr_params(json!({"title": "x"}), "soon"),
    );
    assert_eq!(code, -32602);
}

#[test]
fn pacing_stops_at_a_deadline_in_the_past_or_the_near_future() {
    let mut r = Runner::spawn(&["--pace-ms", "300"]);
    let past = rfc3339_in(chrono::TimeDelta::seconds(-5));
    let (progress, resp) = r.call("workflow.execute", adr_params(json!({"title": "t"}), &past));
    assert!(progress.is_empty());
    assert_eq!(error_of(&resp), (-32001, "deadline exceeded".to_owned()));

    // Three steps of 300 ms against a 500 ms deadline: one step runs, then it is over.
    let soon = rfc3339_in(chrono::TimeDelta::milliseconds(500));
    let start = Instant::now();
    let (progress, resp) = r.call("workflow.execute", adr_params(json!({"title": "t"}), &soon));
    assert_eq!(error_of(&resp).0, -32001);
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert!(start.elapsed() < Duration::from_secs(2));

    let (progress, resp) = r.call(
        "workflow.execute",
        adr_params(json!({"title": "t"}), &far_deadline()),
    );
    assert_eq!(resp["result"]["steps_executed"], 3);
    assert_eq!(progress.len(), 3);
}

#[test]
fn eof_exits_zero_even_in_the_middle_of_a_paced_run() {
    let mut r = Runner::spawn(&[]);
    r.ok("personas.list", with_ctx(json!({})));
    r.close_stdin();
    assert_eq!(r.wait_exit(Duration::from_secs(5)).code(), Some(0));

    let mut r = Runner::spawn(&["--pace-ms", "10000"]);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "workflow.execute",
        "params": adr_params(json!({"title": "t"}), &far_deadline())});
    // The pipe delivers the request before EOF, so the runner has it when stdin closes;
    // EOF while it paces abandons the run: no answer, and exit 0 at once.
    r.send_raw(format!("{request}\n").as_bytes());
    let start = Instant::now();
    r.close_stdin();
    assert_eq!(r.wait_exit(Duration::from_secs(5)).code(), Some(0));
    assert!(start.elapsed() < Duration::from_secs(3));
    assert_eq!(
        r.rest(),
        Vec::<Value>::new(),
        "the abandoned run was answered"
    );
}
