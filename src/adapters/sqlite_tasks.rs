//! `TaskStore` on the embedded SQLite file. Several bridge processes may share it: every
//! status change is a conditional update (`WHERE status = 'running'`), and the tenant is
//! in every per-task `WHERE`.

use serde_json::json;
use sqlx::Row;

use crate::adapters::sqlite::SqliteStore;
use crate::domain::task::{Task, TaskFailure, TaskStatus, orphaned};
use crate::domain::{
    DomainError, ErrorClass, JsonText, TaskId, TenantId, Timestamp, Tool, TraceId, Upstream,
};
use crate::ports::{NewTask, SweepReport, TaskOutcome, TaskPage, TaskStore};

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// The one answer for a task the tenant cannot see, whatever the reason.
pub fn task_not_found() -> DomainError {
    DomainError::invalid("task not found")
        .with_hint("Check the task id; tasks are kept for their ttl, then deleted.")
}

pub(super) fn bad_cursor() -> DomainError {
    DomainError::invalid("invalid cursor")
        .with_hint("Pass nextCursor from the previous page unchanged.")
}

macro_rules! columns {
    () => {
        "task_id, tenant_id, tool_name, status, output, error, status_message, created_at, updated_at, \
         timeout_at, expires_at, trace_id"
    };
}

pub(super) fn failure_json(f: &TaskFailure) -> String {
    json!({"class": f.class.as_str(), "message": f.message, "hint": f.hint}).to_string()
}

pub(super) fn failure_of(text: &str) -> Option<TaskFailure> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let class = match v.get("class")?.as_str()? {
        "input_validation" => ErrorClass::InputValidation,
        "authz_denied" => ErrorClass::AuthzDenied,
        "upstream_unavailable" => ErrorClass::UpstreamUnavailable,
        _ => ErrorClass::Internal,
    };
    Some(TaskFailure {
        class,
        message: v.get("message")?.as_str()?.to_owned(),
        hint: v.get("hint")?.as_str()?.to_owned(),
    })
}

pub(super) fn corrupt(what: &str) -> DomainError {
    DomainError::internal(
        "a stored task is malformed",
        Some(format!("bad {what}").into()),
    )
}

/// A task from a row of either store (the SQL differs; the columns read the same).
pub(super) fn task_of<R>(row: &R) -> Result<Task, DomainError>
where
    R: Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let get_s = |c: &str| row.try_get::<String, _>(c).map_err(down);
    let get_i = |c: &str| row.try_get::<i64, _>(c).map_err(down);
    let output: Option<String> = row.try_get("output").map_err(down)?;
    let error: Option<String> = row.try_get("error").map_err(down)?;
    Ok(Task {
        id: TaskId::parse(&get_s("task_id")?).ok_or_else(|| corrupt("task_id"))?,
        tenant: TenantId::parse(&get_s("tenant_id")?).map_err(|_| corrupt("tenant_id"))?,
        tool: Tool::from_name(&get_s("tool_name")?).ok_or_else(|| corrupt("tool_name"))?,
        status: TaskStatus::parse(&get_s("status")?).ok_or_else(|| corrupt("status"))?,
        output: output.map(JsonText::from_serialized),
        failure: error.as_deref().and_then(failure_of),
        status_message: row.try_get("status_message").map_err(down)?,
        trace_id: TraceId::parse(&get_s("trace_id")?).ok_or_else(|| corrupt("trace_id"))?,
        created_at: Timestamp::from_unix_millis(get_i("created_at")?),
        updated_at: Timestamp::from_unix_millis(get_i("updated_at")?),
        timeout_at: Timestamp::from_unix_millis(get_i("timeout_at")?),
        expires_at: Timestamp::from_unix_millis(get_i("expires_at")?),
    })
}

/// Cursors are opaque: `c1.` + creation time (hex) + `.` + the last task id.
pub(super) fn encode_cursor(task: &Task) -> String {
    format!("c1.{:x}.{}", task.created_at.unix_millis(), task.id)
}

pub(super) fn decode_cursor(cursor: &str) -> Option<(i64, TaskId)> {
    let rest = cursor.strip_prefix("c1.")?;
    let (time, id) = rest.split_once('.')?;
    if time.is_empty() || time.len() > 16 {
        return None;
    }
    Some((i64::from_str_radix(time, 16).ok()?, TaskId::parse(id)?))
}

