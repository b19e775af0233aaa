//! The task progress log on SQLite (`task_progress`): appended in the transaction that
//! records the task's latest message, read by resumed streams. The tenant is in every
//! `WHERE`.

use super::SqliteStore;
use crate::adapters::rows::tasks::{ProgressRow, progress_entries, stored_int};
use crate::domain::task::{PROGRESS_LOG_MAX, progress_log_needs_trim};
use crate::domain::{DomainError, TaskId, TenantId, Timestamp, Upstream};
use crate::ports::ProgressEntry;

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// Records `entry` as the latest message of a running task and appends it to the task's
/// log, in one transaction sent as one batch: the write connection is held for the
/// transaction, not across the waits of this task between statements (on a busy runtime
/// everyone queued behind it would wait them out too). Then keeps only the newest
/// [`PROGRESS_LOG_MAX`] entries. Returns whether the task was running here.
pub(super) async fn record(
    conn: &mut sqlx::SqliteConnection,
    tenant: &TenantId,
    id: TaskId,
    entry: &ProgressEntry,
    now: Timestamp,
) -> Result<bool, sqlx::Error> {
    // `changes()` is the UPDATE's row count: the log grows only for a running task.
    let done = sqlx::query(
        "BEGIN IMMEDIATE;
         UPDATE tasks SET status_message = ?1, updated_at = ?2
          WHERE tenant_id = ?3 AND task_id = ?4 AND status = 'running';
         INSERT INTO task_progress (task_id, tenant_id, seq, total, message, created_at)
         SELECT ?4, ?3, ?5, ?6, ?1, ?2 WHERE changes() = 1
             ON CONFLICT (task_id, seq) DO NOTHING;
         COMMIT;",
    )
    .bind(&entry.message)
    .bind(now.unix_millis())
    .bind(tenant.to_string())
    .bind(id.to_string())
    .bind(stored_int(entry.seq))
    .bind(entry.total.map(stored_int))
    .execute(&mut *conn)
    .await;
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            // A statement after BEGIN failed: leave no transaction open on the connection.
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return Err(e);
        }
    };
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    if progress_log_needs_trim(entry.seq) {
        sqlx::query(
            "DELETE FROM task_progress
              WHERE tenant_id = ?1 AND task_id = ?2
                AND seq < (SELECT seq FROM task_progress WHERE tenant_id = ?1 AND task_id = ?2
                            ORDER BY seq DESC LIMIT 1 OFFSET ?3)",
        )
        .bind(tenant.to_string())
        .bind(id.to_string())
        .bind(i64::from(PROGRESS_LOG_MAX) - 1)
        .execute(&mut *conn)
        .await?;
    }
    Ok(true)
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
        .fetch_all(&self.reader)
        .await
        .map_err(down)?;
        Ok(progress_entries(rows))
    }
}
