//! The state every HTTP handler shares.

use tokio_util::sync::CancellationToken;

use super::limits::{Gauges, Limits};
use super::origin::OriginPolicy;
use crate::app::App;

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
    /// The last `/readyz` answer and when it was found.
    /// The last `/readyz` answer (ready, JSON body) and when it was found.
    pub(super) ready: tokio::sync::Mutex<Option<(tokio::time::Instant, bool, String)>>,
}
