//! The two long-running tools and their two front doors (CONTRACT §3): with `params.task`
//! a spec `CreateTaskResult`; without it, the seed's immediate handle, or with
//! `--long-running wait` the final result.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::app::session::Session;
use crate::app::task_runner::{ProgressTarget, Work};
use crate::app::tools::{CallParams, json_text, structured};
use crate::app::{App, LongRunning, tasks};
use crate::domain::task::{DEFAULT_TIMEOUT_S, Task, TaskStatus, granted_ttl_ms};
use crate::domain::{CallCtx, DomainError, JsonText, TaskId, Timestamp, Tool};
use crate::ports::{SkillRun, WorkflowRun};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecuteWorkflowArgs {
    persona: String,
    workflow: String,
    #[serde(default)]
    inputs: Map<String, Value>,
    timeout_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InvokeSkillArgs {
    skill: String,
    #[serde(default)]
    inputs: Map<String, Value>,
    timeout_s: Option<u64>,
}

pub(super) async fn execute_workflow(
    app: &App,
    session: &Session,
    ctx: &CallCtx,
    call: &CallParams,
    args: ExecuteWorkflowArgs,
) -> Result<Value, DomainError> {
    check_workflow_exists(app, ctx, &args.persona, &args.workflow).await?;
    let timeout_s = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    let inputs = json_text(&Value::Object(args.inputs));
    let (persona, workflow) = (args.persona, args.workflow);
    let work = |deadline| {
        Work::Workflow(WorkflowRun {
            persona,
            workflow,
            inputs,
            deadline,
        })
    };
    launch(
        app,
        session,
        ctx,
        Tool::ExecuteWorkflow,
        call,
        timeout_s,
        work,
    )
    .await
}

pub(super) async fn invoke_skill(
    app: &App,
    session: &Session,
    ctx: &CallCtx,
    call: &CallParams,
    args: InvokeSkillArgs,
) -> Result<Value, DomainError> {
    let Some(skill) = app.ports().skills.get(&args.skill).await? else {
        return Err(DomainError::invalid_at("unknown skill", "/skill")
            .with_hint("List the available skills with cyberos.skill.list_skills."));
    };
    let timeout_s = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    let inputs = json_text(&Value::Object(args.inputs));
    let work = |deadline| {
        Work::Skill(SkillRun {
            skill,
            inputs,
            deadline,
        })
    };
    launch(app, session, ctx, Tool::InvokeSkill, call, timeout_s, work).await
}

/// Unknown persona/workflow ids are refused before a task exists (the CUO catalogue is
/// asked each time; it answers from memory in the bundled runner).
async fn check_workflow_exists(
    app: &App,
    ctx: &CallCtx,
    persona: &str,
    workflow: &str,
) -> Result<(), DomainError> {
    let workflows = app.ports().cuo.list_workflows(ctx, Some(persona)).await?;
    if workflows.iter().any(|w| w.id == workflow) {
        return Ok(());
    }
    Err(DomainError::invalid_at(
        format!("unknown workflow for persona '{persona}'"),
        "/workflow",
    )
    .with_hint("List the persona's workflows with cyberos.cuo.list_workflows."))
}

/// Creates and starts the task. The run's deadline and the task's `timeout_at` are one
/// instant: `timeout_s` after the task's creation.
async fn launch(
    app: &App,
    session: &Session,
    ctx: &CallCtx,
    tool: Tool,
    call: &CallParams,
    timeout_s: u64,
    work: impl FnOnce(Timestamp) -> Work,
) -> Result<Value, DomainError> {
    let now = app.ports().clock.now();
    let timeout_at = now.plus_millis((timeout_s * 1000) as i64);
    let ttl = granted_ttl_ms(
        call.task
            .as_ref()
            .and_then(|t| t.get("ttl"))
            .and_then(Value::as_i64),
    );
    let task = Task {
        id: TaskId::from_random([0; 16]),
        tenant: ctx.tenant,
        tool,
        status: TaskStatus::Running,
        output: None,
        failure: None,
        status_message: Some("started".into()),
        trace_id: ctx.trace_id,
        created_at: now,
        updated_at: now,
        timeout_at,
        expires_at: now.plus_millis(ttl),
    };
    let progress = call
        .meta
        .get("progressToken")
        .cloned()
        .map(|token| ProgressTarget {
            outbound: session.outbound(),
            token,
        });
    let input = JsonText::from_serialized(call.arguments.to_string());
    let task = app
        .runner()
        .start(ctx.clone(), task, input, work(timeout_at), progress)
        .await?;
    if call.task.is_some() {
        let handle = format!(
            "Started {} as task {}; poll tasks/get and fetch the result with tasks/result.",
            tool.name(),
            task.id
        );
        return Ok(json!({
            "task": tasks::spec_task(&task),
            "_meta": {"io.modelcontextprotocol/model-immediate-response": handle}
        }));
    }
    match app.settings().long_running {
        LongRunning::Handle => {
            let handle = json!({"task_id": task.id.to_string(), "status": "running"});
            Ok(structured(handle))
        }
        LongRunning::Wait => {
            let done = app.runner().wait_terminal(&task.tenant, task.id).await?;
            task_result(&done)
        }
    }
}

/// What the original call would have returned, for a terminal task.
pub(crate) fn task_result(task: &Task) -> Result<Value, DomainError> {
    match task.status {
        TaskStatus::Completed => {
            let output = task
                .output
                .as_ref()
                .map(crate::app::tools::json_value)
                .transpose()?
                .unwrap_or(Value::Null);
            Ok(structured(output))
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
