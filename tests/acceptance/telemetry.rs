//! Spans: criterion 14.

use serde_json::json;

use crate::harness::{Adapters, Stack};

/// Criterion 14: An OpenTelemetry span is emitted per tool call: the exporter holds a span
/// with `cyberos.tool_name` and the contract's other attributes, in the trace the client
/// saw.
pub async fn c14_each_tool_call_exports_a_span_with_the_tool_name(adapters: Adapters) {
    let stack = Stack::new(adapters).exporting_spans().up();
    let mut b = stack.bridge().stdio().await;
    let ok = b.call_tool("cyberos.skill.list_skills", json!({})).await;
    assert!(ok["result"].is_object(), "{ok}");
    let refused = b.call_tool("cyberos.cuo.route", json!({"query": ""})).await;
    let trace = refused["error"]["data"]["trace_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {refused}"))
        .to_owned();
    // Over the real adapters the binary flushes its spans as it stops.
    b.disconnect().await;
    let listed = stack
        .wait_span(|s| s.attr("cyberos.tool_name") == Some("cyberos.skill.list_skills"))
        .await;
    assert_eq!(listed.name, "tools/call cyberos.skill.list_skills");
    assert_eq!(listed.attr("cyberos.outcome"), Some("success"));
    let span = stack
        .wait_span(|s| s.attr("cyberos.tool_name") == Some("cyberos.cuo.route"))
        .await;
    assert_eq!(span.trace_id, trace, "the envelope names the span's trace");
    let tenant = stack.tenant("a");
    for (key, want) in [
        ("cyberos.plugin_id", "cyberos"),
        ("cyberos.tenant_id", tenant.as_str()),
        ("cyberos.trace_id", trace.as_str()),
        ("cyberos.outcome", "input_validation"),
    ] {
        assert_eq!(span.attr(key), Some(want), "{key} of {span:?}");
    }
    assert!(
        span.attr("cyberos.duration_ms")
            .is_some_and(|ms| ms.parse::<u64>().is_ok()),
        "{span:?}"
    );
}
