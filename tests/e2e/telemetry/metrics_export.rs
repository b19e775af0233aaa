//! The built binary exporting spans and metrics to real OTLP receivers, over gRPC and
//! over HTTP (protobuf bodies): both chosen by flags or by the standard variables,
//! metrics flushed on stdin EOF, and `OTEL_METRIC_EXPORT_INTERVAL` honoured.

use std::time::Duration;

use serde_json::json;

use super::envelope_trace;
use crate::support::binary::Bridge;
use crate::support::collector::{Collector, Point, hex};

/// A few calls through a bridge exporting with `args` and `env`, then stdin EOF; returns
/// the trace id of the refused call.
fn calls_then_eof(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut b = Bridge::spawn_with_env(args, env);
    b.initialize();
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    let trace = envelope_trace(&bad);
    // The default export interval is a minute: only the exit flush can send the metrics.
    assert!(b.close().success());
    trace
}

/// The receiver got the refused call's span and the calls' metrics.
fn received_both(collector: &Collector, trace: &str) {
    let got = collector.wait_for(Duration::from_secs(1), |s| hex(&s.trace_id) == trace);
    assert_eq!(got.span.name, "tools/call cyberos.cuo.route");
    let is = |p: &Point, metric: &str, tool: &str| {
        p.metric == metric && p.attr("gen_ai.tool.name") == Some(tool)
    };
    let timed = collector.wait_for_point(Duration::from_secs(1), |p| {
        is(p, "mcp.server.operation.duration", "cyberos.cuo.route")
    });
    assert_eq!(timed.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(timed.attr("error.type"), Some("input_validation"));
    assert_eq!(timed.value, 1.0, "one call in the histogram");
    let counted = collector.wait_for_point(Duration::from_secs(1), |p| {
        is(p, "cyberos.tool.calls", "cyberos.skill.list_skills")
    });
    assert_eq!(counted.attr("cyberos.outcome"), Some("success"));
    assert_eq!(counted.value, 1.0);
    assert_eq!(counted.attr("cyberos.tenant_id"), None);
}

#[test]
fn spans_and_metrics_reach_a_grpc_receiver_and_are_flushed_on_eof() {
    let collector = Collector::start();
    let trace = calls_then_eof(&["--dev", "--otlp-endpoint", &collector.endpoint], &[]);
    received_both(&collector, &trace);
}

#[test]
fn spans_and_metrics_reach_an_http_receiver_chosen_by_the_flag() {
    let collector = Collector::start_http();
    let args = [
        "--dev",
        "--otlp-endpoint",
        &collector.endpoint,
        "--otlp-protocol",
        "http/protobuf",
    ];
    let trace = calls_then_eof(&args, &[]);
    received_both(&collector, &trace);
    let types = collector.content_types();
    assert!(
        types.len() >= 2 && types.iter().all(|t| t == "application/x-protobuf"),
        "{types:?}"
    );
}

#[test]
fn the_standard_variables_choose_http_and_the_export_interval_applies() {
    let collector = Collector::start_http();
    let mut b = Bridge::spawn_with_env(
        &["--dev"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
        ],
    );
    b.initialize();
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
    // Pushed while the bridge runs, well before any exit flush.
    let point = collector.wait_for_point(Duration::from_secs(10), |p| {
        p.metric == "cyberos.tool.calls"
            && p.attr("gen_ai.tool.name") == Some("cyberos.skill.list_skills")
    });
    assert_eq!(point.value, 1.0);
    collector.wait_for(Duration::from_secs(5), |s| {
        s.name == "tools/call cyberos.skill.list_skills"
    });
    assert!(b.close().success());
}
