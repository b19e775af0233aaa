//! `TaskStore` on the embedded SQLite file. Several bridge processes may share it: every
//! status change is a conditional update (`WHERE status = 'running'`), and the tenant is
//! in every per-task `WHERE`. Row reading and cursors are shared with Postgres through
//! `adapters::task_rows`.

use sqlx::Row;

use super::{SqliteStore, progress};
use crate::adapters::rows::tasks::{
    bad_cursor, decode_cursor, encode_cursor, failure_json, finished_status, task_of,
};
use crate::domain::task::{
    OVERDUE_GRACE_MS, QUICK_FAILURE_MS, QUICK_FAILURE_RETENTION_MS, Task, orphaned, overdue,
    stored_quota_reached,
};
use crate::domain::{DomainError, JsonText, TaskId, TenantId, Timestamp, Upstream};
use crate::ports::{
    Finished, NewTask, ProgressEntry, SweepReport, TaskOutcome, TaskPage, TaskStore,
};

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// Task ids as a JSON array, for `json_each(?)`.
fn id_list(ids: &[TaskId]) -> String {
    serde_json::Value::from(ids.iter().map(TaskId::to_string).collect::<Vec<_>>()).to_string()
}

macro_rules! columns {
    () => {
        "task_id, tenant_id, tool_name, status, output, error, status_message, created_at, updated_at, \
         timeout_at, expires_at, trace_id"
    };
}

