use crate::domain::cuo::{Persona, Progress, Route, Workflow, WorkflowOutcome};
use crate::domain::skill::Skill;
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp};

/// A workflow to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRun {
    /// Persona id.
    pub persona: String,
    /// Workflow id.
    pub workflow: String,
    /// Inputs, a JSON object.
    pub inputs: JsonText,
    /// When the run must be over.
    pub deadline: Timestamp,
}

/// A skill to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRun {
    /// The skill, as indexed.
    pub skill: Skill,
    /// Inputs, a JSON object.
    pub inputs: JsonText,
    /// When the run must be over.
    pub deadline: Timestamp,
}

/// Receives progress reports while a long call runs. Must not block.
pub trait ProgressSink: Send + Sync {
    /// One report; reports arrive in order.
    fn report(&self, progress: Progress);
}

/// The CUO orchestrator: personas, workflows, routing, and runs.
///
/// Every call carries the caller's [`CallCtx`] (tenant, actor, trace) upstream; the
/// client's token never leaves the bridge.
#[async_trait::async_trait]
pub trait CuoRunner: Send + Sync + 'static {
    /// All personas.
    ///
    /// # Errors
    /// MUST return `UpstreamUnavailable` when the orchestrator cannot be reached, crashes,
    /// hangs past the call timeout or answers something malformed.
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError>;

    /// All workflows, or one persona's.
    ///
    /// # Errors
    /// MUST return `InputValidation` for an unknown persona; `UpstreamUnavailable` as for
    /// [`CuoRunner::list_personas`].
    async fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError>;

    /// The best persona/workflow for `query`, with up to `limit - 1` alternates.
    ///
    /// # Errors
    /// As for [`CuoRunner::list_personas`].
    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError>;

    /// Runs a workflow to completion in its own child, reporting progress. Dropping the
    /// future kills the run.
    ///
    /// # Errors
    /// MUST return `InputValidation` for an unknown persona/workflow or bad inputs;
    /// `UpstreamUnavailable` for a crash, garbage, or an error reply;
    /// `Internal` with a timeout hint when the deadline passes.
    async fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError>;

    /// Runs a skill to completion in its own child. Returns `{output, artifacts}` as JSON.
    ///
    /// # Errors
    /// As for [`CuoRunner::execute_workflow`].
    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError>;

    /// Whether the orchestrator answers.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when it does not.
    async fn check(&self) -> Result<(), DomainError>;
}
