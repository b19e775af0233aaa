//! The task progress log on Postgres (`plugin_host.task_progress`): appended in the
//! transaction that records the task's latest message, read by resumed streams. The
//! tenant is in every `WHERE` besides row-level security.

use super::nul_bytes::storable_text;
use super::{PgStore, down, timed, ts};
use crate::adapters::rows::tasks::{ProgressRow, progress_entries, stored_int};
use crate::domain::task::{PROGRESS_LOG_MAX, progress_log_needs_trim};
use crate::domain::{DomainError, TaskId, TenantId, Timestamp};
use crate::ports::ProgressEntry;

/// Appends `entry` to the log of a running task (inside the caller's transaction) and
/// keeps only the newest [`PROGRESS_LOG_MAX`] entries.
pub(super) async fn append(
    tx: &mut sqlx::PgConnection,
    tenant: &TenantId,
    id: TaskId,
    entry: &ProgressEntry,
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    sqlx::query(concat!(
        "INSERT INTO plugin_host.task_progress (task_id, tenant_id, seq, total, message, created_at)
         VALUES ($1, $2::uuid, $3, $4, $5, ",
        ts!(6),
        ") ON CONFLICT (task_id, seq) DO NOTHING"
    ))
    .bind(id.to_string())
    .bind(tenant.to_string())
    .bind(stored_int(entry.seq))
    .bind(entry.total.map(stored_int))
    .bind(storable_text(&entry.message).as_ref())
    .bind(now.unix_millis())
    .execute(&mut *tx)
    .await?;
    if !progress_log_needs_trim(entry.seq) {
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM plugin_host.task_progress
              WHERE tenant_id = $1::uuid AND task_id = $2
                AND seq < (SELECT seq FROM plugin_host.task_progress
                            WHERE tenant_id = $1::uuid AND task_id = $2
                            ORDER BY seq DESC OFFSET $3 LIMIT 1)",
    )
    .bind(tenant.to_string())
    .bind(id.to_string())
    .bind(i64::from(PROGRESS_LOG_MAX) - 1)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

impl PgStore {
    /// [`crate::ports::TaskStore::progress_after`].
    pub(super) async fn progress_log_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let rows: Vec<ProgressRow> = sqlx::query_as(
                "SELECT seq, total, message FROM plugin_host.task_progress
                  WHERE tenant_id = $1::uuid AND task_id = $2 AND seq > $3
                  ORDER BY seq LIMIT $4",
            )
            .bind(tenant.to_string())
            .bind(id.to_string())
            .bind(stored_int(after))
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(progress_entries(rows))
        })
        .await
    }
}
