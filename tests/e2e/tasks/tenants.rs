//! Tenancy: another tenant's task is indistinguishable from a missing one, and a tenant
//! runs at most its cap of tasks at once.

use serde_json::json;

use super::{ADR, dev_args, dev_token, start, stores};
use crate::support::assert_envelope;
use crate::support::binary::{Bridge, paced};

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
            assert_eq!(resp["error"]["data"]["message"], "task not found");
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
        assert_eq!(cancel["error"]["data"]["message"], "task not found");
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
    assert_eq!(
        refused["error"]["data"]["message"],
        "too many running tasks"
    );
    assert!(data["hint"].as_str().unwrap().contains("At most 1"));
}
