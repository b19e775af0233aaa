//! What every exported span shares: the export gate, the outcome, and the timer that
//! records duration and outcome (span attributes and metrics) exactly once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use opentelemetry::trace::Status;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::metrics;
use super::outcome::Outcome;
use crate::domain::TenantId;

/// The `tracing` target of the spans that are exported.
pub const TARGET: &str = "cyberos::span";
/// The target of the same spans while export is shut (they still carry ids into logs).
pub(super) const UNEXPORTED: &str = "cyberos::span::unexported";

/// Whether spans are exported now; installed by `main` with the export pipeline.
type Gate = Box<dyn Fn() -> bool + Send + Sync>;
static EXPORT_GATE: std::sync::OnceLock<Gate> = std::sync::OnceLock::new();

/// Installs the check the call and task spans ask before they are built: while the
/// collector is failing (or the queue is full) they are not recorded at all, so a down
/// collector costs a call nothing (the gate counts them as dropped).
pub fn set_export_gate(gate: Gate) {
    let _ = EXPORT_GATE.set(gate);
}

pub(super) fn exporting() -> bool {
    EXPORT_GATE.get().is_none_or(|open| open())
}

/// Whether an OTel layer is installed (`otel_layer` was built).
static OTEL_LAYER: AtomicBool = AtomicBool::new(false);

/// Notes that an OTel layer is installed.
pub(super) fn otel_installed() {
    OTEL_LAYER.store(true, Ordering::Relaxed);
}

/// Whether a span opened now becomes an OTel span: a layer is installed and export is
/// open.
pub(super) fn otel_records() -> bool {
    OTEL_LAYER.load(Ordering::Relaxed) && exporting()
}

/// What a span measures: a `tools/call` (over `pipe` or `tcp`) or a task run.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Call { transport: &'static str },
    Task,
}

/// An open span that records its duration and outcome when it ends; dropped without an
/// outcome, it records `panic` if the thread is unwinding, else `cancelled`.
pub(super) struct Timed {
    pub(super) span: Span,
    kind: Kind,
    started: Instant,
    ended: AtomicBool,
    /// The tool, as a metric label (a catalogue name or `_OTHER`).
    pub(super) tool: OnceLock<&'static str>,
    /// The verified tenant, once recorded (the SDK keeps every value set for a key, so
    /// `unknown` is written only at the end, if nothing else was).
    pub(super) tenant: OnceLock<TenantId>,
    /// Whether an OTel layer records this span (else attributes are skipped: only the log
    /// fields matter).
    pub(super) otel: bool,
}

impl Timed {
    pub(super) fn new(span: Span, kind: Kind, otel: bool) -> Timed {
        Timed {
            span,
            kind,
            started: Instant::now(),
            ended: AtomicBool::new(false),
            tool: OnceLock::new(),
            tenant: OnceLock::new(),
            otel,
        }
    }

    /// Records the outcome and the duration, once; says the duration the first time.
    pub(super) fn end(&self, result: Outcome) -> Option<std::time::Duration> {
        if self.ended.swap(true, Ordering::AcqRel) {
            return None;
        }
        let took = self.started.elapsed();
        let tenant = self.tenant.get();
        let tool = self.tool.get().copied();
        match self.kind {
            Kind::Call { transport } => metrics::call_ended(tool, result, took, transport, tenant),
            Kind::Task => metrics::task_ended(tool.unwrap_or(metrics::OTHER), result, tenant),
        }
        let (failed, outcome) = (result.failed(), result.as_str());
        if tenant.is_none() {
            self.span.record("cyberos.tenant_id", "unknown");
        }
        if !self.otel {
            return Some(took);
        }
        let ms = i64::try_from(took.as_millis()).unwrap_or(i64::MAX);
        self.span.set_attribute("cyberos.duration_ms", ms);
        self.span.set_attribute("cyberos.outcome", outcome);
        if failed {
            self.span.set_attribute("error.type", outcome);
            self.span.set_status(Status::error(outcome.to_owned()));
        } else {
            self.span.set_status(Status::Ok);
        }
        Some(took)
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        let _ = self.end(if std::thread::panicking() {
            Outcome::Panic
        } else {
            Outcome::Cancelled
        });
    }
}
