//! The wire shapes of tasks: the spec's `Task` object, the seed's task object, and the
//! result a terminal task answers `tasks/result` (and a waiting call) with.

use serde_json::{Value, json};

use crate::app::service::output::{json_value, structured_value};
use crate::domain::DomainError;
use crate::domain::task::{Task, TaskStatus};

fn spec_status(task: &Task) -> &'static str {
    match task.status {
        TaskStatus::Running => "working",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    }
}

/// The spec's `Task` object.
pub fn spec_task(task: &Task) -> Value {
    let mut v = json!({
        "taskId": task.id.to_string(),
        "status": spec_status(task),
        "createdAt": task.created_at.to_rfc3339(),
        "lastUpdatedAt": task.updated_at.to_rfc3339(),
        "ttl": task.expires_at.millis_since(task.created_at),
        "pollInterval": 1000
    });
    let message = match task.status {
        TaskStatus::Cancelled => Some("The task was cancelled by request.".to_owned()),
        _ => task
            .failure
            .as_ref()
            .map(|f| f.hint.clone())
            .or_else(|| task.status_message.clone()),
    };
    if let Some(m) = message {
        v["statusMessage"] = m.into();
    }
    v
}

/// The seed's task object.
pub fn seed_task(task: &Task) -> Result<Value, DomainError> {
    let mut v = json!({
        "task_id": task.id.to_string(),
        "status": task.status.as_str(),
        "created_at": task.created_at.to_rfc3339(),
        "updated_at": task.updated_at.to_rfc3339(),
        "duration_ms": task.duration_ms()
    });
    if let Some(out) = &task.output {
        v["output"] = json_value(out)?;
    }
    if let Some(f) = &task.failure {
        v["error"] = json!({ "class": f.class.as_str(), "message": f.message, "hint": f.hint, "trace_id": task.trace_id.to_string() });
    }
    Ok(v)
}

/// What the original call would have returned, for a terminal task.
pub fn task_result(task: &Task) -> Result<Value, DomainError> {
    match task.status {
        TaskStatus::Completed => {
            let output = task
                .output
                .as_ref()
                .map(json_value)
                .transpose()?
                .unwrap_or(Value::Null);
            Ok(structured_value(output))
        }
        TaskStatus::Failed => Err(task
            .failure
            .as_ref()
            .map(|f| f.to_error())
            .unwrap_or_else(|| DomainError::internal("the task failed", None))),
        TaskStatus::Cancelled => Err(DomainError::Internal {
            message: "the task was cancelled".into(),
            hint: "It was cancelled by request; run it again if it is still needed.".into(),
            source: None,
        }),
        TaskStatus::Running => Err(DomainError::internal("the task is still running", None)),
    }
}
