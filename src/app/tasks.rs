//! `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` (CONTRACT §3, §6).
//!
//! A task id that does not parse, does not exist, or belongs to another tenant gets the
//! identical "task not found" answer. Tasks are visible tenant-wide; acting on one needs
//! the scope of the tool that created it. `{taskId}` params get the spec's shapes, `{id}`
//! params the seed's.

use serde_json::{Value, json};

use crate::app::App;
use crate::app::rpc::{INVALID_PARAMS, RpcError};
use crate::app::tools::long::task_result;
use crate::app::tools::{json_value, rfc3339};
use crate::domain::task::{Task, TaskStatus};
use crate::domain::{DomainError, Principal, TaskId, TraceId};
use crate::ports::TaskOutcome;

pub(crate) async fn handle(
    app: &App,
    session: &crate::app::session::Session,
    method: &str,
    params: &Value,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let fail = |e: DomainError| app.domain_failure(&e, trace);
    let principal = app.principal(session).await.map_err(fail)?;
    if method == "tasks/list" {
        return list(app, &principal, params, trace).await;
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
    let id = TaskId::parse(raw).ok_or_else(|| fail(task_not_found()))?;
    let task = app
        .ports()
        .tasks
        .get(&principal.tenant, id)
        .await
        .map_err(fail)?;
    may_act_on(&principal, &task).map_err(fail)?;
    match method {
        "tasks/get" if seed_shape => seed_task(&task).map_err(fail),
        "tasks/get" => Ok(spec_task(&task)),
        "tasks/cancel" => {
            let cancelled = cancel(app, &task).await.map_err(fail)?;
            if seed_shape {
                seed_task(&cancelled).map_err(fail)
            } else {
                Ok(spec_task(&cancelled))
            }
        }
        "tasks/result" => {
            let done = app
                .runner()
                .wait_terminal(&principal.tenant, id)
                .await
                .map_err(fail)?;
            let related =
                json!({"io.modelcontextprotocol/related-task": {"taskId": done.id.to_string()}});
            match task_result(&done) {
                Ok(mut result) => {
                    result["_meta"] = related;
                    Ok(result)
                }
                // The error the original call would have answered, in the task's trace.
                Err(e) => Err(RpcError::from_domain(&e, done.trace_id).with_data("_meta", related)),
            }
        }
        _ => unreachable!("the dispatcher routes only tasks/* methods here"),
    }
}

async fn list(
    app: &App,
    principal: &Principal,
    params: &Value,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(_) => {
            return Err(RpcError::protocol(
                INVALID_PARAMS,
                "invalid cursor",
                "Pass nextCursor unchanged.",
                trace,
            ));
        }
    };
    let page = app
        .ports()
        .tasks
        .list(&principal.tenant, cursor, 50)
        .await
        .map_err(|e| app.domain_failure(&e, trace))?;
    // Tasks of tools the caller may not use are not listed.
    let visible: Vec<Value> = page
        .tasks
        .iter()
        .filter(|t| principal.has(t.tool.spec().scope))
        .map(spec_task)
        .collect();
    let mut out = json!({ "tasks": visible });
    if let Some(next) = page.next_cursor {
        out["nextCursor"] = next.into();
    }
    Ok(out)
}

/// Marks the task cancelled (only if still running), stops its child here if it runs
/// here (another instance notices within a second), and returns the stored task.
async fn cancel(app: &App, task: &Task) -> Result<Task, DomainError> {
    if task.status.is_terminal() {
        return Err(already_terminal(task));
    }
    let outcome = TaskOutcome {
        status: TaskStatus::Cancelled,
        output: None,
        failure: None,
    };
    let stored = app
        .ports()
        .tasks
        .finish(&task.tenant, task.id, &outcome, app.ports().clock.now())
        .await?;
    if stored.status != TaskStatus::Cancelled {
        return Err(already_terminal(&stored));
    }
    app.runner().stop_local(task.id).await;
    tracing::info!(task_id = %task.id, tenant = %task.tenant, "task cancelled");
    Ok(stored)
}

fn already_terminal(task: &Task) -> DomainError {
    DomainError::invalid(format!(
        "cannot cancel the task: it is already {}",
        task.status.as_str()
    ))
    .with_hint("Only running tasks can be cancelled.")
}

fn may_act_on(principal: &Principal, task: &Task) -> Result<(), DomainError> {
    let scope = task.tool.spec().scope;
    if principal.has(scope) {
        return Ok(());
    }
    Err(DomainError::AuthzDenied {
        message: format!(
            "this task needs scope '{}' which is not in your token",
            scope.as_str()
        ),
        hint: format!(
            "Re-authorise the plugin with the '{}' scope, or have an admin grant it.",
            scope.as_str()
        ),
        missing_scopes: vec![scope.as_str().to_owned()],
    })
}

fn task_not_found() -> DomainError {
    DomainError::invalid("task not found")
        .with_hint("Check the task id; tasks are kept for their ttl, then deleted.")
}

fn spec_status(task: &Task) -> &'static str {
    match task.status {
        TaskStatus::Running => "working",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    }
}

/// The spec's `Task` object.
pub(crate) fn spec_task(task: &Task) -> Value {
    let mut v = json!({
        "taskId": task.id.to_string(),
        "status": spec_status(task),
        "createdAt": rfc3339(task.created_at),
        "lastUpdatedAt": rfc3339(task.updated_at),
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
