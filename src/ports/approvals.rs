use crate::domain::approval::{Approval, ApprovalId, CallBinding, PageSecret, SecretKind, Settled};
use crate::domain::{DomainError, TenantId};

/// Approvals kept for users whose host cannot ask them (`domain::approval`), shared by
/// every instance on the store, and the approval page's one-time secrets. Times come from
/// the store's clock; every read and write but [`find`](Approvals::find),
/// [`take_secret`](Approvals::take_secret) and [`sweep`](Approvals::sweep) is scoped to
/// one tenant.
///
/// Every method fails with `UpstreamUnavailable` when the store is down.
#[async_trait::async_trait]
pub trait Approvals: Send + Sync + 'static {
    /// Consumes one decided, unexpired approval of exactly `binding`, if there is one:
    /// concurrent retries of one approved call see it once.
    async fn settle(&self, binding: &CallBinding) -> Result<Option<Settled>, DomainError>;

    /// The id of the pending, unexpired approval of `binding`, recording a new one (with
    /// `arguments`, the canonical JSON to show) when there is none; `None` (nothing
    /// recorded) when the subject already has
    /// [`MAX_PENDING_PER_SUBJECT`](crate::domain::approval::MAX_PENDING_PER_SUBJECT)
    /// pending.
    async fn request(
        &self,
        binding: &CallBinding,
        id: ApprovalId,
        arguments: &str,
    ) -> Result<Option<ApprovalId>, DomainError>;

    /// The approval `id`, of whichever tenant, if it has not expired: the page learns the
    /// tenant from it, then proves the person is its subject there.
    async fn find(&self, id: &ApprovalId) -> Result<Option<Approval>, DomainError>;

    /// Records the verdict of approval `id` of `tenant` by `subject`; `false` when it is
    /// not pending, expired, or not that subject's.
    async fn decide(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        subject: &str,
        approve: bool,
    ) -> Result<bool, DomainError>;

    /// Keeps a one-time secret of the page until it is taken or expires.
    async fn keep_secret(&self, secret: &PageSecret) -> Result<(), DomainError>;

    /// Takes (deletes and returns) the unexpired secret of `kind` whose value has
    /// `digest`: each works once.
    async fn take_secret(
        &self,
        kind: SecretKind,
        digest: &str,
    ) -> Result<Option<PageSecret>, DomainError>;

    /// Deletes every tenant's expired approvals and secrets; returns how many.
    async fn sweep(&self) -> Result<u64, DomainError>;
}