#[async_trait::async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        let t = &new.task;
        let done = sqlx::query(
            "INSERT INTO tasks (task_id, tenant_id, tool_name, status, input, created_at, updated_at, timeout_at,
                                expires_at, trace_id, owner, lease_expires_at)
             VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)
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
        .execute(&self.pool)
        .await
        .map_err(down)?;
        Ok(done.rows_affected() == 1)
    }

    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM tasks WHERE tenant_id = ? AND task_id = ?"
        ))
        .bind(tenant.to_string())
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(down)?;
        task_of(&row.ok_or_else(task_not_found)?)
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
        .fetch_all(&self.pool)
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
    ) -> Result<Task, DomainError> {
        sqlx::query(
            "UPDATE tasks SET status = ?, output = ?, error = ?, updated_at = ?, completed_at = ?,
                              status_message = COALESCE(?, status_message)
             WHERE tenant_id = ? AND task_id = ? AND status = 'running'",
        )
        .bind(outcome.status.as_str())
        .bind(outcome.output.as_ref().map(JsonText::as_str))
        .bind(outcome.failure.as_ref().map(failure_json))
        .bind(now.unix_millis())
        .bind(now.unix_millis())
        .bind(outcome.failure.as_ref().map(|f| f.hint.clone()))
        .bind(tenant.to_string())
        .bind(id.to_string())
        .execute(&self.pool)
        .await
        .map_err(down)?;
        self.get(tenant, id).await
    }

    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        message: &str,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        let updated = sqlx::query(
            "UPDATE tasks SET status_message = ?, updated_at = ? WHERE tenant_id = ? AND task_id = ? AND status = 'running'",
        )
        .bind(message)
        .bind(now.unix_millis())
        .bind(tenant.to_string())
        .bind(id.to_string())
        .execute(&self.pool)
        .await
        .map_err(down)?;
        if updated.rows_affected() == 0 {
            // Missing or foreign: "task not found"; merely finished: nothing to record.
            self.get(tenant, id).await?;
        }
        Ok(())
    }

    async fn renew_leases(&self, owner: &str, until: Timestamp) -> Result<(), DomainError> {
        sqlx::query("UPDATE tasks SET lease_expires_at = ? WHERE owner = ? AND status = 'running'")
            .bind(until.unix_millis())
            .bind(owner)
            .execute(&self.pool)
            .await
            .map_err(down)?;
        Ok(())
    }

    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = serde_json::Value::from(ids.iter().map(TaskId::to_string).collect::<Vec<_>>())
            .to_string();
        let rows = sqlx::query(
            "SELECT task_id FROM tasks WHERE owner = ? AND status <> 'running'
               AND task_id IN (SELECT value FROM json_each(?))",
        )
        .bind(owner)
        .bind(list)
        .fetch_all(&self.pool)
        .await
        .map_err(down)?;
        Ok(rows
            .iter()
            .filter_map(|r| r.try_get::<String, _>(0).ok())
            .filter_map(|s| TaskId::parse(&s))
            .collect())
    }

    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError> {
        let lost = orphaned();
        let orphaned = sqlx::query(
            "UPDATE tasks SET status = 'failed', error = ?, status_message = ?, updated_at = ?, completed_at = ?
             WHERE status = 'running' AND lease_expires_at < ?",
        )
        .bind(failure_json(&lost))
        .bind(&lost.hint)
        .bind(now.unix_millis())
        .bind(now.unix_millis())
        .bind(now.unix_millis())
        .execute(&self.pool)
        .await
        .map_err(down)?
        .rows_affected();
        let expired = sqlx::query("DELETE FROM tasks WHERE expires_at < ? AND status <> 'running'")
            .bind(now.unix_millis())
            .execute(&self.pool)
            .await
            .map_err(down)?
            .rows_affected();
        Ok(SweepReport { orphaned, expired })
    }

    async fn check(&self) -> Result<(), DomainError> {
        sqlx::query("SELECT 1 FROM tasks LIMIT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_cursors_round_trip_and_garbage_is_refused() {
        let id = TaskId::from_random([9; 16]);
        let cursor = format!("c1.{:x}.{id}", 1_700_000_000_000_i64);
        assert_eq!(decode_cursor(&cursor), Some((1_700_000_000_000, id)));
        for bad in ["", "c1.", "c1.zz.t-x", "c2.1.t-aaaa", "c1.1", "c1..t-a"] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }
}
