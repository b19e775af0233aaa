//! The spans of a `tools/call` and of a task run, their trace ids, and the export gate.

use std::sync::Arc;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags};
use opentelemetry::{Context, KeyValue};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::context::Parent;
use super::metrics;
use super::outcome::Outcome;
use super::timed::{Kind, TARGET, Timed, UNEXPORTED, exporting, otel_records};
use crate::app::telemetry::ids::{new_span_id, new_trace_id, request_trace};
use crate::domain::ids::{hex_lower, write_hex};
use crate::domain::task::Task;
use crate::domain::{CallCtx, PROTOCOL_VERSION, TenantId, Tool, TraceId};

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

/// The trace id of a request: its call span's, else its caller's, else the transport's
/// (HTTP `traceparent` header) or a new one.
pub fn request_trace_id(call: Option<&CallSpan>, parent: Option<&Parent>) -> TraceId {
    call.map(CallSpan::trace_id)
        .or(parent.map(|p| p.trace_id))
        .unwrap_or_else(request_trace)
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
    /// Opens the span, continuing `parent`'s trace when there is one. `request_id` gives
    /// the JSON-RPC id as text (asked for only when the span is exported); `transport` is
    /// `pipe` (stdio) or `tcp` (HTTP); `tenant` is the caller's when the transport verified
    /// it already (HTTP).
    pub fn start(
        parent: Option<&Parent>,
        request_id: impl FnOnce() -> String,
        transport: &'static str,
        tenant: Option<TenantId>,
    ) -> CallSpan {
        let (span, joined) = if otel_records() {
            let span = gated_span!(
                "tools/call",
                otel.kind = "server",
                cyberos.trace_id = Empty,
                span_id = Empty,
                cyberos.tenant_id = tenant.map(tracing::field::display),
            );
            // The OTel layer draws the ids as the span opens; the log layer gets them after.
            let joined = join_trace(&span, parent, None);
            span.record("cyberos.trace_id", tracing::field::display(joined.trace_id));
            span.record("span_id", tracing::field::display(Hex(&joined.span_id)));
            (span, joined)
        } else {
            // Ours to draw: the span opens with every field it has, since each field
            // recorded later is formatted again for the log layer.
            let joined = own_ids(parent);
            // No `otel.kind`: nothing exports this span, and the log line has no use for it.
            let span = gated_span!(
                "tools/call",
                cyberos.trace_id = %joined.trace_id,
                span_id = %Hex(&joined.span_id),
                cyberos.tenant_id = tenant.map(tracing::field::display),
            );
            (span, joined)
        };
        let Joined {
            trace_id,
            span_id,
            sampled,
            otel,
        } = joined;
        let attributes = otel.then(|| {
            [
                KeyValue::new("cyberos.plugin_id", PLUGIN_ID),
                KeyValue::new("rpc.system", "jsonrpc"),
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("mcp.protocol.version", PROTOCOL_VERSION),
                KeyValue::new("jsonrpc.request.id", request_id()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("network.transport", transport),
            ]
        });
        for kv in attributes.into_iter().flatten() {
            span.set_attribute(kv.key, kv.value);
        }
        let timed = Timed::new(span, Kind::Call { transport }, otel);
        if let Some(tenant) = tenant {
            let _ = timed.tenant.set(tenant);
        }
        CallSpan {
            timed,
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

    /// Records the tool the call asked for: `tool`, the one `name` names if any (a known
    /// tool's name, or the unknown name as sent, shortened and made inert).
    pub fn tool(&self, tool: Option<Tool>, name: &str) {
        // Metrics take a bounded label: the catalogue's spelling, or `_OTHER`.
        let known = tool.map_or(metrics::OTHER, Tool::name);
        let _ = self.timed.tool.set(known);
        if !self.timed.otel {
            return;
        }
        let name = crate::domain::text::clip(name, 128).into_owned();
        let span = &self.timed.span;
        // MCP semantic conventions: "{method} {tool}". The OTel span has started (its ids
        // were needed), so the name is changed on it directly.
        span.context()
            .span()
            .update_name(format!("tools/call {name}"));
        span.set_attribute("cyberos.tool_name", name.clone());
        span.set_attribute("gen_ai.tool.name", name);
    }

    /// Records the tenant once its token is verified.
    pub fn tenant(&self, tenant: &TenantId) {
        if self.timed.tenant.set(*tenant).is_ok() {
            self.timed
                .span
                .record("cyberos.tenant_id", tracing::field::display(tenant));
        }
    }

    /// Ends the call with its outcome and says how long it took; later calls change
    /// nothing (`None`).
    pub fn finish(&self, outcome: Outcome) -> Option<std::time::Duration> {
        self.timed.end(outcome)
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
        let timed = Timed::new(span, Kind::Task, otel);
        let _ = timed.tool.set(task.tool.name());
        let _ = timed.tenant.set(task.tenant);
        metrics::task_started(task.tool.name(), Some(&task.tenant));
        TaskSpan { timed }
    }

    /// The `tracing` span, to run the task in.
    pub fn span(&self) -> &Span {
        &self.timed.span
    }

    /// Ends the run with its outcome.
    pub fn finish(&self, outcome: Outcome) {
        let _ = self.timed.end(outcome);
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
        own_ids(parent)
    }
}

/// Ids of a span no OTel layer records: the parent's trace (or a new one), a fresh span
/// id, the parent's sampling decision.
fn own_ids(parent: Option<&Parent>) -> Joined {
    Joined {
        trace_id: parent.map_or_else(new_trace_id, |p| p.trace_id),
        span_id: new_span_id(),
        sampled: parent.is_none_or(|p| p.sampled),
        otel: false,
    }
}

/// Bytes as lowercase hex, written only when a log layer formats them.
struct Hex<'a>(&'a [u8]);

impl std::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_hex(f, self.0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::telemetry::context::parse_traceparent;

    #[test]
    fn without_an_otel_layer_a_call_continues_the_callers_trace() {
        let parent = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let call = CallSpan::start(parent.as_ref(), || "1".into(), "pipe", None);
        assert_eq!(
            call.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_ne!(call.span_id(), parent.unwrap().span_id);
        let fresh = CallSpan::start(None, || "2".into(), "pipe", None);
        assert_ne!(fresh.trace_id(), call.trace_id());
        assert!(call.sampled() && fresh.sampled());
    }

    #[test]
    fn a_callers_decision_not_to_sample_travels_on() {
        let parent = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let call = CallSpan::start(parent.as_ref(), || "1".into(), "pipe", None);
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
}
