//! The `tasks/*` requests: each checks its principal before its params (CONTRACT §3).

use serde_json::{Value, json};

use crate::app::App;
use crate::app::edge::results::{seed_task, spec_task, task_result};
use crate::app::edge::rpc::{BadParams, Reply, RpcError, TaskRef};
use crate::app::edge::session::Session;
use crate::app::service::tasks::methods as tasks;
use crate::domain::task::Task;
use crate::domain::{DomainError, Principal, TraceId};

/// `tasks/get`: the spec's `Task` for `{taskId}`, the seed's task object for `{id}`.
pub(super) async fn task_get(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Reply, RpcError> {
    let (principal, task_ref) = task_target(app, session, params, trace).await?;
    let task = tasks::get(app, &principal, &task_ref.id).await;
    task_reply(task, task_ref, trace)
}

/// `tasks/cancel`, answered in the shape of the request as `tasks/get` is.
pub(super) async fn task_cancel(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Reply, RpcError> {
    let (principal, task_ref) = task_target(app, session, params, trace).await?;
    let task = tasks::cancel(app, &principal, &task_ref.id).await;
    task_reply(task, task_ref, trace)
}

/// The principal of a `tasks/*` request, then its params: checked in that order
/// (CONTRACT §3).
async fn task_target<'p, T>(
    app: &App,
    session: &Session,
    params: &'p Result<T, BadParams>,
    trace: TraceId,
) -> Result<(Principal, &'p T), RpcError> {
    let principal = app
        .principal(session)
        .await
        .map_err(|e| RpcError::logged(&e, trace))?;
    let params = params.as_ref().map_err(|e| e.to_error(trace))?;
    Ok((principal, params))
}

/// The task in the shape its request asked for.
fn task_reply(
    task: Result<Task, DomainError>,
    task_ref: &TaskRef,
    trace: TraceId,
) -> Result<Reply, RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    task_shape(&task.map_err(fail)?, task_ref.seed_shape).map_err(fail)
}

fn task_shape(task: &Task, seed_shape: bool) -> Result<Reply, DomainError> {
    if seed_shape {
        seed_task(task).map(Reply::Json)
    } else {
        Ok(Reply::Json(spec_task(task)))
    }
}

/// `tasks/result`: waits until the task is terminal, then answers what the original call
/// would have, in the task's trace.
pub(super) async fn task_result_of(
    app: &App,
    session: &Session,
    params: &Result<TaskRef, BadParams>,
    trace: TraceId,
) -> Result<Reply, RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    let (principal, task_ref) = task_target(app, session, params, trace).await?;
    let done = tasks::result(app, session, &principal, &task_ref.id)
        .await
        .map_err(fail)?;
    let related = json!({"io.modelcontextprotocol/related-task": {"taskId": done.id.to_string()}});
    match task_result(&done) {
        Ok(mut result) => {
            result["_meta"] = related;
            Ok(Reply::Json(result))
        }
        Err(e) => Err(RpcError::from_domain(&e, done.trace_id).with_data("_meta", related)),
    }
}

/// `tasks/list`: one page of the tenant's tasks the caller may act on.
pub(super) async fn task_list(
    app: &App,
    session: &Session,
    cursor: &Result<Option<String>, BadParams>,
    trace: TraceId,
) -> Result<Reply, RpcError> {
    let fail = |e: DomainError| RpcError::logged(&e, trace);
    let (principal, cursor) = task_target(app, session, cursor, trace).await?;
    let page = tasks::list(app, &principal, cursor.as_deref())
        .await
        .map_err(fail)?;
    let listed: Vec<Value> = page.tasks.iter().map(spec_task).collect();
    let mut out = json!({ "tasks": listed });
    if let Some(next) = page.next_cursor {
        out["nextCursor"] = next.into();
    }
    Ok(Reply::Json(out))
}
