//! The `ClientAnswers` contract, on the embedded SQLite store and on Postgres (where the
//! waiter and the delivery also run on two stores, as on two instances): an answer reaches
//! only the question of its own tenant and session, once, while it is open; a tenant's
//! open questions are capped; the sweep deletes every tenant's expired questions.

use std::sync::Arc;
use std::time::Duration;

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::domain::session::{ClientAnswer, MAX_OPEN_QUESTIONS, QuestionKey};
use cyberos_mcp_bridge::domain::{JsonText, TenantId, Timestamp};
use cyberos_mcp_bridge::ports::ClientAnswers;

use super::{random, tenant};
use crate::support::pg::TestDb;

const OPEN: Duration = Duration::from_secs(300);

fn key(session: &str) -> QuestionKey {
    QuestionKey {
        session: session.to_owned(),
        request: format!(
            "cyberos-e-{}",
            data_encoding::HEXLOWER.encode(&random::<16>())
        ),
    }
}

fn said(text: &str) -> ClientAnswer {
    Ok(JsonText::from_serialized(format!(
        "{{\"said\":\"{text}\"}}"
    )))
}

/// `waiter` waits for `key` of `tenant` while `deliverer` delivers: first another tenant's
/// answer under the very same key (its own question), then the right one.
async fn isolation(
    waiter: Arc<dyn ClientAnswers>,
    deliverer: Arc<dyn ClientAnswers>,
    a: TenantId,
    b: TenantId,
) {
    let k = key("s1");
    assert!(waiter.open(&a, &k, OPEN).await.unwrap());
    assert!(deliverer.open(&b, &k, OPEN).await.unwrap());
    let waiting = {
        let (waiter, k) = (Arc::clone(&waiter), k.clone());
        tokio::spawn(async move { waiter.wait(&a, &k, Duration::from_secs(10)).await })
    };
    assert!(deliverer.deliver(&b, &k, &said("b")).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "tenant B's answer woke tenant A's waiter"
    );
    assert!(deliverer.deliver(&a, &k, &said("a")).await.unwrap());
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the answer in time")
        .unwrap()
        .unwrap();
    assert_eq!(got, Some(said("a")));
    // B's own question still holds B's answer.
    assert_eq!(
        waiter.wait(&b, &k, Duration::ZERO).await.unwrap(),
        Some(said("b"))
    );
}

pub(crate) async fn answers_contract(store: Arc<dyn ClientAnswers>, other: Arc<dyn ClientAnswers>) {
    let (a, b) = (tenant(), tenant());
    // Answered once, under its own session only; the waiter takes it and closes it.
    let k = key("s1");
    assert!(store.open(&a, &k, OPEN).await.unwrap());
    let astray = QuestionKey {
        session: "s2".into(),
        ..k.clone()
    };
    assert!(!store.deliver(&a, &astray, &said("x")).await.unwrap());
    assert!(!store.deliver(&a, &key("s1"), &said("x")).await.unwrap());
    let error = Err(JsonText::from_serialized(
        r#"{"code":-1,"message":"m"}"#.into(),
    ));
    assert!(store.deliver(&a, &k, &error).await.unwrap());
    assert!(!store.deliver(&a, &k, &said("again")).await.unwrap());
    assert_eq!(store.wait(&a, &k, OPEN).await.unwrap(), Some(error));
    assert!(!store.deliver(&a, &k, &said("late")).await.unwrap());
    // A wait that ends unanswered closes the question.
    let k = key("s1");
    assert!(store.open(&a, &k, OPEN).await.unwrap());
    assert_eq!(
        store
            .wait(&a, &k, Duration::from_millis(200))
            .await
            .unwrap(),
        None
    );
    assert!(!store.deliver(&a, &k, &said("late")).await.unwrap());
    // An expired question takes no answer.
    let k = key("s1");
    assert!(store.open(&a, &k, Duration::ZERO).await.unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(!store.deliver(&a, &k, &said("late")).await.unwrap());
    // Tenants are isolated, also between two stores (two instances).
    isolation(Arc::clone(&store), Arc::clone(&other), a, b).await;
    // The cap counts open questions per tenant.
    let c = tenant();
    let keys: Vec<QuestionKey> = (0..MAX_OPEN_QUESTIONS).map(|_| key("s1")).collect();
    for k in &keys {
        assert!(store.open(&c, k, OPEN).await.unwrap());
    }
    assert!(!store.open(&c, &key("s1"), OPEN).await.unwrap());
    assert!(store.open(&b, &key("s1"), OPEN).await.unwrap());
    assert_eq!(
        store.wait(&c, &keys[0], Duration::ZERO).await.unwrap(),
        None
    );
    assert!(store.open(&c, &key("s1"), OPEN).await.unwrap());
    sweep(&*store).await;
}

/// The sweep deletes the questions that expired, of any tenant (their waiters died with
/// their instance: nobody else closes them), and leaves open ones be.
async fn sweep(store: &dyn ClientAnswers) {
    let (d, e) = (tenant(), tenant());
    let live = key("s1");
    assert!(store.open(&e, &live, OPEN).await.unwrap());
    let dead = key("s1");
    assert!(store.open(&d, &dead, Duration::ZERO).await.unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    let now = || Timestamp::from_unix_millis(chrono::Utc::now().timestamp_millis());
    assert_eq!(store.sweep(now()).await.unwrap(), 1, "the expired question");
    assert_eq!(store.sweep(now()).await.unwrap(), 0, "gone");
    assert!(store.deliver(&e, &live, &said("e")).await.unwrap());
    assert_eq!(store.wait(&e, &live, OPEN).await.unwrap(), Some(said("e")));
}

#[tokio::test]
async fn the_sqlite_store_meets_the_answers_contract() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.sqlite3");
    let store = SqliteStore::open(&path).await.unwrap();
    let other = SqliteStore::open(&path).await.unwrap();
    answers_contract(Arc::new(store), Arc::new(other)).await;
}

#[tokio::test]
async fn the_postgres_store_meets_the_answers_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    answers_contract(Arc::new(db.store().await), Arc::new(db.store().await)).await;
}
