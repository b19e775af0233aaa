//! One OpenTelemetry span per `tools/call` and one per task run (CONTRACT §9), and the
//! metrics recorded as they end (`metrics`).
//!
//! The spans are `tracing` spans with target [`TARGET`]. When an exporter is configured,
//! the tracing-opentelemetry layer (filtered to that target, see [`otel_layer`]) makes them
//! OTel spans, and the request's trace id *is* the OTel trace id: the caller's, when it sent
//! a `traceparent`, else the one the SDK drew. Without an exporter there is no OTel layer;
//! the ids come from the caller's `traceparent` or the CSPRNG. Either way the span carries
//! the trace and span ids into every log line written while the call runs.
//!
//! Outcome: `success`, an error class, `panic` (the handler panicked: `App::answer` catches
//! it and answers `internal_error`; a task run that panics records it as its span drops
//! while unwinding), or `cancelled` (the client cancelled the request, or a task was
//! stopped).

mod context;
pub mod export;
pub mod ids;
pub mod install;
mod layer;
pub mod logs;
mod metrics;
mod outcome;
mod span;
mod timed;

pub use context::{Parent, parse_traceparent, parse_tracestate};
pub use layer::otel_layer;
pub use logs::UtcMicros;
pub use logs::{TextFields, TextLine};
pub use metrics::{OTHER, Refusal, label_tenants, record_metrics, refused, request_ended};
pub use outcome::Outcome;
pub use span::{CallSpan, PLUGIN_ID, TaskSpan, request_trace_id};
pub use timed::{TARGET, set_export_gate};
