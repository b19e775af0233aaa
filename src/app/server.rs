//! Method dispatch for one JSON-RPC message: lifecycle, ping, logging, tools and tasks.
//! Transports call [`App::handle`]; it never panics outward (see `stdio`).

use serde_json::{Value, json};

use crate::app::rpc::{
    self, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Reply, Request, RequestId,
    RpcError,
};
use crate::app::session::{LOG_LEVELS, Session};
use crate::app::telemetry::{self, CallSpan, Outcome};
use crate::app::{App, tasks};
use crate::domain::{DomainError, ErrorClass, TraceId};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use tracing::Instrument;

/// A serialized response and what HTTP needs to pick its status.
pub struct Answer {
    /// The response frame.
    pub frame: String,
    /// Scopes the token lacked, when the request failed for that reason.
    pub missing_scopes: Vec<String>,
    /// The tenant is at its cap of running tasks (HTTP: 429).
    pub too_many_tasks: bool,
}

/// The only protocol revision the bridge speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Earlier revisions a client may ask for; we answer with ours and the client decides.
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", PROTOCOL_VERSION];

/// The methods we serve, for telling "unknown" (-32601) from "too early" (-32600).
const METHODS: [&str; 9] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

impl App {
    /// Handles one incoming message; returns the response frame for requests.
    pub async fn handle(&self, session: &Session, message: Incoming) -> Option<String> {
        match message {
            Incoming::Request(req) => Some(self.handle_request(session, req).await),
            Incoming::Notification(n) => {
                self.handle_notification(session, &n.method, &n.params);
                None
            }
            Incoming::Response(resp) => {
                session.resolve(&resp.id, resp.outcome);
                None
            }
        }
    }

    /// Handles one request and builds its response frame.
    pub async fn handle_request(&self, session: &Session, req: Request) -> String {
        self.answer(session, req).await.frame
    }

    /// Handles one request; also says which scopes were missing, for HTTP's 403.
    pub async fn answer(&self, session: &Session, req: Request) -> Answer {
        // The caller's trace: `params._meta.traceparent` (with its `tracestate`), else the
        // transport's (HTTP headers); otherwise a new one starts.
        let meta = |key| req.params.get("_meta")?.get(key)?.as_str();
        let parent = telemetry::Parent::from_headers(meta("traceparent"), meta("tracestate"))
            .or_else(|| session.traceparent().cloned());
        let call = (req.method == "tools/call")
            .then(|| CallSpan::start(parent.as_ref(), &id_text(&req.id), session.network()));
        let trace = telemetry::request_trace_id(call.as_ref(), parent.as_ref());
        let work =
            AssertUnwindSafe(self.dispatch(session, &req, trace, call.as_ref())).catch_unwind();
        let caught = match &call {
            Some(span) => work.instrument(span.span().clone()).await,
            None => work.await,
        };
        // A panicking handler answers internal_error with this request's trace id; the
        // transports catch anything that escapes elsewhere.
        let result = caught.unwrap_or_else(|_| {
            if let Some(call) = &call {
                call.finish(Outcome::Panic);
            }
            tracing::error!(method = %req.method, trace_id = %trace, "handler panicked");
            let err = DomainError::internal("internal error", None);
            Err(RpcError::from_domain(&err, trace))
        });
        if let Some(call) = &call {
            // Failures before the tool ran (params, unknown tool, session state); a call
            // that reached its tool has already recorded its outcome.
            call.finish(match &result {
                Ok(_) => Outcome::Success,
                Err(e) => Outcome::Failed(class_of(e)),
            });
        }
        match result {
            Ok(result) => Answer {
                frame: rpc::success(&req.id, &result),
                missing_scopes: Vec::new(),
                too_many_tasks: false,
            },
            Err(err) => {
                tracing::debug!(method = %req.method, code = err.code, trace_id = %trace, "request failed");
                let missing_scopes = err
                    .data
                    .get("missing_scopes")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let too_many_tasks = err.message == crate::app::task_runner::TOO_MANY_TASKS;
                Answer {
                    frame: rpc::failure(Some(&req.id), &err),
                    missing_scopes,
                    too_many_tasks,
                }
            }
        }
    }