#[async_trait::async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        let t = &new.task;
        // One statement: SQLite runs writes one at a time, so the count and the insert
        // cannot interleave with another create.
        let done = sqlx::query(
            "INSERT INTO tasks (task_id, tenant_id, tool_name, status, input, created_at, updated_at, timeout_at,
                                expires_at, trace_id, owner, lease_expires_at)
             SELECT ?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
              WHERE (SELECT count(*) FROM tasks WHERE tenant_id = ?2) < ?12
             ON CONFLICT (task_id) DO NOTHING",
        )
        .bind(t.id.to_string())
        .bind(t.tenant.to_string())
        .bind(t.tool.name())
        .bind(new.input.as_str())
        .bind(t.created_at.unix_millis())
        .bind(t.updated_at.unix_millis())
        .bind(t.timeout_at.unix_millis())
        .bind(t.expires_at.unix_millis())
        .bind(t.trace_id.to_string())
        .bind(&new.owner)
        .bind(new.lease_until.unix_millis())
        .bind(new.max_stored)
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE tenant_id = ?")
            .bind(t.tenant.to_string())
            .fetch_one(&self.reader)
            .await
            .map_err(down)?;
        if stored >= i64::from(new.max_stored) {
            return Err(stored_quota_reached(new.max_stored));
        }
        Ok(false)
    }

    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM tasks WHERE tenant_id = ? AND task_id = ?"
        ))
        .bind(tenant.to_string())
        .bind(id.to_string())
        .fetch_optional(&self.reader)
        .await
        .map_err(down)?;
        task_of(&row.ok_or_else(DomainError::task_not_found)?)
    }

    async fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, DomainError> {
        let (before_time, before_id) = match cursor {
            Some(c) => {
                let (t, id) = decode_cursor(c).ok_or_else(bad_cursor)?;
                (t, id.to_string())
            }
            None => (i64::MAX, String::new()),
        };
        let limit = i64::from(limit.clamp(1, 200));
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM tasks WHERE tenant_id = ?
              AND (created_at < ? OR (created_at = ? AND ? <> '' AND task_id < ?))
              ORDER BY created_at DESC, task_id DESC LIMIT ?"
        ))
        .bind(tenant.to_string())
        .bind(before_time)
        .bind(before_time)
        .bind(&before_id)
        .bind(&before_id)
        .bind(limit + 1)
        .fetch_all(&self.reader)
        .await
        .map_err(down)?;
        let mut tasks = rows.iter().map(task_of).collect::<Result<Vec<_>, _>>()?;
        let more = tasks.len() as i64 > limit;
        tasks.truncate(limit as usize);
        let next_cursor = if more {
            tasks.last().map(encode_cursor)
        } else {
            None
        };
        Ok(TaskPage { tasks, next_cursor })
    }

    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError> {
        // Whether the outcome may be written at all; the conditional update decides races:
        // SQLite runs one writer at a time, so only one update finds the row running.
        let status = finished_status(outcome)?;
        let turn = self.writer.later().await;
        let done = sqlx::query(
            "UPDATE tasks SET status = ?, output = ?, error = ?, updated_at = ?, completed_at = ?,
                              status_message = COALESCE(?, status_message)
             WHERE tenant_id = ? AND task_id = ? AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(outcome.output.as_ref().map(JsonText::as_str))
        .bind(outcome.failure.as_ref().map(failure_json))
        .bind(now.unix_millis())
        .bind(now.unix_millis())
        .bind(outcome.failure.as_ref().map(|f| f.hint.clone()))
        .bind(tenant.to_string())
        .bind(id.to_string())
        .execute(turn.pool)
        .await
        .map_err(down)?;
        drop(turn);
        Ok(Finished {
            task: self.get(tenant, id).await?,
            changed: done.rows_affected() == 1,
        })
    }

    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        let turn = self.writer.later().await;
        let mut conn = turn.pool.acquire().await.map_err(down)?;
        let running = progress::record(&mut conn, tenant, id, entry, now)
            .await
            .map_err(down)?;
        drop(conn);
        drop(turn);
        if !running {
            // Missing or foreign: "task not found"; merely finished: nothing to record.
            self.get(tenant, id).await?;
        }
        Ok(())
    }

    async fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        self.progress_log_after(tenant, id, after, limit).await
    }

    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[TaskId],
        until: Timestamp,
    ) -> Result<(), DomainError> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE tasks SET lease_expires_at = ? WHERE owner = ? AND status = 'running'
               AND task_id IN (SELECT value FROM json_each(?))",
        )
        .bind(until.unix_millis())
        .bind(owner)
        .bind(id_list(ids))
        .execute(self.writer.later().await.pool)
        .await
        .map_err(down)?;
        Ok(())
    }

    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT task_id FROM tasks WHERE owner = ? AND status <> 'running'
               AND task_id IN (SELECT value FROM json_each(?))",
        )
        .bind(owner)
        .bind(id_list(ids))
        .fetch_all(&self.reader)
        .await
        .map_err(down)?;
        Ok(rows
            .iter()
            .filter_map(|r| r.try_get::<String, _>(0).ok())
            .filter_map(|s| TaskId::parse(&s))
            .collect())
    }

    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError> {
        let now_ms = now.unix_millis();
        let turn = self.writer.later().await;
        let lost = orphaned();
        let orphaned = sqlx::query(
            "UPDATE tasks SET status = 'failed', error = ?, status_message = ?, updated_at = ?, completed_at = ?
             WHERE status = 'running' AND lease_expires_at < ?",
        )
        .bind(failure_json(&lost))
        .bind(&lost.hint)
        .bind(now_ms)
        .bind(now_ms)
        .bind(now_ms)
        .execute(turn.pool)
        .await
        .map_err(down)?
        .rows_affected();
        let late = overdue();
        let overdue = sqlx::query(
            "UPDATE tasks SET status = 'failed', error = ?, status_message = ?, updated_at = ?, completed_at = ?
             WHERE status = 'running' AND timeout_at < ?",
        )
        .bind(failure_json(&late))
        .bind(&late.hint)
        .bind(now_ms)
        .bind(now_ms)
        .bind(now_ms - OVERDUE_GRACE_MS)
        .execute(turn.pool)
        .await
        .map_err(down)?
        .rows_affected();
        let expired = sqlx::query(
            "DELETE FROM tasks WHERE status <> 'running'
               AND (expires_at < ?1
                    OR (status = 'failed' AND completed_at - created_at < ?2 AND completed_at + ?3 < ?1))",
        )
        .bind(now_ms)
        .bind(QUICK_FAILURE_MS)
        .bind(QUICK_FAILURE_RETENTION_MS)
        .execute(turn.pool)
        .await
        .map_err(down)?
        .rows_affected();
        Ok(SweepReport {
            orphaned,
            overdue,
            expired,
        })
    }

    async fn check(&self) -> Result<(), DomainError> {
        sqlx::query("SELECT 1 FROM tasks LIMIT 1")
            .execute(&self.reader)
            .await
            .map(|_| ())
            .map_err(down)
    }
}
