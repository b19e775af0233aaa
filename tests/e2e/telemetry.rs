//! Spans (CONTRACT §9): seed criterion 14 through the SDK's in-memory exporter, then the
//! built binary exporting to a real OTLP/gRPC receiver, and with the collector down.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanKind, Status, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

use cyberos_mcp_bridge::app::Settings;
use cyberos_mcp_bridge::app::telemetry::otel_layer;

use crate::support::binary::{Bridge, binary};
use crate::support::collector::{Collector, attr, black_hole, hex};
use crate::support::fakes::Behaviour;
use crate::support::in_process::Client;
use crate::support::memory_server::MemoryServer;
use crate::support::{assert_envelope, fixtures, init_params};

const TENANT: &str = "00000000-0000-4000-8000-000000000001";

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

fn envelope_trace(frame: &Value) -> String {
    frame["error"]["data"]["trace_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an error envelope: {frame}"))
        .to_owned()
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

/// Reads the bridge's stderr lines into a shared buffer.
fn spawn_logged(
    args: &[&str],
    data: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(binary())
        .arg("--dev")
        .arg("--data-dir")
        .arg(data)
        .arg("--skills-dir")
        .arg(fixtures().join("skills"))
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("CYBEROS_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

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
    let deadline = Instant::now() + Duration::from_secs(10);
    let row = loop {
        let rows = memory.entries(TENANT);
        if let Some(row) = rows.into_iter().find(|e| e["kind"] == "plugin.invoked") {
            break row;
        }
        assert!(
            Instant::now() < deadline,
            "no plugin.invoked row reached the memory service"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
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
fn json_logs_carry_the_trace_and_span_ids_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = spawn_logged(&["--log-format", "json"], dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "cyberos.cuo.route", "arguments": {"query": ""}}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    drop(stdin);
    let frames: Vec<Value> = BufReader::new(stdout)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    let trace = envelope_trace(&frames[1]);
    let logs: Vec<Value> = lines
        .try_iter()
        .map(|l| serde_json::from_str(&l).unwrap_or_else(|_| panic!("not a JSON log line: {l}")))
        .collect();
    let line = logs
        .iter()
        .find(|l| l["fields"]["message"] == "tool call")
        .expect("a tool call log line");
    assert_eq!(line["span"]["cyberos.trace_id"], trace.as_str(), "{line}");
    let span_id = line["span"]["span_id"].as_str().unwrap();
    assert!(
        span_id.len() == 16 && span_id != "0000000000000000",
        "{line}"
    );
}

/// Runs `n` sequential tools/call through the binary and returns (calls/s, exit time).
fn run_calls(extra: &[&str], n: usize) -> (Duration, Duration) {
    let mut b = Bridge::initialized(extra);
    let started = Instant::now();
    for _ in 0..n {
        let r = b.call("cyberos.skill.list_skills", json!({}));
        assert!(r["result"].is_object(), "{r}");
    }
    let calls = started.elapsed();
    let closing = Instant::now();
    assert!(b.close().success());
    (calls, closing.elapsed())
}

#[test]
fn a_down_or_hung_collector_never_fails_a_call_and_exit_waits_a_bounded_time() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hung = black_hole();
    for endpoint in [refused, hung] {
        let (calls, exit) = run_calls(&["--otlp-endpoint", &endpoint], 200);
        // Correctness bounds, not a benchmark (that is benches/otlp.rs): the calls went
        // through, and the flush on EOF gave up within its wait.
        assert!(calls < Duration::from_secs(20), "{endpoint}: {calls:?}");
        assert!(
            exit < Duration::from_secs(8),
            "{endpoint}: exit took {exit:?}"
        );
    }
}

#[test]
fn a_bad_otlp_endpoint_is_a_usage_error() {
    let out = Command::new(binary())
        .args(["--dev", "--otlp-endpoint", "localhost:4317"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp-endpoint"), "{err}");
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

#[test]
fn the_standard_otel_variable_alone_turns_export_on() {
    let collector = Collector::start();
    let mut b = Bridge::spawn_with_env(
        &["--dev"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "bridge-under-test"),
        ],
    );
    b.initialize();
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    let trace = envelope_trace(&bad);
    assert!(b.close().success());
    let got = collector.wait_for(Duration::from_secs(1), |s| hex(&s.trace_id) == trace);
    assert_eq!(got.service, "bridge-under-test");
}

#[test]
fn the_standard_switches_turn_env_export_off_and_a_non_grpc_protocol_is_refused() {
    let collector = Collector::start();
    for off in [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ] {
        let mut b = Bridge::spawn_with_env(
            &["--dev"],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
                off,
            ],
        );
        b.initialize();
        let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
        assert_eq!(bad["error"]["data"]["class"], "input_validation");
        // Exit flushes whatever was exported: nothing was.
        assert!(b.close().success());
        assert!(collector.spans().is_empty(), "{off:?}");
    }
    let out = Command::new(binary())
        .arg("--dev")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OTLP/gRPC only"), "{err}");
}
