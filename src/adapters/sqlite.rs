//! The embedded store: one SQLite file in the data dir (WAL, busy timeout), shared by
//! several bridge processes. Today it holds the append-only, tenant-scoped audit log
//! that serves `MemoryClient` when no `--memory-url` is given.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::domain::TenantId;
use crate::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry};
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp, TraceId, Upstream};
use crate::ports::{ConfirmationLedger, MemoryClient};

/// Migrations in order; the index + 1 is the schema version.
const MIGRATIONS: [&str; 3] = [
    include_str!("../../migrations/sqlite/0001_audit.sql"),
    include_str!("../../migrations/sqlite/0002_confirmations.sql"),
    include_str!("../../migrations/sqlite/0003_tasks.sql"),
];

/// The embedded SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
}

/// The store could not be opened or migrated.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the embedded store: {0}")]
pub struct OpenStoreError(#[source] sqlx::Error);

impl SqliteStore {
    /// Opens (creating if needed) `path` and applies pending migrations.
    ///
    /// # Errors
    /// When the file cannot be created, opened or migrated.
    pub async fn open(path: &Path) -> Result<SqliteStore, OpenStoreError> {
        // Switching a new file to WAL, or recovering a WAL, can answer SQLITE_BUSY without
        // consulting the busy handler while another process does the same; such opens are
        // retried for a few seconds.
        let mut attempt = 0;
        loop {
            match Self::try_open(path).await {
                Err(OpenStoreError(e)) if is_busy(&e) && attempt < 50 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20 + 10 * attempt)).await;
                }
                other => return other,
            }
        }
    }

    async fn try_open(path: &Path) -> Result<SqliteStore, OpenStoreError> {
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(OpenStoreError)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // Other bridge processes may hold the write lock for a moment.
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(OpenStoreError)?;
        migrate(&pool).await.map_err(OpenStoreError)?;
        Ok(SqliteStore { pool })
    }
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

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::Memory, Some(e.into()))
}

fn not_found() -> DomainError {
    DomainError::invalid("audit entry not found")
        .with_hint("Check the audit_id, or list entries with cyberos.memory.read_audit.")
}

fn bad_cursor() -> DomainError {
    DomainError::invalid_at("invalid cursor", "/cursor")
        .with_hint("Pass next_cursor from the previous page unchanged.")
}

/// Cursors are opaque to clients: `c1.` and the last sequence number in hex.
fn encode_cursor(seq: i64) -> String {
    format!("c1.{seq:x}")
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let hex = cursor.strip_prefix("c1.")?;
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    i64::from_str_radix(hex, 16).ok().filter(|v| *v > 0)
}

fn new_audit_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .expect("the operating system's random number generator is unavailable");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("aud_{hex}")
}

fn entry_of(row: &sqlx::sqlite::SqliteRow) -> Result<AuditEntry, DomainError> {
    let trace: String = row.try_get("trace_id").map_err(down)?;
    Ok(AuditEntry {
        audit_id: row.try_get("audit_id").map_err(down)?,
        kind: row.try_get("kind").map_err(down)?,
        actor_id: row.try_get("actor_id").map_err(down)?,
        subject: row.try_get("subject").map_err(down)?,
        body: JsonText::from_serialized(row.try_get("body").map_err(down)?),
        recorded_at: Timestamp::from_unix_millis(row.try_get("recorded_at").map_err(down)?),
        trace_id: TraceId::parse(&trace)
            .ok_or_else(|| DomainError::internal("a stored trace id is malformed", None))?,
    })
}

macro_rules! columns {
    () => {
        "seq, audit_id, kind, actor_id, subject, body, recorded_at, trace_id"
    };
}

#[async_trait::async_trait]
impl MemoryClient for SqliteStore {
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
        let tenant = ctx.tenant.to_string();
        let now = chrono::Utc::now().timestamp_millis();
        sqlx::query(
            "INSERT INTO audit_entries (audit_id, tenant_id, kind, actor_id, subject, body, recorded_at, trace_id, idempotency_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        )
        .bind(new_audit_id())
        .bind(&tenant)
        .bind(&entry.kind)
        .bind(&ctx.actor)
        .bind(&entry.subject)
        .bind(entry.body.as_str())
        .bind(now)
        .bind(ctx.trace_id.to_string())
        .bind(key)
        .execute(&self.pool)
        .await
        .map_err(down)?;
        // The stored row answers both a first append and a retry with the same key.
        let row = sqlx::query("SELECT audit_id, recorded_at FROM audit_entries WHERE tenant_id = ? AND idempotency_key = ?")
            .bind(&tenant)
            .bind(key)
            .fetch_one(&self.pool)
            .await
            .map_err(down)?;
        Ok(AuditReceipt {
            audit_id: row.try_get("audit_id").map_err(down)?,
            recorded_at: Timestamp::from_unix_millis(row.try_get("recorded_at").map_err(down)?),
        })
    }

    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_entries WHERE tenant_id = ? AND audit_id = ?"
        ))
        .bind(ctx.tenant.to_string())
        .bind(audit_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(down)?;
        entry_of(&row.ok_or_else(not_found)?)
    }

    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
        let before = match &q.cursor {
            Some(c) => decode_cursor(c).ok_or_else(bad_cursor)?,
            None => i64::MAX,
        };
        let limit = i64::from(q.limit.clamp(1, 200));
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_entries
             WHERE tenant_id = ? AND seq < ? AND (? IS NULL OR kind = ?) AND (? IS NULL OR recorded_at >= ?)
             ORDER BY seq DESC LIMIT ?"
        ))
        .bind(ctx.tenant.to_string())
        .bind(before)
        .bind(&q.kind)
        .bind(&q.kind)
        .bind(q.since.map(Timestamp::unix_millis))
        .bind(q.since.map(Timestamp::unix_millis))
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(down)?;
        let more = rows.len() as i64 > limit;
        let rows = &rows[..rows.len().min(limit as usize)];
        let next_cursor = match (more, rows.last()) {
            (true, Some(last)) => Some(encode_cursor(last.try_get("seq").map_err(down)?)),
            _ => None,
        };
        Ok(AuditPage {
            entries: rows.iter().map(entry_of).collect::<Result<_, _>>()?,
            next_cursor,
        })
    }

    async fn check(&self) -> Result<(), DomainError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(down)
    }
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
        let now = chrono::Utc::now().timestamp_millis();
        // Expired ids can no longer be replayed (their tokens fail verification), so they go.
        sqlx::query("DELETE FROM used_confirmations WHERE expires_at < ?")
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        let inserted = sqlx::query("INSERT INTO used_confirmations (tenant_id, jti, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            .bind(tenant.to_string())
            .bind(jti)
            .bind(expires_at.unix_millis())
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(inserted.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        for bad in [
            "",
            "c1.",
            "c1.zz",
            "c2.1",
            "42",
            "c1.0",
            "c1.-1",
            "c1.ffffffffffffffffff",
        ] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }
}
