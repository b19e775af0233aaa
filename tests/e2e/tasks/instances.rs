//! Tasks are shared by two instances on one store, and a crashed owner's task is failed by
//! the survivor. (A task outliving its bridge process is criterion 7 of the acceptance
//! suite.)

use std::time::Duration;

use serde_json::json;

use super::{ADR, dev_args, get_seed, start, stores, wait_status};
use crate::support::binary::{Bridge, paced};

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
