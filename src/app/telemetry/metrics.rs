//! The bridge's metrics: OpenTelemetry instruments on the global meter provider, which
//! `main` installs when metrics are pushed or scraped (without one every instrument is a
//! no-op). `mcp.server.operation.duration` follows the MCP semantic conventions; the rest
//! are `cyberos.*`. Every label is bounded: a tool outside the catalogue or an unknown
//! method is `_OTHER`, and the tenant is a label only with `--metrics-tenant-label`.
//! (The adapters add `cyberos.cuo.children` and `cyberos.spans.dropped`.)

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};

use super::outcome::Outcome;
use crate::domain::{ErrorClass, TenantId};

/// The label of a value outside a known set (the semantic conventions' word for it).
pub const OTHER: &str = "_OTHER";

/// Bucket bounds of `mcp.server.operation.duration` in seconds, as the MCP semantic
/// conventions advise.
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

static TENANT_LABEL: AtomicBool = AtomicBool::new(false);
static RECORDING: AtomicBool = AtomicBool::new(false);

/// Whether a meter provider is installed. Without one every instrument is a no-op, and
/// the labels of a measurement (a few allocations per call) are not built either.
pub fn record_metrics(on: bool) {
    RECORDING.store(on, Ordering::Relaxed);
}

fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// `--metrics-tenant-label`: whether metrics that know the tenant carry it.
pub fn label_tenants(on: bool) {
    TENANT_LABEL.store(on, Ordering::Relaxed);
}

/// Why the HTTP transport refused a request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Origin or Host not allowed (403).
    Origin,
    /// No valid token (401).
    Auth,
    /// The tenant's call rate or waits (429).
    Rate,
    /// Load shed: the connection cap, the in-flight cap or the body budget (503).
    Shed,
    /// The body is too large (413).
    Size,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::Origin => "origin",
            Refusal::Auth => "auth",
            Refusal::Rate => "rate",
            Refusal::Shed => "shed",
            Refusal::Size => "size",
        }
    }
}

struct Instruments {
    duration: Histogram<f64>,
    tool_calls: Counter<u64>,
    tasks_running: UpDownCounter<i64>,
    tasks_ended: Counter<u64>,
    refusals: Counter<u64>,
}

/// Created on first use, from the provider installed by then (`main` installs it before
/// anything records).
fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = opentelemetry::global::meter(env!("CARGO_PKG_NAME"));
        Instruments {
            duration: meter
                .f64_histogram("mcp.server.operation.duration")
                .with_unit("s")
                .with_description("MCP request duration, from its arrival to its answer")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            tool_calls: meter
                .u64_counter("cyberos.tool.calls")
                .with_unit("{call}")
                .with_description("tools/call requests by tool and outcome")
                .build(),
            tasks_running: meter
                .i64_up_down_counter("cyberos.tasks.running")
                .with_unit("{task}")
                .with_description("Task runs in progress on this bridge")
                .build(),
            tasks_ended: meter
                .u64_counter("cyberos.tasks.ended")
                .with_unit("{task}")
                .with_description("Task runs ended on this bridge, by status")
                .build(),
            refusals: meter
                .u64_counter("cyberos.http.refusals")
                .with_unit("{request}")
                .with_description("HTTP requests the transport refused itself, by reason")
                .build(),
        }
    })
}

/// The tenant label, when the operator asked for it.
fn tenant_label(tenant: Option<&TenantId>) -> Option<KeyValue> {
    if !TENANT_LABEL.load(Ordering::Relaxed) {
        return None;
    }
    tenant.map(|t| KeyValue::new("cyberos.tenant_id", t.to_string()))
}

/// A request other than `tools/call` was answered (`method` is [`OTHER`] when unknown).
pub fn request_ended(
    method: &'static str,
    failed: Option<ErrorClass>,
    took: Duration,
    transport: &'static str,
) {
    if !recording() {
        return;
    }
    let mut attrs = vec![
        KeyValue::new("mcp.method.name", method),
        KeyValue::new("network.transport", transport),
    ];
    if let Some(class) = failed {
        attrs.push(KeyValue::new("error.type", class.as_str()));
    }
    instruments().duration.record(took.as_secs_f64(), &attrs);
}

/// A `tools/call` ended: its duration and its count by tool and outcome.
pub(super) fn call_ended(
    tool: Option<&'static str>,
    outcome: Outcome,
    took: Duration,
    transport: &'static str,
    tenant: Option<&TenantId>,
) {
    if !recording() {
        return;
    }
    let mut attrs = vec![
        KeyValue::new("mcp.method.name", "tools/call"),
        KeyValue::new("network.transport", transport),
    ];
    attrs.extend(tool.map(|t| KeyValue::new("gen_ai.tool.name", t)));
    attrs.extend(tenant_label(tenant));
    let mut timed = attrs.clone();
    if outcome.failed() {
        timed.push(KeyValue::new("error.type", outcome.as_str()));
    }
    let i = instruments();
    i.duration.record(took.as_secs_f64(), &timed);
    attrs.push(KeyValue::new("cyberos.outcome", outcome.as_str()));
    i.tool_calls.add(1, &attrs);
}

fn task_attrs(tool: &'static str, tenant: Option<&TenantId>) -> Vec<KeyValue> {
    let mut attrs = vec![KeyValue::new("gen_ai.tool.name", tool)];
    attrs.extend(tenant_label(tenant));
    attrs
}

/// A task run started.
pub(super) fn task_started(tool: &'static str, tenant: Option<&TenantId>) {
    if !recording() {
        return;
    }
    instruments()
        .tasks_running
        .add(1, &task_attrs(tool, tenant));
}

/// A task run ended: `completed`, `failed` (an error or a panic) or `cancelled` (stopped
/// before it ended: cancelled, or killed at shutdown).
pub(super) fn task_ended(tool: &'static str, outcome: Outcome, tenant: Option<&TenantId>) {
    if !recording() {
        return;
    }
    let mut attrs = task_attrs(tool, tenant);
    let i = instruments();
    i.tasks_running.add(-1, &attrs);
    let status = match outcome {
        Outcome::Success => "completed",
        Outcome::Failed(_) | Outcome::Panic => "failed",
        Outcome::Cancelled => "cancelled",
    };
    attrs.push(KeyValue::new("cyberos.task.status", status));
    i.tasks_ended.add(1, &attrs);
}

/// The HTTP transport refused a request (`tenant` when it is known: rate refusals).
pub fn refused(reason: Refusal, tenant: Option<&TenantId>) {
    if !recording() {
        return;
    }
    let mut attrs = vec![KeyValue::new("cyberos.refusal.reason", reason.as_str())];
    attrs.extend(tenant_label(tenant));
    instruments().refusals.add(1, &attrs);
}
