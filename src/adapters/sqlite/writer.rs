//! The one connection this process writes through, and who goes first on it.
//!
//! SQLite runs one writer at a time. Writers of one process that meet on the file lock
//! wait in its busy handler, which sleeps 1, 2, 5, 10 … ms between tries; on a single
//! connection they queue in order instead, and no request waits out a sleep. The busy
//! timeout is left for other processes sharing the file.
//!
//! A request waits on its write (a new task, a confirmation, an audit row, an
//! elicitation); runs write in the background (progress, outcomes, leases, sweeps).
//! Background writes take turns in a lane of their own before they queue for the
//! connection, so at most one of them is ever ahead of a request's write.
//!
//! Checkpoints run off the writer: a commit that crossed SQLite's automatic checkpoint
//! threshold would do the checkpoint's fsyncs before its caller heard back. A task copies
//! the WAL back a moment after writes, on a read connection, without blocking writers.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use tokio::sync::{Mutex, MutexGuard, Notify};

/// How long after a write the WAL is copied back (writes in between share the checkpoint).
const CHECKPOINT_AFTER: Duration = Duration::from_millis(250);

/// The write connection of a store.
#[derive(Clone)]
pub(super) struct Writer {
    pool: SqlitePool,
    lane: Arc<Mutex<()>>,
    written: Arc<Notify>,
}

/// A background write's turn: the connection, while the lane is held.
pub(super) struct Turn<'a> {
    pub(super) pool: &'a SqlitePool,
    _lane: MutexGuard<'a, ()>,
}

impl Writer {
    /// Opens the write connection (creating the file and switching it to WAL).
    pub(super) async fn open(options: SqliteConnectOptions) -> Result<Writer, sqlx::Error> {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options.pragma("wal_autocheckpoint", "0"))
            .await?;
        Ok(Writer {
            pool,
            lane: Arc::new(Mutex::new(())),
            written: Arc::new(Notify::new()),
        })
    }

    /// The connection for a write a request waits on.
    pub(super) fn now(&self) -> &SqlitePool {
        self.written.notify_one();
        &self.pool
    }

    /// The connection for a background write, once it is this write's turn.
    pub(super) async fn later(&self) -> Turn<'_> {
        let lane = self.lane.lock().await;
        self.written.notify_one();
        Turn {
            pool: &self.pool,
            _lane: lane,
        }
    }

    /// Copies the WAL back into the database a moment after writes, on `reader`, until
    /// that pool is closed.
    pub(super) fn checkpoint_with(&self, reader: SqlitePool) {
        let written = Arc::clone(&self.written);
        tokio::spawn(async move {
            loop {
                written.notified().await;
                tokio::time::sleep(CHECKPOINT_AFTER).await;
                if reader.is_closed() {
                    return;
                }
                // PASSIVE: copies what no reader still needs; never waits for anyone.
                if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                    .execute(&reader)
                    .await
                {
                    tracing::warn!("embedded store: checkpoint failed: {e}");
                }
            }
        });
    }
}
