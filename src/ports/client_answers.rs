use std::time::Duration;

use crate::domain::session::{ClientAnswer, QuestionKey};
use crate::domain::{DomainError, TenantId, Timestamp};

/// Where a client's answer to one of our requests (an elicitation sent on an HTTP
/// response's SSE stream) meets the request waiting for it, which may run on another
/// instance: the answer arrives as a POST of its own, anywhere behind the balancer.
///
/// A question is opened before it is sent, answered at most once, and closed by its
/// waiter; everything is scoped to the tenant, so no delivery of one tenant reaches
/// another's waiter.
#[async_trait::async_trait]
pub trait ClientAnswers: Send + Sync + 'static {
    /// Opens question `key` of `tenant`, asked of `subject`, answerable for `open_for`;
    /// `false` (nothing recorded) when the subject already has
    /// [`MAX_OPEN_QUESTIONS`](crate::domain::session::MAX_OPEN_QUESTIONS) open, or the
    /// tenant [`MAX_OPEN_QUESTIONS_PER_TENANT`](crate::domain::session::MAX_OPEN_QUESTIONS_PER_TENANT).
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn open(
        &self,
        tenant: &TenantId,
        subject: &str,
        key: &QuestionKey,
        open_for: Duration,
    ) -> Result<bool, DomainError>;

    /// Records `answer` to the open, unanswered question `key` of `tenant` and wakes its
    /// waiter; `false` when there is none (never asked, another session's or tenant's,
    /// answered already, closed or expired).
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn deliver(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        answer: &ClientAnswer,
    ) -> Result<bool, DomainError>;

    /// Waits up to `within` for the answer to `key` of `tenant`, then closes the question
    /// either way (a later delivery gets `false`); `None` when no answer came.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn wait(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        within: Duration,
    ) -> Result<Option<ClientAnswer>, DomainError>;

    /// Deletes every tenant's questions that expired before `now` (their waiter died with
    /// its instance, so nobody closes them) and returns how many.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn sweep(&self, now: Timestamp) -> Result<u64, DomainError>;
}
