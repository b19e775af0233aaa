//! The `ClientAnswers` contract, on the embedded SQLite store and on Postgres (where the
//! waiter and the delivery also run on two stores, as on two instances): an answer reaches
//! only the question of its own tenant and session, once, while it is open; a tenant's
//! open questions are capped per subject and per tenant; the sweep deletes every tenant's expired questions. The
//! stores tell the time by a test clock, long past, which the contract moves: a store
//! that read the system's clock instead would find every question expired, or none.

use std::sync::Arc;
use std::time::Duration;

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::domain::session::{
    ClientAnswer, MAX_OPEN_QUESTIONS, MAX_OPEN_QUESTIONS_PER_TENANT, QuestionKey,
};
use cyberos_mcp_bridge::domain::{JsonText, TenantId};
use cyberos_mcp_bridge::ports::{ClientAnswers, Clock};

use super::{at, random, tenant};
use crate::support::fakes::TestClock;
use crate::support::pg::TestDb;

const OPEN: Duration = Duration::from_secs(300);
const ALICE: &str = "alice";
const OPEN_MS: i64 = 300_000;

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
    assert!(waiter.open(&a, ALICE, &k, OPEN).await.unwrap());
    assert!(deliverer.open(&b, ALICE, &k, OPEN).await.unwrap());
    let waiting = {
        let (waiter, k) = (Arc::clone(&waiter), k.clone());
        tokio::spawn(async move { waiter.wait(&a, &k, Duration::from_secs(10)).await })
    };
    assert!(deliverer.deliver(&b, &k, &said("b")).await.unwrap());
    // A negative, so a real wait: long enough for a wrongly woken waiter to have ended.
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

