//! What the SQLite and Postgres task stores share: reading a task row (the SQL differs;
//! the columns read the same), the stored failure and cursor formats, the common errors,
//! and the state-machine check of `finish`. A leaf: it imports neither store.

use serde_json::json;
use sqlx::Row;

use crate::domain::task::{Task, TaskFailure, TaskStatus};
use crate::domain::{
    DomainError, ErrorClass, JsonText, TaskId, TenantId, Timestamp, Tool, TraceId, Upstream,
};
use crate::ports::{ProgressEntry, TaskOutcome};

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// The one answer for a task the tenant cannot see, whatever the reason.
/// A progress log row (`seq`, `total`, `message`) as stored by either store.
pub(in crate::adapters) type ProgressRow = (i64, Option<i64>, String);

/// Progress log rows → entries.
pub(in crate::adapters) fn progress_entries(rows: Vec<ProgressRow>) -> Vec<ProgressEntry> {
    rows.into_iter()
        .map(|(seq, total, message)| ProgressEntry {
            seq: u64::try_from(seq).unwrap_or(0),
            total: total.and_then(|t| u64::try_from(t).ok()),
            message,
        })
        .collect()
}

/// A step or count as both stores keep it (a signed 64-bit integer).
pub(in crate::adapters) fn stored_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(in crate::adapters) fn bad_cursor() -> DomainError {
    DomainError::invalid("invalid cursor")
        .with_hint("Pass nextCursor from the previous page unchanged.")
}

/// The status `finish` may write: the state machine's move out of `running`, the only
/// status a conditional finish updates. The `WHERE status = 'running'` update still
/// decides races between finishers.
pub(in crate::adapters) fn finished_status(
    outcome: &TaskOutcome,
) -> Result<TaskStatus, DomainError> {
    TaskStatus::Running
        .transition(outcome.status)
        .map_err(|e| DomainError::internal("a task cannot be finished so", Some(e.into())))
}

/// The stored form of a failure: a JSON object with `class`, `message` and `hint`.
pub(in crate::adapters) fn failure_json(f: &TaskFailure) -> String {
    json!({"class": f.class.as_str(), "message": f.message, "hint": f.hint}).to_string()
}

/// The error class of its stored name; `None` for a name no store writes.
fn error_class(stored: &str) -> Option<ErrorClass> {
    match stored {
        "input_validation" => Some(ErrorClass::InputValidation),
        "authz_denied" => Some(ErrorClass::AuthzDenied),
        "upstream_unavailable" => Some(ErrorClass::UpstreamUnavailable),
        "internal_error" => Some(ErrorClass::Internal),
        _ => None,
    }
}

pub(in crate::adapters) fn failure_of(text: &str) -> Option<TaskFailure> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(TaskFailure {
        class: error_class(v.get("class")?.as_str()?)?,
        message: v.get("message")?.as_str()?.to_owned(),
        hint: v.get("hint")?.as_str()?.to_owned(),
    })
}

fn corrupt(what: &str) -> DomainError {
    DomainError::internal(
        "a stored task is malformed",
        Some(format!("bad {what}").into()),
    )
}

/// A task from a row of either store (the SQL differs; the columns read the same).
pub(in crate::adapters) fn task_of<R>(row: &R) -> Result<Task, DomainError>
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
pub(in crate::adapters) fn encode_cursor(task: &Task) -> String {
    format!("c1.{:x}.{}", task.created_at.unix_millis(), task.id)
}

pub(in crate::adapters) fn decode_cursor(cursor: &str) -> Option<(i64, TaskId)> {
    let rest = cursor.strip_prefix("c1.")?;
    let (time, id) = rest.split_once('.')?;
    if time.is_empty() || time.len() > 16 {
        return None;
    }
    Some((i64::from_str_radix(time, 16).ok()?, TaskId::parse(id)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn task_cursors_round_trip_and_garbage_is_refused() {
        let id = TaskId::from_random([9; 16]);
        let cursor = format!("c1.{:x}.{id}", 1_700_000_000_000_i64);
        assert_eq!(decode_cursor(&cursor), Some((1_700_000_000_000, id)));
        for bad in ["", "c1.", "c1.zz.t-x", "c2.1.t-aaaa", "c1.1", "c1..t-a"] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_error_class_round_trips_and_unknown_names_are_refused() {
        for class in [
            ErrorClass::InputValidation,
            ErrorClass::AuthzDenied,
            ErrorClass::UpstreamUnavailable,
            ErrorClass::Internal,
        ] {
            let stored = failure_json(&TaskFailure {
                class,
                message: "m".into(),
                hint: "h".into(),
            });
            assert_eq!(
                failure_of(&stored).map(|f| f.class),
                Some(class),
                "{stored}"
            );
        }
        for bad in ["internal", "Internal_Error", ""] {
            let stored = json!({"class": bad, "message": "m", "hint": "h"}).to_string();
            assert_eq!(failure_of(&stored), None, "{bad:?}");
        }
    }

    #[test]
    fn only_terminal_outcomes_finish_a_task() {
        let outcome = |status| TaskOutcome {
            status,
            output: None,
            failure: None,
        };
        for to in [
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            assert_eq!(finished_status(&outcome(to)).ok(), Some(to));
        }
        assert!(finished_status(&outcome(TaskStatus::Running)).is_err());
    }

    proptest! {
        #[test]
        fn task_cursors_round_trip(ms in 0i64..=i64::MAX, id in any::<[u8; 16]>()) {
            let text = format!("c1.{ms:x}.{}", TaskId::from_random(id));
            prop_assert_eq!(decode_cursor(&text), Some((ms, TaskId::from_random(id))));
        }

        #[test]
        fn any_cursor_text_decodes_or_is_refused(text in "(c1\\.)?[0-9a-f.]{0,20}(t-[a-z2-7]{0,26})?|\\PC{0,40}") {
            if let Some((ms, id)) = decode_cursor(&text) {
                prop_assert_eq!(format!("c1.{ms:x}.{id}"), text.to_ascii_lowercase());
            }
        }
    }
}
