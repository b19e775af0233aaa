use crate::domain::confirm::ConfirmationClaims;
use crate::domain::{DomainError, Principal, TenantId, Timestamp};

/// Verifies bearer and confirmation tokens. Every request presents its token; a bearer
/// token verified before may be remembered (by the hash of its bytes, bounded, `exp` and
/// `nbf` checked on every use, forgotten when the key set changes); a confirmation token
/// never is.
#[async_trait::async_trait]
pub trait TokenVerifier: Send + Sync + 'static {
    /// The principal of a bearer token.
    ///
    /// # Errors
    /// MUST return `AuthzDenied` (via `TokenRejection`) for any token that is not a valid,
    /// unexpired JWT from an accepted issuer for this audience with a UUID `tenant_id`;
    /// `UpstreamUnavailable` only when no key could be obtained to check it.
    async fn verify(&self, token: &str) -> Result<Principal, DomainError>;

    /// [`TokenVerifier::verify`] for the token one caller presents on request after
    /// request (the stdio token): a verifier may keep what depends only on the token's
    /// bytes from one call to the next.
    ///
    /// # Errors
    /// As for [`TokenVerifier::verify`].
    async fn verify_recurring(&self, token: &str) -> Result<Principal, DomainError> {
        self.verify(token).await
    }

    /// The claims of a confirmation token, signature, issuer and expiry checked.
    ///
    /// # Errors
    /// As for [`TokenVerifier::verify`].
    async fn verify_confirmation(&self, token: &str) -> Result<ConfirmationClaims, DomainError>;
}

/// Remembers used confirmation-token ids until they expire, so each token works once.
#[async_trait::async_trait]
pub trait ConfirmationLedger: Send + Sync + 'static {
    /// Records `jti` for `tenant`; `false` when it was already used.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn claim(
        &self,
        tenant: &TenantId,
        jti: &str,
        expires_at: Timestamp,
    ) -> Result<bool, DomainError>;

    /// Whether `jti` is recorded for `tenant` and not yet expired (an ended HTTP session
    /// is recorded under its `ledger_key`).
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    async fn used(&self, tenant: &TenantId, jti: &str) -> Result<bool, DomainError>;
}
