//! Who a request runs as: a verified token on every request, nothing cached between
//! requests (CONTRACT §5).
//!
//! Over stdio the token comes from `--token-file` (re-read on every request, so a host
//! can rotate it), else `CYBEROS_TOKEN`, else the `--dev` token: the first that is set
//! wins, with no fallback when it fails verification.

use std::path::PathBuf;
use std::sync::Arc;

use crate::domain::{DomainError, Principal, TokenRejection};
use crate::ports::TokenVerifier;

/// The tenant of `--dev` tokens.
pub const LOCAL_TENANT: &str = "00000000-0000-4000-8000-000000000001";

/// Where the stdio token comes from.
#[derive(Clone)]
pub enum StdioToken {
    /// `--token-file`, read on every request.
    File(PathBuf),
    /// `CYBEROS_TOKEN` or the `--dev` token.
    Literal(String),
    /// Nothing configured.
    None,
}

impl std::fmt::Debug for StdioToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StdioToken::File(p) => write!(f, "File({})", p.display()),
            StdioToken::Literal(_) => f.write_str("Literal(<redacted>)"),
            StdioToken::None => f.write_str("None"),
        }
    }
}

/// Token verification plus the stdio token source.
#[derive(Clone)]
pub struct Identity {
    verifier: Arc<dyn TokenVerifier>,
    stdio: StdioToken,
}

impl Identity {
    /// An identity checking tokens with `verifier`.
    pub fn new(verifier: Arc<dyn TokenVerifier>, stdio: StdioToken) -> Identity {
        Identity { verifier, stdio }
    }

    /// The verifier, also used for confirmation tokens.
    pub fn verifier(&self) -> &dyn TokenVerifier {
        self.verifier.as_ref()
    }

    /// The principal of a stdio request.
    ///
    /// # Errors
    /// `AuthzDenied` when no token is configured, the token file cannot be read, or the
    /// token does not verify.
    pub async fn stdio_principal(&self) -> Result<Principal, DomainError> {
        match &self.stdio {
            StdioToken::File(path) => match tokio::fs::read_to_string(path).await {
                Ok(token) => self.verifier.verify(token.trim()).await,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot read --token-file: {e}");
                    Err(DomainError::denied(
                        "authentication required",
                        "The bridge cannot read its --token-file; write a fresh token there and retry.",
                    ))
                }
            },
            StdioToken::Literal(token) => self.verifier.verify(token).await,
            StdioToken::None => {
                tracing::info!(reason = %TokenRejection::Missing.reason(), "token rejected");
                Err(TokenRejection::Missing.into_error())
            }
        }
    }

    /// The principal of an HTTP request's bearer token.
    ///
    /// # Errors
    /// As for [`Identity::stdio_principal`].
    pub async fn bearer_principal(&self, token: Option<&str>) -> Result<Principal, DomainError> {
        match token {
            Some(t) => self.verifier.verify(t).await,
            None => Err(TokenRejection::Missing.into_error()),
        }
    }
}
