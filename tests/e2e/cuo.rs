//! The CUO child-process adapter through the built binary, against a real misbehaving
//! child (`tests/fixtures/cuo/misbehaving_cuo.py`) and the bundled reference runner.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::binary::Bridge;
use crate::support::{alive, assert_envelope, fixtures, wait_for, wait_until};

/// The interpreter itself, not a version-manager shim (a shell script that would add its
/// own variables to the child's environment).
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn fixture_command() -> String {
    format!(
        "{} {}",
        python(),
        fixtures().join("cuo/misbehaving_cuo.py").display()
    )
}

fn route(b: &mut Bridge, query: &str) -> Value {
    b.call("cyberos.cuo.route", json!({"query": query}))
}

fn alternates(resp: &Value) -> Vec<String> {
    serde_json::from_value(resp["result"]["structuredContent"]["alternates"].clone()).unwrap()
}

#[test]
fn a_crash_mid_call_is_upstream_unavailable_and_the_next_call_gets_a_fresh_child() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    let first_pid = alternates(&route(&mut b, "pid"))[0].clone();
    let resp = route(&mut b, "crash");
    assert_envelope(&resp, -32050, "upstream_unavailable");
    let personas = b.call("cyberos.cuo.list_personas", json!({}));
    assert_eq!(
        personas["result"]["structuredContent"]["personas"][0]["short_name"], "CTO",
        "{personas}"
    );
    let second_pid = alternates(&route(&mut b, "pid"))[0].clone();
    assert_ne!(first_pid, second_pid, "a new child serves after the crash");
}

#[test]
fn short_calls_share_one_child() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    let pids: Vec<String> = (0..3)
        .map(|_| alternates(&route(&mut b, "pid"))[0].clone())
        .collect();
    assert!(pids.windows(2).all(|w| w[0] == w[1]), "{pids:?}");
}

#[test]
fn a_hung_child_times_out_and_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Bridge::spawn_with_env(
        &[
            "--dev",
            "--cuo-command",
            &fixture_command(),
            "--cuo-timeout",
            "1",
            "--cuo-env",
            "CUO_FIXTURE_DIR",
        ],
        &[("CUO_FIXTURE_DIR", dir.path().to_str().unwrap())],
    );
    b.initialize();
    let started = Instant::now();
    let resp = route(&mut b, "hang");
    assert_envelope(&resp, -32050, "upstream_unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the per-call timeout holds"
    );
    let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap();
    let pids: Vec<i32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    wait_until(
        Duration::from_secs(5),
        &format!("child and grandchild are gone: {pids:?}"),
        || !pids.iter().any(|p| alive(*p)),
    );
    // And the bridge recovers.
    assert_eq!(
        route(&mut b, "ok")["result"]["structuredContent"]["persona"],
        "chief-technology-officer"
    );
}

#[test]
fn garbage_and_over_long_lines_are_upstream_unavailable_then_it_recovers() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    for query in ["garbage", "long"] {
        let resp = route(&mut b, query);
        assert_envelope(&resp, -32050, "upstream_unavailable");
        let ok = route(&mut b, "ok");
        assert_eq!(
            ok["result"]["structuredContent"]["workflow"], "architect-new-system",
            "after {query}: {ok}"
        );
    }
}

#[test]
fn a_child_refusal_is_input_validation_with_a_sanitised_message_and_a_discovery_hint() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    let resp = b.call("cyberos.cuo.list_workflows", json!({"persona": "x"}));
    let data = assert_envelope(&resp, -32602, "input_validation");
    let message = resp["error"]["data"]["message"].as_str().unwrap();
    assert!(message.starts_with("unknown persona"), "{message}");
    assert!(
        !message.contains('\u{7}'),
        "control characters are stripped"
    );
    assert!(
        data["hint"]
            .as_str()
            .unwrap()
            .contains("cyberos.cuo.list_personas")
    );
}

