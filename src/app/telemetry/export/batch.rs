//! [`BoundedBatch`]: the span processor that queues ended spans for the export thread and
//! never waits on the exporter.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor};
use tokio::sync::mpsc;

use super::queue::{ExportStats, MAX_BATCH, QUEUE, Queue};
use super::worker::{Control, EXPORT_TIMEOUT, export_loop};

/// A span processor with a bounded queue and its own export thread.
#[derive(Debug)]
pub struct BoundedBatch {
    queue: Arc<Queue>,
    control: mpsc::UnboundedSender<Control>,
    stats: Arc<ExportStats>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl BoundedBatch {
    /// Starts the export thread. `make` builds the exporter inside the thread's runtime
    /// (a tonic channel must be created within one); it exports spans as of `resource`.
    ///
    /// # Errors
    /// The runtime, thread or exporter could not be created.
    pub fn start<E, F>(resource: &Resource, make: F) -> anyhow::Result<BoundedBatch>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> anyhow::Result<E>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| anyhow::anyhow!("cannot start the span export runtime: {e}"))?;
        let mut exporter = {
            let _inside = runtime.enter();
            make()?
        };
        // The exporter moves to its thread, so it gets the resource now rather than
        // through `SpanProcessor::set_resource`.
        exporter.set_resource(resource);
        let queue = Arc::new(Queue::default());
        let worker_queue = Arc::clone(&queue);
        let (control, commands) = mpsc::unbounded_channel();
        let stats = Arc::new(ExportStats::default());
        let worker_stats = Arc::clone(&stats);
        let worker = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                runtime.block_on(export_loop(
                    exporter,
                    &worker_queue,
                    commands,
                    &worker_stats,
                ));
                worker_queue.closed.store(true, Ordering::Release);
            })
            .map_err(|e| anyhow::anyhow!("cannot start the span export thread: {e}"))?;
        Ok(BoundedBatch {
            queue,
            control,
            stats,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The pipeline's counters.
    pub fn stats(&self) -> Arc<ExportStats> {
        Arc::clone(&self.stats)
    }

    /// A check for span producers: `false` (and the span counted as dropped) while the
    /// collector is failing or the queue is full, so such spans need not be built at all.
    pub fn gate(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let queue = Arc::clone(&self.queue);
        let stats = Arc::clone(&self.stats);
        move || {
            let open = !queue.paused() && queue.queued.load(Ordering::Relaxed) < QUEUE;
            if !open {
                stats.drop_spans(1, None);
            }
            open
        }
    }

    /// Sends a command and waits at most `wait` for the export thread to carry it out.
    fn command(
        &self,
        make: fn(std::sync::mpsc::SyncSender<()>) -> Control,
        wait: Duration,
    ) -> OTelSdkResult {
        let (done, acked) = std::sync::mpsc::sync_channel(1);
        if self.control.send(make(done)).is_err() {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        acked
            .recv_timeout(wait)
            .map_err(|_| OTelSdkError::Timeout(wait))
    }
}

impl SpanProcessor for BoundedBatch {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        // Never waits on the exporter: a failing collector, a full queue or a stopped
        // pipeline drops the span.
        if self.queue.paused() {
            self.stats.drop_spans(1, None);
            return;
        }
        let mut spans = self.queue.lock();
        if spans.len() >= QUEUE || self.queue.closed.load(Ordering::Acquire) {
            drop(spans);
            self.stats.drop_spans(1, None);
            return;
        }
        spans.push(span);
        self.queue.queued.store(spans.len(), Ordering::Relaxed);
        if spans.len() == MAX_BATCH {
            self.queue.full.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.command(Control::Flush, EXPORT_TIMEOUT)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.command(Control::Shutdown, timeout);
        if result.is_ok()
            && let Some(worker) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let _ = worker.join();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use std::sync::atomic::AtomicUsize;

    /// Records how many spans it got, or never answers, or always fails.
    #[derive(Debug, Clone, Copy)]
    enum Mode {
        Take,
        Hang,
        Fail,
    }

    #[derive(Debug, Clone)]
    struct Scripted(Mode, Arc<AtomicUsize>);

    impl SpanExporter for Scripted {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            match self.0 {
                Mode::Take => {
                    self.1.fetch_add(batch.len(), Ordering::Relaxed);
                    Ok(())
                }
                Mode::Hang => std::future::pending().await,
                Mode::Fail => Err(OTelSdkError::InternalFailure("connection refused".into())),
            }
        }
    }

    fn pipeline(mode: Mode) -> (SdkTracerProvider, Arc<ExportStats>, Arc<AtomicUsize>) {
        let (provider, stats, got, _) = gated_pipeline(mode);
        (provider, stats, got)
    }

    type Gate = Box<dyn Fn() -> bool + Send + Sync>;

    fn gated_pipeline(mode: Mode) -> (SdkTracerProvider, Arc<ExportStats>, Arc<AtomicUsize>, Gate) {
        let got = Arc::new(AtomicUsize::new(0));
        let exporter = Scripted(mode, Arc::clone(&got));
        let batch =
            BoundedBatch::start(&Resource::builder().build(), move || Ok(exporter)).unwrap();
        let gate: Gate = Box::new(batch.gate());
        let stats = batch.stats();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch)
            .build();
        (provider, stats, got, gate)
    }

    fn emit(provider: &SdkTracerProvider, n: usize) {
        let tracer = provider.tracer("test");
        for _ in 0..n {
            drop(tracer.start("span"));
        }
    }

    #[test]
    fn spans_reach_the_exporter_on_flush() {
        let (provider, stats, got) = pipeline(Mode::Take);
        emit(&provider, 1200);
        provider.force_flush().unwrap();
        assert_eq!(got.load(Ordering::Relaxed), 1200);
        assert_eq!((stats.exported(), stats.dropped()), (1200, 0));
        provider
            .shutdown_with_timeout(Duration::from_secs(5))
            .unwrap();
    }

    #[test]
    fn a_hung_collector_fills_the_queue_then_spans_are_dropped_and_counted() {
        let (provider, stats, _) = pipeline(Mode::Hang);
        // The export thread takes at most one batch before it hangs; the queue holds
        // QUEUE more; everything beyond is dropped at once, without blocking.
        let n = QUEUE + 2 * MAX_BATCH + 100;
        emit(&provider, n);
        let dropped = stats.dropped() as usize;
        assert!(
            dropped >= n - QUEUE - MAX_BATCH && dropped <= n - QUEUE,
            "{dropped} of {n}"
        );
        // Shutdown waits only as long as it is told to.
        let err = provider.shutdown_with_timeout(Duration::from_millis(200));
        assert!(err.is_err(), "a hung export cannot finish: {err:?}");
        assert_eq!(stats.exported(), 0);
    }

    #[test]
    fn after_a_failed_export_the_gate_shuts_and_counts_what_it_turns_away() {
        let (provider, stats, _, gate) = gated_pipeline(Mode::Fail);
        assert!(gate(), "open before anything failed");
        emit(&provider, 3);
        provider.force_flush().unwrap();
        assert_eq!(stats.dropped(), 3);
        assert!(!gate(), "shut while backing off");
        assert_eq!(stats.dropped(), 4, "a span turned away is a dropped span");
        provider
            .shutdown_with_timeout(Duration::from_secs(5))
            .unwrap();
    }

    #[test]
    fn a_failing_collector_counts_its_batches_as_dropped() {
        let (provider, stats, _) = pipeline(Mode::Fail);
        emit(&provider, 10);
        provider.force_flush().unwrap();
        assert_eq!((stats.exported(), stats.dropped()), (0, 10));
        let why = stats.last_failure.lock().unwrap().clone().unwrap();
        assert!(why.contains("connection refused"), "{why}");
        provider
            .shutdown_with_timeout(Duration::from_secs(5))
            .unwrap();
    }
}
