//! The export thread's loop: batches from the queue to the exporter, backing off while
//! the collector fails, and the rate-limited warning about dropped spans.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::trace::SpanExporter;
use tokio::sync::mpsc;

use super::queue::{ExportStats, Queue};

/// How long a span waits for a batch to fill before it is sent anyway.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);
/// Longest wait for one export request; a slower collector loses that batch.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Warnings about dropped spans are at most this frequent.
const WARN_EVERY: Duration = Duration::from_secs(60);

pub(super) enum Control {
    Flush(std::sync::mpsc::SyncSender<()>),
    Shutdown(std::sync::mpsc::SyncSender<()>),
}

pub(super) async fn export_loop<E: SpanExporter>(
    exporter: E,
    queue: &Queue,
    mut commands: mpsc::UnboundedReceiver<Control>,
    stats: &ExportStats,
) {
    let mut tick = tokio::time::interval(BATCH_DELAY);
    let mut warned = Warned::default();
    let mut backoff = Backoff::default();
    loop {
        tokio::select! {
            () = queue.full.notified() => export_all(&exporter, queue, stats, &mut backoff).await,
            _ = tick.tick() => {
                export_all(&exporter, queue, stats, &mut backoff).await;
                warned.maybe_warn(stats);
            }
            command = commands.recv() => {
                export_all(&exporter, queue, stats, &mut backoff).await;
                match command {
                    Some(Control::Flush(done)) => {
                        warned.maybe_warn(stats);
                        let _ = done.send(());
                    }
                    Some(Control::Shutdown(done)) => {
                        let _ = exporter.shutdown_with_timeout(Duration::from_millis(100));
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                }
            }
        }
    }
}

/// After a failed export, spans are dropped where they end for a while (1 s, doubling to
/// 30 s), so a down collector costs no queueing, encoding or connection attempts per span.
#[derive(Default)]
struct Backoff {
    delay: Duration,
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Backoff {
    fn failed(&mut self, queue: &Queue) {
        self.delay = (self.delay * 2).clamp(BATCH_DELAY, MAX_BACKOFF);
        queue.pause_for(self.delay);
    }

    fn succeeded(&mut self, queue: &Queue) {
        self.delay = Duration::ZERO;
        queue.resume();
    }
}

/// Exports everything queued, in batches of at most [`MAX_BATCH`](super::MAX_BATCH); while backing off
/// from a failure, drops them (counted) instead.
async fn export_all<E: SpanExporter>(
    exporter: &E,
    queue: &Queue,
    stats: &ExportStats,
    backoff: &mut Backoff,
) {
    loop {
        let batch = queue.take_batch();
        if batch.is_empty() {
            return;
        }
        if queue.paused() {
            stats.drop_spans(batch.len() as u64, None);
            continue;
        }
        let n = batch.len() as u64;
        let failure = match tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(failure_text(&e)),
            Err(_) => Some("the collector did not answer in time".to_owned()),
        };
        match failure {
            None => {
                stats.exported.fetch_add(n, Ordering::Relaxed);
                backoff.succeeded(queue);
            }
            Some(why) => {
                stats.drop_spans(n, Some(why));
                backoff.failed(queue);
            }
        }
    }
}

/// A user-safe reason: the exporter's error text names the endpoint at most.
fn failure_text(e: &OTelSdkError) -> String {
    let text = e.to_string();
    crate::domain::text::clip(&text, 200).into_owned()
}

/// When the dropped-span warning was last logged, and at what count.
#[derive(Default)]
struct Warned {
    at: Option<Instant>,
    count: u64,
}

impl Warned {
    /// Logs the dropped-span warning if spans were dropped since the last one and a minute
    /// has passed; returns whether it did.
    fn maybe_warn(&mut self, stats: &ExportStats) -> bool {
        let dropped = stats.dropped();
        if dropped == self.count || self.at.is_some_and(|t| t.elapsed() < WARN_EVERY) {
            return false;
        }
        let why = stats
            .last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "the export queue is full".into());
        tracing::warn!(
            dropped_total = dropped,
            dropped_since_last_warning = dropped - self.count,
            reason = %why,
            "spans dropped: the OTLP collector is unreachable or too slow (tool calls are unaffected)"
        );
        self.at = Some(Instant::now());
        self.count = dropped;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dropped_span_warning_is_logged_at_most_once_a_minute() {
        let stats = ExportStats::default();
        let mut warned = Warned::default();
        assert!(!warned.maybe_warn(&stats), "nothing dropped, nothing said");
        stats.drop_spans(3, Some("refused".into()));
        assert!(warned.maybe_warn(&stats));
        stats.drop_spans(5, None);
        assert!(!warned.maybe_warn(&stats), "again within the minute");
        warned.at = Some(Instant::now() - WARN_EVERY);
        assert!(
            warned.maybe_warn(&stats),
            "a minute later, with the new count"
        );
        assert_eq!(warned.count, 8);
    }
}
