//! What every `Approvals` store must do, on the embedded file and on Postgres: one
//! pending approval per call, the subject's cap, decisions by the call's own subject
//! only, each verdict used once, secrets taken once, tenants apart, expiry on the
//! store's clock.

use std::sync::Arc;

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::domain::Tool;
use cyberos_mcp_bridge::domain::approval::{
    ApprovalId, CallBinding, LIFETIME_MS, MAX_PENDING_PER_SUBJECT, PageSecret, SecretKind, Settled,
    Verdict,
};
use cyberos_mcp_bridge::ports::Approvals;

use super::{at, tenant};
use crate::support::fakes::TestClock;
use crate::support::pg::TestDb;

fn id() -> ApprovalId {
    ApprovalId::from_random(rand::random())
}

fn call(tenant: cyberos_mcp_bridge::domain::TenantId, subject: &str, args: &str) -> CallBinding {
    CallBinding {
        tenant,
        subject: subject.into(),
        tool: Tool::AppendAudit,
        args_sha256: format!("{args:0>64}"),
    }
}

pub(crate) async fn approvals_contract(store: Arc<dyn Approvals>, clock: &TestClock) {
    clock.set(at(0));
    let (a, b) = (tenant(), tenant());
    let x = call(a, "alice", "1");
    // One pending approval per call: asking again gives the first id.
    let first = store.request(&x, id(), "{\"n\":1}").await.unwrap().unwrap();
    assert_eq!(store.request(&x, id(), "{}").await.unwrap(), Some(first));
    let found = store.find(&first).await.unwrap().unwrap();
    assert_eq!(found.binding, x);
    assert_eq!(found.verdict, Verdict::Pending);
    assert_eq!(found.arguments, "{\"n\":1}");
    assert_eq!(found.expires_at, at(LIFETIME_MS));
    assert_eq!(store.find(&id()).await.unwrap(), None, "unknown id");
    // Nothing to use while pending.
    assert_eq!(store.settle(&x).await.unwrap(), None);
    // Only the call's own subject in its own tenant decides it.
    assert!(
        !store.decide(&b, &first, "alice", true).await.unwrap(),
        "other tenant"
    );
    assert!(
        !store.decide(&a, &first, "bob", true).await.unwrap(),
        "other subject"
    );
    assert!(store.decide(&a, &first, "alice", true).await.unwrap());
    assert!(
        !store.decide(&a, &first, "alice", false).await.unwrap(),
        "decided once"
    );
    // The same arguments elsewhere are not approved by it.
    assert_eq!(store.settle(&call(b, "alice", "1")).await.unwrap(), None);
    assert_eq!(store.settle(&call(a, "bob", "1")).await.unwrap(), None);
    assert_eq!(store.settle(&call(a, "alice", "2")).await.unwrap(), None);
    // Used once.
    assert_eq!(store.settle(&x).await.unwrap(), Some(Settled::Approved));
    assert_eq!(store.settle(&x).await.unwrap(), None);
    assert_eq!(store.find(&first).await.unwrap(), None, "used");

    // A denial is used once too.
    let y = call(a, "alice", "3");
    let denied = store.request(&y, id(), "{}").await.unwrap().unwrap();
    assert!(store.decide(&a, &denied, "alice", false).await.unwrap());
    assert_eq!(store.settle(&y).await.unwrap(), Some(Settled::Denied));
    assert_eq!(store.settle(&y).await.unwrap(), None);

    // The subject's cap on pending approvals; other subjects are not counted.
    for n in 0..MAX_PENDING_PER_SUBJECT {
        let c = call(a, "carol", &format!("c{n}"));
        assert!(store.request(&c, id(), "{}").await.unwrap().is_some());
    }
    assert_eq!(
        store
            .request(&call(a, "carol", "over"), id(), "{}")
            .await
            .unwrap(),
        None
    );
    assert!(
        store
            .request(&call(a, "dave", "1"), id(), "{}")
            .await
            .unwrap()
            .is_some()
    );

    // Secrets are taken once, by kind and digest, until they expire.
    let secret = PageSecret {
        kind: SecretKind::Form,
        digest: "d".repeat(64),
        approval: first,
        tenant: a,
        subject: Some("alice".into()),
        payload: String::new(),
        expires_at: at(60_000),
    };
    store.keep_secret(&secret).await.unwrap();
    assert_eq!(
        store
            .take_secret(SecretKind::Login, &secret.digest)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .take_secret(SecretKind::Form, &secret.digest)
            .await
            .unwrap(),
        Some(secret.clone())
    );
    assert_eq!(
        store
            .take_secret(SecretKind::Form, &secret.digest)
            .await
            .unwrap(),
        None
    );
    let late = PageSecret {
        digest: "e".repeat(64),
        ..secret
    };
    store.keep_secret(&late).await.unwrap();

    // Expiry follows the store's clock: an approved call past its life is not used.
    let z = call(a, "alice", "4");
    let old = store.request(&z, id(), "{}").await.unwrap().unwrap();
    assert!(store.decide(&a, &old, "alice", true).await.unwrap());
    clock.set(at(LIFETIME_MS));
    assert_eq!(store.settle(&z).await.unwrap(), None, "expired");
    assert_eq!(store.find(&old).await.unwrap(), None);
    assert_eq!(
        store
            .take_secret(SecretKind::Form, &late.digest)
            .await
            .unwrap(),
        None
    );
    assert!(store.sweep().await.unwrap() >= 1);
}

#[tokio::test]
async fn the_sqlite_store_meets_the_approvals_contract() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::at(at(0));
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), clock.port())
        .await
        .unwrap();
    approvals_contract(Arc::new(store), &clock).await;
}

#[tokio::test]
async fn the_postgres_store_meets_the_approvals_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let clock = TestClock::at(at(0));
    approvals_contract(Arc::new(db.store_on(clock.port()).await), &clock).await;
}
