//! The built binary exporting to a real OTLP/gRPC receiver: the call's span with the
//! trace id the client saw, a task's span linked to its call and the trace reaching
//! memory and the audit row, and spans flushed on SIGTERM over stdio.

use std::time::Duration;

use serde_json::json;

use super::{TENANT, envelope_trace};
use crate::support::binary::Bridge;
use crate::support::collector::{Collector, attr, hex};
use crate::support::memory_server::MemoryServer;
use crate::support::wait_for;

#[test]
fn the_binary_exports_the_call_span_with_the_trace_id_the_client_saw() {
    let collector = Collector::start();
    let mut b = Bridge::initialized(&["--otlp-endpoint", &collector.endpoint]);
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    let trace = envelope_trace(&bad);
    let good = b.call("cyberos.skill.list_skills", json!({}));
    assert!(good["result"].is_object());
    // EOF flushes what is queued before the process exits.
    assert!(b.close().success());
    let got = collector.wait_for(Duration::from_secs(1), |s| hex(&s.trace_id) == trace);
    let span = &got.span;
    assert_eq!(got.service, "cyberos-mcp-bridge");
    assert_eq!(span.name, "tools/call cyberos.cuo.route");
    assert_eq!(
        attr(span, "cyberos.tool_name").as_deref(),
        Some("cyberos.cuo.route")
    );
    assert_eq!(
        attr(span, "cyberos.outcome").as_deref(),
        Some("input_validation")
    );
    assert_eq!(attr(span, "cyberos.trace_id"), Some(trace));
    assert_eq!(attr(span, "cyberos.tenant_id").as_deref(), Some(TENANT));
    let names: Vec<_> = collector.spans().into_iter().map(|r| r.span.name).collect();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("tools/call")).count(),
        2,
        "{names:?}"
    );
}

#[test]
fn a_task_span_is_linked_to_its_call_and_the_trace_reaches_memory_and_the_audit_row() {
    let collector = Collector::start();
    let memory = MemoryServer::start();
    let mut b = Bridge::initialized(&[
        "--otlp-endpoint",
        &collector.endpoint,
        "--memory-url",
        &memory.url,
    ]);
    let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let resp = b.request(
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow",
               "arguments": {"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
                             "inputs": {"title": "an event store"}},
               "_meta": {"traceparent": caller, "tracestate": "rojo=00f067aa0ba902b7"}}),
    );
    let task_id = resp["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {resp}"))
        .to_owned();
    let call = collector.wait_for(Duration::from_secs(10), |s| {
        s.name == "tools/call cyberos.cuo.execute_workflow"
    });
    let task = collector.wait_for(Duration::from_secs(30), |s| {
        attr(s, "cyberos.task_id").as_deref() == Some(task_id.as_str())
    });
    let (call, task) = (call.span, task.span);
    assert_eq!(hex(&call.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex(&call.parent_span_id), "b7ad6b7169203331");
    assert_eq!(task.name, "task cyberos.cuo.execute_workflow");
    assert_eq!(call.trace_state, "rojo=00f067aa0ba902b7");
    assert_eq!(
        task.trace_state, call.trace_state,
        "the run keeps the tracestate"
    );
    assert_eq!(
        task.trace_id, call.trace_id,
        "the run is in the call's trace"
    );
    assert_eq!(task.parent_span_id, call.span_id);
    assert!(
        task.links
            .iter()
            .any(|l| l.span_id == call.span_id && l.trace_id == call.trace_id),
        "the task span links to the call's: {:?}",
        task.links
    );
    assert_eq!(attr(&task, "cyberos.outcome").as_deref(), Some("success"));
    assert_eq!(
        attr(&task, "cyberos.tool_name").as_deref(),
        Some("cyberos.cuo.execute_workflow")
    );
    assert!(attr(&task, "cyberos.duration_ms").is_some());
    // The plugin.invoked row reached the memory service, in the call's trace, and the
    // request carried a traceparent whose parent is a bridge span of that trace.
    let row = wait_for(Duration::from_secs(10), || {
        let rows = memory.entries(TENANT);
        rows.into_iter()
            .find(|e| e["kind"] == "plugin.invoked")
            .ok_or_else(|| "no plugin.invoked row reached the memory service".to_owned())
    });
    assert_eq!(row["body"]["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(row["body"]["tool_name"], "cyberos.cuo.execute_workflow");
    assert_eq!(row["body"]["outcome"], "success");
    let sent = memory
        .headers()
        .iter()
        .filter_map(|h| h.get("traceparent")?.to_str().ok().map(str::to_owned))
        .collect::<Vec<_>>();
    let expected = format!(
        "00-0af7651916cd43dd8448eb211c80319c-{}-01",
        hex(&call.span_id)
    );
    assert!(
        sent.contains(&expected),
        "{sent:?} should contain {expected}"
    );
    assert!(
        memory
            .headers()
            .iter()
            .all(|h| h.get("tracestate").and_then(|v| v.to_str().ok())
                == Some("rojo=00f067aa0ba902b7")),
        "every memory request of the run carries the caller's tracestate"
    );
}

#[test]
fn sigterm_on_stdio_flushes_the_spans_before_exit() {
    let collector = Collector::start();
    let mut b = Bridge::initialized(&["--otlp-endpoint", &collector.endpoint]);
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    let trace = envelope_trace(&bad);
    // Well inside the export thread's 1 s batch delay: only the exit flush can send it.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = b
        .wait_exit(Duration::from_secs(10))
        .expect("the bridge exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    let got = collector
        .spans()
        .into_iter()
        .find(|r| hex(&r.span.trace_id) == trace);
    assert!(got.is_some(), "the span was flushed before exit");
}
