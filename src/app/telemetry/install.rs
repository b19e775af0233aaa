//! The composition root's telemetry: span export, the metrics pipeline and its scrape,
//! and their flush on the way out.

use std::sync::Arc;

use crate::app::config::{Config, ConfigError, OtlpProtocol, OtlpTarget};
use crate::app::telemetry::export::{self as otlp, Meters, Otlp};

/// An OTLP collector as the adapters take it.
fn otlp_target(t: &OtlpTarget) -> otlp::Target {
    let protocol = match t.protocol {
        OtlpProtocol::Grpc => otlp::Protocol::Grpc,
        OtlpProtocol::HttpProtobuf => otlp::Protocol::HttpProtobuf,
    };
    otlp::Target {
        endpoint: t.endpoint.clone(),
        protocol,
    }
}

/// Span export for commands that run tools (serving, `call`), when a collector is set.
/// Start [`metrics`] first: the dropped-span count is a metric.
///
/// # Errors
/// The endpoint is unusable, or the export thread could not start.
pub fn span_export(config: &Config) -> Result<Option<Otlp>, ConfigError> {
    let target = config.otlp_traces.as_ref().map(otlp_target);
    target
        .as_ref()
        .map(otlp::start)
        .transpose()
        .map_err(ConfigError::from)
}

/// Metrics for commands that run tools: pushed to the OTLP collector when one is set, and
/// scraped when `scrape` and `--metrics-listen`. Installs the global meter provider
/// (else every instrument is a no-op) and the tenant-label choice.
///
/// # Errors
/// The endpoint is unusable, or a reader could not start.
pub fn metrics(config: &Config, scrape: bool) -> Result<Option<Meters>, ConfigError> {
    crate::app::telemetry::label_tenants(config.metrics_tenant_label);
    let push = config.otlp_metrics.as_ref().map(otlp_target);
    let scrape = scrape && config.metrics_listen.is_some();
    if push.is_none() && !scrape {
        return Ok(None);
    }
    let meters = Meters::start(push.as_ref(), scrape).map_err(ConfigError::from)?;
    crate::app::telemetry::record_metrics(true);
    Ok(Some(meters))
}

/// Renders the metrics in the Prometheus text exposition format.
pub type Render = Arc<dyn Fn() -> anyhow::Result<String> + Send + Sync>;

/// What `GET /metrics` serves, when [`metrics`] set up a scrape.
pub fn scrape(meters: Option<&Meters>) -> Option<Render> {
    let scrape = meters?.scrape()?;
    Some(Arc::new(move || scrape.render()))
}

/// The way out for the export pipelines: exports what is queued (spans) or aggregated
/// (metrics) and stops them, both within `wait`.
pub fn flush_telemetry(spans: Option<Otlp>, meters: Option<Meters>, wait: std::time::Duration) {
    let deadline = std::time::Instant::now() + wait;
    let metrics = meters.map(Meters::shutdown);
    if let Some(otlp) = spans {
        otlp.shutdown(wait);
    }
    if let Some(flushing) = metrics {
        flushing.wait(deadline);
    }
}
