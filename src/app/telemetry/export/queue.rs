//! The bounded queue between span producers and the export thread, and the pipeline's
//! counters.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_sdk::trace::SpanData;

/// Spans waiting for export; beyond this they are dropped.
pub const QUEUE: usize = 4096;
/// Spans per export request.
pub const MAX_BATCH: usize = 512;

/// Counters of the export pipeline.
#[derive(Debug, Default)]
pub struct ExportStats {
    pub(super) exported: AtomicU64,
    pub(super) dropped: AtomicU64,
    /// Why the last batch failed, for the next warning.
    pub(super) last_failure: Mutex<Option<String>>,
}

impl ExportStats {
    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped: queue full, export failed or timed out, or left at shutdown.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn drop_spans(&self, n: u64, why: Option<String>) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
        if let Some(why) = why {
            *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
    }
}

/// Ended spans waiting for the export thread. A plain vector under a mutex rather than a
/// channel: the thread is woken once per full batch (or by its timer), not once per span,
/// which on a busy stdio bridge costs a context switch per call.
#[derive(Debug)]
pub(super) struct Queue {
    spans: Mutex<Vec<SpanData>>,
    pub(super) full: tokio::sync::Notify,
    pub(super) closed: std::sync::atomic::AtomicBool,
    /// While the collector is failing, spans are dropped where they end, until this many
    /// milliseconds after `epoch`: a span freed on the thread that built it is freed
    /// from that thread's cache; handed to the export thread, it costs a wake-up there
    /// and a free of memory that thread never touched.
    paused_until_ms: AtomicU64,
    epoch: Instant,
    /// `spans.len()`, readable without the lock.
    pub(super) queued: std::sync::atomic::AtomicUsize,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            spans: Mutex::default(),
            full: tokio::sync::Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            paused_until_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            queued: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl Queue {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn paused(&self) -> bool {
        self.now_ms() < self.paused_until_ms.load(Ordering::Relaxed)
    }

    pub(super) fn pause_for(&self, delay: Duration) {
        let until = self.now_ms() + u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.paused_until_ms.store(until, Ordering::Relaxed);
    }

    pub(super) fn resume(&self) {
        self.paused_until_ms.store(0, Ordering::Relaxed);
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SpanData>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to [`MAX_BATCH`] of the oldest spans; the rest stay queued (and counted against
    /// [`QUEUE`]) while they are exported.
    pub(super) fn take_batch(&self) -> Vec<SpanData> {
        let mut spans = self.lock();
        let n = spans.len().min(MAX_BATCH);
        let batch = spans.drain(..n).collect();
        self.queued.store(spans.len(), Ordering::Relaxed);
        batch
    }
}
