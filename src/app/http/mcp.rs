//! `/mcp`: one JSON-RPC message per POST, answered as JSON, or as an SSE stream when
//! progress notifications precede the response or a `tasks/result` waits.
//!
//! A POST is checked in this order, so each client learns the right thing: Origin and
//! Host (403) → `MCP-Protocol-Version` (400) → `Content-Type` (415) and `Accept` (406) →
//! bearer token (401) → body size (413) and shape (400) → per-tenant rate (429) → the
//! method itself (403 for a missing scope). Nothing about a client is kept between
//! requests: every POST carries and verifies its own token.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::app::LongRunning;
use crate::app::http::gate::{self, Accept, Origin};
use crate::app::http::{Shared, reply, sse};
use crate::app::rpc::{
    self, INVALID_REQUEST, Incoming, Request as RpcRequest, RequestId, RpcError,
};
use crate::app::server::{Answer, PROTOCOL_VERSION, id_text};
use crate::app::session::Session;
use crate::app::telemetry::{self, CallSpan, Outcome};
use crate::app::trace::{self, request_trace};
use crate::domain::{DomainError, Principal, TaskSupport, Tool};

/// The largest body accepted (CONTRACT §10).
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a client may take to send its body.
const BODY_DEADLINE: Duration = Duration::from_secs(30);
/// Notifications a handler may queue for one request.
const OUTBOUND: usize = 64;

pub(super) type Work = Pin<Box<dyn Future<Output = Result<Answer, Box<dyn Any + Send>>> + Send>>;

/// Every method on `/mcp` (OPTIONS is answered by the CORS edge).
pub async fn endpoint(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    // W3C trace context from the HTTP client: every reply carries its trace id, and calls
    // continue its trace (`params._meta.traceparent` wins over it).
    let parent = trace_context(&parts.headers);
    let trace = parent.as_ref().map(|p| p.trace_id);
    trace::with_request_trace(trace, answer(s, parts, body, parent)).await
}

/// The request's `traceparent` and `tracestate` headers (several `tracestate` fields are
/// one list, RFC 9110 §5.3; one that is not text spoils the list).
fn trace_context(headers: &HeaderMap) -> Option<telemetry::Parent> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let state = headers
        .get_all("tracestate")
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Option<Vec<&str>>>()
        .filter(|fields| !fields.is_empty())
        .map(|fields| fields.join(","));
    telemetry::Parent::from_headers(text("traceparent"), state.as_deref())
}

async fn answer(
    s: Arc<Shared>,
    parts: axum::http::request::Parts,
    body: Body,
    parent: Option<telemetry::Parent>,
) -> Response {
    let origin = parts
        .extensions
        .get::<Origin>()
        .copied()
        .unwrap_or_else(|| s.policy.origin(&parts.headers));
    if let Some(refused) = admit(&s, origin, &parts.headers) {
        return refused;
    }
    if parts.method != Method::POST {
        return reply::method_not_allowed(
            "POST, OPTIONS",
            "This stateless server has no GET stream and no sessions to DELETE; POST each JSON-RPC message to /mcp.",
        );
    }
    post(&s, &parts.headers, body, parent).await
}

/// The Origin and Host checks (403).
pub fn admit(s: &Shared, origin: Origin, headers: &HeaderMap) -> Option<Response> {
    if origin == Origin::Denied {
        return Some(reply::forbidden(
            "origin not allowed",
            "Browser pages may call this bridge only from its --public-url origin, a --cors-origin, or (on a loopback bind) localhost.",
        ));
    }
    if !s.policy.host_allowed(headers) {
        return Some(reply::forbidden(
            "host not allowed",
            "This bridge listens on a loopback address and answers only requests addressed to localhost, 127.0.0.1 or [::1].",
        ));
    }
    None
}

