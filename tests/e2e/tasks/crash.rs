//! Nothing the bridge starts outlives it: after a `kill -9` of the bridge (stdio and
//! HTTP), its CUO children, the skill entrypoint a run's child started and the process
//! that entrypoint left in the background are all gone within [`GONE_WITHIN`]. Before,
//! the children died (a death signal) and the entrypoint and its background process were
//! reparented to init and ran on.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::LOCAL;
use super::cancel::spawning_skill;
use crate::support::binary::Bridge;
use crate::support::cuo_children::{recording_runner, wait_children, wait_gone};
use crate::support::http_server::Server;
use crate::support::{alive, wait_until};

/// How long the orphans may take to die once the bridge is killed.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// SIGKILLs, on drop, whatever of `pids` still runs: a failing test leaves no sleeper.
struct Reaper(Vec<i32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in self.0.iter().copied().filter(|p| alive(*p)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The entrypoint's pid and its background child's, once the entrypoint wrote them.
fn entrypoint_pids(dir: &Path) -> Vec<i32> {
    let file = dir.join("pids");
    wait_until(
        Duration::from_secs(10),
        "the entrypoint never started",
        || std::fs::read_to_string(&file).is_ok_and(|s| s.ends_with('\n')),
    );
    std::fs::read_to_string(&file)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The processes a bridge started: its two CUO children (the shared one and the run's),
/// the entrypoint and the entrypoint's background child.
fn started(dir: &Path) -> Vec<i32> {
    let mut pids = wait_children(&dir.join("children"), 2, Duration::from_secs(10));
    pids.extend(entrypoint_pids(dir));
    assert_eq!(pids.len(), 4, "{pids:?}");
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    pids
}

#[test]
fn a_stdio_bridge_killed_with_sigkill_leaves_no_process_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let skills = spawning_skill(dir.path());
    let cuo = recording_runner(0, &dir.path().join("children"));
    let mut b = Bridge::initialized(&[
        "--cuo-command",
        &cuo,
        "--skills-dir",
        skills.to_str().unwrap(),
    ]);
    let personas = b.call("cyberos.cuo.list_personas", json!({}));
    assert!(personas["result"].is_object(), "{personas}");
    let run = b.call(
        "cyberos.skill.invoke_skill",
        json!({"skill": "spawner", "inputs": {}}),
    );
    assert!(
        run["result"]["structuredContent"]["task_id"].is_string(),
        "{run}"
    );
    let pids = started(dir.path());
    let _reaper = Reaper(pids.clone());
    b.kill();
    wait_gone(&pids, GONE_WITHIN);
}

#[tokio::test]
async fn an_http_bridge_killed_with_sigkill_leaves_no_process_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let skills = spawning_skill(dir.path());
    let cuo = recording_runner(0, &dir.path().join("children"));
    let s = Server::start(&[
        "--cuo-command",
        &cuo,
        "--skills-dir",
        skills.to_str().unwrap(),
    ]);
    let t = s.token(LOCAL, None);
    let personas = s.call(&t, "cyberos.cuo.list_personas", json!({})).await;
    assert!(personas["result"].is_object(), "{personas}");
    let run = s
        .call(
            &t,
            "cyberos.skill.invoke_skill",
            json!({"skill": "spawner", "inputs": {}}),
        )
        .await;
    assert!(
        run["result"]["structuredContent"]["task_id"].is_string(),
        "{run}"
    );
    let pids = started(dir.path());
    let _reaper = Reaper(pids.clone());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_gone(&pids, GONE_WITHIN);
}
