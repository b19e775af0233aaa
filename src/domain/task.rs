//! Tasks: the status state machine and the stored record.

use crate::domain::{
    DomainError, ErrorClass, JsonText, TaskId, TenantId, Timestamp, Tool, TraceId,
};

/// The seed's statuses; the spec door maps `Running` to `working` at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Created and not yet finished.
    Running,
    /// Finished with a result.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled by the caller.
    Cancelled,
}

impl TaskStatus {
    /// Stored and seed-wire form.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<TaskStatus> {
        [
            TaskStatus::Running,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }

    /// Whether no further transition is possible.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Running)
    }

    /// Status only moves forward: from `Running` to any terminal status, and never out of
    /// a terminal one (so a finishing worker cannot overwrite `Cancelled`). The task stores
    /// check every `finish` against it; their conditional update settles races.
    pub fn transition(self, to: TaskStatus) -> Result<TaskStatus, IllegalTransition> {
        match (self, to) {
            (TaskStatus::Running, t) if t.is_terminal() => Ok(t),
            (from, to) => Err(IllegalTransition { from, to }),
        }
    }
}

/// A status change the state machine forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {} task cannot become {}", from.as_str(), to.as_str())]
pub struct IllegalTransition {
    /// Current status.
    pub from: TaskStatus,
    /// Requested status.
    pub to: TaskStatus,
}

/// The failure recorded on a failed task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    /// Error class.
    pub class: ErrorClass,
    /// User-safe message.
    pub message: String,
    /// What to do.
    pub hint: String,
}

/// Default run time limit of a task, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 600;
/// Default retention of a task, in milliseconds (24 h).
pub const DEFAULT_TTL_MS: i64 = 24 * 3600 * 1000;
/// Longest retention granted, in milliseconds (7 days).
pub const MAX_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// Most bytes of tool arguments stored with a task. A workflow's fields are capped at
/// 4000 characters each by its schema; nothing a task needs comes near this.
pub const MAX_STORED_INPUT_BYTES: usize = 64 * 1024;
/// Most bytes of a task's result kept in the store.
pub const MAX_STORED_OUTPUT_BYTES: usize = 1024 * 1024;
/// Most entries of one task's progress log kept (the newest): what a resumed stream can
/// replay. A client further behind than this misses the oldest steps, not the result.
pub const PROGRESS_LOG_MAX: u32 = 256;

/// Whether appending step `seq` can take a task's progress log past
/// [`PROGRESS_LOG_MAX`] entries, so the store must trim it. Steps are recorded only when
/// they pass the last one, so a log whose newest step is below the cap holds at most the
/// distinct steps 0..seq: no more than the cap.
#[must_use]
pub fn progress_log_needs_trim(seq: u64) -> bool {
    seq >= u64::from(PROGRESS_LOG_MAX)
}
/// Default most tasks (any status, until their retention ends) one tenant may have stored.
pub const DEFAULT_MAX_STORED_PER_TENANT: u32 = 1000;
/// A task that failed within this long of its creation failed at once (a refused start,
/// an input the workflow rejects)...
pub const QUICK_FAILURE_MS: i64 = 10_000;
/// ...and is kept this long after it failed, not for its whole ttl.
pub const QUICK_FAILURE_RETENTION_MS: i64 = 3600 * 1000;

/// The error for task arguments of `len` bytes, over [`MAX_STORED_INPUT_BYTES`].
pub fn input_too_large(len: usize) -> DomainError {
    DomainError::invalid_at(
        format!(
            "the arguments are too large to keep with a task ({len} bytes, at most {MAX_STORED_INPUT_BYTES})"
        ),
        "/inputs",
    )
    .with_hint("Pass large content by reference (a path or an id) instead of inline.")
}

/// The failure recorded for a run whose result of `len` bytes is over
/// [`MAX_STORED_OUTPUT_BYTES`].
pub fn output_too_large(len: usize) -> TaskFailure {
    TaskFailure {
        class: ErrorClass::UpstreamUnavailable,
        message: "the task's result is too large to keep".into(),
        hint: format!(
            "The run produced {len} bytes, more than the {MAX_STORED_OUTPUT_BYTES} a task keeps; ask an operator to make the workflow or skill return less (a reference to its output)."
        ),
    }
}

/// The refusal when a tenant already has `max` tasks stored.
pub fn stored_quota_reached(max: u32) -> DomainError {
    DomainError::UpstreamUnavailable {
        upstream: crate::domain::Upstream::TaskStore,
        message: "too many stored tasks".into(),
        hint: format!(
            "You have {max} tasks kept, the most this bridge keeps per tenant; finished tasks are deleted when their ttl ends (pass a shorter params.task.ttl), then retry."
        ),
        retry_after: Some(std::time::Duration::from_secs(60)),
        source: None,
    }
}

/// The retention granted for a requested `ttl` (ms): the default when absent, capped.
pub fn granted_ttl_ms(requested: Option<i64>) -> i64 {
    requested.unwrap_or(DEFAULT_TTL_MS).clamp(1000, MAX_TTL_MS)
}