async fn post(
    s: &Shared,
    headers: &HeaderMap,
    body: Body,
    parent: Option<telemetry::Parent>,
) -> Response {
    let Ok(permit) = Arc::clone(&s.gauges.inflight).try_acquire_owned() else {
        return reply::overloaded();
    };
    if let Some(v) = headers.get("mcp-protocol-version")
        && v.as_bytes() != PROTOCOL_VERSION.as_bytes()
    {
        return reply::rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            &RpcError::protocol(
                INVALID_REQUEST,
                "unsupported MCP-Protocol-Version",
                "This bridge speaks MCP 2025-11-25 only: send MCP-Protocol-Version: 2025-11-25 (or none) and initialize with 2025-11-25.",
                request_trace(),
            )
            .with_data("supported", serde_json::json!([PROTOCOL_VERSION])),
        );
    }
    if !gate::is_json(headers) {
        return reply::protocol(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_REQUEST,
            "unsupported media type",
            "Send the JSON-RPC message with Content-Type: application/json.",
        );
    }
    let accept = Accept::parse(headers);
    if !accept.any() {
        return reply::protocol(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "not acceptable",
            "Accept application/json and text/event-stream.",
        );
    }
    let token = gate::bearer_token(headers);
    let principal = s.app.identity().bearer_principal(token).await;
    let body = read_body(body, headers).await;
    let principal = match principal {
        Ok(p) => p,
        Err(e) => {
            let bytes = body.as_deref().ok();
            let id = bytes.and_then(request_id);
            let req = bytes.and_then(request_of);
            return unauthorized(s, token.is_some(), &e, id.as_ref(), req.as_ref(), parent);
        }
    };
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(status) => return body_error(status),
    };
    match rpc::parse_frame(&bytes) {
        Err(e) => reply::rpc_error(
            StatusCode::BAD_REQUEST,
            e.id.as_ref(),
            &RpcError::protocol(
                e.code,
                e.message,
                "POST exactly one JSON-RPC 2.0 object per request.",
                request_trace(),
            ),
        ),
        Ok(Incoming::Request(req)) => request(s, accept, principal, req, parent, permit).await,
        Ok(other) => {
            // Notifications and responses: accepted; nothing is sent back on this POST.
            let (tx, _) = mpsc::channel(1);
            let session = Session::stateless(tx, principal, false);
            let _ = s.app.handle(&session, other).await;
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = StatusCode::ACCEPTED;
            resp
        }
    }
}

/// 401 with the RFC 9728 challenge and the envelope of why. A refused `tools/call` still
/// gets its span (tenant `unknown`, outcome `authz_denied`).
fn unauthorized(
    s: &Shared,
    presented: bool,
    err: &DomainError,
    id: Option<&RequestId>,
    req: Option<&RpcRequest>,
    parent: Option<telemetry::Parent>,
) -> Response {
    let call = req.filter(|r| r.method == "tools/call").map(|r| {
        let call = CallSpan::start(parent.as_ref(), &id_text(&r.id), "tcp");
        if let Some(name) = r.params.get("name").and_then(Value::as_str) {
            call.tool(name);
        }
        call
    });
    let trace = telemetry::request_trace_id(call.as_ref(), parent.as_ref());
    let rpc = {
        let _in = call.as_ref().map(|c| c.span().enter());
        s.app.domain_failure(err, trace)
    };
    if let Some(call) = &call {
        call.finish(Outcome::Failed(err.class()));
    }
    let resp = reply::rpc_error(StatusCode::UNAUTHORIZED, id, &rpc);
    if presented {
        reply::challenge(resp, &format!("{}, error=\"invalid_token\"", s.challenge))
    } else {
        reply::challenge(resp, &s.challenge)
    }
}

/// The id of a request body, for echoing in a 401 (none for notifications and junk).
fn request_id(bytes: &[u8]) -> Option<RequestId> {
    match rpc::parse_frame(bytes) {
        Ok(Incoming::Request(r)) => Some(r.id),
        Ok(_) => None,
        Err(e) => e.id,
    }
}

/// The request in a body, if it is one.
fn request_of(bytes: &[u8]) -> Option<RpcRequest> {
    match rpc::parse_frame(bytes) {
        Ok(Incoming::Request(r)) => Some(r),
        _ => None,
    }
}

/// Reads at most [`MAX_BODY`] bytes within [`BODY_DEADLINE`]; the error is the status.
async fn read_body(body: Body, headers: &HeaderMap) -> Result<Bytes, StatusCode> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut first: Option<Bytes> = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| StatusCode::BAD_REQUEST)?;
            let len = first.as_ref().map_or(buf.len(), Bytes::len) + chunk.len();
            if len > MAX_BODY {
                return Err(StatusCode::PAYLOAD_TOO_LARGE);
            }
            // Most bodies arrive in one chunk: keep it without copying.
            match first.take() {
                None if buf.is_empty() => first = Some(chunk),
                None => buf.extend_from_slice(&chunk),
                Some(f) => {
                    buf.extend_from_slice(&f);
                    buf.extend_from_slice(&chunk);
                }
            }
        }
        Ok(first.unwrap_or_else(|| Bytes::from(buf)))
    };
    tokio::time::timeout(BODY_DEADLINE, read)
        .await
        .unwrap_or(Err(StatusCode::REQUEST_TIMEOUT))
}

