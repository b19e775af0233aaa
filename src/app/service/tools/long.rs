//! The two long-running tools: their arguments and checks; `tasks::launch` runs them.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::app::App;
use crate::app::service::caller::Caller;
use crate::app::service::output::json_text;
use crate::app::service::request::{CallOutcome, ToolCall};
use crate::app::service::tasks::{Work, launch};
use crate::app::service::tools::registry::violation;
use crate::domain::task::DEFAULT_TIMEOUT_S;
use crate::domain::{CallCtx, DomainError, Tool};
use crate::ports::{SkillRun, WorkflowRun};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct ExecuteWorkflowArgs {
    persona: String,
    workflow: String,
    #[serde(default)]
    inputs: Map<String, Value>,
    timeout_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct InvokeSkillArgs {
    skill: String,
    #[serde(default)]
    inputs: Map<String, Value>,
    timeout_s: Option<u64>,
}

pub(in crate::app::service) async fn execute_workflow(
    app: &App,
    caller: &dyn Caller,
    ctx: &CallCtx,
    call: ToolCall<'_>,
    args: ExecuteWorkflowArgs,
) -> Result<CallOutcome, DomainError> {
    let inputs = Value::Object(args.inputs);
    check_workflow(app, ctx, &args.persona, &args.workflow, &inputs).await?;
    let timeout_s = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    let inputs = json_text(&inputs);
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
        caller,
        ctx,
        Tool::ExecuteWorkflow,
        call,
        timeout_s,
        work,
    )
    .await
}

pub(in crate::app::service) async fn invoke_skill(
    app: &App,
    caller: &dyn Caller,
    ctx: &CallCtx,
    call: ToolCall<'_>,
    args: InvokeSkillArgs,
) -> Result<CallOutcome, DomainError> {
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
    launch(app, caller, ctx, Tool::InvokeSkill, call, timeout_s, work).await
}

/// The workflow exists for the persona and `inputs` match its `input_schema`: checked
/// before a task exists, so a run that could only fail is never started or stored
/// (against the cached catalogue, `workflows.rs`).
async fn check_workflow(
    app: &App,
    ctx: &CallCtx,
    persona: &str,
    workflow: &str,
    inputs: &Value,
) -> Result<(), DomainError> {
    let found = app
        .workflows()
        .schema(app.ports().cuo.as_ref(), ctx, persona, workflow)
        .await?;
    let Some(schema) = found else {
        return Err(DomainError::invalid_at(
            format!("unknown workflow for persona '{persona}'"),
            "/workflow",
        )
        .with_hint("List the persona's workflows with cyberos.cuo.list_workflows."));
    };
    let validator = schema
        .as_ref()
        .as_ref()
        .map_err(|why| super::workflows::broken(why))?;
    match validator.iter_errors(inputs).next() {
        None => Ok(()),
        Some(error) => {
            let (message, pointer) = violation(&error, "/inputs");
            Err(DomainError::invalid_at(message, pointer).with_hint(
                "Fix the inputs to match the workflow's input_schema (see cyberos.cuo.list_workflows).",
            ))
        }
    }
}
