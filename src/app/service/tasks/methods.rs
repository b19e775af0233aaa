//! `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` (CONTRACT §3, §6).
//!
//! A task id that does not parse, does not exist, or belongs to another tenant gets the
//! identical "task not found" answer. Tasks are visible tenant-wide; acting on one needs
//! the scope of the tool that created it. `{taskId}` params get the spec's shapes, `{id}`
//! params the seed's. Identity is checked before the params, as for every task method.

use serde_json::{Value, json};

use super::wire::{seed_task, spec_task, task_result};
use crate::app::App;
use crate::app::edge::rpc::{BadParams, INVALID_PARAMS, RpcError, TaskRef};
use crate::app::edge::session::Session;
use crate::domain::task::{Task, TaskStatus};
use crate::domain::{DomainError, Principal, TaskId, TraceId};
use crate::ports::TaskOutcome;

/// `tasks/get`.
pub async fn get(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let (task, seed_shape) = load(app, session, params, trace).await?;
    if seed_shape {
        seed_task(&task).map_err(|e| RpcError::logged(&e, trace))
    } else {
        Ok(spec_task(&task))
    }
}

/// `tasks/cancel`.
pub async fn cancel(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    let (task, seed_shape) = load(app, session, params, trace).await?;
    let cancelled = stop(app, &task).await.map_err(fail)?;
    if seed_shape {
        seed_task(&cancelled).map_err(fail)
    } else {
        Ok(spec_task(&cancelled))
    }
}

/// `tasks/result`: waits until the task is terminal, then answers what the original call
/// would have, in the task's trace.
pub async fn result(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let (task, _) = load(app, session, params, trace).await?;
    session.waits_for_task(task.id);
    let done = app
        .runner()
        .wait_terminal(&task.tenant, task.id)
        .await
        .map_err(|e| RpcError::logged(&e, trace))?;
    let related = json!({"io.modelcontextprotocol/related-task": {"taskId": done.id.to_string()}});
    match task_result(&done) {
        Ok(mut result) => {
            result["_meta"] = related;
            Ok(result)
        }
        Err(e) => Err(RpcError::from_domain(&e, done.trace_id).with_data("_meta", related)),
    }
}

/// `tasks/list`: one page of the tenant's tasks, without those of tools the caller may
/// not use.
pub async fn list(
    app: &App,
    session: &Session,
    cursor: &Result<Option<String>, BadParams>,
    trace: TraceId,
) -> Result<Value, RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    let principal = app.principal(session).await.map_err(fail)?;
    let cursor = cursor.as_ref().map_err(|e| bad_params(e, trace))?;
    let page = app
        .ports()
        .tasks
        .list(&principal.tenant, cursor.as_deref(), 50)
        .await
        .map_err(fail)?;
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

/// The caller's task named by `params`, if the caller may act on it; and whether the
/// seed's shape was asked for.
async fn load(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<(Task, bool), RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    let principal = app.principal(session).await.map_err(fail)?;
    let task_ref = params.as_ref().map_err(|e| bad_params(e, trace))?;
    let id = TaskId::parse(&task_ref.id).ok_or_else(|| fail(DomainError::task_not_found()))?;
    let task = visible(app, &principal, id).await.map_err(fail)?;
    Ok((task, task_ref.seed_shape))
}

/// `principal`'s task `id`, if it may act on it: another tenant's task is "not found".
///
/// # Errors
/// "task not found", `authz_denied` for a missing scope, `upstream_unavailable`.
pub async fn visible(app: &App, principal: &Principal, id: TaskId) -> Result<Task, DomainError> {
    let task = app.ports().tasks.get(&principal.tenant, id).await?;
    may_act_on(principal, &task)?;
    Ok(task)
}

fn bad_params(e: &BadParams, trace: TraceId) -> RpcError {
    RpcError::protocol(INVALID_PARAMS, e.message.clone(), e.hint, trace)
}

async fn stop(app: &App, task: &Task) -> Result<Task, DomainError> {
    // Only a running task may become cancelled; the store's conditional update settles a
    // race with the run's own outcome and with other cancels.
    let status = task
        .status
        .transition(TaskStatus::Cancelled)
        .map_err(|_| already_terminal(task))?;
    let outcome = TaskOutcome {
        status,
        output: None,
        failure: None,
    };
    let finished = app
        .ports()
        .tasks
        .finish(&task.tenant, task.id, &outcome, app.ports().clock.now())
        .await?;
    // Of concurrent cancels (and the run's own outcome) exactly one update wins; every
    // other cancel is answered as a cancel of a finished task is.
    if !finished.changed {
        return Err(already_terminal(&finished.task));
    }
    app.runner().stop_local(task.id).await;
    tracing::info!(task_id = %task.id, tenant = %task.tenant, "task cancelled");
    Ok(finished.task)
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
