//! The caller's W3C trace context over HTTP: through the bridge to memory and onto
//! every refusal.

use std::time::Duration;

use serde_json::{Value, json};

use super::LOCAL;
use crate::support::collector::{Collector, attr, hex};
use crate::support::http_server::{Server, error_body, rpc};
use crate::support::memory_server::MemoryServer;

#[tokio::test]
async fn a_traceparent_header_continues_the_callers_trace_through_the_bridge_to_memory() {
    let collector = Collector::start();
    let memory = MemoryServer::start();
    let s = Server::start(&[
        "--otlp-endpoint",
        &collector.endpoint,
        "--memory-url",
        &memory.url,
    ]);
    let token = s.token(LOCAL, None);
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let caller = format!("00-{trace}-10f067aa0ba902b7-01");
    // Two tracestate fields are one list (RFC 9110); it travels on unchanged.
    let header = [
        ("traceparent", caller.as_str()),
        ("tracestate", "rojo=00f067aa0ba902b7"),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    let state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
    let call = |id: i64, tool: &str, args: Value| {
        rpc(id, "tools/call", json!({"name": tool, "arguments": args})).to_string()
    };
    let read = s
        .post_with(
            Some(&token),
            call(3, "cyberos.memory.read_audit", json!({})),
            &header,
        )
        .await;
    assert_eq!(read.status, 200, "{}", read.text);
    let bad = s
        .post_with(
            Some(&token),
            call(4, "cyberos.cuo.route", json!({"query": ""})),
            &header,
        )
        .await;
    assert_eq!(bad.json()["error"]["data"]["trace_id"], trace);
    let refused = s
        .post_with(
            Some("not.a.jwt"),
            call(5, "cyberos.skill.list_skills", json!({})),
            &header,
        )
        .await;
    let frame = error_body(&refused, 401, -32000, "authz_denied");
    assert_eq!(frame["error"]["data"]["trace_id"], trace);
    // Refusals by the transport itself carry the caller's trace too.
    let not_acceptable = s
        .post_with(
            Some(&token),
            call(6, "cyberos.skill.list_skills", json!({})),
            &[("traceparent", caller.as_str()), ("accept", "text/html")],
        )
        .await;
    let frame = error_body(&not_acceptable, 406, -32600, "input_validation");
    assert_eq!(frame["error"]["data"]["trace_id"], trace);

    let span = |id: &str| {
        collector
            .wait_for(Duration::from_secs(10), |s| {
                attr(s, "jsonrpc.request.id").as_deref() == Some(id)
            })
            .span
    };
    let read_span = span("3");
    assert_eq!(hex(&read_span.trace_id), trace);
    assert_eq!(hex(&read_span.parent_span_id), "10f067aa0ba902b7");
    assert_eq!(read_span.trace_state, state);
    assert_eq!(
        attr(&read_span, "network.transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(
        attr(&read_span, "cyberos.tenant_id").as_deref(),
        Some(LOCAL)
    );
    assert_eq!(
        attr(&read_span, "cyberos.outcome").as_deref(),
        Some("success")
    );
    // The memory request carried the trace on, with the bridge's span as its parent.
    let sent: Vec<String> = memory
        .headers()
        .iter()
        .filter_map(|h| Some(h.get("traceparent")?.to_str().ok()?.to_owned()))
        .collect();
    let expected = format!("00-{trace}-{}-01", hex(&read_span.span_id));
    assert!(
        sent.contains(&expected),
        "{sent:?} should contain {expected}"
    );
    assert!(
        memory
            .headers()
            .iter()
            .any(|h| h.get("tracestate").and_then(|v| v.to_str().ok()) == Some(state)),
        "the memory request carries the caller's tracestate"
    );
    let refused_span = span("5");
    assert_eq!(hex(&refused_span.trace_id), trace);
    assert_eq!(
        attr(&refused_span, "cyberos.tenant_id").as_deref(),
        Some("unknown")
    );
    assert_eq!(
        attr(&refused_span, "cyberos.outcome").as_deref(),
        Some("authz_denied")
    );
    assert_eq!(
        attr(&refused_span, "cyberos.tool_name").as_deref(),
        Some("cyberos.skill.list_skills")
    );
}
