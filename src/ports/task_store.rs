use crate::domain::task::{Task, TaskFailure, TaskStatus};
use crate::domain::{DomainError, JsonText, TaskId, TenantId, Timestamp};

/// A task to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The record, with status `Running`.
    pub task: Task,
    /// The tool arguments, kept for audit and re-runs.
    pub input: JsonText,
}

/// A page of tasks, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPage {
    /// The tasks.
    pub tasks: Vec<Task>,
    /// Cursor for the next page.
    pub next_cursor: Option<String>,
}

/// Durable task storage, partitioned by tenant: every method takes the tenant, so a
/// cross-tenant read cannot be written by accident.
#[async_trait::async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new running task. Returns `false` when the id is already taken (the caller
    /// retries with a fresh id).
    ///
    /// # Errors
    /// MUST return `UpstreamUnavailable` when the store is down.
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError>;

    /// One task of `tenant`.
    ///
    /// # Errors
    /// MUST return `InputValidation` "task not found" when `id` does not exist for
    /// `tenant`, identical for another tenant's task; `UpstreamUnavailable` when down.
    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError>;

    /// A page of `tenant`'s tasks.
    ///
    /// # Errors
    /// MUST return `InputValidation` for a cursor it did not issue; `UpstreamUnavailable`
    /// when down.
    async fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, DomainError>;

    /// Moves a running task to a terminal status, only if it is still running. Returns the
    /// task as stored afterwards (so a caller sees `cancelled` if it lost the race).
    ///
    /// # Errors
    /// As for [`TaskStore::get`].
    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        status: TaskStatus,
        output: Option<&JsonText>,
        failure: Option<&TaskFailure>,
        now: Timestamp,
    ) -> Result<Task, DomainError>;

    /// Records the latest progress message of a running task.
    ///
    /// # Errors
    /// As for [`TaskStore::get`].
    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        message: &str,
        now: Timestamp,
    ) -> Result<(), DomainError>;

    /// Whether the store answers.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when it does not.
    async fn check(&self) -> Result<(), DomainError>;
}
