//! The OTLP exporters of both signals over either transport: gRPC (tonic) or HTTP with
//! protobuf bodies (reqwest); `https://` uses TLS with the Mozilla roots either way. And
//! the resource both signals describe.

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;

use super::worker::EXPORT_TIMEOUT;

/// The OTLP transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
}

/// Where a signal is exported: the collector (gRPC) or the signal's full URL (HTTP).
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL.
    pub endpoint: String,
    /// The transport.
    pub protocol: Protocol,
}

/// Configures an exporter builder of either signal for `target` and builds it. A macro
/// because the span and metric builders are distinct types with the same methods.
macro_rules! build_for {
    ($builder:expr, $target:expr) => {{
        let target: &Target = $target;
        let built = match target.protocol {
            Protocol::Grpc => {
                let builder = $builder
                    .with_tonic()
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(EXPORT_TIMEOUT);
                if target.endpoint.starts_with("https://") {
                    builder.with_tls_config(tonic_tls()).build()
                } else {
                    builder.build()
                }
            }
            Protocol::HttpProtobuf => $builder
                .with_http()
                .with_http_client(http_client()?)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(target.endpoint.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .build(),
        };
        built.map_err(|e| anyhow::anyhow!("--otlp-endpoint: {e}"))
    }};
}

/// The span exporter for `target`; call it inside the Tokio runtime that will run it.
pub(super) fn spans(target: &Target) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    build_for!(opentelemetry_otlp::SpanExporter::builder(), target)
}

/// The metric exporter for `target` (cumulative, as Prometheus counts); call it inside the
/// Tokio runtime that will run it.
pub(super) fn metrics(target: &Target) -> anyhow::Result<opentelemetry_otlp::MetricExporter> {
    build_for!(opentelemetry_otlp::MetricExporter::builder(), target)
}

/// The HTTP client: the bridge's own reqwest, with rustls on the ring provider.
fn http_client() -> anyhow::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the OTLP/HTTP client: {e}"))
}

/// TLS for `https://` gRPC collectors, trusting the Mozilla root set.
fn tonic_tls() -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
    opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_webpki_roots()
}

/// What every exported span and metric says about this process: `service.name` (unless
/// the standard variables name it) and `service.version`.
pub(super) fn resource() -> Resource {
    let mut resource = Resource::builder();
    let named_by_env = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    if !named_by_env {
        resource = resource.with_service_name(env!("CARGO_PKG_NAME"));
    }
    resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}
