//! One run of a task, start to stored outcome: the CUO call on a child of its own,
//! progress to the store and the client, the deadline backstop, the outcome written with
//! a conditional update, and the workflow's `plugin.invoked` audit row.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::service::caller::{Progress, ProgressListener};
use crate::app::telemetry::Outcome;
use crate::domain::cuo::{self, WorkflowOutcome};
use crate::domain::memory::NewAuditEntry;
use crate::domain::task::{
    MAX_STORED_OUTPUT_BYTES, OVERDUE_GRACE_MS, Task, TaskFailure, TaskStatus, output_too_large,
    timed_out,
};
use crate::domain::{CallCtx, DomainError, ErrorClass, JsonText, Tool};
use crate::ports::{Ports, ProgressEntry, ProgressSink, SkillRun, TaskOutcome, WorkflowRun};

/// What a task runs.
pub enum Work {
    /// A CUO workflow.
    Workflow(WorkflowRun),
    /// A skill.
    Skill(SkillRun),
}

/// Runs `task` until it completes, passes its deadline or `stop` fires, and stores the
/// outcome (a stopped run stores nothing: whoever stopped it wrote its status).
pub(super) async fn run(
    ports: &Ports,
    ctx: CallCtx,
    task: Task,
    work: Work,
    progress: Progress,
    stop: CancellationToken,
) -> Outcome {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sink = ChannelSink(tx);
    let cuo = Arc::clone(&ports.cuo);
    let mut call = Box::pin(async {
        match &work {
            Work::Workflow(run) => cuo
                .execute_workflow(&ctx, run, &sink)
                .await
                .map(|o| workflow_output(&o)),
            Work::Skill(run) => cuo.invoke_skill(&ctx, run, &sink).await,
        }
    });
    let now_ms = ports.clock.now().unix_millis();
    // The adapter enforces the deadline itself; this is the backstop.
    let backstop =
        Duration::from_millis(u64::try_from(task.timeout_at.unix_millis() - now_ms).unwrap_or(0))
            + Duration::from_secs(5);
    let deadline = tokio::time::sleep(backstop);
    tokio::pin!(deadline);
    let mut last_step = 0u64;
    let outcome = loop {
        tokio::select! {
            result = &mut call => break Some(result),
            () = stop.cancelled() => break None,
            () = &mut deadline => break Some(Err(timeout_error(&task))),
            Some(p) = rx.recv() => {
                report_new(ports, &task, &p, progress.as_deref(), &mut last_step).await;
            }
        }
    };
    // Dropping the call future kills the child's process group.
    drop(call);
    // Progress the run reported before its result may still be queued (`select!` picks
    // among ready branches at random): it is recorded before the outcome, so the log a
    // resumed stream replays ends with the run's last step.
    if outcome.is_some() {
        while let Ok(p) = rx.try_recv() {
            report_new(ports, &task, &p, progress.as_deref(), &mut last_step).await;
        }
    }
    let Some(result) = outcome else {
        tracing::info!(task_id = %task.id, "task stopped");
        return Outcome::Cancelled;
    };
    let outcome = match result {
        Ok(output) if output.as_str().len() > MAX_STORED_OUTPUT_BYTES => {
            tracing::warn!(task_id = %task.id, bytes = output.as_str().len(), "task result too large to keep");
            TaskOutcome {
                status: TaskStatus::Failed,
                output: None,
                failure: Some(output_too_large(output.as_str().len())),
            }
        }
        Ok(output) => TaskOutcome {
            status: TaskStatus::Completed,
            output: Some(output),
            failure: None,
        },
        Err(e) => {
            tracing::info!(task_id = %task.id, class = %e.class(), "task failed: {e}");
            TaskOutcome {
                status: TaskStatus::Failed,
                output: None,
                failure: Some(failure_of(&e)),
            }
        }
    };
    store_outcome(ports, &task, &outcome, &stop).await;
    if task.tool == Tool::ExecuteWorkflow {
        audit_invocation(ports, &ctx, &task, &outcome).await;
    }
    match &outcome.failure {
        None => Outcome::Success,
        Some(f) => Outcome::Failed(f.class),
    }
}

