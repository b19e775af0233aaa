use crate::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry};
use crate::domain::{CallCtx, DomainError};

/// The tenant-scoped, append-only audit log.
#[async_trait::async_trait]
pub trait MemoryClient: Send + Sync + 'static {
    /// Appends one entry for `ctx.tenant`, attributed to `ctx.actor` and `ctx.trace_id`.
    /// Appending twice with the same `idempotency_key` records one entry and returns the
    /// same receipt.
    ///
    /// # Errors
    /// MUST return `UpstreamUnavailable` when the log is down, slow (5 s), or answers
    /// something malformed or oversized.
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        idempotency_key: &str,
    ) -> Result<AuditReceipt, DomainError>;

    /// One entry of `ctx.tenant`.
    ///
    /// # Errors
    /// MUST return `InputValidation` with the message "audit entry not found" and nothing
    /// echoed when the id does not exist for the tenant (including other tenants' ids);
    /// `UpstreamUnavailable` as for [`MemoryClient::append`].
    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError>;

    /// A page of `ctx.tenant`'s entries, newest first.
    ///
    /// # Errors
    /// MUST return `InputValidation` for a cursor it did not issue;
    /// `UpstreamUnavailable` as for [`MemoryClient::append`].
    async fn list(&self, ctx: &CallCtx, query: &AuditQuery) -> Result<AuditPage, DomainError>;

    /// Whether the log answers.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when it does not.
    async fn check(&self) -> Result<(), DomainError>;
}
