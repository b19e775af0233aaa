//! One OpenTelemetry span per `tools/call` and one per task run (CONTRACT §9).
//!
//! The spans are `tracing` spans with target [`TARGET`]. When an exporter is configured,
//! the tracing-opentelemetry layer (filtered to that target, see [`otel_layer`]) makes them
//! OTel spans, and the request's trace id *is* the OTel trace id: the caller's, when it sent
//! a `traceparent`, else the one the SDK drew. Without an exporter there is no OTel layer;
//! the ids come from the caller's `traceparent` or the CSPRNG. Either way the span carries
//! the trace and span ids into every log line written while the call runs.
//!
//! Outcome: `success`, an error class, `panic` (the handler panicked: `App::answer` catches
//! it and answers `internal_error`; a task run that panics records it as its span drops
//! while unwinding), or `cancelled` (the client cancelled the request, or a task was
//! stopped).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use opentelemetry::trace::{SpanContext, SpanId, Status, TraceContextExt, TraceFlags};
use opentelemetry::{Context, KeyValue};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::app::trace::{new_span_id, new_trace_id};
use crate::domain::ids::hex_lower;
use crate::domain::task::Task;
use crate::domain::{CallCtx, ErrorClass, TenantId, TraceId};

/// The `tracing` target of the spans that are exported.
pub const TARGET: &str = "cyberos::span";
/// The target of the same spans while export is shut (they still carry ids into logs).
const UNEXPORTED: &str = "cyberos::span::unexported";

/// Whether spans are exported now; installed by `main` with the export pipeline.
type Gate = Box<dyn Fn() -> bool + Send + Sync>;
static EXPORT_GATE: std::sync::OnceLock<Gate> = std::sync::OnceLock::new();

/// Installs the check the call and task spans ask before they are built: while the
/// collector is failing (or the queue is full) they are not recorded at all, so a down
/// collector costs a call nothing (the gate counts them as dropped).
pub fn set_export_gate(gate: Gate) {
    let _ = EXPORT_GATE.set(gate);
}

fn exporting() -> bool {
    EXPORT_GATE.get().is_none_or(|open| open())
}

/// A span of [`TARGET`] when export is open, else of a target the OTel layer ignores.
macro_rules! gated_span {
    ($($rest:tt)*) => {
        if exporting() {
            tracing::info_span!(target: TARGET, parent: None, $($rest)*)
        } else {
            tracing::info_span!(target: UNEXPORTED, parent: None, $($rest)*)
        }
    };
}

/// The plugin id on every span (seed §8).
pub const PLUGIN_ID: &str = "cyberos";

/// The W3C trace context a request arrived with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The caller's trace.
    pub trace_id: TraceId,
    /// The caller's span.
    pub span_id: [u8; 8],
    /// The caller's sampling decision.
    pub sampled: bool,
    /// The caller's `tracestate`, passed on unchanged (the bridge adds no entry of its own).
    pub state: Option<Arc<str>>,
}

impl Parent {
    /// The context of `traceparent` with its `tracestate`; `None` without a valid
    /// `traceparent` (a `tracestate` alone means nothing).
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Parent> {
        let mut parent = parse_traceparent(traceparent?)?;
        parent.state = tracestate.and_then(parse_tracestate);
        Some(parent)
    }
}

/// Parses a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase). Malformed
/// values, other versions and all-zero ids are ignored, as the W3C spec asks.
pub fn parse_traceparent(value: &str) -> Option<Parent> {
    let mut parts = value.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    if parts.next().is_some()
        || version != "00"
        || !hex(trace, 32)
        || !hex(parent, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let span_id = u64::from_str_radix(parent, 16).ok()?.to_be_bytes();
    if span_id == [0; 8] {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(Parent {
        trace_id: TraceId::parse(trace)?,
        span_id,
        sampled: flags & 1 == 1,
        state: None,
    })
}

/// The longest `tracestate` passed on; a member that would take it past this is dropped
/// (W3C: propagate at least 512 characters, truncate by whole members).
const TRACESTATE_MAX: usize = 512;

/// Parses a W3C `tracestate` (`key=value` list members, comma separated, at most 32) into
/// its normal form. A malformed list (bad key or value, duplicate key) is dropped whole,
/// so nothing that could break a header reaches an upstream.
pub fn parse_tracestate(value: &str) -> Option<Arc<str>> {
    let mut out = String::new();
    let mut keys: Vec<&str> = Vec::new();
    for member in value.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, val) = member.split_once('=')?;
        if !tracestate_key(key) || !tracestate_value(val) || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        if keys.len() > 32 {
            return None;
        }
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + member.len() <= TRACESTATE_MAX {
            if sep == 1 {
                out.push(',');
            }
            out.push_str(member);
        }
    }
    (!out.is_empty()).then(|| Arc::from(out))
}

