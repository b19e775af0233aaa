//! What every `TaskStore` must do with a task's progress log: append in order, skip a
//! repeated step, keep the newest `PROGRESS_LOG_MAX`, stay within the tenant, stop at the
//! task's end, and go with the task.

use cyberos_mcp_bridge::domain::task::{PROGRESS_LOG_MAX, TaskStatus};
use cyberos_mcp_bridge::ports::{ProgressEntry, TaskStore};

use super::{DAY, assert_not_found, at, outcome, running, step, tenant};

fn seqs(log: &[ProgressEntry]) -> Vec<u64> {
    log.iter().map(|e| e.seq).collect()
}

pub(crate) async fn progress_log_contract(store: &dyn TaskStore) {
    let (a, b) = (tenant(), tenant());
    let t = running(a, 0, "inst-1");
    assert!(store.create(&t).await.unwrap());
    let id = t.task.id;
    for (seq, message) in [(1, "plan"), (2, "draft"), (3, "review")] {
        store
            .record_progress(&a, id, &step(seq, message), at(seq as i64 * 100))
            .await
            .unwrap();
    }
    let log = store.progress_after(&a, id, 0, 10).await.unwrap();
    assert_eq!(
        log,
        vec![step(1, "plan"), step(2, "draft"), step(3, "review")]
    );
    assert_eq!(
        seqs(&store.progress_after(&a, id, 1, 10).await.unwrap()),
        [2, 3]
    );
    assert_eq!(
        seqs(&store.progress_after(&a, id, 0, 1).await.unwrap()),
        [1]
    );
    assert!(
        store
            .progress_after(&a, id, 3, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The latest message stays the task's statusMessage.
    let got = store.get(&a, id).await.unwrap();
    assert_eq!(got.status_message.as_deref(), Some("review"));

    // A step already logged is not logged again.
    store
        .record_progress(&a, id, &step(2, "again"), at(400))
        .await
        .unwrap();
    assert_eq!(
        store.progress_after(&a, id, 1, 10).await.unwrap()[0],
        step(2, "draft")
    );

    // Another tenant sees no entry of it and cannot add one.
    assert!(
        store
            .progress_after(&b, id, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let foreign = store
        .record_progress(&b, id, &step(4, "hijacked"), at(500))
        .await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(
        seqs(&store.progress_after(&a, id, 0, 10).await.unwrap()),
        [1, 2, 3]
    );

    // Bounded: only the newest entries are kept.
    let long = running(a, 10, "inst-1");
    assert!(store.create(&long).await.unwrap());
    let extra = 5;
    for seq in 1..=u64::from(PROGRESS_LOG_MAX) + extra {
        store
            .record_progress(&a, long.task.id, &step(seq, "s"), at(1000))
            .await
            .unwrap();
    }
    let kept = store
        .progress_after(&a, long.task.id, 0, PROGRESS_LOG_MAX + 10)
        .await
        .unwrap();
    assert_eq!(kept.len(), PROGRESS_LOG_MAX as usize);
    assert_eq!(kept[0].seq, extra + 1);

    // A finished task logs nothing more.
    let done = outcome(TaskStatus::Completed, None, None);
    store.finish(&a, id, &done, at(2000)).await.unwrap();
    store
        .record_progress(&a, id, &step(7, "too late"), at(2100))
        .await
        .unwrap();
    assert_eq!(
        seqs(&store.progress_after(&a, id, 0, 10).await.unwrap()),
        [1, 2, 3]
    );

    // The log goes with its task: once the sweep deletes the task, a new task with the
    // same id starts with an empty log.
    store.sweep(at(2 * DAY)).await.unwrap();
    assert_not_found(store.get(&a, id).await.as_ref().unwrap_err());
    let mut reborn = running(a, 2 * DAY, "inst-1");
    reborn.task.id = id;
    assert!(store.create(&reborn).await.unwrap());
    assert!(
        store
            .progress_after(&a, id, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
}
