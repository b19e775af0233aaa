//! What every `TaskStore` and every `ConfirmationLedger` must do, as functions the store
//! tests run against each implementation.

use std::collections::HashSet;

use serde_json::json;

use cyberos_mcp_bridge::domain::task::{
    OVERDUE_GRACE_MS, TaskFailure, TaskStatus, orphaned, overdue,
};
use cyberos_mcp_bridge::domain::{DomainError, ErrorClass, TaskId, Timestamp};
use cyberos_mcp_bridge::ports::{Clock, ConfirmationLedger, SweepReport, TaskStore};

use super::{
    HOUR, MINUTE, assert_not_found, at, json_of, outcome, running, seen, step, task_id, tenant,
};
use crate::support::fakes::TestClock;

/// What every `TaskStore` must do (the port's doc comments).
pub(crate) async fn task_store_contract(store: &dyn TaskStore) {
    let (a, b) = (tenant(), tenant());

    // create / get, duplicate ids.
    let t1 = running(a, 0, "inst-1");
    assert!(store.create(&t1).await.unwrap());
    assert_eq!(store.get(&a, t1.task.id).await.unwrap(), t1.task);
    assert!(!store.create(&t1).await.unwrap(), "a taken id is refused");
    let mut same_id = running(b, 5, "inst-9");
    same_id.task.id = t1.task.id;
    assert!(
        !store.create(&same_id).await.unwrap(),
        "a taken id is refused for another tenant too"
    );
    assert_eq!(store.get(&a, t1.task.id).await.unwrap(), t1.task);

    // Another tenant's task is answered exactly like a missing one.
    let missing = task_id();
    let foreign = store.get(&b, t1.task.id).await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(seen(&foreign), seen(&store.get(&b, missing).await));
    let done = outcome(TaskStatus::Completed, Some(json!({"x": 1})), None);
    let foreign = store.finish(&b, t1.task.id, &done, at(1000)).await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(
        seen(&foreign),
        seen(&store.finish(&b, missing, &done, at(1000)).await)
    );
    let foreign = store
        .record_progress(&b, t1.task.id, &step(1, "hijacked"), at(1000))
        .await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(
        seen(&foreign),
        seen(
            &store
                .record_progress(&b, missing, &step(1, "x"), at(1000))
                .await
        )
    );
    assert_eq!(
        store.get(&a, t1.task.id).await.unwrap(),
        t1.task,
        "nothing of another tenant's task changed"
    );

    // Progress.
    store
        .record_progress(&a, t1.task.id, &step(1, "step 1 of 3"), at(1000))
        .await
        .unwrap();
    let got = store.get(&a, t1.task.id).await.unwrap();
    assert_eq!(got.status_message.as_deref(), Some("step 1 of 3"));
    assert_eq!(got.updated_at, at(1000));
    assert_eq!(got.status, TaskStatus::Running);

    // list: newest first (ties by id), paged, the tenant's tasks only.
    let t2 = running(a, 10, "inst-1");
    let t3 = running(a, 20, "inst-1");
    let t4 = running(a, 30, "inst-2");
    let t5 = running(a, 30, "inst-2");
    let tb = running(b, 40, "inst-2");
    for t in [&t2, &t3, &t4, &t5, &tb] {
        assert!(store.create(t).await.unwrap());
    }
    let mut expected: Vec<(Timestamp, String)> = [&t1, &t2, &t3, &t4, &t5]
        .iter()
        .map(|t| (t.task.created_at, t.task.id.to_string()))
        .collect();
    expected.sort_by(|x, y| y.cmp(x));
    let mut listed = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list(&a, cursor.as_deref(), 2).await.unwrap();
        sizes.push(page.tasks.len());
        listed.extend(page.tasks.iter().map(|t| (t.created_at, t.id.to_string())));
        assert!(page.tasks.iter().all(|t| t.tenant == a));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(listed, expected);
    assert_eq!(sizes, [2, 2, 1]);
    let theirs = store.list(&b, None, 50).await.unwrap();
    assert_eq!(
        theirs.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        [tb.task.id]
    );
    assert_eq!(theirs.next_cursor, None);
    for bad in ["garbage", "c1.", "c1.zz.t-x", ""] {
        let e = store.list(&a, Some(bad), 10).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::InputValidation, "{bad:?}");
        assert_eq!(e.to_string(), "invalid cursor");
    }

    // finish is conditional: a terminal status is never overwritten, and only the update
    // that made the change is told so.
    let cancel = outcome(TaskStatus::Cancelled, None, None);
    let first = store
        .finish(&a, t2.task.id, &cancel, at(2000))
        .await
        .unwrap();
    assert!(first.changed, "the first finish makes the change");
    let cancelled = first.task;
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let again = store
        .finish(&a, t2.task.id, &cancel, at(2500))
        .await
        .unwrap();
    assert!(
        !again.changed,
        "a second cancel changes nothing and is told so"
    );
    assert_eq!(again.task, cancelled);
    let late = store
        .finish(
            &a,
            t2.task.id,
            &outcome(TaskStatus::Completed, Some(json!({"late": true})), None),
            at(3000),
        )
        .await
        .unwrap();
    assert!(!late.changed);
    assert_eq!(
        late.task.status,
        TaskStatus::Cancelled,
        "the winner's status"
    );
    assert_eq!(late.task.output, None);
    assert_eq!(late.task.updated_at, at(2000));
    assert_eq!(store.get(&a, t2.task.id).await.unwrap(), cancelled);

    // Concurrent finishers of one running task: exactly one is told it made the change.
    let raced = running(a, 5, "inst-1");
    assert!(store.create(&raced).await.unwrap());
    let finishers = (0..8).map(|i| {
        let status = if i % 2 == 0 {
            TaskStatus::Cancelled
        } else {
            TaskStatus::Completed
        };
        let out = outcome(status, None, None);
        async move { store.finish(&a, raced.task.id, &out, at(2000 + i)).await }
    });
    let results: Vec<_> = futures::future::join_all(finishers).await;
    let results: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        results.iter().filter(|f| f.changed).count(),
        1,
        "{results:?}"
    );
    let stored = store.get(&a, raced.task.id).await.unwrap();
    assert!(results.iter().all(|f| f.task == stored), "{results:?}");

    let result = json!({"steps_executed": 3, "final_artifacts": [{"path": "adr.md"}], "a": null});
    let completed = store
        .finish(
            &a,
            t3.task.id,
            &outcome(TaskStatus::Completed, Some(result.clone()), None),
            at(4000),
        )
        .await
        .unwrap();
    assert!(completed.changed);
    let completed = completed.task;
    assert_eq!(completed.status, TaskStatus::Completed);
    assert_eq!(json_of(completed.output.as_ref().unwrap()), result);
    assert_eq!(completed.updated_at, at(4000));
    assert_eq!(completed.failure, None);

    let why = TaskFailure {
        class: ErrorClass::UpstreamUnavailable,
        message: "the CUO orchestrator is unavailable".into(),
        hint: "Try again in a moment.".into(),
    };
    let failed = store
        .finish(
            &a,
            t4.task.id,
            &outcome(TaskStatus::Failed, None, Some(why.clone())),
            at(5000),
        )
        .await
        .unwrap()
        .task;
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.failure.as_ref(), Some(&why));
    assert_eq!(failed.status_message.as_deref(), Some(why.hint.as_str()));
    assert_eq!(store.get(&a, t4.task.id).await.unwrap(), failed);

    // Progress on a finished task is accepted and changes nothing.
    store
        .record_progress(&a, t3.task.id, &step(9, "too late"), at(6000))
        .await
        .unwrap();
    assert_eq!(store.get(&a, t3.task.id).await.unwrap(), completed);

    // Leases and stops. Owners: t1, t2, t3 inst-1; t4, t5, tb inst-2.
    let stopped: HashSet<TaskId> = store
        .stopped_among(
            "inst-1",
            &[t1.task.id, t2.task.id, t3.task.id, t5.task.id, missing],
        )
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(stopped, HashSet::from([t2.task.id, t3.task.id]));
    assert_eq!(
        store
            .stopped_among("inst-2", &[t4.task.id, t5.task.id, tb.task.id])
            .await
            .unwrap(),
        [t4.task.id]
    );
    assert!(store.stopped_among("inst-1", &[]).await.unwrap().is_empty());

    // t6 finishes and passes its retention; t7 is running past its retention (kept).
    let mut t6 = running(a, 50, "inst-1");
    t6.task.expires_at = at(10 * MINUTE);
    let mut t7 = running(b, 60, "inst-1");
    t7.task.expires_at = at(10 * MINUTE);
    assert!(store.create(&t6).await.unwrap());
    assert!(store.create(&t7).await.unwrap());
    store
        .finish(
            &a,
            t6.task.id,
            &outcome(TaskStatus::Completed, None, None),
            at(7000),
        )
        .await
        .unwrap();

    // t8 runs on inst-1 but its run ended there without an outcome: inst-1 does not name
    // it, so its lease lapses. t9 and t10 are live on inst-1; t9 is past its timeout by
    // more than the grace at the sweep, t10 by just less.
    let t8 = running(a, 70, "inst-1");
    let mut t9 = running(b, 80, "inst-1");
    t9.task.timeout_at = at(HOUR - OVERDUE_GRACE_MS - 1);
    let mut t10 = running(b, 90, "inst-1");
    t10.task.timeout_at = at(HOUR - OVERDUE_GRACE_MS + 1);
    for t in [&t8, &t9, &t10] {
        assert!(store.create(t).await.unwrap());
    }

    // inst-1 renews the runs live on it (t1, t7, t9, t10); a finished task (t2) and
    // another owner's (t5) among the ids are not renewed. inst-2's (t5, tb) lapse.
    let live = [
        t1.task.id,
        t7.task.id,
        t9.task.id,
        t10.task.id,
        t2.task.id,
        t5.task.id,
    ];
    store
        .renew_leases("inst-1", &live, at(10 * HOUR))
        .await
        .unwrap();
    store
        .renew_leases("inst-2", &[], at(10 * HOUR))
        .await
        .unwrap();
    let report = store.sweep(at(HOUR)).await.unwrap();
    assert_eq!(
        report,
        SweepReport {
            orphaned: 3,
            overdue: 1,
            expired: 1
        }
    );
    for (tenant, id) in [(a, t5.task.id), (b, tb.task.id), (a, t8.task.id)] {
        let lost = store.get(&tenant, id).await.unwrap();
        assert_eq!(lost.status, TaskStatus::Failed);
        assert_eq!(lost.failure, Some(orphaned()));
        assert_eq!(lost.failure.as_ref().unwrap().class, ErrorClass::Internal);
        assert_eq!(lost.status_message, Some(orphaned().hint));
        assert_eq!(lost.updated_at, at(HOUR));
    }
    let late = store.get(&b, t9.task.id).await.unwrap();
    assert_eq!(late.status, TaskStatus::Failed);
    assert_eq!(late.failure, Some(overdue()));
    assert_eq!(late.status_message, Some(overdue().hint));
    assert_eq!(late.updated_at, at(HOUR));
    assert_eq!(
        store.get(&b, t10.task.id).await.unwrap().status,
        TaskStatus::Running,
        "within the grace"
    );
    assert_not_found(&store.get(&a, t6.task.id).await.unwrap_err());
    assert_eq!(
        store.get(&b, t7.task.id).await.unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        store.get(&a, t1.task.id).await.unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        store.stopped_among("inst-2", &[t5.task.id]).await.unwrap(),
        [t5.task.id],
        "a swept task counts as stopped for its owner"
    );
    assert_eq!(
        store.sweep(at(HOUR)).await.unwrap(),
        SweepReport::default(),
        "a second sweep finds nothing"
    );
    // The owner finishing after the sweep does not revive the task.
    let after = store
        .finish(&a, t5.task.id, &done, at(HOUR + 1000))
        .await
        .unwrap();
    assert!(!after.changed);
    assert_eq!(after.task.status, TaskStatus::Failed);

    store.check().await.unwrap();
}

