//! The embedded SQLite store meets both contracts.

use std::sync::Arc;

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;

use super::at;
use super::contract::{LEDGER_CAP, ledger_cap_contract, ledger_contract, task_store_contract};
use super::limits::storage_limits_contract;
use super::progress::progress_log_contract;
use crate::support::fakes::TestClock;

#[tokio::test]
async fn the_sqlite_store_meets_the_task_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    task_store_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_meets_the_ledger_contract() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::at(at(0));
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), clock.port())
        .await
        .unwrap();
    ledger_contract(&store, &clock).await;
}

#[tokio::test]
async fn the_sqlite_ledger_holds_at_most_its_cap_per_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::at(at(0));
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), clock.port())
        .await
        .unwrap()
        .with_ledger_cap(LEDGER_CAP);
    ledger_cap_contract(&store, &clock).await;
}

#[tokio::test]
async fn the_sqlite_store_meets_the_storage_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    storage_limits_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_keeps_the_progress_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    progress_log_contract(&store).await;
}