/// The failure recorded when a run passes its deadline.
pub fn timed_out(timeout_s: u64) -> TaskFailure {
    TaskFailure {
        class: ErrorClass::Internal,
        message: "the task timed out".into(),
        hint: format!(
            "It ran longer than its timeout of {timeout_s} s; run it again with a longer timeout_s if the work needs it."
        ),
    }
}

/// How long past its `timeout_at` a task may stay `running` before any instance's sweep
/// fails it, in milliseconds. The run's own deadline backstop fires 5 s past `timeout_at`
/// and its outcome write is retried until this grace ends, so the sweep only ends tasks
/// whose outcome was lost (a store outage that outlasted the grace, a bug).
pub const OVERDUE_GRACE_MS: i64 = 60_000;

/// The failure the sweep records on a task still `running` past `timeout_at` plus
/// [`OVERDUE_GRACE_MS`] (the Postgres sweep writes the same texts).
pub fn overdue() -> TaskFailure {
    TaskFailure {
        class: ErrorClass::Internal,
        message: "the task timed out".into(),
        hint: "It passed its timeout and its outcome was never recorded; run it again.".into(),
    }
}

/// The failure recorded on a run that panicked (a bug in the bridge or an adapter).
pub fn panicked() -> TaskFailure {
    TaskFailure {
        class: ErrorClass::Internal,
        message: "the task failed unexpectedly".into(),
        hint: "The bridge hit an internal error while running the task; run it again, and report it if it persists.".into(),
    }
}

/// The failure recorded when the instance running a task died.
pub fn orphaned() -> TaskFailure {
    TaskFailure {
        class: ErrorClass::Internal,
        message: "the bridge running the task stopped".into(),
        hint: "The bridge restarted while the task ran; run it again.".into(),
    }
}

impl TaskFailure {
    /// The error a plain call would have answered.
    pub fn to_error(&self) -> crate::domain::DomainError {
        use crate::domain::{DomainError, Upstream};
        let (message, hint) = (self.message.clone(), self.hint.clone());
        match self.class {
            ErrorClass::InputValidation => DomainError::InputValidation {
                message,
                pointer: None,
                hint,
            },
            ErrorClass::AuthzDenied => DomainError::AuthzDenied {
                message,
                hint,
                missing_scopes: Vec::new(),
                step_up: Vec::new(),
            },
            ErrorClass::UpstreamUnavailable => DomainError::UpstreamUnavailable {
                retry_after: None,
                upstream: Upstream::Cuo,
                message,
                hint,
                source: None,
            },
            ErrorClass::Internal => DomainError::Internal {
                message,
                hint,
                source: None,
            },
        }
    }
}

/// A stored task as the tenant sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Its id.
    pub id: TaskId,
    /// Owner tenant.
    pub tenant: TenantId,
    /// The tool that created it.
    pub tool: Tool,
    /// Current status.
    pub status: TaskStatus,
    /// The tool's final `structuredContent`, when completed.
    pub output: Option<JsonText>,
    /// Why it failed.
    pub failure: Option<TaskFailure>,
    /// Last progress message, if any.
    pub status_message: Option<String>,
    /// Trace of the call that created it.
    pub trace_id: TraceId,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// When it is failed for running too long.
    pub timeout_at: Timestamp,
    /// When it may be deleted.
    pub expires_at: Timestamp,
}

impl Task {
    /// Run time so far, or in total once terminal.
    pub fn duration_ms(&self) -> u64 {
        self.updated_at.millis_since(self.created_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    #[test]
    fn a_running_task_can_reach_every_terminal_status() {
        for to in [Completed, Failed, Cancelled] {
            assert_eq!(Running.transition(to), Ok(to));
        }
    }

    #[test]
    fn terminal_statuses_are_sticky() {
        for from in [Completed, Failed, Cancelled] {
            for to in [Running, Completed, Failed, Cancelled] {
                assert_eq!(from.transition(to), Err(IllegalTransition { from, to }));
            }
        }
        assert!(Running.transition(Running).is_err());
    }

    #[test]
    fn ttl_requests_are_defaulted_and_capped() {
        assert_eq!(granted_ttl_ms(None), DEFAULT_TTL_MS);
        assert_eq!(granted_ttl_ms(Some(60_000)), 60_000);
        assert_eq!(granted_ttl_ms(Some(i64::MAX)), MAX_TTL_MS);
        assert_eq!(granted_ttl_ms(Some(0)), 1000);
    }

    #[test]
    fn statuses_round_trip_through_their_stored_form() {
        for st in [Running, Completed, Failed, Cancelled] {
            assert_eq!(TaskStatus::parse(st.as_str()), Some(st));
        }
        assert_eq!(TaskStatus::parse("working"), None);
    }

    #[test]
    fn a_progress_log_is_trimmed_only_once_its_steps_can_pass_the_cap() {
        // Up to step 255 a log holds at most the 256 steps 0..=255: nothing to trim.
        assert!(!progress_log_needs_trim(0));
        assert!(!progress_log_needs_trim(u64::from(PROGRESS_LOG_MAX) - 1));
        // Step 256 may be the 257th entry (0..=256).
        assert!(progress_log_needs_trim(u64::from(PROGRESS_LOG_MAX)));
        assert!(progress_log_needs_trim(u64::MAX));
    }
}
