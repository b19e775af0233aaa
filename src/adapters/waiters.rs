//! The process's waiters for clients' answers, by our request id: woken one by one (by
//! Postgres's answer listener, or the embedded store's answer poller), or all at once (after
//! the listener reconnected, as it may have missed some).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

/// The waiters of this process by request id, and whether the listener runs.
#[derive(Default)]
pub(crate) struct Waiters {
    by_request: Mutex<HashMap<String, Arc<Notify>>>,
    listening: OnceLock<()>,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.by_request.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `start` (the listener's spawn) the first time only.
    pub(crate) fn start_once(&self, start: impl FnOnce()) {
        self.listening.get_or_init(start);
    }

    /// Registers a waiter for `request` until the registration is dropped.
    pub(crate) fn register<'a>(&'a self, request: &'a str) -> Registered<'a> {
        let woken = Arc::new(Notify::new());
        self.lock().insert(request.to_owned(), Arc::clone(&woken));
        Registered {
            waiters: self,
            request,
            woken,
        }
    }

    /// Wakes the waiter of `request`. A wake with nobody waiting yet is kept by the
    /// `Notify`, so one that comes between a waiter's read and its sleep is not lost.
    pub(crate) fn wake(&self, request: &str) {
        if let Some(waiter) = self.lock().get(request) {
            waiter.notify_one();
        }
    }

    /// Whether nobody waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Wakes every waiter.
    pub(crate) fn wake_all(&self) {
        self.lock().values().for_each(|w| w.notify_one());
    }
}

/// A waiter's registration, removed when its wait ends (or is dropped).
pub(crate) struct Registered<'a> {
    waiters: &'a Waiters,
    request: &'a str,
    /// Notified when the answer may be there.
    woken: Arc<Notify>,
}

impl Registered<'_> {
    /// Waits until the waiter is woken or `until` has come, whichever is first.
    pub(crate) async fn woken_or(&self, until: tokio::time::Instant) {
        tokio::select! {
            () = self.woken.notified() => {}
            () = tokio::time::sleep_until(until) => {}
        }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.waiters.lock().remove(self.request);
    }
}
