//! Span export off the request path: a bounded queue in front of an OTLP/gRPC exporter
//! that runs on a thread and a Tokio runtime of its own.
//!
//! Why not the SDK's `BatchSpanProcessor`: it calls the exporter from a plain thread
//! (tonic needs a Tokio reactor there) and reports dropped spans only at shutdown. Here a
//! full queue drops the span at once and the caller never waits; every span that is not
//! exported (queue full, collector down or slow) is counted, and a warning with the count
//! is logged at most once a minute. A collector that never answers costs one export
//! timeout per batch on the export thread, nothing on the request path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::mpsc;

/// Spans waiting for export; beyond this they are dropped.
pub const QUEUE: usize = 4096;
/// Spans per export request.
pub const MAX_BATCH: usize = 512;
/// How long a span waits for a batch to fill before it is sent anyway.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);
/// Longest wait for one export request; a slower collector loses that batch.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Warnings about dropped spans are at most this frequent.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Counters of the export pipeline.
#[derive(Debug, Default)]
pub struct ExportStats {
    exported: AtomicU64,
    dropped: AtomicU64,
    /// Why the last batch failed, for the next warning.
    last_failure: Mutex<Option<String>>,
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

    fn drop_spans(&self, n: u64, why: Option<String>) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
        if let Some(why) = why {
            *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
    }
}

enum Control {
    Flush(std::sync::mpsc::SyncSender<()>),
    Shutdown(std::sync::mpsc::SyncSender<()>),
}

/// Ended spans waiting for the export thread. A plain vector under a mutex rather than a
/// channel: the thread is woken once per full batch (or by its timer), not once per span,
/// which on a busy stdio bridge costs a context switch per call.
#[derive(Debug)]
struct Queue {
    spans: Mutex<Vec<SpanData>>,
    full: tokio::sync::Notify,
    closed: std::sync::atomic::AtomicBool,
    /// While the collector is failing, spans are dropped where they end, until this many
    /// milliseconds after `epoch`: freeing a span on the thread that built it is cheap,
    /// handing it to the export thread to free is not (measured in benches/stdio.rs).
    paused_until_ms: AtomicU64,
    epoch: Instant,
    /// `spans.len()`, readable without the lock.
    queued: std::sync::atomic::AtomicUsize,
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

    fn paused(&self) -> bool {
        self.now_ms() < self.paused_until_ms.load(Ordering::Relaxed)
    }

    fn pause_for(&self, delay: Duration) {
        let until = self.now_ms() + u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.paused_until_ms.store(until, Ordering::Relaxed);
    }

    fn resume(&self) {
        self.paused_until_ms.store(0, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SpanData>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to [`MAX_BATCH`] of the oldest spans; the rest stay queued (and counted against
    /// [`QUEUE`]) while they are exported.
    fn take_batch(&self) -> Vec<SpanData> {
        let mut spans = self.lock();
        let n = spans.len().min(MAX_BATCH);
        let batch = spans.drain(..n).collect();
        self.queued.store(spans.len(), Ordering::Relaxed);
        batch
    }
}

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
    pub fn start<E, F>(resource: &Resource, make: F) -> Result<BoundedBatch, String>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> Result<E, String>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the span export runtime: {e}"))?;
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
            .map_err(|e| format!("cannot start the span export thread: {e}"))?;
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

async fn export_loop<E: SpanExporter>(
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

/// Exports everything queued, in batches of at most [`MAX_BATCH`]; while backing off
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
    crate::lines::truncate(&text, 200).to_owned()
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

/// The export pipeline of a running bridge.
pub struct Otlp {
    provider: SdkTracerProvider,
    stats: Arc<ExportStats>,
    gate: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Otlp {
    /// Whether spans are exported now (see [`BoundedBatch::gate`]); hand it to
    /// `telemetry::set_export_gate`.
    pub fn take_gate(&mut self) -> Box<dyn Fn() -> bool + Send + Sync> {
        std::mem::replace(&mut self.gate, Box::new(|| true))
    }

    /// The tracer the `tracing` layer records into.
    pub fn tracer(&self) -> opentelemetry_sdk::trace::SdkTracer {
        use opentelemetry::trace::TracerProvider;
        self.provider.tracer(env!("CARGO_PKG_NAME"))
    }

    /// Exports what is queued, waiting at most `wait`, and stops; logs how many spans were
    /// lost over the process's life, if any.
    pub fn shutdown(self, wait: Duration) {
        if self.provider.shutdown_with_timeout(wait).is_err() {
            tracing::warn!(
                wait_ms = wait.as_millis() as u64,
                "the OTLP collector did not take the last spans in time; they are dropped"
            );
        }
        let dropped = self.stats.dropped();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                exported = self.stats.exported(),
                "not every span reached the OTLP collector"
            );
        }
    }
}

/// Span export by OTLP/gRPC to `endpoint` through a [`BoundedBatch`].
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the exporter's `OTEL_EXPORTER_OTLP_*`
/// settings (headers, compression) are honoured.
///
/// # Errors
/// The endpoint is not a valid URL, or the export thread could not start.
pub fn start(endpoint: &str) -> Result<Otlp, String> {
    let mut resource = Resource::builder();
    let named_by_env = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    if !named_by_env {
        resource = resource.with_service_name(env!("CARGO_PKG_NAME"));
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let endpoint = endpoint.to_owned();
    let processor = BoundedBatch::start(&resource, move || {
        let tls = endpoint.starts_with("https://");
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT);
        if tls {
            builder = builder.with_tls_config(tonic_tls());
        }
        builder.build().map_err(|e| format!("--otlp-endpoint: {e}"))
    })?;
    let stats = processor.stats();
    let gate = Box::new(processor.gate());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    Ok(Otlp {
        provider,
        stats,
        gate,
    })
}

/// TLS for `https://` collectors, trusting the Mozilla root set.
fn tonic_tls() -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
    opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_webpki_roots()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Tracer, TracerProvider};
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
