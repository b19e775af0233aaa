//! OpenTelemetry export. Spans leave off the request path: a bounded queue in front of an
//! OTLP exporter (gRPC or HTTP) that runs on a thread and a Tokio runtime of its own.
//! Metrics are aggregated by the SDK's meter provider (`meters`), pushed by OTLP
//! (`push`) and/or rendered for a Prometheus scrape.
//!
//! Why not the SDK's `BatchSpanProcessor`: it calls the exporter from a plain thread
//! (tonic needs a Tokio reactor there) and reports dropped spans only at shutdown. Here a
//! full queue drops the span at once and the caller never waits; every span that is not
//! exported (queue full, collector down or slow) is counted, and a warning with the count
//! is logged at most once a minute. A collector that never answers costs one export
//! timeout per batch on the export thread, nothing on the request path.
//!
//! This module sets up the span pipeline (resource, tracer provider); `exporter` builds the
//! exporters of either transport, `batch` is the span processor, `queue` the bounded
//! queue and counters, `worker` the export thread's loop.

mod batch;
mod exporter;
mod meters;
mod push;
mod queue;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_sdk::trace::SdkTracerProvider;

pub use batch::BoundedBatch;
pub use exporter::{Protocol, Target};
pub use meters::{Flushing, Meters, Scrape};
pub use queue::{ExportStats, MAX_BATCH, QUEUE};
pub use worker::{BATCH_DELAY, EXPORT_TIMEOUT};

/// The export pipeline of a running bridge.
pub struct Otlp {
    provider: SdkTracerProvider,
    stats: Arc<ExportStats>,
    gate: Box<dyn Fn() -> bool + Send + Sync>,
    /// Reports `cyberos.spans.dropped` while the meter provider lives.
    _dropped: opentelemetry::metrics::ObservableCounter<u64>,
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

/// Span export by OTLP to `target` through a [`BoundedBatch`], and the dropped spans as
/// the metric `cyberos.spans.dropped` (on the global meter provider, so install that
/// first). `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the exporter's
/// `OTEL_EXPORTER_OTLP_*` settings (headers, compression) are honoured.
///
/// # Errors
/// The endpoint is not a valid URL, or the export thread could not start.
pub fn start(target: &Target) -> anyhow::Result<Otlp> {
    let resource = exporter::resource();
    let target = target.clone();
    let processor = BoundedBatch::start(&resource, move || exporter::spans(&target))?;
    let stats = processor.stats();
    let gate = Box::new(processor.gate());
    let observed = Arc::clone(&stats);
    let dropped = opentelemetry::global::meter(env!("CARGO_PKG_NAME"))
        .u64_observable_counter("cyberos.spans.dropped")
        .with_unit("{span}")
        .with_description(
            "Spans not exported: queue full, collector failing or slow, or left at exit",
        )
        .with_callback(move |counter| counter.observe(observed.dropped(), &[]))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    Ok(Otlp {
        provider,
        stats,
        gate,
        _dropped: dropped,
    })
}