fn body_error(status: StatusCode) -> Response {
    let (message, hint) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            "the message exceeds 4 MiB",
            "Send smaller messages; large payloads belong in upstream storage.",
        ),
        StatusCode::REQUEST_TIMEOUT => (
            "the request body arrived too slowly",
            "Send the whole body within 30 seconds.",
        ),
        _ => ("the request body could not be read", "Retry the request."),
    };
    reply::protocol(status, INVALID_REQUEST, message, hint)
}

/// A request: rate limit, then the dispatcher, answered as JSON or SSE.
async fn request(
    s: &Shared,
    accept: Accept,
    principal: Principal,
    req: RpcRequest,
    parent: Option<telemetry::Parent>,
    permit: OwnedSemaphorePermit,
) -> Response {
    let method = req.method.clone();
    let id = req.id.clone();
    if method == "tools/call"
        && let Err(wait) = s.gauges.take_call(&principal.tenant)
    {
        tracing::info!(tenant = %principal.tenant, "tools/call rate limited");
        return reply::rate_limited(&id, wait);
    }
    let progress = method == "tools/call"
        && req
            .params
            .pointer("/_meta/progressToken")
            .is_some_and(|t| t.is_string() || t.is_number());
    let stream = (accept.sse && (progress || method == "tasks/result")) || !accept.json;
    let waits = method == "tasks/result" || waits_for_task(s, &req);
    let (tx, outbound) = mpsc::channel(OUTBOUND);
    let session =
        Session::stateless(tx, principal, method == "initialize").with_traceparent(parent);
    let app = s.app.clone();
    let mut work: Work = Box::pin(async move {
        AssertUnwindSafe(app.answer(&session, req))
            .catch_unwind()
            .await
    });
    if stream {
        return sse::respond(s, accept, id, &method, work, outbound, permit).await;
    }
    // A plain answer: notifications have no way to the client, so they are dropped.
    drop(outbound);
    let outcome = if waits {
        tokio::select! {
            outcome = &mut work => outcome,
            () = s.shutdown.cancelled() => return reply::shutting_down(&id),
        }
    } else {
        match tokio::time::timeout(s.limits.request_timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => return reply::timed_out(&id),
        }
    };
    json_answer(s, &id, &method, outcome)
}

/// Whether a plain `tools/call` waits for a long-running tool (`--long-running wait`):
/// its deadline is the tool's own `timeout_s`, not the per-request timeout.
fn waits_for_task(s: &Shared, req: &RpcRequest) -> bool {
    req.method == "tools/call"
        && s.app.settings().long_running == LongRunning::Wait
        && req.params.get("task").is_none()
        && req
            .params
            .get("name")
            .and_then(Value::as_str)
            .and_then(Tool::from_name)
            .is_some_and(|t| t.spec().task_support == TaskSupport::Optional)
}

/// The status of a JSON answer: 403 with a step-up challenge for a missing scope, 400
/// for a newer client's `server/discover` probe (CONTRACT §3), else 200.
pub(super) fn json_answer(
    s: &Shared,
    id: &RequestId,
    method: &str,
    outcome: Result<Answer, Box<dyn Any + Send>>,
) -> Response {
    let answer = match outcome {
        Ok(answer) => answer,
        Err(_) => {
            return reply::json(
                StatusCode::INTERNAL_SERVER_ERROR,
                reply::panic_frame(Some(id)),
            );
        }
    };
    if !answer.missing_scopes.is_empty() {
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            answer.missing_scopes.join(" "),
            s.resource_metadata
        );
        return reply::challenge(reply::json(StatusCode::FORBIDDEN, answer.frame), &challenge);
    }
    if answer.too_many_tasks {
        return reply::too_many_tasks(answer.frame);
    }
    let status = if method == "server/discover" {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    reply::json(status, answer.frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_401_echoes_the_request_id_only() {
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#),
            Some(RequestId::Int(7))
        );
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
        assert_eq!(request_id(b"[1]"), None);
        assert_eq!(request_id(b"{"), None);
    }
}
