//! `TaskStore` for [`PgStore`], with the semantics of the SQLite store
//! (`adapters::sqlite::tasks`): conditional status changes, the same cursors and errors
//! (shared through `adapters::task_rows`).

use std::sync::Arc;

use sqlx::Row;

use super::nul_bytes::{
    is_unstorable_json, storable_text, unstorable_arguments, unstorable_result,
};
use super::{PgStore, down, progress, timed, ts};
use crate::adapters::rows::tasks::{
    bad_cursor, decode_cursor, encode_cursor, failure_json, finished_status, task_of,
};
use crate::domain::task::{
    OVERDUE_GRACE_MS, QUICK_FAILURE_MS, QUICK_FAILURE_RETENTION_MS, Task, stored_quota_reached,
};
use crate::domain::{DomainError, JsonText, TaskId, TenantId, Timestamp, Upstream};
use crate::ports::{
    Finished, NewTask, ProgressEntry, StopSink, SweepReport, TaskOutcome, TaskPage, TaskStore,
};

macro_rules! columns {
    () => {
        "task_id, tenant_id::text AS tenant_id, tool_name, status, output::text AS output, \
         error::text AS error, status_message, trace_id::text AS trace_id, \
         (extract(epoch FROM created_at) * 1000)::int8 AS created_at, \
         (extract(epoch FROM updated_at) * 1000)::int8 AS updated_at, \
         (extract(epoch FROM timeout_at) * 1000)::int8 AS timeout_at, \
         (extract(epoch FROM expires_at) * 1000)::int8 AS expires_at"
    };
}

impl PgStore {
    async fn select_task(
        tx: &mut sqlx::PgConnection,
        tenant: &TenantId,
        id: TaskId,
    ) -> Result<Task, DomainError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM plugin_host.tasks WHERE tenant_id = $1::uuid AND task_id = $2"
        ))
        .bind(tenant.to_string())
        .bind(id.to_string())
        .fetch_optional(tx)
        .await
        .map_err(down)?;
        task_of(&row.ok_or_else(DomainError::task_not_found)?)
    }

    /// One attempt at [`TaskStore::finish`]; the raw error tells an unstorable result.
    async fn try_finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Result<Finished, DomainError>, sqlx::Error> {
        let mut tx = self.begin(Some(tenant)).await?;
        // Under READ COMMITTED a concurrent finisher waits for this row's lock, then
        // re-checks `status = 'running'` on the committed row: only one update changes it.
        let done = sqlx::query(concat!(
            "UPDATE plugin_host.tasks SET status = $1, output = $2::jsonb, error = $3::jsonb, updated_at = ",
            ts!(4),
            ", completed_at = ",
            ts!(4),
            ", status_message = COALESCE($5, status_message)
             WHERE tenant_id = $6::uuid AND task_id = $7 AND status = 'running'"
        ))
        .bind(outcome.status.as_str())
        .bind(outcome.output.as_ref().map(JsonText::as_str))
        .bind(outcome.failure.as_ref().map(failure_json))
        .bind(now.unix_millis())
        .bind(
            outcome
                .failure
                .as_ref()
                .map(|f| storable_text(&f.hint).into_owned()),
        )
        .bind(tenant.to_string())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        let task = Self::select_task(&mut tx, tenant, id).await;
        tx.commit().await?;
        Ok(task.map(|task| Finished {
            task,
            changed: done.rows_affected() == 1,
        }))
    }
}

