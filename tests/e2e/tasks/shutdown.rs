//! SIGTERM on stdio: a call waiting for its run gets the run's outcome within the grace
//! (5 s): the result of a run that ends in time, the failure of one that does not, which
//! is killed. The bridge then exits 0 at once, however long the run would have taken. A
//! second SIGTERM exits at once (1).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ADR;
use crate::support::binary::{Bridge, paced};

/// Sends a plain `tools/call` of the workflow (answered when its run ends, under
/// `--long-running wait`) and returns its id once the run's task exists.
fn waiting_call(b: &mut Bridge) -> Value {
    let id = b.send_request(
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR()}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = b.request("tasks/list", json!({}));
        if listed["result"]["tasks"].as_array().unwrap().len() == 1 {
            return id;
        }
        assert!(Instant::now() < deadline, "the call's task: {listed}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sigterm(b: &Bridge) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// The response to `id`, then the exit status (within `within` of the signal).
fn answer_then_exit(b: &mut Bridge, id: &Value, within: Duration) -> Value {
    let answer = loop {
        let frame = b.recv();
        if frame.get("id") == Some(id) {
            break frame;
        }
    };
    let status = b.wait_exit(within).expect("the bridge exits");
    assert_eq!(status.code(), Some(0));
    answer
}

#[test]
fn sigterm_lets_a_waiting_call_end_with_its_runs_result() {
    // Three steps of a second: within the grace.
    let paced = paced(1000);
    let mut b = Bridge::initialized(&["--cuo-command", &paced, "--long-running", "wait"]);
    let id = waiting_call(&mut b);
    sigterm(&b);
    let answer = answer_then_exit(&mut b, &id, Duration::from_secs(10));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["steps_executed"], 3);
}

#[test]
fn sigterm_fails_a_waiting_call_whose_run_outlasts_the_grace_and_exits() {
    // Three steps of 20 s: a minute, far past the grace.
    let paced = paced(20_000);
    let mut b = Bridge::initialized(&["--cuo-command", &paced, "--long-running", "wait"]);
    let id = waiting_call(&mut b);
    sigterm(&b);
    let answer = answer_then_exit(&mut b, &id, Duration::from_secs(10));
    assert!(
        answer
            .to_string()
            .contains("the bridge running the task stopped"),
        "{answer}"
    );
}

#[test]
fn a_second_sigterm_exits_at_once() {
    let paced = paced(20_000);
    let mut b = Bridge::initialized(&["--cuo-command", &paced, "--long-running", "wait"]);
    waiting_call(&mut b);
    sigterm(&b);
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&b);
    // Well inside the 5 s grace the first signal started.
    let status = b.wait_exit(Duration::from_secs(3)).expect("exited at once");
    assert_eq!(status.code(), Some(1));
}
