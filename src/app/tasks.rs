//! `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` over the task store.
//!
//! A task id that does not parse, does not exist, or belongs to another tenant gets the
//! identical "task not found" answer.

use serde_json::{Value, json};

use crate::app::App;
use crate::app::rpc::{INVALID_PARAMS, RpcError};
use crate::app::tools::{json_value, rfc3339};
use crate::domain::task::Task;
use crate::domain::{DomainError, TaskId, TraceId};

pub(crate) async fn handle(
    app: &App,
    method: &str,
    params: &Value,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let principal = app
        .identity()
        .stdio_principal()
        .await
        .map_err(|e| app.domain_failure(&e, trace))?;
    let tasks = &app.ports().tasks;
    if method == "tasks/list" {
        let cursor = params.get("cursor").and_then(Value::as_str);
        let page = tasks
            .list(&principal.tenant, cursor, 50)
            .await
            .map_err(|e| app.domain_failure(&e, trace))?;
        let mut out = json!({ "tasks": page.tasks.iter().map(spec_task).collect::<Vec<_>>() });
        if let Some(next) = page.next_cursor {
            out["nextCursor"] = next.into();
        }
        return Ok(out);
    }
    let (raw, seed_shape) = match (params.get("taskId"), params.get("id")) {
        (Some(Value::String(id)), _) => (id.as_str(), false),
        (None, Some(Value::String(id))) => (id.as_str(), true),
        _ => {
            return Err(RpcError::protocol(
                INVALID_PARAMS,
                format!("{method} needs params.taskId, a string"),
                "Pass the taskId returned when the task was created.",
                trace,
            ));
        }
    };
    let not_found = || app.domain_failure(&task_not_found(), trace);
    let id = TaskId::parse(raw).ok_or_else(not_found)?;
    let task = tasks
        .get(&principal.tenant, id)
        .await
        .map_err(|e| app.domain_failure(&e, trace))?;
    match method {
        "tasks/get" if seed_shape => seed_task(&task).map_err(|e| app.domain_failure(&e, trace)),
        "tasks/get" => Ok(spec_task(&task)),
        // Running tasks, results and cancellation arrive with the task runner (#5).
        _ => Err(app.domain_failure(
            &DomainError::unavailable(crate::domain::Upstream::TaskStore, None)
                .with_hint("The task runner is not part of this build yet."),
            trace,
        )),
    }
}

fn task_not_found() -> DomainError {
    DomainError::invalid("task not found")
        .with_hint("Check the task id; tasks expire after their ttl.")
}

fn spec_status(task: &Task) -> &'static str {
    use crate::domain::task::TaskStatus::*;
    match task.status {
        Running => "working",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

/// The spec's `Task` object.
fn spec_task(task: &Task) -> Value {
    let mut v = json!({
        "taskId": task.id.to_string(),
        "status": spec_status(task),
        "createdAt": rfc3339(task.created_at),
        "lastUpdatedAt": rfc3339(task.updated_at),
        "ttl": task.expires_at.millis_since(task.created_at),
        "pollInterval": 1000
    });
    let message = task
        .failure
        .as_ref()
        .map(|f| f.hint.clone())
        .or_else(|| task.status_message.clone());
    if let Some(m) = message {
        v["statusMessage"] = m.into();
    }
    v
}

/// The seed's task object.
fn seed_task(task: &Task) -> Result<Value, DomainError> {
    let mut v = json!({
        "task_id": task.id.to_string(),
        "status": task.status.as_str(),
        "created_at": rfc3339(task.created_at),
        "updated_at": rfc3339(task.updated_at),
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