    /// The principal of a request: verified by the transport (HTTP), or from the stdio
    /// token source.
    pub(crate) async fn principal(
        &self,
        session: &Session,
    ) -> Result<crate::domain::Principal, DomainError> {
        match session.principal() {
            Some(p) => Ok(p.clone()),
            None => self.identity().stdio_principal().await,
        }
    }

    async fn dispatch(
        &self,
        session: &Session,
        req: &Request,
        trace: TraceId,
        call: Option<&CallSpan>,
    ) -> Result<Reply, RpcError> {
        let method = req.method.as_str();
        if !METHODS.contains(&method) {
            // Newer clients probe with `server/discover`; -32601 tells them to fall back to
            // `initialize`, and the session stays ready for it.
            return Err(RpcError::protocol(
                METHOD_NOT_FOUND,
                format!("method not found: {}", truncate(method, 64)),
                "This server speaks MCP 2025-11-25; start with initialize.",
                trace,
            ));
        }
        if !session.is_initialized() && !matches!(method, "initialize" | "ping") {
            return Err(RpcError::protocol(
                INVALID_REQUEST,
                "the session is not initialized",
                "Send initialize (and notifications/initialized) before other requests.",
                trace,
            ));
        }
        match method {
            "initialize" => self
                .initialize(session, &req.params, trace)
                .map(Reply::Json),
            "ping" => Ok(Reply::Json(json!({}))),
            "logging/setLevel" => set_level(session, &req.params, trace).map(Reply::Json),
            "tools/list" => self.tools_list(&req.params, trace),
            "tools/call" => {
                let call = call.expect("answer() opens a span for every tools/call");
                self.tools_call(session, &req.params, call)
                    .await
                    .map(Reply::Json)
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" => {
                tasks::handle(self, session, method, &req.params, trace)
                    .await
                    .map(Reply::Json)
            }
            _ => unreachable!("METHODS lists every method matched here"),
        }
    }

    fn handle_notification(&self, session: &Session, method: &str, params: &Value) {
        // `initialized` needs no action; unknown notifications are ignored as MCP asks.
        if method == "notifications/cancelled"
            && let Some(id) = params.get("requestId").and_then(RequestId::from_value)
            && session.cancel(&id)
        {
            tracing::debug!(request_id = ?id, "request cancelled by the client");
        }
    }

    fn initialize(
        &self,
        session: &Session,
        params: &Value,
        trace: TraceId,
    ) -> Result<Value, RpcError> {
        let requested = params.get("protocolVersion");
        let version = requested.and_then(Value::as_str);
        if !version.is_some_and(is_supported_request) {
            let echoed = match version {
                Some(v) if v.len() <= 64 => Value::String(v.into()),
                _ => Value::Null,
            };
            return Err(RpcError::protocol(
                INVALID_PARAMS,
                "unsupported protocol version",
                "This bridge speaks MCP 2025-11-25 only; upgrade the client or ask for 2025-11-25.",
                trace,
            )
            .with_data("supported", json!([PROTOCOL_VERSION]))
            .with_data("requested", echoed));
        }
        let elicitation = params
            .pointer("/capabilities/elicitation")
            .is_some_and(Value::is_object);
        if !session.mark_initialized(elicitation) {
            return Err(RpcError::protocol(
                INVALID_REQUEST,
                "the session is already initialized",
                "Send initialize once per connection.",
                trace,
            ));
        }
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {
                "tools": {"listChanged": false},
                "logging": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            },
            "serverInfo": {
                "name": "cyberos-mcp-bridge",
                "title": "CyberOS MCP Bridge",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "CyberOS personas, workflows, audit log and skills as MCP tools"
            },
            "instructions": INSTRUCTIONS
        }))
    }

    fn tools_list(&self, params: &Value, trace: TraceId) -> Result<Reply, RpcError> {
        // One page holds every tool, so no cursor we could have issued exists.
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(RpcError::protocol(
                INVALID_PARAMS,
                "invalid cursor",
                "tools/list has a single page; call it without a cursor.",
                trace,
            ));
        }
        Ok(Reply::Raw(self.registry().listing_text()))
    }

    /// Maps a domain error to the wire, logging it once with its source chain.
    pub(crate) fn domain_failure(&self, err: &DomainError, trace: TraceId) -> RpcError {
        log_domain_error(err, trace);
        RpcError::from_domain(err, trace)
    }
}

