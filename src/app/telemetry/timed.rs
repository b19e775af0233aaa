//! What every exported span shares: the export gate, the outcome, and the timer that
//! records duration and outcome exactly once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use opentelemetry::trace::Status;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::domain::ErrorClass;

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

/// How a call or run ended, for `cyberos.outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Success,
    /// It failed with this class.
    Failed(ErrorClass),
    /// It was cancelled or stopped before it ended.
    Cancelled,
    /// Its handler panicked (the client got `internal_error`).
    Panic,
}

impl Outcome {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed(class) => class.as_str(),
            Outcome::Cancelled => "cancelled",
            Outcome::Panic => "panic",
        }
    }

    fn failed(self) -> bool {
        matches!(self, Outcome::Failed(_) | Outcome::Panic)
    }
}

/// An open span that records its duration and outcome when it ends; dropped without an
/// outcome, it records `panic` if the thread is unwinding, else `cancelled`.
pub(super) struct Timed {
    pub(super) span: Span,
    started: Instant,
    ended: AtomicBool,
    /// Whether `cyberos.tenant_id` was recorded (the SDK keeps every value set for a key,
    /// so `unknown` is written only at the end, if nothing else was).
    pub(super) tenant_known: AtomicBool,
    /// Whether an OTel layer records this span (else attributes are skipped: only the log
    /// fields matter).
    pub(super) otel: bool,
}

impl Timed {
    pub(super) fn new(span: Span, tenant_known: bool, otel: bool) -> Timed {
        Timed {
            span,
            started: Instant::now(),
            ended: AtomicBool::new(false),
            tenant_known: AtomicBool::new(tenant_known),
            otel,
        }
    }

    pub(super) fn end(&self, outcome: Outcome) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let (failed, outcome) = (outcome.failed(), outcome.as_str());
        if !self.tenant_known.load(Ordering::Acquire) {
            self.span.record("cyberos.tenant_id", "unknown");
        }
        if !self.otel {
            return;
        }
        let ms = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.span.set_attribute("cyberos.duration_ms", ms);
        self.span.set_attribute("cyberos.outcome", outcome);
        if failed {
            self.span.set_attribute("error.type", outcome);
            self.span.set_status(Status::error(outcome.to_owned()));
        } else {
            self.span.set_status(Status::Ok);
        }
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        self.end(if std::thread::panicking() {
            Outcome::Panic
        } else {
            Outcome::Cancelled
        });
    }
}