#[async_trait::async_trait]
impl TaskStore for PgStore {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        let t = &new.task;
        timed(async {
            let mut tx = self.begin(Some(&t.tenant)).await.map_err(down)?;
            // Creates of one tenant take turns, so the count and the insert are one step.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('plugin_host.tasks/' || $1, 0))")
                .bind(t.tenant.to_string())
                .execute(&mut *tx)
                .await
                .map_err(down)?;
            let stored: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM plugin_host.tasks WHERE tenant_id = $1::uuid",
            )
            .bind(t.tenant.to_string())
            .fetch_one(&mut *tx)
            .await
            .map_err(down)?;
            if stored >= i64::from(new.max_stored) {
                return Err(stored_quota_reached(new.max_stored));
            }
            let done = sqlx::query(concat!(
                "INSERT INTO plugin_host.tasks (task_id, tenant_id, plugin_id, tool_name, status, input, created_at,
                                                updated_at, timeout_at, expires_at, trace_id, owner, lease_expires_at)
                 VALUES ($1, $2::uuid, 'cyberos', $3, 'running', $4::jsonb, ",
                ts!(5),
                ", ",
                ts!(6),
                ", ",
                ts!(7),
                ", ",
                ts!(8),
                ", $9, $10, ",
                ts!(11),
                ") ON CONFLICT (task_id) DO NOTHING"
            ))
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
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                if is_unstorable_json(&e) {
                    unstorable_arguments()
                } else {
                    down(e)
                }
            })?;
            tx.commit().await.map_err(down)?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let task = Self::select_task(&mut tx, tenant, id).await?;
            tx.commit().await.map_err(down)?;
            Ok(task)
        })
        .await
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
                (Some(t), id.to_string())
            }
            None => (None, String::new()),
        };
        let limit = i64::from(limit.clamp(1, 200));
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let rows = sqlx::query(concat!(
                "SELECT ",
                columns!(),
                " FROM plugin_host.tasks WHERE tenant_id = $1::uuid
                  AND ($2::int8 IS NULL OR created_at < ",
                ts!(2),
                " OR (created_at = ",
                ts!(2),
                " AND task_id < $3))
                  ORDER BY created_at DESC, task_id DESC LIMIT $4"
            ))
            .bind(tenant.to_string())
            .bind(before_time)
            .bind(&before_id)
            .bind(limit + 1)
            .fetch_all(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            let mut tasks = rows.iter().map(task_of).collect::<Result<Vec<_>, _>>()?;
            let more = tasks.len() as i64 > limit;
            tasks.truncate(limit as usize);
            let next_cursor = if more {
                tasks.last().map(encode_cursor)
            } else {
                None
            };
            Ok(TaskPage { tasks, next_cursor })
        })
        .await
    }

    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError> {
        // Whether the outcome may be written at all; the conditional update decides races.
        finished_status(outcome)?;
        timed(async {
            match self.try_finish(tenant, id, outcome, now).await {
                Err(e) if is_unstorable_json(&e) => {
                    tracing::warn!(task_id = %id, "a task result holds \\u0000; recording a failure instead");
                    self.try_finish(tenant, id, &unstorable_result(), now)
                        .await
                        .map_err(down)?
                }
                other => other.map_err(down)?,
            }
        })
        .await
    }

    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let done = sqlx::query(concat!(
                "UPDATE plugin_host.tasks SET status_message = $1, updated_at = ",
                ts!(2),
                " WHERE tenant_id = $3::uuid AND task_id = $4 AND status = 'running'"
            ))
            .bind(storable_text(&entry.message).as_ref())
            .bind(now.unix_millis())
            .bind(tenant.to_string())
            .bind(id.to_string())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            if done.rows_affected() == 0 {
                // Finished tasks keep their last message; unknown ones are "not found".
                Self::select_task(&mut tx, tenant, id).await?;
            } else {
                progress::append(&mut tx, tenant, id, entry, now)
                    .await
                    .map_err(down)?;
            }
            tx.commit().await.map_err(down)?;
            Ok(())
        })
        .await
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
        let ids: Vec<String> = ids.iter().map(TaskId::to_string).collect();
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            sqlx::query(concat!(
                "SELECT plugin_host.renew_leases($1, $2::text[], ",
                ts!(3),
                ")"
            ))
            .bind(owner)
            .bind(&ids)
            .bind(until.unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)
        })
        .await
    }

    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = ids.iter().map(TaskId::to_string).collect();
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            let stopped: Vec<String> =
                sqlx::query_scalar("SELECT plugin_host.stopped_among($1, $2::text[])")
                    .bind(owner)
                    .bind(&ids)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(stopped.iter().filter_map(|s| TaskId::parse(s)).collect())
        })
        .await
    }

    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError> {
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            let row = sqlx::query(concat!(
                "SELECT orphaned, overdue, expired FROM plugin_host.sweep(",
                ts!(1),
                ", $2::int8 * interval '1 millisecond', $3::int8 * interval '1 millisecond',
                   $4::int8 * interval '1 millisecond')"
            ))
            .bind(now.unix_millis())
            .bind(OVERDUE_GRACE_MS)
            .bind(QUICK_FAILURE_MS)
            .bind(QUICK_FAILURE_RETENTION_MS)
            .fetch_one(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            let count = |c: &str| {
                row.try_get::<i64, _>(c)
                    .map(|n| u64::try_from(n).unwrap_or(0))
                    .map_err(down)
            };
            Ok(SweepReport {
                orphaned: count("orphaned")?,
                overdue: count("overdue")?,
                expired: count("expired")?,
            })
        })
        .await
    }

    async fn watch_stops(&self, sink: Arc<dyn StopSink>) {
        self.spawn_stop_listener(sink);
    }

    async fn check(&self) -> Result<(), DomainError> {
        timed(async {
            // Proves the login role may act as plugin_host_app and the schema exists
            // (a read without a tenant would fail by design).
            let mut tx = self.begin(None).await.map_err(down)?;
            let usable: bool =
                sqlx::query_scalar("SELECT has_table_privilege('plugin_host.tasks', 'SELECT')")
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(down)?;
            if !usable {
                return Err(DomainError::unavailable(
                    Upstream::TaskStore,
                    Some("plugin_host_app may not read plugin_host.tasks".into()),
                ));
            }
            tx.commit().await.map_err(down)
        })
        .await
    }
}