/// Logs a domain error once, with its source chain (never sent to the client).
pub fn log_domain_error(err: &DomainError, trace: TraceId) {
    let source = std::error::Error::source(err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    match err.class() {
        ErrorClass::InputValidation | ErrorClass::AuthzDenied => {
            tracing::info!(class = %err.class(), trace_id = %trace, "{err}");
        }
        ErrorClass::UpstreamUnavailable => {
            tracing::warn!(class = %err.class(), trace_id = %trace, source, "{err}")
        }
        ErrorClass::Internal => {
            tracing::error!(class = %err.class(), trace_id = %trace, source, "{err}")
        }
    }
}

const INSTRUCTIONS: &str = "CyberOS tools. cyberos.cuo.route finds the persona and workflow for a request; \
cyberos.cuo.execute_workflow and cyberos.skill.invoke_skill are long-running: called plainly they return \
{task_id, status} at once (poll tasks/get, then tasks/result), or run as MCP tasks when the call carries \
params.task. cyberos.memory.append_audit writes a permanent record and needs the user's confirmation.";

/// Whether a client's requested version gets a successful answer (CONTRACT §3): a known
/// revision, or a well-formed date after ours (the client then decides).
fn is_supported_request(v: &str) -> bool {
    KNOWN_VERSIONS.contains(&v)
        || (v.len() == 10
            && chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").is_ok()
            && v > PROTOCOL_VERSION)
}

fn set_level(session: &Session, params: &Value, trace: TraceId) -> Result<Value, RpcError> {
    let level = params.get("level").and_then(Value::as_str);
    match level.and_then(|l| LOG_LEVELS.iter().position(|x| *x == l)) {
        Some(index) => {
            session.set_log_level(index as u8);
            Ok(json!({}))
        }
        None => Err(RpcError::protocol(
            INVALID_PARAMS,
            "invalid log level",
            "Use one of debug, info, notice, warning, error, critical, alert, emergency.",
            trace,
        )),
    }
}

pub use crate::lines::truncate;

/// The error class an envelope carries (protocol errors are `input_validation`).
pub(crate) fn class_of(err: &RpcError) -> ErrorClass {
    let class = err.data.get("class").and_then(Value::as_str);
    [
        ErrorClass::AuthzDenied,
        ErrorClass::UpstreamUnavailable,
        ErrorClass::Internal,
    ]
    .into_iter()
    .find(|c| Some(c.as_str()) == class)
    .unwrap_or(ErrorClass::InputValidation)
}

/// A request id as plain text, for span attributes.
pub(crate) fn id_text(id: &RequestId) -> String {
    match id {
        RequestId::Int(i) => i.to_string(),
        RequestId::UInt(u) => u.to_string(),
        RequestId::Str(s) => truncate(s, 128).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_policy_matches_the_contract() {
        for ok in [
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05",
            "2026-07-28",
            "2031-01-01",
        ] {
            assert!(is_supported_request(ok), "{ok}");
        }
        for bad in [
            "2024-01-01",
            "2025-11-24",
            "1.0.0",
            "",
            "2026-13-01",
            "2026-02-30",
            "2026-7-28",
            "latest",
        ] {
            assert!(!is_supported_request(bad), "{bad}");
        }
    }
}
