//! The embedded SQLite store meets both contracts.

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;

use super::contract::{ledger_contract, task_store_contract};
use super::limits::storage_limits_contract;
use super::progress::progress_log_contract;

#[tokio::test]
async fn the_sqlite_store_meets_the_task_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    task_store_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_meets_the_ledger_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    ledger_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_meets_the_storage_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    storage_limits_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_keeps_the_progress_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    progress_log_contract(&store).await;
}
