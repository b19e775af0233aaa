//! Cancellation: the run's child (and everything it started) dies with the cancel, the
//! run has no further effect, and the task stays cancelled.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{ADR, args, get_seed, start, stores, wait_status};
use crate::support::binary::Bridge;
use crate::support::cuo_children::{recording_runner, wait_children, wait_gone};
use crate::support::{alive, assert_envelope, script_skill, wait_for, wait_until};

/// Each workflow step of the cancelled run and its sibling takes this long, so a run
/// cancelled after its first step still has about `2 * PACE_MS` of work left.
const PACE_MS: u64 = 1500;
/// How long the cancelled run's child may take to die after the cancel answers. The
/// answer comes only once the run's process group was sent SIGKILL (`stop_local`), so
/// this is the kernel's time to end it; a run that stopped only through the store's
/// once-a-second stop poll would usually still be alive.
const DIES_WITHIN: Duration = Duration::from_millis(300);

/// Waits until the run has reported its first step (the task's message moves on from
/// "started"): the run is in flight, not merely created.
fn wait_first_step(b: &mut Bridge, id: &str) {
    wait_for(Duration::from_secs(20), || {
        let got = b.request("tasks/get", json!({"taskId": id}));
        let message = &got["result"]["statusMessage"];
        if message.is_string() && message != "started" {
            return Ok(());
        }
        Err(format!("no first step: {got}"))
    });
}

/// The subjects of the `plugin.invoked` audit rows: one per workflow run that finished.
fn audited(b: &mut Bridge) -> Vec<Value> {
    let page = b.call(
        "cyberos.memory.read_audit",
        json!({"kind": "plugin.invoked"}),
    );
    page["result"]["structuredContent"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("audit entries: {page}"))
        .iter()
        .map(|e| e["subject"].clone())
        .collect()
}

#[test]
fn cancel_kills_the_runs_child_and_the_run_never_finishes() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let cuo = recording_runner(PACE_MS, &pids);
        let mut b = Bridge::initialized(&args(&store, &["--cuo-command", &cuo]));
        // The shared child for short calls starts first; then each run gets its own.
        let personas = b.call("cyberos.cuo.list_personas", json!({}));
        assert!(personas["result"].is_object(), "{personas}");
        let shared = wait_children(&pids, 1, Duration::from_secs(10))[0];
        let id = start(&mut b, ADR());
        let child = wait_children(&pids, 2, Duration::from_secs(10))[1];
        wait_first_step(&mut b, &id);
        // A sibling run with the same pacing, started later and never cancelled: once it
        // has finished and been audited, a run that survived the cancel would have too.
        let sibling = start(&mut b, ADR());
        let sibling_child = wait_children(&pids, 3, Duration::from_secs(10))[2];
        let cancelled = b.request("tasks/cancel", json!({"id": id}));
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        // The child dies with the cancel, long before its remaining steps would end...
        wait_gone(&[child], DIES_WITHIN);
        // ...and only that child: the sibling's is still at work.
        assert!(
            alive(sibling_child) && alive(shared),
            "the cancel killed other children too"
        );
        wait_status(&mut b, &sibling, "completed", Duration::from_secs(20));
        let rows = wait_for(Duration::from_secs(10), || {
            let rows = audited(&mut b);
            if rows.contains(&json!(sibling)) {
                return Ok(rows);
            }
            Err("the sibling was never audited".to_owned())
        });
        assert!(
            !rows.contains(&json!(id)),
            "the cancelled run went on and finished: {rows:?}"
        );
        let got = get_seed(&mut b, &id);
        assert_eq!(got["result"]["status"], "cancelled", "{got}");
        assert!(got["result"].get("output").is_none(), "{got}");
        let again = b.request("tasks/cancel", json!({"taskId": id}));
        assert_envelope(&again, -32602, "input_validation");
        let result = b.request("tasks/result", json!({"taskId": id}));
        assert_envelope(&result, -32603, "internal_error");
        assert_eq!(
            result["error"]["data"]["message"], "the task was cancelled",
            "{result}"
        );
    }
}

/// A skill whose entrypoint starts a grandchild and records both pids.
pub(super) fn spawning_skill(dir: &Path) -> PathBuf {
    let skills = dir.join("skills");
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho \"$$ $!\" > '{}'\nwait\n",
        dir.join("pids").display()
    );
    script_skill(
        &skills,
        "spawner",
        "Starts a background process and waits.",
        &script,
    );
    skills
}

#[test]
fn cancelling_a_skill_kills_its_child_and_grandchild() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let skills = spawning_skill(dir.path());
        let mut b = Bridge::initialized(&args(&store, &["--skills-dir", skills.to_str().unwrap()]));
        let resp = b.call(
            "cyberos.skill.invoke_skill",
            json!({"skill": "spawner", "inputs": {}}),
        );
        let id = resp["result"]["structuredContent"]["task_id"]
            .as_str()
            .expect("a task id")
            .to_owned();
        let pid_file = dir.path().join("pids");
        wait_until(
            Duration::from_secs(10),
            "the entrypoint never started",
            || std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')),
        );
        let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(pids.iter().all(|p| alive(*p)));
        let cancelled = b.request("tasks/cancel", json!({"taskId": id}));
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        wait_gone(&pids, DIES_WITHIN);
    }
}
