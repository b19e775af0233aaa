//! The state every HTTP handler shares.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::limits::{Gauges, Limits};
use super::origin::OriginPolicy;
use crate::app::App;
use crate::app::service::tasks::SHUTDOWN_GRACE;

/// After SIGTERM, how long a request may still wait for its answer: the runs' grace, then
/// the time to kill and fail the rest and for their waiters to read that. Within the
/// transport's drain deadline.
pub(super) const LAST_CALL: Duration = SHUTDOWN_GRACE.saturating_add(Duration::from_secs(2));

/// State shared by every handler.
pub(crate) struct Shared {
    pub(super) app: App,
    pub(super) policy: OriginPolicy,
    /// URL of the path-inserted RFC 9728 document.
    pub(super) resource_metadata: String,
    /// The 401 challenge: `Bearer resource_metadata="…", scope="…"`.
    pub(super) challenge: String,
    /// The RFC 9728 document, serialized once.
    pub(super) document: String,
    pub(super) limits: Limits,
    /// Signs and opens `MCP-Session-Id` values.
    pub(super) sessions: super::session_id::SessionKey,
    pub(super) gauges: Gauges,
    pub(super) shutdown: CancellationToken,
    /// How the approval page learns who is there.
    pub(super) approval_trust: super::approve::trust::PageTrust,
    /// The last `/readyz` answer and when it was found.
    /// The last `/readyz` answer (ready, JSON body) and when it was found.
    pub(super) ready: tokio::sync::Mutex<Option<(tokio::time::Instant, bool, String)>>,
}

impl Shared {
    /// Resolves [`LAST_CALL`] after shutdown began (or after this is first polled, if
    /// that is later).
    pub(super) async fn last_call(&self) {
        self.shutdown.cancelled().await;
        tokio::time::sleep(LAST_CALL).await;
    }
}
