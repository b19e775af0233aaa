//! Seed criterion 14: one span per tool call with the attributes of each outcome, seen
//! through the SDK's in-memory exporter over the in-process transport.

use opentelemetry::trace::{SpanKind, Status, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use cyberos_mcp_bridge::app::Settings;
use cyberos_mcp_bridge::app::telemetry::otel_layer;

use super::{TENANT, envelope_trace};
use crate::support::assert_envelope;
use crate::support::fakes::Behaviour;
use crate::support::in_process::Client;

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The span of the request with JSON-RPC id `id`.
fn span_of(spans: &[SpanData], id: i64) -> &SpanData {
    let found: Vec<_> = spans
        .iter()
        .filter(|s| attribute(s, "jsonrpc.request.id").as_deref() == Some(&id.to_string()))
        .collect();
    assert_eq!(found.len(), 1, "exactly one span for request {id}");
    found[0]
}

/// Checks the contract's attributes; returns the span's trace id.
fn check(span: &SpanData, tool: &str, tenant: &str, outcome: &str) -> String {
    assert_eq!(span.name, format!("tools/call {tool}"));
    assert_eq!(span.span_kind, SpanKind::Server);
    let trace = span.span_context.trace_id().to_string();
    for (key, want) in [
        ("cyberos.plugin_id", "cyberos"),
        ("cyberos.tool_name", tool),
        ("cyberos.tenant_id", tenant),
        ("cyberos.trace_id", trace.as_str()),
        ("cyberos.outcome", outcome),
        ("mcp.method.name", "tools/call"),
        ("rpc.system", "jsonrpc"),
        ("network.transport", "pipe"),
    ] {
        assert_eq!(
            attribute(span, key).as_deref(),
            Some(want),
            "{key} of {span:?}"
        );
    }
    let ms = attribute(span, "cyberos.duration_ms").expect("cyberos.duration_ms");
    assert!(ms.parse::<u64>().is_ok(), "{ms}");
    if outcome == "success" {
        assert_eq!(span.status, Status::Ok);
        assert_eq!(attribute(span, "error.type"), None);
    } else {
        assert!(
            matches!(span.status, Status::Error { .. }),
            "{:?}",
            span.status
        );
        assert_eq!(attribute(span, "error.type").as_deref(), Some(outcome));
    }
    trace
}

#[tokio::test]
async fn criterion_14_one_span_per_tool_call_with_the_attributes_of_each_outcome() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(otel_layer(provider.tracer("test")));
    // The test's runtime is single-threaded, so the handlers run under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut ok = Client::start(Behaviour::Answer, Settings::default()).await;
    let success = ok.call(2, "cyberos.skill.list_skills", json!({})).await;
    assert!(success["result"].is_object(), "{success}");
    let invalid = ok.call(3, "cyberos.cuo.route", json!({"query": ""})).await;
    assert_envelope(&invalid, -32602, "input_validation");
    let denied = ok
        .call(
            4,
            "cyberos.memory.append_audit",
            json!({"kind": "decision", "body": {}}),
        )
        .await;
    assert_envelope(&denied, -32000, "authz_denied");
    let unknown = ok.call(5, "cyberos.cuo.nope", json!({})).await;
    assert_envelope(&unknown, -32602, "input_validation");
    let continued = ok
        .request(
            6,
            "tools/call",
            json!({"name": "cyberos.cuo.route", "arguments": {"query": ""},
                   "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}),
        )
        .await;
    let mut down = Client::start(Behaviour::Down, Settings::default()).await;
    let unavailable = down.call(7, "cyberos.skill.list_skills", json!({})).await;
    assert_envelope(&unavailable, -32050, "upstream_unavailable");
    let mut broken = Client::start(Behaviour::Broken, Settings::default()).await;
    let internal = broken.call(8, "cyberos.skill.list_skills", json!({})).await;
    assert_envelope(&internal, -32603, "internal_error");
    let mut panicky = Client::start(Behaviour::Panic, Settings::default()).await;
    let panicked = panicky
        .call(9, "cyberos.skill.list_skills", json!({}))
        .await;
    assert_envelope(&panicked, -32603, "internal_error");
    let mut forged = Client::start_as(Behaviour::Answer, Settings::default(), "forged").await;
    let unauthenticated = forged
        .call(10, "cyberos.skill.list_skills", json!({}))
        .await;
    assert_envelope(&unauthenticated, -32000, "authz_denied");
    // Not tool calls: no spans.
    let _ = ok.request(11, "ping", json!({})).await;
    let _ = ok.request(12, "tools/list", json!({})).await;

    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 9, "one span per tools/call and nothing else");
    check(
        span_of(&spans, 2),
        "cyberos.skill.list_skills",
        TENANT,
        "success",
    );
    let cases = [
        (3, &invalid, "cyberos.cuo.route", TENANT, "input_validation"),
        (
            4,
            &denied,
            "cyberos.memory.append_audit",
            TENANT,
            "authz_denied",
        ),
        (5, &unknown, "cyberos.cuo.nope", TENANT, "input_validation"),
        (
            6,
            &continued,
            "cyberos.cuo.route",
            TENANT,
            "input_validation",
        ),
        (
            7,
            &unavailable,
            "cyberos.skill.list_skills",
            TENANT,
            "upstream_unavailable",
        ),
        (
            8,
            &internal,
            "cyberos.skill.list_skills",
            TENANT,
            "internal_error",
        ),
        (9, &panicked, "cyberos.skill.list_skills", TENANT, "panic"),
        (
            10,
            &unauthenticated,
            "cyberos.skill.list_skills",
            "unknown",
            "authz_denied",
        ),
    ];
    for (id, frame, tool, tenant, outcome) in cases {
        let trace = check(span_of(&spans, id), tool, tenant, outcome);
        assert_eq!(
            envelope_trace(frame),
            trace,
            "the envelope carries the span's trace id"
        );
    }
    // A caller's traceparent: same trace, the caller's span is the parent.
    let child = span_of(&spans, 6);
    assert_eq!(
        child.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(child.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert!(child.parent_span_is_remote);
    // Otherwise each call starts its own trace.
    let roots: std::collections::HashSet<_> = [2, 3, 4, 5]
        .iter()
        .map(|id| span_of(&spans, *id).span_context.trace_id())
        .collect();
    assert_eq!(roots.len(), 4);
}
