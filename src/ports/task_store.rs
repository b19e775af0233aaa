use crate::domain::task::{Task, TaskFailure, TaskStatus};
use crate::domain::{DomainError, JsonText, TaskId, TenantId, Timestamp};

/// A task to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The record, with status `Running`.
    pub task: Task,
    /// The tool arguments, kept with the task.
    pub input: JsonText,
    /// The bridge instance that runs it.
    pub owner: String,
    /// Until when the owner's lease holds without a heartbeat.
    pub lease_until: Timestamp,
    /// How many tasks (any status) the tenant may have stored, this one included.
    pub max_stored: u32,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// A terminal status.
    pub status: TaskStatus,
    /// The tool's `structuredContent`, when completed.
    pub output: Option<JsonText>,
    /// Why it failed, when failed.
    pub failure: Option<TaskFailure>,
}

/// One progress report of a running task, as its log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressEntry {
    /// Its place in the task's log: strictly increasing over one run (the step).
    pub seq: u64,
    /// Total steps, when known.
    pub total: Option<u64>,
    /// What is happening (also the task's `statusMessage`).
    pub message: String,
}

/// What [`TaskStore::finish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The task as stored afterwards: when this update lost a race, the winner's status.
    pub task: Task,
    /// Whether this very update moved the task out of `running` (exactly one finisher of
    /// a task ever sees `true`).
    pub changed: bool,
}

/// A page of tasks, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPage {
    /// The tasks.
    pub tasks: Vec<Task>,
    /// Cursor for the next page.
    pub next_cursor: Option<String>,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Running tasks whose owner's lease expired, now failed.
    pub orphaned: u64,
    /// Running tasks past their `timeout_at` plus the grace, now failed.
    pub overdue: u64,
    /// Tasks past their retention, deleted.
    pub expired: u64,
}

/// Told when a task stops being `running` somewhere else (cancelled on another instance).
pub trait StopSink: Send + Sync {
    /// `id` is no longer running.
    fn stopped(&self, id: TaskId);
}

/// Durable task storage, partitioned by tenant: every per-task method takes the tenant,
/// so a cross-tenant read cannot be written by accident. The owner and sweep methods are
/// the documented non-tenant operations (CONTRACT §6), about the bridge's own instances.
#[async_trait::async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new running task. Returns `false` when the id is already taken (the caller
    /// retries with a fresh id). Counting the tenant's stored tasks and inserting are one
    /// atomic step, so concurrent creates cannot pass `max_stored` together.
    ///
    /// # Errors
    /// MUST return `UpstreamUnavailable` when the store is down, and
    /// [`crate::domain::task::stored_quota_reached`] when the tenant already has
    /// `max_stored` tasks stored.
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError>;

    /// One task of `tenant`.
    ///
    /// # Errors
    /// MUST return `InputValidation` "task not found" when `id` does not exist for
    /// `tenant`, identical for another tenant's task; `UpstreamUnavailable` when down.
    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError>;

    /// A page of `tenant`'s tasks, newest first.
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

    /// Moves a running task to the outcome's terminal status, only if it is still running
    /// (a terminal status is never overwritten). Returns the task as stored afterwards, so
    /// a caller that lost the race sees the winner's status, and whether this update was
    /// the one that made the change: of any number of concurrent finishers, exactly one
    /// is told `changed`.
    ///
    /// # Errors
    /// As for [`TaskStore::get`].
    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError>;

    /// Records a progress report of a running task: its message becomes the task's
    /// latest, and the entry is appended to the task's log, which keeps the newest
    /// [`crate::domain::task::PROGRESS_LOG_MAX`] entries and goes with the task. An entry
    /// whose `seq` is already logged is not logged again; a finished task records nothing.
    ///
    /// # Errors
    /// As for [`TaskStore::get`].
    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError>;

    /// The logged progress of `tenant`'s task `id` with `seq` above `after`, in order, at
    /// most `limit` entries. Empty for a task that does not exist for `tenant` (callers
    /// that must tell "not found" ask [`TaskStore::get`]).
    ///
    /// # Errors
    /// `UpstreamUnavailable` when down.
    async fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError>;

    /// Extends the lease of those of `ids` that `owner` runs and that are still running:
    /// the runs live on that instance. A row the instance no longer runs (its run ended,
    /// whatever became of the outcome) is not renewed, so its lease lapses and the sweep
    /// ends it.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when down.
    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[TaskId],
        until: Timestamp,
    ) -> Result<(), DomainError>;

    /// Which of `ids` (run by `owner`) are no longer running: cancelled elsewhere, or failed
    /// by a sweep.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when down.
    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError>;

    /// Fails running tasks whose owner's lease expired before `now` ("bridge restarted",
    /// [`crate::domain::task::orphaned`]), fails running tasks whose `timeout_at` plus
    /// [`crate::domain::task::OVERDUE_GRACE_MS`] is before `now` whatever their lease
    /// ([`crate::domain::task::overdue`]), and deletes finished tasks past their retention:
    /// their `expires_at`, or for a task that failed within
    /// [`crate::domain::task::QUICK_FAILURE_MS`] of its creation,
    /// [`crate::domain::task::QUICK_FAILURE_RETENTION_MS`] after it failed.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when down.
    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError>;

    /// Pushes stops to `sink` as they happen, when the store can (Postgres LISTEN/NOTIFY).
    /// Stores that cannot return at once; the runner polls [`TaskStore::stopped_among`]
    /// every second either way.
    async fn watch_stops(&self, sink: std::sync::Arc<dyn StopSink>) {
        let _ = sink;
    }

    /// Whether the store answers.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when it does not.
    async fn check(&self) -> Result<(), DomainError>;
}