/// What every `ConfirmationLedger` must do: each id works once per tenant, and is
/// remembered until its token expires on `clock`, the ledger's clock. The times are long
/// past, so a ledger that read the system's clock instead would forget every id at once.
pub(crate) async fn ledger_contract(ledger: &dyn ConfirmationLedger, clock: &TestClock) {
    let (a, b) = (tenant(), tenant());
    clock.set(at(0));
    let soon = at(5 * MINUTE);
    assert!(ledger.claim(&a, "jti-1", soon).await.unwrap());
    assert!(!ledger.claim(&a, "jti-1", soon).await.unwrap(), "used once");
    assert!(ledger.claim(&b, "jti-1", soon).await.unwrap(), "per tenant");
    assert!(ledger.claim(&a, "jti-2", soon).await.unwrap());
    assert!(ledger.used(&a, "jti-1").await.unwrap());
    assert!(!ledger.used(&a, "jti-3").await.unwrap(), "never claimed");
    // Retained until its token expires, that very millisecond included.
    clock.set(soon);
    assert!(ledger.used(&a, "jti-1").await.unwrap(), "retained");
    assert!(
        !ledger.claim(&a, "jti-1", soon).await.unwrap(),
        "refused while retained"
    );
    // A millisecond later it is forgotten, and the next claim sweeps it away.
    clock.set(soon.plus_millis(1));
    assert!(!ledger.used(&a, "jti-1").await.unwrap(), "forgotten");
    assert!(
        ledger.claim(&a, "jti-1", at(10 * MINUTE)).await.unwrap(),
        "swept"
    );
    assert!(!ledger.claim(&a, "jti-1", at(10 * MINUTE)).await.unwrap());
    // Ids whose token has expired are forgotten (the token no longer verifies anyway).
    let past = clock.now().plus_millis(-MINUTE);
    assert!(ledger.claim(&a, "jti-old", past).await.unwrap());
    assert!(ledger.claim(&a, "jti-old", past).await.unwrap());
}