/// The `structuredContent` of `cyberos.cuo.execute_workflow`, serialized once.
fn workflow_output(outcome: &WorkflowOutcome) -> JsonText {
    #[derive(Serialize)]
    struct Output<'a> {
        steps_executed: u64,
        final_artifacts: Vec<Artifact<'a>>,
    }
    #[derive(Serialize)]
    struct Artifact<'a> {
        name: &'a str,
        media_type: &'a str,
        content: &'a str,
    }
    let output = Output {
        steps_executed: outcome.steps_executed,
        final_artifacts: outcome
            .final_artifacts
            .iter()
            .map(|a| Artifact {
                name: &a.name,
                media_type: &a.media_type,
                content: &a.content,
            })
            .collect(),
    };
    JsonText::from_serialized(
        serde_json::to_string(&output).expect("strings and numbers serialize"),
    )
}

/// Reports `p` only if it is past `last_step` (a child may repeat or reorder steps), and
/// moves `last_step` to it.
async fn report_new(
    ports: &Ports,
    task: &Task,
    p: &cuo::Progress,
    target: Option<&dyn ProgressListener>,
    last_step: &mut u64,
) {
    if p.step > *last_step {
        *last_step = p.step;
        report(ports, task, p, target).await;
    }
}

async fn report(
    ports: &Ports,
    task: &Task,
    p: &cuo::Progress,
    target: Option<&dyn ProgressListener>,
) {
    let entry = ProgressEntry {
        seq: p.step,
        total: p.total,
        message: p
            .message
            .clone()
            .unwrap_or_else(|| format!("step {}", p.step)),
    };
    let now = ports.clock.now();
    if let Err(e) = ports
        .tasks
        .record_progress(&task.tenant, task.id, &entry, now)
        .await
    {
        tracing::warn!(task_id = %task.id, "cannot record progress: {e}");
    }
    if let Some(target) = target {
        target.progress(task.id, &entry);
    }
}

