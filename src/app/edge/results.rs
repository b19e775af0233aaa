//! What the service returns, in MCP's shapes: a tool's output as a `CallToolResult`, a
//! tool's failure as an `isError` result or a JSON-RPC error (`--tool-errors`), a created
//! task's `CreateTaskResult`, the spec's `Task` object and the seed's, the result a
//! terminal task answers `tasks/result` (and a waiting call) with, and progress
//! notifications.

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rpc::{Reply, RpcError, notification, text_of};
use crate::app::service::caller::ProgressListener;
use crate::app::service::output::json_value;
use crate::app::service::request::CallOutcome;
use crate::app::{App, ToolErrors};
use crate::domain::task::{Task, TaskStatus};
use crate::domain::{DomainError, ErrorClass, TaskId, TraceId};
use crate::ports::ProgressEntry;

/// The result of a successful `tools/call`.
pub fn call_reply(app: &App, outcome: CallOutcome, trace: TraceId) -> Result<Reply, RpcError> {
    match outcome {
        CallOutcome::Output(output) => Ok(Reply::Tool(output)),
        CallOutcome::Task(task) => {
            let handle = format!(
                "Started {} as task {}; poll tasks/get and fetch the result with tasks/result.",
                task.tool.listed_name(app.settings().tool_names),
                task.id
            );
            Ok(Reply::Json(json!({
                "task": spec_task(&task),
                "_meta": {"io.modelcontextprotocol/model-immediate-response": handle}
            })))
        }
        CallOutcome::Finished(done) => task_result(&done)
            .or_else(|e| tool_failure(app, &e, trace))
            .map(Reply::Json),
    }
}

/// How a `tools/call` answers its tool's error: a `CallToolResult` with `isError` under
/// `--tool-errors result` for the classes a model can act on, else a JSON-RPC error.
/// Also what a resumed stream of a waiting call ends with.
pub fn tool_failure(app: &App, err: &DomainError, trace: TraceId) -> Result<Value, RpcError> {
    let as_result = app.settings().tool_errors == ToolErrors::Result
        && matches!(
            err.class(),
            ErrorClass::InputValidation | ErrorClass::UpstreamUnavailable
        );
    let mut wire = RpcError::logged(err, trace);
    if as_result {
        // An error sent as JSON-RPC is respelled where every error frame is built.
        wire.respell(app.settings().tool_names);
        Ok(error_result(&wire))
    } else {
        Err(wire)
    }
}

/// `--tool-errors result`: the envelope's data as `structuredContent`, the message as text.
fn error_result(err: &RpcError) -> Value {
    json!({
        "content": [{"type": "text", "text": err.text()}],
        "structuredContent": Value::Object(err.data()),
        "isError": true
    })
}

/// A successful `CallToolResult` whose `structuredContent` is `value`, for the task paths
/// that add to it (`tasks/result`'s `_meta`).
fn structured_value(value: Value) -> Value {
    let text = text_of(&value);
    json!({ "content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false })
}

/// `notifications/progress` for one entry of a task's progress: the same frame live and
/// when a resumed stream replays the log.
pub fn progress_notification(task: TaskId, token: &Value, entry: &ProgressEntry) -> String {
    let mut params = json!({
        "progressToken": token, "progress": entry.seq, "message": entry.message,
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task.to_string()}}
    });
    if let Some(total) = entry.total {
        params["total"] = total.into();
    }
    notification("notifications/progress", params)
}

/// A run's progress as notifications to the client that sent `token`, queued on its
/// connection; a full queue drops the step (the store has it).
pub struct ProgressFrames {
    /// The connection's outbound frames.
    pub outbound: mpsc::Sender<String>,
    /// The client's `progressToken`.
    pub token: Value,
}

impl ProgressListener for ProgressFrames {
    fn progress(&self, task: TaskId, entry: &ProgressEntry) {
        let _ = self
            .outbound
            .try_send(progress_notification(task, &self.token, entry));
    }
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