/// What a `ConfirmationLedger` built with a cap of [`LEDGER_CAP`] keys per tenant must do:
/// past the cap a new key is refused as retryable (a used one is still reported used),
/// other tenants are untouched, and expired keys make room again.
pub(crate) async fn ledger_cap_contract(ledger: &dyn ConfirmationLedger, clock: &TestClock) {
    let (a, b) = (tenant(), tenant());
    clock.set(at(0));
    let soon = at(5 * MINUTE);
    for i in 0..LEDGER_CAP {
        assert!(ledger.claim(&a, &format!("k-{i}"), soon).await.unwrap());
    }
    let full = ledger.claim(&a, "one-more", soon).await.unwrap_err();
    assert_eq!(full.class(), ErrorClass::UpstreamUnavailable, "{full}");
    assert!(
        matches!(
            full,
            DomainError::UpstreamUnavailable {
                retry_after: Some(_),
                ..
            }
        ),
        "{full}"
    );
    assert!(full.to_string().contains("too many"), "{full}");
    assert!(
        !ledger.claim(&a, "k-0", soon).await.unwrap(),
        "a used key is still used"
    );
    assert!(
        !ledger.used(&a, "one-more").await.unwrap(),
        "nothing was stored"
    );
    assert!(
        ledger.claim(&b, "one-more", soon).await.unwrap(),
        "per tenant"
    );
    clock.set(soon.plus_millis(1));
    assert!(
        ledger.claim(&a, "one-more", at(10 * MINUTE)).await.unwrap(),
        "expired keys make room"
    );
}

/// The cap the stores under [`ledger_cap_contract`] are built with.
pub(crate) const LEDGER_CAP: u32 = 5;
