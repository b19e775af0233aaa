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

/// A span processor with a bounded queue and its own export thread.
#[derive(Debug)]
pub struct BoundedBatch {
    spans: mpsc::Sender<SpanData>,
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
        let (spans, queue) = mpsc::channel(QUEUE);
        let (control, commands) = mpsc::unbounded_channel();
        let stats = Arc::new(ExportStats::default());
        let worker_stats = Arc::clone(&stats);
        let worker = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || runtime.block_on(export_loop(exporter, queue, commands, worker_stats)))
            .map_err(|e| format!("cannot start the span export thread: {e}"))?;
        Ok(BoundedBatch {
            spans,
            control,
            stats,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The pipeline's counters.
    pub fn stats(&self) -> Arc<ExportStats> {
        Arc::clone(&self.stats)
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
        // Never blocks: a full queue (or a stopped pipeline) drops the span.
        if self.spans.try_send(span).is_err() {
            self.stats.drop_spans(1, None);
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
    mut queue: mpsc::Receiver<SpanData>,
    mut commands: mpsc::UnboundedReceiver<Control>,
    stats: Arc<ExportStats>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut tick = tokio::time::interval(BATCH_DELAY);
    let mut warned = Warned::default();
    loop {
        tokio::select! {
            Some(span) = queue.recv() => {
                batch.push(span);
                if batch.len() >= MAX_BATCH {
                    export(&exporter, &mut batch, &stats).await;
                }
            }
            _ = tick.tick() => {
                if !batch.is_empty() {
                    export(&exporter, &mut batch, &stats).await;
                }
                warned.maybe_warn(&stats);
            }
            command = commands.recv() => {
                while let Ok(span) = queue.try_recv() {
                    batch.push(span);
                    if batch.len() >= MAX_BATCH {
                        export(&exporter, &mut batch, &stats).await;
                    }
                }
                if !batch.is_empty() {
                    export(&exporter, &mut batch, &stats).await;
                }
                match command {
                    Some(Control::Flush(done)) => {
                        warned.maybe_warn(&stats);
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

async fn export<E: SpanExporter>(exporter: &E, batch: &mut Vec<SpanData>, stats: &ExportStats) {
    let spans = std::mem::replace(batch, Vec::with_capacity(MAX_BATCH));
    let n = spans.len() as u64;
    match tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(spans)).await {
        Ok(Ok(())) => {
            stats.exported.fetch_add(n, Ordering::Relaxed);
        }
        Ok(Err(e)) => stats.drop_spans(n, Some(failure_text(&e))),
        Err(_) => stats.drop_spans(n, Some("the collector did not answer in time".into())),
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
    fn maybe_warn(&mut self, stats: &ExportStats) {
        let dropped = stats.dropped();
        if dropped == self.count || self.at.is_some_and(|t| t.elapsed() < WARN_EVERY) {
            return;
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
    }
}

/// The export pipeline of a running bridge.
pub struct Otlp {
    provider: SdkTracerProvider,
    stats: Arc<ExportStats>,
}

impl Otlp {
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
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
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
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    Ok(Otlp { provider, stats })
}

/// TLS for `https://` collectors, trusting the Mozilla root set.
fn tonic_tls() -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
    opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_webpki_roots()
}