/// The contract for `store` and `other`, two stores on one database telling the time by
/// `clock`.
pub(crate) async fn answers_contract(
    store: Arc<dyn ClientAnswers>,
    other: Arc<dyn ClientAnswers>,
    clock: &TestClock,
) {
    clock.set(at(0));
    let (a, b) = (tenant(), tenant());
    // Answered once, under its own session only; the waiter takes it and closes it.
    let k = key("s1");
    assert!(store.open(&a, ALICE, &k, OPEN).await.unwrap());
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
    // A waiter is woken by an answer recorded on another instance, long before its own
    // wait would end (and take the answer anyway).
    let k = key("s1");
    assert!(store.open(&a, ALICE, &k, OPEN).await.unwrap());
    let waiting = tokio::spawn({
        let (store, a, k) = (Arc::clone(&store), a, k.clone());
        async move { store.wait(&a, &k, OPEN).await }
    });
    // Past the waiter's first read, so that only a wake can bring it the answer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(other.deliver(&a, &k, &said("from afar")).await.unwrap());
    let woken = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter is woken, not left to its wait's end");
    assert_eq!(woken.unwrap().unwrap(), Some(said("from afar")));
    // A wait that ends unanswered closes the question.
    let k = key("s1");
    assert!(store.open(&a, ALICE, &k, OPEN).await.unwrap());
    assert_eq!(
        store
            .wait(&a, &k, Duration::from_millis(200))
            .await
            .unwrap(),
        None
    );
    assert!(!store.deliver(&a, &k, &said("late")).await.unwrap());
    // A question takes its answer until its wait has passed on the clock, that very
    // millisecond included; an expired one takes none.
    let k = key("s1");
    assert!(store.open(&a, ALICE, &k, OPEN).await.unwrap());
    clock.advance_ms(OPEN_MS);
    assert!(store.deliver(&a, &k, &said("in time")).await.unwrap());
    assert_eq!(
        store.wait(&a, &k, Duration::ZERO).await.unwrap(),
        Some(said("in time"))
    );
    let k = key("s1");
    assert!(store.open(&a, ALICE, &k, OPEN).await.unwrap());
    clock.advance_ms(OPEN_MS + 1);
    assert!(!store.deliver(&a, &k, &said("late")).await.unwrap());
    assert_eq!(store.wait(&a, &k, Duration::ZERO).await.unwrap(), None);
    // Tenants are isolated, also between two stores (two instances).
    isolation(Arc::clone(&store), Arc::clone(&other), a, b).await;
    // The cap counts open questions per subject: one user's open forms leave the
    // tenant's other users their own.
    let c = tenant();
    let keys: Vec<QuestionKey> = (0..MAX_OPEN_QUESTIONS).map(|_| key("s1")).collect();
    for k in &keys {
        assert!(store.open(&c, ALICE, k, OPEN).await.unwrap());
    }
    assert!(!store.open(&c, ALICE, &key("s1"), OPEN).await.unwrap());
    let bobs = key("s2");
    assert!(
        store.open(&c, "bob", &bobs, OPEN).await.unwrap(),
        "another subject"
    );
    assert_eq!(store.wait(&c, &bobs, Duration::ZERO).await.unwrap(), None);
    let kb = key("s1");
    assert!(store.open(&b, ALICE, &kb, OPEN).await.unwrap());
    assert_eq!(
        store.wait(&c, &keys[0], Duration::ZERO).await.unwrap(),
        None
    );
    assert!(store.open(&c, ALICE, &key("s1"), OPEN).await.unwrap());
    assert_eq!(store.wait(&b, &kb, Duration::ZERO).await.unwrap(), None);
    // Questions whose wait has passed no longer count, though nobody closed them.
    assert!(!store.open(&c, ALICE, &key("s1"), OPEN).await.unwrap());
    clock.advance_ms(OPEN_MS + 1);
    for _ in 0..MAX_OPEN_QUESTIONS {
        assert!(store.open(&c, ALICE, &key("s1"), OPEN).await.unwrap());
    }
    assert!(!store.open(&c, ALICE, &key("s1"), OPEN).await.unwrap());
    // And per tenant, all its subjects together.
    let f = tenant();
    let per_subject = MAX_OPEN_QUESTIONS;
    for n in 0..MAX_OPEN_QUESTIONS_PER_TENANT / per_subject {
        for _ in 0..per_subject {
            assert!(
                store
                    .open(&f, &format!("user-{n}"), &key("s1"), OPEN)
                    .await
                    .unwrap()
            );
        }
    }
    assert!(
        !store
            .open(&f, "a-newcomer", &key("s1"), OPEN)
            .await
            .unwrap()
    );
    assert!(
        store
            .open(&b, "a-newcomer", &key("s1"), OPEN)
            .await
            .unwrap(),
        "per tenant"
    );
    sweep(&*store, clock).await;
}

/// The sweep deletes the questions that expired, of any tenant (their waiters died with
/// their instance: nobody else closes them), and leaves open ones be.
async fn sweep(store: &dyn ClientAnswers, clock: &TestClock) {
    let (d, e) = (tenant(), tenant());
    let live = key("s1");
    assert!(store.open(&e, ALICE, &live, OPEN).await.unwrap());
    let dead = key("s1");
    assert!(store.open(&d, ALICE, &dead, Duration::ZERO).await.unwrap());
    clock.advance_ms(1);
    let now = || clock.now();
    assert_eq!(store.sweep(now()).await.unwrap(), 1, "the expired question");
    assert_eq!(store.sweep(now()).await.unwrap(), 0, "gone");
    assert!(store.deliver(&e, &live, &said("e")).await.unwrap());
    assert_eq!(store.wait(&e, &live, OPEN).await.unwrap(), Some(said("e")));
}

#[tokio::test]
async fn the_sqlite_store_meets_the_answers_contract() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.sqlite3");
    let clock = TestClock::at(at(0));
    let store = SqliteStore::open(&path, clock.port()).await.unwrap();
    let other = SqliteStore::open(&path, clock.port()).await.unwrap();
    answers_contract(Arc::new(store), Arc::new(other), &clock).await;
}

#[tokio::test]
async fn the_postgres_store_meets_the_answers_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let clock = TestClock::at(at(0));
    answers_contract(
        Arc::new(db.store_on(clock.port()).await),
        Arc::new(db.store_on(clock.port()).await),
        &clock,
    )
    .await;
}
