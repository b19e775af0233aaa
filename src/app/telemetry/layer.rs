//! The tracing-opentelemetry layer: which spans become OTel spans.

use super::timed::{TARGET, UNEXPORTED, otel_installed};

/// The tracing-opentelemetry layer for `tracer`: only [`TARGET`] spans become OTel spans
/// (so the HTTP and gRPC stacks' own spans are never exported, the exporter's included),
/// and warnings and errors logged inside them become span events (the attributes already
/// say what an `info` line would).
pub fn otel_layer<S, T>(tracer: T) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    use tracing_subscriber::Layer;
    otel_installed();
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_context_activation(false)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_target(false)
        .with_level(false)
        .with_filter(otel_filter())
}

/// [`TARGET`] spans (and events) at every level, anything else at `warn` and above. A
/// static filter, unlike a closure, lets `tracing` cache each callsite's interest, so the
/// many `debug!` callsites in the bridge and its dependencies stay free when disabled.
/// (Spans are created at `info`; no dependency makes `warn` spans.)
fn otel_filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target(UNEXPORTED, tracing::level_filters::LevelFilter::OFF)
        .with_target(TARGET, tracing::Level::TRACE)
}
