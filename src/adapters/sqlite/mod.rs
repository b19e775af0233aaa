//! The embedded store: one SQLite file in the data dir (WAL, busy timeout), shared by
//! several bridge processes. It holds the append-only, tenant-scoped audit log that serves
//! `MemoryClient` when no `--memory-url` is given (`audit`), the used confirmation ids
//! (`ConfirmationLedger`, here), the tasks (`TaskStore`, `tasks`) and clients' answers
//! to elicitations over HTTP (`ClientAnswers`, `answers`), and approvals kept for users
//! whose host cannot ask them (`Approvals`, `approvals`).

mod answers;
mod approvals;
mod audit;
mod progress;
mod tasks;
mod writer;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::adapters::waiters::Waiters;
use crate::domain::{DomainError, TenantId, Timestamp, Upstream, confirm};
use crate::ports::{Clock, ConfirmationLedger};
use writer::Writer;

/// Migrations in order; the index + 1 is the schema version.
const MIGRATIONS: [&str; 7] = [
    include_str!("../../../migrations/sqlite/0001_audit.sql"),
    include_str!("../../../migrations/sqlite/0002_confirmations.sql"),
    include_str!("../../../migrations/sqlite/0003_tasks.sql"),
    include_str!("../../../migrations/sqlite/0004_client_answers.sql"),
    include_str!("../../../migrations/sqlite/0005_task_progress.sql"),
    include_str!("../../../migrations/sqlite/0006_approvals.sql"),
    include_str!("../../../migrations/sqlite/0007_questions_per_subject.sql"),
];

/// The embedded SQLite store: writes through one connection (`writer`), reads on a pool
/// of their own, which in WAL mode never waits for the writer. What it stamps or
/// expires (audit entries, used ids, questions) is timed by `clock`.
#[derive(Clone)]
pub struct SqliteStore {
    reader: SqlitePool,
    writer: Writer,
    clock: Arc<dyn Clock>,
    /// The most live ledger keys per tenant.
    ledger_cap: u32,
    /// This process's waiters for clients' answers, woken by one shared poller.
    waiters: Arc<Waiters>,
}

/// The store could not be opened or migrated.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the embedded store: {0}")]
pub struct OpenStoreError(#[source] sqlx::Error);

impl SqliteStore {
    /// Opens (creating if needed) `path` and applies pending migrations; `clock` tells
    /// the time.
    ///
    /// # Errors
    /// When the file cannot be created, opened or migrated.
    pub async fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<SqliteStore, OpenStoreError> {
        // Switching a new file to WAL, or recovering a WAL, can answer SQLITE_BUSY without
        // consulting the busy handler while another process does the same; such opens are
        // retried for a few seconds.
        let mut attempt = 0;
        loop {
            match Self::try_open(path, Arc::clone(&clock)).await {
                Err(OpenStoreError(e)) if is_busy(&e) && attempt < 50 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20 + 10 * attempt)).await;
                }
                other => return other,
            }
        }
    }

    async fn try_open(path: &Path, clock: Arc<dyn Clock>) -> Result<SqliteStore, OpenStoreError> {
        crate::support::private_file::ensure_private(path)
            .map_err(|e| OpenStoreError(sqlx::Error::Io(e)))?;
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(OpenStoreError)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // Other bridge processes may hold the write lock for a moment.
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        // The writer first: it creates the file and switches it to WAL.
        let writer = Writer::open(options.clone())
            .await
            .map_err(OpenStoreError)?;
        migrate(writer.now()).await.map_err(OpenStoreError)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(OpenStoreError)?;
        writer.checkpoint_with(reader.clone());
        Ok(SqliteStore {
            reader,
            writer,
            clock,
            ledger_cap: confirm::LEDGER_KEYS_PER_TENANT,
            waiters: Arc::default(),
        })
    }

    /// The store with at most `keys` live ledger keys per tenant instead of
    /// [`confirm::LEDGER_KEYS_PER_TENANT`].
    pub fn with_ledger_cap(mut self, keys: u32) -> SqliteStore {
        self.ledger_cap = keys;
        self
    }

    /// Opens an existing `path` read-only, for `check`: nothing is created, migrated or
    /// written (every write fails). Also returns the file's schema version and this
    /// build's, so the caller can tell the migrations a start would apply.
    ///
    /// # Errors
    /// When the file is missing or cannot be opened or read.
    pub async fn open_read_only(
        path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<(SqliteStore, Schema), OpenStoreError> {
        // Read through the WAL only when its files exist (a bridge has the file open, or
        // stopped without checkpointing): SQLite would create them otherwise. Without them
        // the main file holds everything, and an immutable open reads it with no side
        // files and no locks.
        let with_wal = [sibling(path, "-wal"), sibling(path, "-shm")]
            .iter()
            .all(|p| p.exists());
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(OpenStoreError)?
            .filename(path)
            .read_only(true)
            .immutable(!with_wal)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(5));
        let reader = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options.clone())
            .await
            .map_err(OpenStoreError)?;
        let found: i64 = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&reader)
            .await
            .map_err(OpenStoreError)?;
        let writer = Writer::open(options).await.map_err(OpenStoreError)?;
        let schema = Schema {
            found: usize::try_from(found).unwrap_or(0),
            current: MIGRATIONS.len(),
        };
        let store = SqliteStore {
            reader,
            writer,
            clock,
            ledger_cap: confirm::LEDGER_KEYS_PER_TENANT,
            waiters: Arc::default(),
        };
        Ok((store, schema))
    }

    /// The clock's time, in the stored form.
    fn now_ms(&self) -> i64 {
        self.clock.now().unix_millis()
    }
}

