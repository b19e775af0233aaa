//! The storage limits of the `TaskStore` contract, on both stores: the per-tenant quota of
//! stored tasks holds under concurrent creates, and a task that failed at once is kept
//! for a short time only.

use cyberos_mcp_bridge::domain::task::{
    QUICK_FAILURE_MS, QUICK_FAILURE_RETENTION_MS, TaskFailure, TaskStatus,
};
use cyberos_mcp_bridge::domain::{DomainError, ErrorClass};
use cyberos_mcp_bridge::ports::TaskStore;

use super::{DAY, at, outcome, running, tenant};

pub(crate) async fn storage_limits_contract(store: &dyn TaskStore) {
    // 20 concurrent creates against a quota of 5: exactly 5 stored, the rest refused
    // with the quota's error; another tenant is not counted against it.
    let (a, b) = (tenant(), tenant());
    let news: Vec<_> = (0..20)
        .map(|i| {
            let mut new = running(a, i, "inst-1");
            new.max_stored = 5;
            new
        })
        .collect();
    let results = futures::future::join_all(news.iter().map(|n| store.create(n))).await;
    let created = results.iter().filter(|r| matches!(r, Ok(true))).count();
    assert_eq!(created, 5, "{results:?}");
    for r in results.iter().filter(|r| !matches!(r, Ok(true))) {
        let e = r.as_ref().unwrap_err();
        assert_eq!(e.class(), ErrorClass::UpstreamUnavailable, "{e:?}");
        assert_eq!(e.to_string(), "too many stored tasks");
        assert!(
            matches!(
                e,
                DomainError::UpstreamUnavailable {
                    retry_after: Some(_),
                    ..
                }
            ),
            "{e:?}"
        );
    }
    let mut other = running(b, 0, "inst-1");
    other.max_stored = 1;
    assert!(store.create(&other).await.unwrap(), "b has none stored");
    // Finished tasks count too, until the sweep deletes them.
    let first = news
        .iter()
        .zip(&results)
        .find(|(_, r)| matches!(r, Ok(true)))
        .unwrap()
        .0;
    let done = outcome(TaskStatus::Completed, Some(serde_json::json!({})), None);
    store
        .finish(&a, first.task.id, &done, at(1000))
        .await
        .unwrap();
    let mut late = running(a, 100, "inst-1");
    late.max_stored = 5;
    assert!(
        store.create(&late).await.is_err(),
        "a finished task still counts"
    );

    // Retention: a task that failed right after it was created is deleted
    // QUICK_FAILURE_RETENTION_MS after it failed; one that failed later keeps its ttl.
    let c = tenant();
    let quick = running(c, 0, "inst-1");
    let slow = running(c, 0, "inst-1");
    assert!(store.create(&quick).await.unwrap());
    assert!(store.create(&slow).await.unwrap());
    let failure = TaskFailure {
        class: ErrorClass::UpstreamUnavailable,
        message: "refused".into(),
        hint: "retry".into(),
    };
    let failed = outcome(TaskStatus::Failed, None, Some(failure));
    let quick_end = QUICK_FAILURE_MS / 2;
    let slow_end = QUICK_FAILURE_MS * 2;
    store
        .finish(&c, quick.task.id, &failed, at(quick_end))
        .await
        .unwrap();
    store
        .finish(&c, slow.task.id, &failed, at(slow_end))
        .await
        .unwrap();
    let before = at(quick_end + QUICK_FAILURE_RETENTION_MS - 1000);
    store.sweep(before).await.unwrap();
    assert!(
        store.get(&c, quick.task.id).await.is_ok(),
        "kept for an hour"
    );
    let after = at(quick_end + QUICK_FAILURE_RETENTION_MS + 1000);
    store.sweep(after).await.unwrap();
    assert!(store.get(&c, quick.task.id).await.is_err(), "gone after it");
    assert!(
        store.get(&c, slow.task.id).await.is_ok(),
        "a later failure keeps its ttl"
    );
    store.sweep(at(DAY + 1000)).await.unwrap();
    assert!(store.get(&c, slow.task.id).await.is_err(), "until its ttl");
}
