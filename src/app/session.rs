//! Per-connection protocol state: whether `initialize` happened, what the client
//! declared, the log level, in-flight requests that `notifications/cancelled` may stop,
//! and the outbound channel for notifications.
//!
//! Locks here are std mutexes that are never held across an `.await`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::rpc::RequestId;

/// RFC 5424 levels used by `logging/setLevel`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// One client connection.
pub struct Session {
    initialized: AtomicBool,
    client_elicitation: AtomicBool,
    log_level: AtomicU8,
    inflight: Mutex<HashMap<RequestId, CancellationToken>>,
    outbound: mpsc::Sender<String>,
}

impl Session {
    /// A new, uninitialized session whose notifications go to `outbound`.
    pub fn new(outbound: mpsc::Sender<String>) -> Session {
        Session {
            initialized: AtomicBool::new(false),
            client_elicitation: AtomicBool::new(false),
            log_level: AtomicU8::new(1),
            inflight: Mutex::new(HashMap::new()),
            outbound,
        }
    }

    /// Whether `initialize` succeeded.
    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Marks the session initialized; `false` if it already was.
    pub fn mark_initialized(&self, client_elicitation: bool) -> bool {
        let first = !self.initialized.swap(true, Ordering::AcqRel);
        if first {
            self.client_elicitation
                .store(client_elicitation, Ordering::Release);
        }
        first
    }

    /// Whether the client declared the `elicitation` capability.
    pub fn client_elicitation(&self) -> bool {
        self.client_elicitation.load(Ordering::Acquire)
    }

    /// Sets the minimum level of `notifications/message`.
    pub fn set_log_level(&self, index: u8) {
        self.log_level.store(index, Ordering::Release);
    }

    /// The minimum level index of `notifications/message`.
    pub fn log_level(&self) -> u8 {
        self.log_level.load(Ordering::Acquire)
    }

    /// Registers an in-flight request; the token fires on `notifications/cancelled`.
    pub fn track(&self, id: &RequestId) -> CancellationToken {
        let token = CancellationToken::new();
        self.lock_inflight().insert(id.clone(), token.clone());
        token
    }

    /// Forgets a finished request.
    pub fn untrack(&self, id: &RequestId) {
        self.lock_inflight().remove(id);
    }

    /// Cancels an in-flight request; unknown or finished ids are ignored (MCP allows it).
    pub fn cancel(&self, id: &RequestId) -> bool {
        match self.lock_inflight().remove(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Queues a serialized notification to the client; dropped if the connection is gone.
    pub async fn notify(&self, frame: String) {
        let _ = self.outbound.send(frame).await;
    }

    fn lock_inflight(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        // A panic while holding this lock cannot leave the map inconsistent, so poisoning
        // is ignored.
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }
}
