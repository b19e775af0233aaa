//! Cancellation: the run is killed with its process group and the task stays cancelled.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{ADR, args, get_seed, start, stores, wait_gone};
use crate::support::binary::{Bridge, paced};
use crate::support::{alive, assert_envelope};

#[test]
fn cancel_kills_the_run_and_the_task_stays_cancelled() {
    for store in stores() {
        let mut b = Bridge::initialized(&args(&store, &["--cuo-command", &paced(5000)]));
        let id = start(&mut b, ADR());
        std::thread::sleep(Duration::from_millis(300));
        let cancelled = b.request("tasks/cancel", json!({"id": id}));
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        // The run would have finished by now; the status does not move.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(get_seed(&mut b, &id)["result"]["status"], "cancelled");
        let again = b.request("tasks/cancel", json!({"taskId": id}));
        assert_envelope(&again, -32602, "input_validation");
        let result = b.request("tasks/result", json!({"taskId": id}));
        assert!(result["error"].is_object(), "{result}");
    }
}

/// A skill whose entrypoint starts a grandchild and records both pids.
fn spawning_skill(dir: &Path) -> PathBuf {
    let skills = dir.join("skills");
    let folder = skills.join("spawner");
    std::fs::create_dir_all(&folder).unwrap();
    let pids = dir.join("pids");
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: spawner\ndescription: Starts a background process and waits.\nentrypoint: run.sh\n---\nSpawn.\n",
    )
    .unwrap();
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho \"$$ $!\" > '{}'\nwait\n",
        pids.display()
    );
    std::fs::write(folder.join("run.sh"), script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            folder.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
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
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&pid_file).map_or(true, |s| !s.ends_with('\n')) {
            assert!(Instant::now() < deadline, "the entrypoint never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(pids.iter().all(|p| alive(*p)));
        let cancelled = b.request("tasks/cancel", json!({"taskId": id}));
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        wait_gone(&pids);
    }
}
