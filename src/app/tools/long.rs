//! The two long-running tools: their arguments and checks; `tasks::launch` runs them.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::app::App;
use crate::app::json::json_text;
use crate::app::rpc::CallParams;
use crate::app::session::Session;
use crate::app::tasks::{Work, launch};
use crate::domain::task::DEFAULT_TIMEOUT_S;
use crate::domain::{CallCtx, DomainError, Tool};
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
