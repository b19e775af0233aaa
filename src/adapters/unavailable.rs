//! The honest answer for an upstream that is not available (not configured in this build,
//! or failed to open at startup): every call is `upstream_unavailable` with a hint saying
//! why, and `check` reports it.

use std::time::Duration;

use crate::domain::approval::{Approval, ApprovalId, CallBinding, PageSecret, SecretKind, Settled};
use crate::domain::cuo::{Persona, Route, Workflow, WorkflowOutcome};
use crate::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry};
use crate::domain::session::{ClientAnswer, QuestionKey};
use crate::domain::task::Task;
use crate::domain::{CallCtx, DomainError, JsonText, TaskId, TenantId, Timestamp, Upstream};
use crate::ports::{
    Approvals, ClientAnswers, ConfirmationLedger, CuoRunner, Finished, MemoryClient, NewTask,
    ProgressEntry, ProgressSink, SkillRun, SweepReport, TaskOutcome, TaskPage, TaskStore,
    WorkflowRun,
};

/// An upstream that cannot be used, and why.
#[derive(Debug, Clone)]
pub struct Unavailable {
    upstream: Upstream,
    hint: String,
}

impl Unavailable {
    /// `upstream` is unavailable; `hint` tells the user what to do.
    pub fn new(upstream: Upstream, hint: impl Into<String>) -> Unavailable {
        Unavailable {
            upstream,
            hint: hint.into(),
        }
    }

    fn err<T>(&self) -> Result<T, DomainError> {
        Err(DomainError::unavailable(self.upstream, None).with_hint(self.hint.clone()))
    }
}

#[async_trait::async_trait]
impl CuoRunner for Unavailable {
    async fn list_personas(&self, _: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        self.err()
    }
    async fn list_workflows(
        &self,
        _: &CallCtx,
        _: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        self.err()
    }
    async fn route(&self, _: &CallCtx, _: &str, _: u8) -> Result<Route, DomainError> {
        self.err()
    }
    async fn execute_workflow(
        &self,
        _: &CallCtx,
        _: &WorkflowRun,
        _: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        self.err()
    }
    async fn invoke_skill(
        &self,
        _: &CallCtx,
        _: &SkillRun,
        _: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        self.err()
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.err()
    }
}

#[async_trait::async_trait]
impl MemoryClient for Unavailable {
    async fn append(
        &self,
        _: &CallCtx,
        _: &NewAuditEntry,
        _: &str,
    ) -> Result<AuditReceipt, DomainError> {
        self.err()
    }
    async fn get(&self, _: &CallCtx, _: &str) -> Result<AuditEntry, DomainError> {
        self.err()
    }
    async fn list(&self, _: &CallCtx, _: &AuditQuery) -> Result<AuditPage, DomainError> {
        self.err()
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.err()
    }
}

#[async_trait::async_trait]
impl TaskStore for Unavailable {
    async fn create(&self, _: &NewTask) -> Result<bool, DomainError> {
        self.err()
    }
    async fn get(&self, _: &TenantId, _: TaskId) -> Result<Task, DomainError> {
        self.err()
    }
    async fn list(&self, _: &TenantId, _: Option<&str>, _: u32) -> Result<TaskPage, DomainError> {
        self.err()
    }
    async fn finish(
        &self,
        _: &TenantId,
        _: TaskId,
        _: &TaskOutcome,
        _: Timestamp,
    ) -> Result<Finished, DomainError> {
        self.err()
    }
    async fn record_progress(
        &self,
        _: &TenantId,
        _: TaskId,
        _: &ProgressEntry,
        _: Timestamp,
    ) -> Result<(), DomainError> {
        self.err()
    }
    async fn progress_after(
        &self,
        _: &TenantId,
        _: TaskId,
        _: u64,
        _: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        self.err()
    }
    async fn renew_leases(&self, _: &str, _: &[TaskId], _: Timestamp) -> Result<(), DomainError> {
        self.err()
    }
    async fn stopped_among(&self, _: &str, _: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        self.err()
    }
    async fn sweep(&self, _: Timestamp) -> Result<SweepReport, DomainError> {
        self.err()
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.err()
    }
}

#[async_trait::async_trait]
impl ConfirmationLedger for Unavailable {
    async fn claim(&self, _: &TenantId, _: &str, _: Timestamp) -> Result<bool, DomainError> {
        self.err()
    }

    async fn used(&self, _: &TenantId, _: &str) -> Result<bool, DomainError> {
        self.err()
    }
}

#[async_trait::async_trait]
impl ClientAnswers for Unavailable {
    async fn open(
        &self,
        _: &TenantId,
        _: &str,
        _: &QuestionKey,
        _: Duration,
    ) -> Result<bool, DomainError> {
        self.err()
    }

    async fn deliver(
        &self,
        _: &TenantId,
        _: &QuestionKey,
        _: &ClientAnswer,
    ) -> Result<bool, DomainError> {
        self.err()
    }

    async fn wait(
        &self,
        _: &TenantId,
        _: &QuestionKey,
        _: Duration,
    ) -> Result<Option<ClientAnswer>, DomainError> {
        self.err()
    }

    async fn sweep(&self, _: Timestamp) -> Result<u64, DomainError> {
        self.err()
    }
}

#[async_trait::async_trait]
impl Approvals for Unavailable {
    async fn settle(&self, _: &CallBinding) -> Result<Option<Settled>, DomainError> {
        self.err()
    }

    async fn request(
        &self,
        _: &CallBinding,
        _: ApprovalId,
        _: &str,
    ) -> Result<Option<ApprovalId>, DomainError> {
        self.err()
    }

    async fn find(&self, _: &ApprovalId) -> Result<Option<Approval>, DomainError> {
        self.err()
    }

    async fn decide(
        &self,
        _: &TenantId,
        _: &ApprovalId,
        _: &str,
        _: bool,
    ) -> Result<bool, DomainError> {
        self.err()
    }

    async fn keep_secret(&self, _: &PageSecret) -> Result<(), DomainError> {
        self.err()
    }

    async fn take_secret(&self, _: SecretKind, _: &str) -> Result<Option<PageSecret>, DomainError> {
        self.err()
    }

    async fn sweep(&self) -> Result<u64, DomainError> {
        self.err()
    }
}
