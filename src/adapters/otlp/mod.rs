//! Span export off the request path: a bounded queue in front of an OTLP/gRPC exporter
//! that runs on a thread and a Tokio runtime of its own.
//!
//! Why not the SDK's `BatchSpanProcessor`: it calls the exporter from a plain thread
//! (tonic needs a Tokio reactor there) and reports dropped spans only at shutdown. Here a
//! full queue drops the span at once and the caller never waits; every span that is not
//! exported (queue full, collector down or slow) is counted, and a warning with the count
//! is logged at most once a minute. A collector that never answers costs one export
//! timeout per batch on the export thread, nothing on the request path.
//!
//! This module sets up the exporter (endpoint, TLS, resource) and the tracer provider;
//! `batch` is the span processor, `queue` the bounded queue and counters, `worker` the
//! export thread's loop.

mod batch;
mod queue;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

pub use batch::BoundedBatch;
pub use queue::{ExportStats, MAX_BATCH, QUEUE};
pub use worker::{BATCH_DELAY, EXPORT_TIMEOUT};

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
