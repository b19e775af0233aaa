//! Long-running tools as tasks through the built binary, on SQLite and (when
//! `DATABASE_URL` is set) on Postgres: the seed's criteria 4, 5, 6, 7, 8 and 17, the spec's
//! task door, progress, two bridge instances on one store, and process-group kills.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::binary::{Bridge, binary, paced};
use crate::support::{alive, assert_envelope, fixtures, init_params};

const LOCAL: &str = "00000000-0000-4000-8000-000000000001";

/// The stores every scenario runs on: the default SQLite file, and Postgres when
/// `DATABASE_URL` is set (required with `CI=true`).
fn stores() -> Vec<Vec<String>> {
    let mut stores = vec![Vec::new()];
    if let Some(url) = crate::support::pg::database_url() {
        stores.push(vec!["--database-url".into(), url]);
    }
    stores
}

/// Flags for `Bridge::initialized` (which adds `--dev` itself).
fn args<'a>(store: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = store.iter().map(String::as_str).collect();
    v.extend_from_slice(extra);
    v
}

/// Flags for `Bridge::spawn_at`, which takes them as they are.
fn dev_args<'a>(store: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--dev"];
    v.extend(args(store, extra));
    v
}

const ADR: fn() -> Value = || json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "test"}});

fn start(b: &mut Bridge, arguments: Value) -> String {
    let resp = b.call("cyberos.cuo.execute_workflow", arguments);
    let result = &resp["result"];
    let handle: Value = serde_json::from_str(
        result["content"][0]["text"]
            .as_str()
            .expect("a text handle"),
    )
    .unwrap();
    assert_eq!(handle["status"], "running", "{resp}");
    assert_eq!(result["structuredContent"], handle);
    handle["task_id"].as_str().unwrap().to_owned()
}

fn get_seed(b: &mut Bridge, id: &str) -> Value {
    b.request("tasks/get", json!({"id": id}))
}