/// A store file's schema version, and the version this build migrates it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schema {
    /// `PRAGMA user_version` of the file.
    pub found: usize,
    /// The number of bundled migrations.
    pub current: usize,
}

/// `path` with `suffix` appended to its file name (SQLite's `-wal` and `-shm`).
fn sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

fn is_busy(e: &sqlx::Error) -> bool {
    // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with or without extended codes.
    e.as_database_error()
        .and_then(|d| d.code())
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 5 | 6))
}

/// Applies pending migrations under SQLite's write lock, so concurrent openers serialize
/// and each migration runs once.
async fn migrate(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    let result = async {
        let version: i64 = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&mut *conn)
            .await?;
        for (i, script) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            // Both strings are ours: bundled migrations and an integer.
            sqlx::raw_sql(sqlx::AssertSqlSafe(*script))
                .execute(&mut *conn)
                .await?;
            let bump = format!("PRAGMA user_version = {}", i + 1);
            sqlx::raw_sql(sqlx::AssertSqlSafe(bump))
                .execute(&mut *conn)
                .await?;
        }
        Ok::<(), sqlx::Error>(())
    }
    .await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    sqlx::raw_sql(end).execute(&mut *conn).await?;
    result
}

#[async_trait::async_trait]
impl ConfirmationLedger for SqliteStore {
    async fn claim(
        &self,
        tenant: &TenantId,
        jti: &str,
        expires_at: Timestamp,
    ) -> Result<bool, DomainError> {
        let unavailable =
            |e: sqlx::Error| DomainError::unavailable(Upstream::TaskStore, Some(e.into()));
        let now = self.now_ms();
        // Expired ids can no longer be replayed (their tokens fail verification), so they go.
        sqlx::query("DELETE FROM used_confirmations WHERE expires_at < ?")
            .bind(now)
            .execute(self.writer.now())
            .await
            .map_err(unavailable)?;
        // Counting stops at the cap: a full tenant costs no more than a cap's worth of
        // index entries.
        let held: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT 1 FROM used_confirmations WHERE tenant_id = ? LIMIT ?)",
        )
        .bind(tenant.to_string())
        .bind(i64::from(self.ledger_cap))
        .fetch_one(self.writer.now())
        .await
        .map_err(unavailable)?;
        if held >= i64::from(self.ledger_cap) {
            return match self.used(tenant, jti).await? {
                true => Ok(false),
                false => Err(confirm::ledger_full()),
            };
        }
        let inserted = sqlx::query("INSERT INTO used_confirmations (tenant_id, jti, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            .bind(tenant.to_string())
            .bind(jti)
            .bind(expires_at.unix_millis())
            .execute(self.writer.now())
            .await
            .map_err(unavailable)?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn used(&self, tenant: &TenantId, jti: &str) -> Result<bool, DomainError> {
        let now = self.now_ms();
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM used_confirmations WHERE tenant_id = ? AND jti = ? AND expires_at >= ?",
        )
        .bind(tenant.to_string())
        .bind(jti)
        .bind(now)
        .fetch_optional(&self.reader)
        .await
        .map_err(|e| DomainError::unavailable(Upstream::TaskStore, Some(e.into())))?;
        Ok(found.is_some())
    }
}