/// Appends the seed's `plugin.invoked` row for a finished workflow. The task's outcome
/// never depends on it: a down memory service is retried with the same idempotency key
/// (so nothing is written twice), then logged.
async fn audit_invocation(ports: &Ports, ctx: &CallCtx, task: &Task, outcome: &TaskOutcome) {
    let now = ports.clock.now();
    let result = match &outcome.failure {
        None => "success",
        Some(f) => f.class.as_str(),
    };
    let body = json!({
        "plugin_id": "cyberos",
        "plugin_version": env!("CARGO_PKG_VERSION"),
        "tool_name": task.tool.name(),
        "trace_id": task.trace_id.to_string(),
        "duration_ms": now.millis_since(task.created_at),
        "outcome": result,
        "task_id": task.id.to_string()
    });
    let entry = NewAuditEntry {
        kind: "plugin.invoked".into(),
        subject: Some(task.id.to_string()),
        body: JsonText::from_serialized(body.to_string()),
    };
    let key = format!("plugin.invoked:{}", task.id);
    for attempt in 0..3u64 {
        match ports.memory.append(ctx, &entry, &key).await {
            Ok(_) => return,
            Err(e) if attempt < 2 => {
                tracing::debug!(task_id = %task.id, "plugin.invoked audit row failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(500 * (attempt + 1))).await;
            }
            Err(e) => {
                tracing::warn!(task_id = %task.id, "plugin.invoked audit row not recorded: {e}")
            }
        }
    }
}

/// The first wait before the outcome write is tried again; it doubles up to
/// [`OUTCOME_RETRY_MAX`].
const OUTCOME_RETRY_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between two tries of the outcome write.
const OUTCOME_RETRY_MAX: Duration = Duration::from_secs(2);

/// Writes the outcome, keeping it and trying again (with bounded backoff) while the store
/// is down: until the store takes it, until `stop` fires (the task was cancelled or
/// stopped elsewhere, or the bridge is shutting down: then the row is someone else's to
/// end), or until the task is overdue (past `timeout_at` plus the sweep's grace, when any
/// instance's sweep fails it). Meanwhile the run stays live here, so its lease is renewed.
/// An outcome the store refuses for good is replaced once by an `internal_error`.
pub(super) async fn store_outcome(
    ports: &Ports,
    task: &Task,
    outcome: &TaskOutcome,
    stop: &CancellationToken,
) {
    let give_up_at = task.timeout_at.unix_millis() + OVERDUE_GRACE_MS;
    let mut outcome = std::borrow::Cow::Borrowed(outcome);
    let mut wait = OUTCOME_RETRY_FIRST;
    let mut failures = 0u32;
    loop {
        let error = match ports
            .tasks
            .finish(&task.tenant, task.id, &outcome, ports.clock.now())
            .await
        {
            Ok(stored) => {
                tracing::info!(
                    task_id = %task.id,
                    status = stored.task.status.as_str(),
                    recorded = stored.changed,
                    failed_tries = failures,
                    "task finished"
                );
                return;
            }
            Err(e) => e,
        };
        failures += 1;
        match error.class() {
            ErrorClass::UpstreamUnavailable => {}
            ErrorClass::Internal if outcome.failure.as_ref() != Some(&unstorable()) => {
                tracing::error!(task_id = %task.id, "the store refused the outcome; recording a failure instead: {error}");
                outcome = std::borrow::Cow::Owned(TaskOutcome {
                    status: TaskStatus::Failed,
                    output: None,
                    failure: Some(unstorable()),
                });
                continue;
            }
            _ => {
                tracing::error!(task_id = %task.id, "the store refused the outcome; giving up: {error}");
                return;
            }
        }
        if ports.clock.now().unix_millis() >= give_up_at {
            tracing::error!(task_id = %task.id, failed_tries = failures, "the store did not take the outcome before the task became overdue; the sweep will fail it: {error}");
            return;
        }
        if failures == 1 || failures.is_multiple_of(10) {
            tracing::warn!(task_id = %task.id, failed_tries = failures, retry_in_ms = wait.as_millis() as u64, "cannot store the outcome yet; keeping it and trying again: {error}");
        }
        tokio::select! {
            () = stop.cancelled() => {
                tracing::info!(task_id = %task.id, "task stopped while its outcome was pending");
                return;
            }
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(OUTCOME_RETRY_MAX);
    }
}

/// Recorded instead of an outcome the store refuses for good.
fn unstorable() -> TaskFailure {
    TaskFailure {
        class: ErrorClass::Internal,
        message: "the task's result could not be stored".into(),
        hint: "The task ran, but the task store refused its result; run it again, and report it if it persists.".into(),
    }
}

struct ChannelSink(mpsc::UnboundedSender<cuo::Progress>);

impl ProgressSink for ChannelSink {
    fn report(&self, progress: cuo::Progress) {
        let _ = self.0.send(progress);
    }
}

fn timeout_error(task: &Task) -> DomainError {
    let f = timed_out(task.timeout_at.millis_since(task.created_at) / 1000);
    DomainError::Internal {
        message: f.message,
        hint: f.hint,
        source: None,
    }
}

/// The stored failure of a run's error.
fn failure_of(e: &DomainError) -> TaskFailure {
    TaskFailure {
        class: e.class(),
        message: e.to_string(),
        hint: e.hint().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cuo::Artifact;
    use serde_json::Value;

    #[test]
    fn a_workflow_outcome_is_serialized_in_the_tools_output_shape() {
        let outcome = WorkflowOutcome {
            steps_executed: 2,
            final_artifacts: vec![Artifact {
                name: "a.md".into(),
                media_type: "text/markdown".into(),
                content: "# \"x\"".into(),
            }],
        };
        let v: Value = serde_json::from_str(workflow_output(&outcome).as_str()).unwrap();
        assert_eq!(
            v,
            json!({"steps_executed": 2, "final_artifacts": [
                {"name": "a.md", "media_type": "text/markdown", "content": "# \"x\""}
            ]})
        );
    }
}
