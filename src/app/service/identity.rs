//! Who a request runs as: every request presents its own token and is authorised by it
//! (CONTRACT §5); a token verified before is remembered by the verifier until it expires
//! or the key set changes (`adapters::jwt`).
//!
//! Over stdio the token comes from `--token-file` (re-read on every request, so a host
//! can rotate it), else `CYBEROS_TOKEN`, else the `--dev` token: the first that is set
//! wins, with no fallback when it fails verification.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::{DomainError, Principal, TokenRejection, TraceId};
use crate::ports::TokenVerifier;

/// The tenant of `--dev` tokens.
pub const LOCAL_TENANT: &str = "00000000-0000-4000-8000-000000000001";
/// The subject of `--dev` tokens.
pub const LOCAL_SUBJECT: &str = "local-dev";

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
    refusals: Arc<Refusals>,
}

/// Refused-token log lines allowed per second: a flood of bad tokens must not become a
/// flood of log lines.
const REFUSALS_PER_SECOND: u32 = 5;

/// The refused-token log lines of the current one-second window, and those suppressed
/// since the last line (reported on the next one).
#[derive(Default)]
struct Refusals(Mutex<Option<Window>>);

struct Window {
    start: Instant,
    logged: u32,
    suppressed: u64,
}

impl Identity {
    /// An identity checking tokens with `verifier`.
    pub fn new(verifier: Arc<dyn TokenVerifier>, stdio: StdioToken) -> Identity {
        Identity {
            verifier,
            stdio,
            refusals: Arc::default(),
        }
    }

    /// Logs a refused bearer token, in one line, at most [`REFUSALS_PER_SECOND`] a
    /// second; a line after suppressed ones says how many.
    pub fn log_refusal(&self, err: &DomainError, trace: TraceId) {
        let now = Instant::now();
        let suppressed = {
            // Never held across an await; a poisoned window is still a valid window.
            let mut window = self.refusals.0.lock().unwrap_or_else(|e| e.into_inner());
            let w = window.get_or_insert(Window {
                start: now,
                logged: 0,
                suppressed: 0,
            });
            if now.duration_since(w.start) >= Duration::from_secs(1) {
                w.start = now;
                w.logged = 0;
            }
            if w.logged >= REFUSALS_PER_SECOND {
                w.suppressed += 1;
                return;
            }
            w.logged += 1;
            std::mem::take(&mut w.suppressed)
        };
        if suppressed > 0 {
            tracing::info!(class = %err.class(), trace_id = %trace, suppressed, "token refused: {err}");
        } else {
            tracing::info!(class = %err.class(), trace_id = %trace, "token refused: {err}");
        }
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
            // Read in place: a token file is a few hundred bytes on a local disk, which
            // `std::fs` reads in three system calls, where `tokio::fs` hands each read to
            // a blocking thread and back (two thread wake-ups per call).
            StdioToken::File(path) => match std::fs::read_to_string(path) {
                Ok(token) => self.verifier.verify_recurring(token.trim()).await,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot read --token-file: {e}");
                    Err(DomainError::denied(
                        "authentication required",
                        "The bridge cannot read its --token-file; write a fresh token there and retry.",
                    ))
                }
            },
            StdioToken::Literal(token) => self.verifier.verify_recurring(token).await,
            StdioToken::None => {
                tracing::debug!(reason = %TokenRejection::Missing.reason(), "token rejected");
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
