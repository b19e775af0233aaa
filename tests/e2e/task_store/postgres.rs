//! The Postgres store: both contracts and what Postgres adds to them, stops reaching
//! other instances at once, NUL characters, and a down database failing fast.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use cyberos_mcp_bridge::adapters::postgres::{self, PgStore};
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::task::TaskStatus;
use cyberos_mcp_bridge::domain::{ErrorClass, JsonText, TaskId, Timestamp};
use cyberos_mcp_bridge::ports::{ConfirmationLedger, StopSink, TaskStore};

use super::contract::{LEDGER_CAP, ledger_cap_contract, ledger_contract, task_store_contract};
use super::limits::storage_limits_contract;
use super::progress::progress_log_contract;
use super::{at, outcome, running, step, task_id, tenant};
use crate::support::fakes::TestClock;
use crate::support::pg::{TestDb, count};

#[tokio::test]
async fn the_postgres_store_meets_the_storage_limits() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    storage_limits_contract(&db.store().await).await;
}

#[tokio::test]
async fn the_postgres_store_meets_the_task_store_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    task_store_contract(&db.store().await).await;
}

#[tokio::test]
async fn the_postgres_store_keeps_the_progress_log() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    progress_log_contract(&db.store().await).await;
}

#[tokio::test]
async fn the_postgres_ledger_holds_at_most_its_cap_per_tenant() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let clock = TestClock::at(at(0));
    let store = db.store_on(clock.port()).await.with_ledger_cap(LEDGER_CAP);
    ledger_cap_contract(&store, &clock).await;
}

#[tokio::test]
async fn the_postgres_store_meets_the_ledger_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let clock = TestClock::at(at(0));
    let store = db.store_on(clock.port()).await;
    ledger_contract(&store, &clock).await;
    // The sweep removes expired ids of every tenant.
    let mut admin = db.connection().await;
    sqlx::query(
        "INSERT INTO plugin_host.used_confirmations VALUES (gen_random_uuid(), 'old', now() - interval '1 hour')",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    const ALL: &str = "SELECT count(*) FROM plugin_host.used_confirmations";
    const EXPIRED: &str =
        "SELECT count(*) FROM plugin_host.used_confirmations WHERE expires_at < now()";
    let before = count(&mut admin, ALL).await.unwrap();
    let expired = count(&mut admin, EXPIRED).await.unwrap();
    assert!(expired >= 1);
    store
        .sweep(Timestamp::from_unix_millis(
            chrono::Utc::now().timestamp_millis(),
        ))
        .await
        .unwrap();
    assert_eq!(count(&mut admin, EXPIRED).await.unwrap(), 0);
    assert_eq!(
        count(&mut admin, ALL).await.unwrap(),
        before - expired,
        "only expired ids went"
    );
}

struct Stops(Mutex<Vec<TaskId>>);

impl StopSink for Stops {
    fn stopped(&self, id: TaskId) {
        self.0.lock().unwrap().push(id);
    }
}

#[tokio::test]
async fn a_cancel_on_one_instance_reaches_the_others_at_once() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let owner = db.store().await;
    let other = db.store().await;
    let stops = Arc::new(Stops(Mutex::new(Vec::new())));
    owner.watch_stops(stops.clone()).await;
    // Wait until the listener is listening (its LISTEN is the connection's last query).
    let mut admin = db.connection().await;
    crate::support::wait_until_async(Duration::from_secs(20), "no listener", async || {
        count(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND query LIKE 'LISTEN%plugin_host_task_stopped%'",
        )
        .await
        .unwrap()
            > 0
    })
    .await;
    let a = tenant();
    let t = running(a, 0, "inst-1");
    let untouched = running(a, 1, "inst-1");
    assert!(owner.create(&t).await.unwrap());
    assert!(owner.create(&untouched).await.unwrap());
    other
        .record_progress(&a, t.task.id, &step(1, "half way"), at(500))
        .await
        .unwrap();
    other
        .finish(
            &a,
            t.task.id,
            &outcome(TaskStatus::Cancelled, None, None),
            at(1000),
        )
        .await
        .unwrap();
    // A later cancel is the clock: notifications arrive in commit order, so a stop for the
    // progress write or for `untouched` would arrive before the clock's.
    let clock = running(a, 2, "inst-1");
    assert!(owner.create(&clock).await.unwrap());
    other
        .finish(
            &a,
            clock.task.id,
            &outcome(TaskStatus::Cancelled, None, None),
            at(1500),
        )
        .await
        .unwrap();
    crate::support::wait_until_async(Duration::from_secs(10), "no stop arrived", async || {
        stops.0.lock().unwrap().contains(&clock.task.id)
    })
    .await;
    assert_eq!(
        *stops.0.lock().unwrap(),
        [t.task.id, clock.task.id],
        "one stop per cancelled task, nothing for progress or the untouched task"
    );
}

#[tokio::test]
async fn postgres_refuses_nul_characters_without_leaving_a_task_running() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    let a = tenant();
    let mut bad = running(a, 0, "inst-1");
    bad.input = JsonText::from_serialized(json!({"inputs": {"x": "a\u{0}b"}}).to_string());
    let e = store.create(&bad).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::InputValidation, "{e:?}");

    let t = running(a, 0, "inst-1");
    assert!(store.create(&t).await.unwrap());
    store
        .record_progress(&a, t.task.id, &step(1, "nul\u{0}byte"), at(100))
        .await
        .unwrap();
    let done = store
        .finish(
            &a,
            t.task.id,
            &outcome(TaskStatus::Completed, Some(json!({"out": "\u{0}"})), None),
            at(200),
        )
        .await
        .unwrap();
    assert!(done.changed);
    assert_eq!(done.task.status, TaskStatus::Failed);
    let failure = done.task.failure.unwrap();
    assert_eq!(failure.class, ErrorClass::Internal);
    assert_eq!(failure.message, "the task's result could not be stored");
}

/// A closed port on loopback: connections are refused at once.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_down_database_fails_fast_as_upstream_unavailable() {
    // Needs no server: connecting is lazy, and every operation is bounded.
    let url = format!(
        "postgres://bridge:s3cret@127.0.0.1:{}/cyberos",
        closed_port()
    );
    let started = tokio::time::Instant::now();
    let store = PgStore::connect(&url, Arc::new(SystemClock)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "startup does not wait"
    );
    let someone = tenant();
    let (get, check, claim, sweep) = tokio::join!(
        store.get(&someone, task_id()),
        store.check(),
        store.claim(&someone, "jti", at(0)),
        store.sweep(at(0)),
    );
    let e = get.unwrap_err();
    assert_eq!(e.class(), ErrorClass::UpstreamUnavailable, "{e:?}");
    assert_eq!(e.to_string(), "the task store is unavailable");
    for e in [check.unwrap_err(), claim.unwrap_err(), sweep.unwrap_err()] {
        assert_eq!(e.class(), ErrorClass::UpstreamUnavailable, "{e:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "bounded by the acquire timeout"
    );

    let e = format!("{:#}", postgres::migrate(&url).await.unwrap_err());
    assert!(!e.contains("s3cret"), "{e}");
    assert!(e.starts_with("cannot connect to Postgres"), "{e}");
    let e = PgStore::connect("postgres://bridge:s3cret@[nope/x", Arc::new(SystemClock))
        .await
        .err()
        .unwrap();
    assert_eq!(
        format!("{e:#}"),
        "the Postgres URL (--database-url) is malformed"
    );
}
