//! The task progress log on SQLite (`task_progress`): appended in the transaction that
//! records the task's latest message, read by resumed streams. The tenant is in every
//! `WHERE`.

use super::SqliteStore;
use crate::adapters::task_rows::{ProgressRow, progress_entries, stored_int};
use crate::domain::task::PROGRESS_LOG_MAX;
use crate::domain::{DomainError, TaskId, TenantId, Timestamp, Upstream};
use crate::ports::ProgressEntry;

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// Appends `entry` to the log of a task (inside the caller's transaction) and keeps only
/// the newest [`PROGRESS_LOG_MAX`] entries.
pub(super) async fn append(
    tx: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
    id: TaskId,
    entry: &ProgressEntry,
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO task_progress (task_id, tenant_id, seq, total, message, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (task_id, seq) DO NOTHING",
    )
    .bind(id.to_string())
    .bind(tenant.to_string())
    .bind(stored_int(entry.seq))
    .bind(entry.total.map(stored_int))
    .bind(&entry.message)
    .bind(now.unix_millis())
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "DELETE FROM task_progress
          WHERE tenant_id = ?1 AND task_id = ?2
            AND seq < (SELECT seq FROM task_progress WHERE tenant_id = ?1 AND task_id = ?2
                        ORDER BY seq DESC LIMIT 1 OFFSET ?3)",
    )
    .bind(tenant.to_string())
    .bind(id.to_string())
    .bind(i64::from(PROGRESS_LOG_MAX) - 1)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

impl SqliteStore {
    /// [`crate::ports::TaskStore::progress_after`].
    pub(super) async fn progress_log_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        let rows: Vec<ProgressRow> = sqlx::query_as(
            "SELECT seq, total, message FROM task_progress
              WHERE tenant_id = ?1 AND task_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
        )
        .bind(tenant.to_string())
        .bind(id.to_string())
        .bind(stored_int(after))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(down)?;
        Ok(progress_entries(rows))
    }
}