#[test]
fn children_get_a_scrubbed_environment_and_the_callers_context() {
    let mut b = Bridge::spawn_with_env(
        &[
            "--dev",
            "--cuo-command",
            &fixture_command(),
            "--cuo-env",
            "CUO_EXTRA",
        ],
        &[
            ("CUO_EXTRA", "1"),
            ("CYBEROS_JWT_ISSUER_SECRET", "secret-token"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
        ],
    );
    b.initialize();
    let env = alternates(&route(&mut b, "env"));
    assert!(env.contains(&"CUO_EXTRA".to_owned()), "{env:?}");
    assert!(env.contains(&"PATH".to_owned()), "{env:?}");
    for name in &env {
        assert!(
            ["PATH", "HOME", "LANG", "TZ", "TMPDIR", "CUO_EXTRA"].contains(&name.as_str())
                || name.starts_with("LC_"),
            "{name} leaked into the child"
        );
    }
    let ctx = alternates(&route(&mut b, "ctx"));
    assert_eq!(ctx[0], "00000000-0000-4000-8000-000000000001");
    assert!(ctx[2].starts_with("00-") && ctx[2].len() == 55, "{ctx:?}");
}

#[test]
fn an_unstartable_cuo_is_upstream_unavailable() {
    let mut b = Bridge::initialized(&["--cuo-command", "/nonexistent/cuo --flag"]);
    let resp = b.call("cyberos.cuo.list_personas", json!({}));
    let data = assert_envelope(&resp, -32050, "upstream_unavailable");
    assert!(
        !resp.to_string().contains("/nonexistent"),
        "no server paths in messages"
    );
    assert!(data["hint"].as_str().unwrap().contains("--cuo-command"));
}

#[test]
fn a_callers_traceparent_continues_into_errors_and_the_cuo_context() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let meta = json!({"traceparent": format!("00-{trace}-00f067aa0ba902b7-01"),
                      "tracestate": "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"});
    let bad = b.request(
        "tools/call",
        json!({"name": "cyberos.cuo.route", "arguments": {"query": ""}, "_meta": meta}),
    );
    assert_eq!(
        assert_envelope(&bad, -32602, "input_validation")["trace_id"],
        trace
    );
    let ok = b.request(
        "tools/call",
        json!({"name": "cyberos.cuo.route", "arguments": {"query": "ctx"}, "_meta": meta}),
    );
    let sent = alternates(&ok)[2].clone();
    assert!(
        sent.starts_with(&format!("00-{trace}-")),
        "the CUO child gets the caller's trace: {sent}"
    );
    assert!(
        !sent.contains("00f067aa0ba902b7"),
        "with the bridge's own span id"
    );
    assert_eq!(
        alternates(&ok)[3],
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
        "and the caller's tracestate"
    );
    // Without one, each request gets a fresh trace.
    let fresh = b.call("cyberos.cuo.route", json!({"query": ""}));
    assert_ne!(fresh["error"]["data"]["trace_id"], trace);
}

#[test]
fn a_child_that_crashes_during_a_workflow_fails_its_task_and_the_bridge_serves_on() {
    let mut b = Bridge::initialized(&["--cuo-command", &fixture_command()]);
    let resp = b.call(
        "cyberos.cuo.execute_workflow",
        json!({"persona": "chief-technology-officer", "workflow": "crash-midway"}),
    );
    let id = resp["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {resp}"))
        .to_owned();
    wait_for(Duration::from_secs(20), || {
        let got = b.request("tasks/get", json!({"taskId": id}));
        if got["result"]["status"] == "failed" {
            return Ok(());
        }
        assert_ne!(got["result"]["status"], "completed", "{got}");
        Err(format!("the task never failed: {got}"))
    });
    let result = b.request("tasks/result", json!({"taskId": id}));
    let data = assert_envelope(&result, -32050, "upstream_unavailable");
    let message = result["error"]["data"]["message"].as_str().unwrap();
    assert_eq!(
        message, "the CUO orchestrator is unavailable",
        "no process details leak"
    );
    assert_eq!(
        data["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    // Short calls still work: a fresh child serves them.
    assert_eq!(alternates(&route(&mut b, "pid")).len(), 1);
}