/// `simple-key` or `tenant@system`: lowercase letters, digits and `_-*/`, starting with a
/// letter or digit (as lenient as the OTel SDK: a list is dropped whole, so strictness
/// beyond what keeps headers safe costs the caller its trace state).
fn tracestate_key(key: &str) -> bool {
    let part = |s: &str, max: usize| {
        let first = s.as_bytes().first().copied().unwrap_or(b'_');
        s.len() <= max
            && (first.is_ascii_lowercase() || first.is_ascii_digit())
            && s.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'*' | b'/')
            })
    };
    match key.split_once('@') {
        None => part(key, 256),
        Some((tenant, system)) => part(tenant, 241) && part(system, 14),
    }
}

/// 1–256 printable ASCII characters other than `,` and `=` (the member was trimmed, so it
/// does not end in a space).
fn tracestate_value(value: &str) -> bool {
    (1..=256).contains(&value.len())
        && value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

/// The trace id of a request: its call span's, else its caller's, else the transport's
/// (HTTP `traceparent` header) or a new one.
pub fn request_trace_id(call: Option<&CallSpan>, parent: Option<&Parent>) -> TraceId {
    call.map(CallSpan::trace_id)
        .or(parent.map(|p| p.trace_id))
        .unwrap_or_else(crate::app::trace::request_trace)
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
struct Timed {
    span: Span,
    started: Instant,
    ended: AtomicBool,
    /// Whether `cyberos.tenant_id` was recorded (the SDK keeps every value set for a key,
    /// so `unknown` is written only at the end, if nothing else was).
    tenant_known: AtomicBool,
    /// Whether an OTel layer records this span (else attributes are skipped: only the log
    /// fields matter).
    otel: bool,
}

impl Timed {
    fn new(span: Span, tenant_known: bool, otel: bool) -> Timed {
        Timed {
            span,
            started: Instant::now(),
            ended: AtomicBool::new(false),
            tenant_known: AtomicBool::new(tenant_known),
            otel,
        }
    }

    fn end(&self, outcome: Outcome) {
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

/// The span of one `tools/call`.
pub struct CallSpan {
    timed: Timed,
    trace_id: TraceId,
    span_id: [u8; 8],
    sampled: bool,
    state: Option<Arc<str>>,
}

impl CallSpan {
    /// Opens the span, continuing `parent`'s trace when there is one. `request_id` is the
    /// JSON-RPC id as text; `transport` is `pipe` (stdio) or `tcp` (HTTP).
    pub fn start(parent: Option<&Parent>, request_id: &str, transport: &'static str) -> CallSpan {
        let span = gated_span!(
            "tools/call",
            otel.kind = "server",
            cyberos.trace_id = Empty,
            span_id = Empty,
            cyberos.tenant_id = Empty,
        );
        let Joined {
            trace_id,
            span_id,
            sampled,
            otel,
        } = join_trace(&span, parent, None);
        span.record("cyberos.trace_id", trace_id.to_hex().as_str());
        span.record("span_id", hex_lower(&span_id).as_str());
        let attributes = otel.then(|| {
            [
                KeyValue::new("cyberos.plugin_id", PLUGIN_ID),
                KeyValue::new("rpc.system", "jsonrpc"),
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("mcp.protocol.version", crate::app::server::PROTOCOL_VERSION),
                KeyValue::new("jsonrpc.request.id", request_id.to_owned()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("network.transport", transport),
            ]
        });
        for kv in attributes.into_iter().flatten() {
            span.set_attribute(kv.key, kv.value);
        }
        CallSpan {
            timed: Timed::new(span, false, otel),
            trace_id,
            span_id,
            sampled,
            state: parent.and_then(|p| p.state.clone()),
        }
    }

    /// The request's trace id.
    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// This span's id: the parent id in the `traceparent` sent upstream.
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// Whether the trace is sampled (passed on in `traceparent`).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// The caller's `tracestate`, passed on with the `traceparent`.
    pub fn tracestate(&self) -> Option<Arc<str>> {
        self.state.clone()
    }

    /// The `tracing` span, to run the call in.
    pub fn span(&self) -> &Span {
        &self.timed.span
    }

    /// Records the tool the call asked for (a known tool's name, or the unknown name as
    /// sent, shortened).
    pub fn tool(&self, name: &str) {
        let name = crate::lines::truncate(name, 128);
        if !self.timed.otel {
            return;
        }
        let span = &self.timed.span;
        // MCP semantic conventions: "{method} {tool}". The OTel span has started (its ids
        // were needed), so the name is changed on it directly.
        span.context()
            .span()
            .update_name(format!("tools/call {name}"));
        span.set_attribute("cyberos.tool_name", name.to_owned());
        span.set_attribute("gen_ai.tool.name", name.to_owned());
    }

    /// Records the tenant once its token is verified.
    pub fn tenant(&self, tenant: &TenantId) {
        if !self.timed.tenant_known.swap(true, Ordering::AcqRel) {
            self.timed
                .span
                .record("cyberos.tenant_id", tracing::field::display(tenant));
        }
    }

    /// Ends the call with its outcome; later calls change nothing.
    pub fn finish(&self, outcome: Outcome) {
        self.timed.end(outcome);
    }
}

/// The span of one task run: in the call's trace, a child of the call's span and linked to
/// it (the run outlives the call that started it).
pub struct TaskSpan {
    timed: Timed,
}

impl TaskSpan {
    /// Opens the span of `task`, started by the call `ctx`.
    pub fn start(task: &Task, ctx: &CallCtx) -> TaskSpan {
        let span = gated_span!(
            "task",
            otel.kind = "internal",
            otel.name = format!("task {}", task.tool.name()),
            cyberos.trace_id = %task.trace_id,
            span_id = Empty,
            cyberos.tenant_id = %task.tenant,
            task_id = %task.id,
        );
        let call = Parent {
            trace_id: task.trace_id,
            span_id: ctx.span_id,
            sampled: ctx.sampled,
            state: ctx.tracestate.clone(),
        };
        let Joined { span_id, otel, .. } = join_trace(&span, Some(&call), Some(&call));
        span.record("span_id", hex_lower(&span_id).as_str());
        for kv in [
            KeyValue::new("cyberos.plugin_id", PLUGIN_ID),
            KeyValue::new("cyberos.tool_name", task.tool.name()),
            KeyValue::new("cyberos.task_id", task.id.to_string()),
            KeyValue::new("gen_ai.tool.name", task.tool.name()),
        ]
        .into_iter()
        .filter(|_| otel)
        {
            span.set_attribute(kv.key, kv.value);
        }
        TaskSpan {
            timed: Timed::new(span, true, otel),
        }
    }

    /// The `tracing` span, to run the task in.
    pub fn span(&self) -> &Span {
        &self.timed.span
    }

    /// Ends the run with its outcome.
    pub fn finish(&self, outcome: Outcome) {
        self.timed.end(outcome);
    }
}

/// A span's place in its trace.
struct Joined {
    trace_id: TraceId,
    span_id: [u8; 8],
    sampled: bool,
    /// An OTel layer records the span.
    otel: bool,
}

/// Puts `span` in `parent`'s trace (and links it to `link`): the OTel ids and sampling
/// decision when an OTel layer is installed, else the parent's trace (or a new one), a
/// fresh span id and the parent's decision.
fn join_trace(span: &Span, parent: Option<&Parent>, link: Option<&Parent>) -> Joined {
    if let Some(p) = parent {
        // A linked parent is this process's own call span; any other came from the caller.
        let remote = link.is_none();
        // Ignored when no OTel layer is installed or the span is disabled.
        let _ = span.set_parent(Context::new().with_remote_span_context(span_context(p, remote)));
    }
    if let Some(l) = link {
        span.add_link(span_context(l, false));
    }
    let cx = span.context();
    let own = cx.span().span_context().clone();
    if own.is_valid() {
        Joined {
            trace_id: TraceId::from_bytes(own.trace_id().to_bytes()),
            span_id: own.span_id().to_bytes(),
            sampled: own.is_sampled(),
            otel: true,
        }
    } else {
        Joined {
            trace_id: parent.map_or_else(new_trace_id, |p| p.trace_id),
            span_id: new_span_id(),
            sampled: parent.is_none_or(|p| p.sampled),
            otel: false,
        }
    }
}

fn span_context(p: &Parent, remote: bool) -> SpanContext {
    let flags = if p.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        opentelemetry::trace::TraceId::from_bytes(p.trace_id.bytes()),
        SpanId::from_bytes(p.span_id),
        flags,
        remote,
        // Already in normal form, so the SDK's own (laxer) parser accepts it.
        p.state
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_default(),
    )
}

/// The tracing-opentelemetry layer for `tracer`: only [`TARGET`] spans become OTel spans
/// (so the HTTP and gRPC stacks' own spans are never exported, the exporter's included),
/// and warnings and errors logged inside them become span events (the attributes already
/// say what an `info` line would).
pub fn otel_layer<S, T>(tracer: T) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    use tracing_subscriber::Layer;
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_context_activation(false)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_target(false)
        .with_level(false)
        .with_filter(otel_filter())
}

/// [`TARGET`] spans (and events) at every level, anything else at `warn` and above. A
/// static filter, unlike a closure, lets `tracing` cache each callsite's interest, so the
/// many `debug!` callsites in the bridge and its dependencies stay free when disabled.
/// (Spans are created at `info`; no dependency makes `warn` spans.)
fn otel_filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target(UNEXPORTED, tracing::level_filters::LevelFilter::OFF)
        .with_target(TARGET, tracing::Level::TRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_gives_its_ids_and_flag() {
        let p =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(p.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(p.sampled);
        let p =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!p.sampled);
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-+0f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn without_an_otel_layer_a_call_continues_the_callers_trace() {
        let parent = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let call = CallSpan::start(parent.as_ref(), "1", "pipe");
        assert_eq!(
            call.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_ne!(call.span_id(), parent.unwrap().span_id);
        let fresh = CallSpan::start(None, "2", "pipe");
        assert_ne!(fresh.trace_id(), call.trace_id());
        assert!(call.sampled() && fresh.sampled());
    }

    #[test]
    fn a_callers_decision_not_to_sample_travels_on() {
        let parent = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let call = CallSpan::start(parent.as_ref(), "1", "pipe");
        assert!(!call.sampled());
        let ctx = CallCtx {
            tenant: TenantId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
            actor: "a".into(),
            trace_id: call.trace_id(),
            span_id: call.span_id(),
            sampled: call.sampled(),
            tracestate: call.tracestate(),
        };
        assert!(ctx.traceparent().ends_with("-00"), "{}", ctx.traceparent());
        assert!(
            ctx.traceparent()
                .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
        );
    }

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_tracestate_is_kept_in_normal_form() {
        let state = |s| parse_tracestate(s).map(|s| s.to_string());
        assert_eq!(
            state("congo=t61rcWkgMzE").as_deref(),
            Some("congo=t61rcWkgMzE")
        );
        assert_eq!(
            state(" rojo=00f067aa0ba902b7 ,, 1t@vendor=a b\t,congo=x").as_deref(),
            Some("rojo=00f067aa0ba902b7,1t@vendor=a b,congo=x")
        );
        assert_eq!(state(" , "), None);
        let p = Parent::from_headers(Some(TP), Some("rojo=1")).unwrap();
        assert_eq!(p.state.as_deref(), Some("rojo=1"));
        let call = CallSpan::start(Some(&p), "1", "pipe");
        assert_eq!(call.tracestate().as_deref(), Some("rojo=1"));
    }

    #[test]
    fn a_malformed_tracestate_is_dropped_whole() {
        let long = format!("k={}", "v".repeat(257));
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        for bad in [
            "novalue",
            "Upper=1",
            "k=a,k=b",
            "k=a\r\nx-injected: 1",
            "k=é",
            "k=in\tside",
            "k=",
            "=v",
            "_k=v",
            "k@=v",
            "k@toolongvendorname=v",
            "k@_v=v",
            "k=a=b",
            long.as_str(),
            many.as_str(),
        ] {
            assert_eq!(parse_tracestate(bad), None, "{bad:?}");
        }
        // Without a valid traceparent there is no context, its tracestate included.
        assert_eq!(Parent::from_headers(None, Some("rojo=1")), None);
        assert_eq!(Parent::from_headers(Some("00-x"), Some("rojo=1")), None);
        let p = Parent::from_headers(Some(TP), Some("Bad=1")).unwrap();
        assert_eq!(p.state, None);
    }

    #[test]
    fn a_tracestate_over_512_characters_loses_members_from_the_end() {
        let members: Vec<String> = (0..10)
            .map(|i| format!("k{i}={}", "v".repeat(60)))
            .collect();
        let state = parse_tracestate(&members.join(",")).unwrap();
        assert!(state.len() <= 512, "{}", state.len());
        assert_eq!(&*state, members[..8].join(",").as_str());
    }
}
