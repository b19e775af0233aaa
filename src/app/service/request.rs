//! A tool call as the service takes it, and what it answers.

use serde_json::Value;

use super::caller::Progress;
use super::output::ToolOutput;
use crate::domain::DomainError;
use crate::domain::confirm::Confirmation;
use crate::domain::task::Task;

/// One tool call, as the service takes it.
pub struct ToolCall<'a> {
    /// The tool's name as sent (either spelling).
    pub name: &'a str,
    /// The arguments, an object.
    pub arguments: &'a Value,
    /// A confirmation the host sent with the call (a flag).
    pub confirmed: Option<Confirmation>,
    /// A single-use confirmation token sent with the call.
    pub confirmation_token: Option<&'a str>,
    /// The client asked for a task (`params.task`): its requested retention in ms, if any.
    pub task: Option<Option<i64>>,
    /// Where a run's progress goes, when the client asked to follow it.
    pub progress: Progress,
}

/// What a successful call returns.
#[derive(Debug)]
pub enum CallOutcome {
    /// The tool's output.
    Output(ToolOutput),
    /// A task was created for the call, as the client asked; the run goes on.
    Task(Task),
    /// The call waited for its task, which has ended (successfully or not).
    Finished(Task),
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// Refused before any tool ran (identity, an unknown tool): always a protocol error.
    Refused(DomainError),
    /// The tool failed.
    Failed(DomainError),
}
