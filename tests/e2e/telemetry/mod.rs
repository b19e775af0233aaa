//! Spans (CONTRACT §9): seed criterion 14 through the SDK's in-memory exporter (`spans`),
//! then the built binary exporting to a real OTLP/gRPC receiver (`export`), JSON logs
//! carrying the call's ids (`logs`), and the collector down or switched by configuration
//! (`config`); metrics scraped from `/metrics` (`scrape`) and received with spans over
//! OTLP/gRPC and OTLP/HTTP (`metrics_export`).

mod config;
mod export;
mod logs;
mod metrics_export;
mod scrape;
mod spans;

use serde_json::Value;

pub(crate) const TENANT: &str = "00000000-0000-4000-8000-000000000001";

pub(crate) fn envelope_trace(frame: &Value) -> String {
    frame["error"]["data"]["trace_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an error envelope: {frame}"))
        .to_owned()
}