fn wait_status(b: &mut Bridge, id: &str, want: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let resp = get_seed(b, id);
        if resp["result"]["status"] == want {
            return resp["result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "task {id} never became {want}: {resp}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_gone(pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pids.iter().any(|p| alive(*p)), "still running: {pids:?}");
}

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
fn another_tenants_task_is_indistinguishable_from_a_missing_one() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Bridge::spawn_at(dir.path(), &dev_args(&store, &[]), &[]);
        a.initialize();
        let id = start(&mut a, ADR());
        let other = dev_token(dir.path(), "bbbbbbbb-0000-4000-8000-00000000000b");
        let mut b = Bridge::spawn_at(
            dir.path(),
            &dev_args(&store, &[]),
            &[("CYBEROS_TOKEN", other.as_str())],
        );
        b.initialize();
        let foreign = b.request("tasks/get", json!({"taskId": id}));
        let missing = b.request(
            "tasks/get",
            json!({"taskId": "t-aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
        );
        let garbage = b.request("tasks/get", json!({"id": "t-abc123"}));
        for resp in [&foreign, &missing, &garbage] {
            assert_envelope(resp, -32602, "input_validation");
            assert_eq!(resp["error"]["message"], "task not found");
        }
        assert_eq!(
            foreign["error"]["data"]["hint"],
            missing["error"]["data"]["hint"]
        );
        assert!(
            !foreign.to_string().contains(&id[2..]),
            "the id is not echoed"
        );
        let cancel = b.request("tasks/cancel", json!({"taskId": id}));
        assert_eq!(cancel["error"]["message"], "task not found");
        let listed = b.request("tasks/list", json!({}));
        assert!(
            !listed["result"]["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["taskId"] == id)
        );
    }
}

fn dev_token(data_dir: &Path, tenant: &str) -> String {
    let out = std::process::Command::new(binary())
        .arg("--data-dir")
        .arg(data_dir)
        .args(["dev-token", "--tenant", tenant])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn state_and_result_survive_the_bridge_process() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Bridge::spawn_at(
            dir.path(),
            &dev_args(&store, &["--cuo-command", &paced(400)]),
            &[],
        );
        first.initialize();
        let id = start(&mut first, ADR());
        // The host disconnects: the bridge finishes the running task, then exits.
        let status = first.close();
        assert_eq!(status.code(), Some(0));
        let mut second = Bridge::spawn_at(dir.path(), &dev_args(&store, &[]), &[]);
        second.initialize();
        let done = get_seed(&mut second, &id);
        assert_eq!(done["result"]["status"], "completed", "{done}");
        assert_eq!(done["result"]["output"]["steps_executed"], 3);
    }
}

#[test]
fn two_instances_share_tasks_and_a_crashed_owners_task_is_failed_by_the_survivor() {
    for store in stores() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Bridge::spawn_at(
            dir.path(),
            &dev_args(&store, &["--cuo-command", &paced(4000)]),
            &[],
        );
        a.initialize();
        let mut b = Bridge::spawn_at(dir.path(), &dev_args(&store, &[]), &[]);
        b.initialize();
        // Cancel on B a task running on A: A notices and kills its child.
        let first = start(&mut a, ADR());
        assert_eq!(get_seed(&mut b, &first)["result"]["status"], "running");
        let cancelled = b.request("tasks/cancel", json!({"taskId": first}));
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        assert_eq!(get_seed(&mut a, &first)["result"]["status"], "cancelled");
        // A dies mid-task; once its lease expires, B's sweeper fails the task.
        let second = start(&mut a, ADR());
        a.kill();
        let failed = wait_status(&mut b, &second, "failed", Duration::from_secs(40));
        assert_eq!(failed["error"]["class"], "internal_error");
        assert!(
            failed["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("restarted"),
            "{failed}"
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
fn a_finished_workflow_appends_a_plugin_invoked_audit_row() {
    let mut b = Bridge::initialized(&[]);
    let id = start(&mut b, ADR());
    wait_status(&mut b, &id, "completed", Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    let row = loop {
        let page = b.call(
            "cyberos.memory.read_audit",
            json!({"kind": "plugin.invoked"}),
        );
        let entries = page["result"]["structuredContent"]["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(row) = entries.into_iter().find(|e| e["subject"] == id.as_str()) {
            break row;
        }
        assert!(Instant::now() < deadline, "no plugin.invoked row for {id}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let body = &row["body"];
    assert_eq!(body["plugin_id"], "cyberos");
    assert_eq!(body["tool_name"], "cyberos.cuo.execute_workflow");
    assert_eq!(body["outcome"], "success");
    assert_eq!(
        body["trace_id"], row["trace_id"],
        "the row carries the call's trace"
    );
    assert!(body["duration_ms"].is_u64() && body["plugin_version"].is_string());
}

#[test]
fn a_down_memory_service_does_not_change_a_tasks_outcome() {
    let refused = crate::support::memory_server::refused_url();
    let mut b = Bridge::initialized(&["--memory-url", &refused]);
    let id = start(&mut b, ADR());
    let done = wait_status(&mut b, &id, "completed", Duration::from_secs(20));
    assert_eq!(done["output"]["steps_executed"], 3);
}

#[test]
fn a_down_task_store_fails_task_operations_while_short_tools_keep_working() {
    let refused = crate::support::memory_server::refused_url()
        .replace("http://", "postgres://postgres@")
        + "/nowhere";
    let mut b = Bridge::initialized(&["--database-url", &refused]);
    let resp = b.call("cyberos.cuo.execute_workflow", ADR());
    assert_envelope(&resp, -32050, "upstream_unavailable");
    assert!(
        !resp.to_string().contains("nowhere"),
        "no connection details in messages"
    );
    let listed = b.request("tasks/list", json!({}));
    assert_envelope(&listed, -32050, "upstream_unavailable");
    let skills = b.call("cyberos.skill.list_skills", json!({}));
    assert!(
        skills["result"]["structuredContent"]["skills"].is_array(),
        "{skills}"
    );
    let route = b.call(
        "cyberos.cuo.route",
        json!({"query": "quarterly budget forecast"}),
    );
    assert!(route["result"].is_object(), "{route}");
}

#[test]
fn a_tenant_runs_at_most_its_cap_of_tasks_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Bridge::spawn_at(
        dir.path(),
        &["--dev", "--cuo-command", &paced(3000)],
        &[("CYBEROS_MAX_TASKS_PER_TENANT", "1")],
    );
    b.initialize();
    start(&mut b, ADR());
    let refused = b.call("cyberos.cuo.execute_workflow", ADR());
    let data = assert_envelope(&refused, -32050, "upstream_unavailable");
    assert_eq!(refused["error"]["message"], "too many running tasks");
    assert!(data["hint"].as_str().unwrap().contains("At most 1"));
}
