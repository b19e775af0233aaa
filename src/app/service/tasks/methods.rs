//! What the `tasks/*` requests do (CONTRACT §3, §6): find a task, wait for its end, list a
//! tenant's tasks, cancel one.
//!
//! A task id that does not parse, does not exist, or belongs to another tenant gets the
//! identical "task not found" answer. Tasks are visible tenant-wide; acting on one needs
//! the scope of the tool that created it.

use crate::app::App;
use crate::app::service::caller::Caller;
use crate::domain::task::{Task, TaskStatus};
use crate::domain::{DomainError, Principal, TaskId};
use crate::ports::{TaskOutcome, TaskPage};

/// Tasks listed at a time.
const PAGE: u32 = 50;

/// `principal`'s task named `id` (as sent), if it may act on it.
///
/// # Errors
/// "task not found" (also for an id that does not parse), `authz_denied` for a missing
/// scope, `upstream_unavailable`.
pub async fn get(app: &App, principal: &Principal, id: &str) -> Result<Task, DomainError> {
    let id = TaskId::parse(id).ok_or_else(DomainError::task_not_found)?;
    visible(app, principal, id).await
}

/// Waits until `principal`'s task `id` is terminal and returns it.
///
/// # Errors
/// As for [`get`].
pub async fn result(
    app: &App,
    caller: &dyn Caller,
    principal: &Principal,
    id: &str,
) -> Result<Task, DomainError> {
    let task = get(app, principal, id).await?;
    caller.waits_for_task(task.id);
    app.runner().wait_terminal(&task.tenant, task.id).await
}

/// One page of the tenant's tasks, without those of tools `principal` may not use.
///
/// # Errors
/// `upstream_unavailable` when the store is down, `input_validation` for a bad cursor.
pub async fn list(
    app: &App,
    principal: &Principal,
    cursor: Option<&str>,
) -> Result<TaskPage, DomainError> {
    let mut page = app
        .ports()
        .tasks
        .list(&principal.tenant, cursor, PAGE)
        .await?;
    page.tasks.retain(|t| principal.has(t.tool.spec().scope));
    Ok(page)
}

/// Cancels `principal`'s task `id` and returns it, cancelled.
///
/// # Errors
/// As for [`get`], and `input_validation` for a task that is already terminal.
pub async fn cancel(app: &App, principal: &Principal, id: &str) -> Result<Task, DomainError> {
    let task = get(app, principal, id).await?;
    // Only a running task may become cancelled; the store's conditional update settles a
    // race with the run's own outcome and with other cancels.
    let status = task
        .status
        .transition(TaskStatus::Cancelled)
        .map_err(|_| already_terminal(&task))?;
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

/// `principal`'s task `id`, if it may act on it: another tenant's task is "not found".
///
/// # Errors
/// "task not found", `authz_denied` for a missing scope, `upstream_unavailable`.
pub async fn visible(app: &App, principal: &Principal, id: TaskId) -> Result<Task, DomainError> {
    let task = app.ports().tasks.get(&principal.tenant, id).await?;
    may_act_on(principal, &task)?;
    Ok(task)
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
    Err(principal.lacks(scope, "this task"))
}
