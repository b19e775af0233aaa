//! Tenancy: a tenant runs at most its cap of tasks at once. (Another tenant's task looks
//! exactly like a missing one: criterion 8 of the acceptance suite.)

use super::{ADR, start};
use crate::support::assert_envelope;
use crate::support::binary::{Bridge, paced};

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
