//! Starting a long-running tool as a task, and its two front doors (CONTRACT §3): with
//! `params.task` a spec `CreateTaskResult`; without it, the seed's immediate handle, or
//! with `--long-running wait` the final result.

use serde_json::json;

use super::run::{ProgressTarget, Work};
use super::runner::NewRun;
use super::wire::{spec_task, task_result};
use crate::app::App;
use crate::app::edge::rpc::{CallParams, Reply};
use crate::app::edge::session::Session;
use crate::app::service::output::structured;
use crate::domain::task::{MAX_STORED_INPUT_BYTES, granted_ttl_ms, input_too_large};
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp, Tool};

/// Creates and starts the task. The run's deadline and the task's `timeout_at` are one
/// instant: `timeout_s` after the task's creation.
pub async fn launch(
    app: &App,
    session: &Session,
    ctx: &CallCtx,
    tool: Tool,
    call: &CallParams,
    timeout_s: u64,
    work: impl FnOnce(Timestamp) -> Work,
) -> Result<Reply, DomainError> {
    let now = app.ports().clock.now();
    let timeout_at = now.plus_millis((timeout_s * 1000) as i64);
    let ttl = granted_ttl_ms(call.requested_ttl());
    // Progress belongs to its request and stops when the request is answered: a task
    // call's request lives as long as the task, a waiting call's until the result; a
    // plain call answered with a handle gets none.
    let waits = app.settings().plain_calls_wait(session.client_name());
    let answered_now = call.task.is_none() && !waits;
    let progress = call
        .meta
        .get("progressToken")
        .filter(|_| !answered_now)
        .cloned()
        .map(|token| ProgressTarget {
            outbound: session.outbound(),
            token,
        });
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
        let handle = format!(
            "Started {} as task {}; poll tasks/get and fetch the result with tasks/result.",
            tool.listed_name(app.settings().tool_names),
            task.id
        );
        let answer = json!({
            "task": spec_task(&task),
            "_meta": {"io.modelcontextprotocol/model-immediate-response": handle}
        });
        session.hold(begin);
        return Ok(answer.into());
    }
    match waits {
        false => {
            session.hold(begin);
            structured(&json!({"task_id": task.id.to_string(), "status": "running"}))
        }
        true => {
            // Named before the run begins, so the stream knows the task before any progress.
            session.waits_for_task(task.id);
            drop(begin);
            let done = app.runner().wait_terminal(&task.tenant, task.id).await?;
            task_result(&done).map(Reply::Json)
        }
    }
}
