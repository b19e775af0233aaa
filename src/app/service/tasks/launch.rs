//! Starting a long-running tool as a task, and its three endings (CONTRACT §3): with
//! `params.task` the created task; without it, the seed's immediate handle, or when the
//! caller's plain calls wait (`--long-running wait`, or `auto` for a host that never polls),
//! the ended task.

use serde_json::json;

use super::run::Work;
use super::runner::NewRun;
use crate::app::App;
use crate::app::service::caller::Caller;
use crate::app::service::output::structured;
use crate::app::service::request::{CallOutcome, ToolCall};
use crate::domain::task::{MAX_STORED_INPUT_BYTES, granted_ttl_ms, input_too_large};
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp, Tool};

/// Creates and starts the task. The run's deadline and the task's `timeout_at` are one
/// instant: `timeout_s` after the task's creation.
pub async fn launch(
    app: &App,
    caller: &dyn Caller,
    ctx: &CallCtx,
    tool: Tool,
    call: ToolCall<'_>,
    timeout_s: u64,
    work: impl FnOnce(Timestamp) -> Work,
) -> Result<CallOutcome, DomainError> {
    let now = app.ports().clock.now();
    let timeout_at = now.plus_millis((timeout_s * 1000) as i64);
    let ttl = granted_ttl_ms(call.task.flatten());
    // Progress belongs to its request and stops when the request is answered: a task
    // call's request lives as long as the task, a waiting call's until the result; a
    // plain call answered with a handle gets none.
    let waits = app.settings().plain_calls_wait(caller.client_name());
    let answered_now = call.task.is_none() && !waits;
    let progress = call.progress.filter(|_| !answered_now);
    let input = call.arguments.to_string();
    if input.len() > MAX_STORED_INPUT_BYTES {
        return Err(input_too_large(input.len()));
    }
    let new = NewRun {
        tool,
        input: JsonText::from_serialized(input),
        work: work(timeout_at),
        created_at: now,
        timeout_at,
        expires_at: now.plus_millis(ttl),
        progress,
        max_stored: app.settings().max_stored_tasks_per_tenant,
    };
    // The run waits for `begin` to drop: once the answer below is on its way.
    let (task, begin) = app.runner().start(ctx.clone(), new).await?;
    if call.task.is_some() {
        caller.hold(begin);
        return Ok(CallOutcome::Task(task));
    }
    if !waits {
        caller.hold(begin);
        let handle = json!({"task_id": task.id.to_string(), "status": "running"});
        return structured(&handle).map(CallOutcome::Output);
    }
    // Named before the run begins, so the stream knows the task before any progress.
    caller.waits_for_task(task.id);
    drop(begin);
    let done = app.runner().wait_terminal(&task.tenant, task.id).await?;
    Ok(CallOutcome::Finished(done))
}
