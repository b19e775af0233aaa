//! What a task keeps is bounded: its arguments are checked (size, and a workflow's
//! `input_schema`) before a task exists, its result has a size cap, and a tenant keeps a
//! bounded number of tasks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{dev_args, dev_token, stores};
use crate::support::binary::Bridge;
use crate::support::{assert_envelope, script_skill, wait_for};

/// A skills dir with `echo` (prints `{}`) and `flood` (prints a million `"`, which is not
/// JSON: its result is that text as a JSON string of about 2 MB).
fn skills(dir: &Path) -> PathBuf {
    let root = dir.join("skills");
    for (name, script) in [
        ("echo", "#!/bin/sh\necho '{}'\n"),
        (
            "flood",
            "#!/bin/sh\nhead -c 1000000 /dev/zero | tr '\\0' '\"'\n",
        ),
    ] {
        script_skill(&root, name, "A test skill.", script);
    }
    root
}

/// A bridge on `store` with the skills of [`skills`], as a tenant of its own (the Postgres
/// run database is shared by every scenario), with `env` set.
fn bridge(store: &[String], dir: &Path, env: &[(&str, &str)]) -> Bridge {
    let skills = skills(dir);
    let tenant = crate::task_store::tenant().to_string();
    let token = dev_token(dir, &tenant);
    let mut env = env.to_vec();
    env.push(("CYBEROS_TOKEN", token.as_str()));
    let mut b = Bridge::spawn_at(
        dir,
        &dev_args(store, &["--skills-dir", skills.to_str().unwrap()]),
        &env,
    );
    b.initialize();
    b
}

/// At most 300 characters of `v`, for assertion messages.
fn clip(v: &Value) -> String {
    v.to_string().chars().take(300).collect()
}

fn task_count(b: &mut Bridge) -> usize {
    let list = b.request("tasks/list", json!({}));
    list["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .len()
}

fn adr(inputs: Value) -> Value {
    json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": inputs})
}

#[test]
fn arguments_are_checked_before_a_task_exists() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = bridge(&store, dir.path(), &[]);
        for (inputs, pointer) in [
            (json!({"title": "x".repeat(201)}), "/inputs/title"),
            (json!({}), "/inputs/title"),
            (json!({"title": "t", "colour": "red"}), "/inputs/colour"),
        ] {
            let resp = b.call("cyberos.cuo.execute_workflow", adr(inputs));
            let data = assert_envelope(&resp, -32602, "input_validation");
            assert_eq!(data["pointer"], pointer, "{resp}");
            assert!(
                resp.to_string().len() < 2000,
                "no echo of the value: {resp}"
            );
        }
        // 3 MB of inputs to a skill without a schema.
        let blob = "x".repeat(3 * 1024 * 1024);
        let resp = b.call(
            "cyberos.skill.invoke_skill",
            json!({"skill": "echo", "inputs": {"blob": blob}}),
        );
        let data = assert_envelope(&resp, -32602, "input_validation");
        assert_eq!(data["pointer"], "/inputs", "{resp}");
        assert!(resp.to_string().len() < 2000);
        assert_eq!(task_count(&mut b), 0, "nothing was stored");
    }
}

#[test]
fn a_result_too_large_to_keep_fails_the_task() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = bridge(&store, dir.path(), &[]);
        let resp = b.call("cyberos.skill.invoke_skill", json!({"skill": "flood"}));
        let id = resp["result"]["structuredContent"]["task_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{resp}"))
            .to_owned();
        // Not wait_status: a failing run here would print megabytes.
        let task = wait_for(Duration::from_secs(20), || {
            let got = b.request("tasks/get", json!({"id": id}));
            if got["result"]["status"] != "running" {
                return Ok(got["result"].clone());
            }
            Err("the run never ended".to_owned())
        });
        assert_eq!(task["status"], "failed", "{}", clip(&task));
        assert!(task.get("output").is_none(), "{}", clip(&task));
        let result = b.request("tasks/result", json!({"taskId": id}));
        assert_envelope(&result, -32050, "upstream_unavailable");
        assert_eq!(
            result["error"]["data"]["message"],
            "the task's result is too large to keep"
        );
    }
}

#[test]
fn a_tenant_keeps_at_most_its_quota_of_tasks() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = bridge(
            &store,
            dir.path(),
            &[("CYBEROS_MAX_STORED_TASKS_PER_TENANT", "2")],
        );
        for _ in 0..2 {
            let resp = b.call("cyberos.skill.invoke_skill", json!({"skill": "echo"}));
            assert!(
                resp["result"]["structuredContent"]["task_id"].is_string(),
                "{resp}"
            );
        }
        let resp = b.call("cyberos.skill.invoke_skill", json!({"skill": "echo"}));
        assert_envelope(&resp, -32050, "upstream_unavailable");
        assert_eq!(
            resp["error"]["data"]["message"], "too many stored tasks",
            "{resp}"
        );
        assert_eq!(task_count(&mut b), 2);
    }
}
