//! `/mcp`: one JSON-RPC message per POST, answered as JSON, or as an SSE stream when
//! progress notifications precede the response or a `tasks/result` waits.
//!
//! A POST is checked in this order, so each client learns the right thing: Origin and
//! Host (403) → `MCP-Protocol-Version` (400) → `Content-Type` (415) and `Accept` (406) →
//! bearer token (401) → in-flight slots (503) → body size (413), byte budget (503) and
//! shape (400) → per-tenant rate (429) → the method itself (403 for a missing scope).
//! Everything before the token is read from the headers, so an unauthenticated request
//! holds no slot and buffers at most a small prefix of its body. Nothing about a client
//! is kept between requests: every POST carries and verifies its own token.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, StatusCode};
use axum::response::Response;
use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::answer::{Asked, Work, json_answer};
use super::gate::{self, Accept};
use super::origin::Origin;
use super::resumable::Resumable;
use super::shared::Shared;
use super::waits::{Hold, Refused};
use super::{body, elicitation, reply, resume, sessions, sse, unauthorized};
use crate::app::edge::dispatch;
use crate::app::edge::rpc::{
    CallParams, FrameError, INVALID_REQUEST, Incoming, Method, PROTOCOL_VERSION,
    Request as RpcRequest, RpcError,
};
use crate::app::edge::session::{AnswerRoute, Session};
use crate::app::telemetry;
use crate::app::telemetry::ids::{self, request_trace};
use crate::domain::{Principal, TaskSupport, Tool};

/// Notifications a handler may queue for one request.
const OUTBOUND: usize = 64;

/// Every method on `/mcp` (OPTIONS is answered by the CORS edge).
pub async fn endpoint(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    // W3C trace context from the HTTP client: every reply carries its trace id, and calls
    // continue its trace (`params._meta.traceparent` wins over it).
    let parent = trace_context(&parts.headers);
    let trace = parent.as_ref().map(|p| p.trace_id);
    // Boxed: the request's future is a few KiB, and axum's handler and middleware futures
    // that hold it are moved as they are polled; a box is allocated once and never moved.
    let work = Box::pin(answer(s, parts, body, parent));
    ids::with_request_trace(trace, work).await
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The request's `traceparent` and `tracestate` headers (several `tracestate` fields are
/// one list, RFC 9110 §5.3; one that is not text spoils the list).
fn trace_context(headers: &HeaderMap) -> Option<telemetry::Parent> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let state = headers
        .get_all(TRACESTATE)
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Option<Vec<&str>>>()
        .filter(|fields| !fields.is_empty())
        .map(|fields| fields.join(","));
    telemetry::Parent::from_headers(text(TRACEPARENT), state.as_deref())
}

async fn answer(
    s: Arc<Shared>,
    parts: axum::http::request::Parts,
    body: Body,
    parent: Option<telemetry::Parent>,
) -> Response {
    if let Some(name) = gate::duplicated(&parts.headers) {
        return reply::protocol(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            format!("the {name} header appears more than once"),
            "Send each of Authorization, Host, Origin, Content-Type, MCP-Protocol-Version, MCP-Session-Id and Last-Event-ID at most once.",
        );
    }
    let origin = parts
        .extensions
        .get::<Origin>()
        .copied()
        .unwrap_or_else(|| s.policy.origin(&parts.headers));
    if let Some(refused) = gate::admit(&s.policy, origin, &parts.headers) {
        return refused;
    }
    if parts.method == HttpMethod::DELETE {
        return sessions::end(&s, &parts.headers).await;
    }
    if parts.method == HttpMethod::GET
        && let Some(last) = resume::last_event_id(&parts.headers)
    {
        return get(&s, &parts.headers, last.unwrap_or_default(), parent).await;
    }
    if parts.method != HttpMethod::POST {
        return reply::method_not_allowed(
            "POST, DELETE, OPTIONS",
            "This server opens no GET stream of its own; POST each JSON-RPC message to /mcp (GET with Last-Event-ID resumes a stream that waited for a task; DELETE ends a session).",
        );
    }
    post(&s, &parts.headers, body, parent).await
}

/// A `MCP-Protocol-Version` this bridge does not speak: 400.
fn unsupported_version(headers: &HeaderMap) -> Option<Response> {
    let v = headers.get(gate::MCP_PROTOCOL_VERSION)?;
    (v.as_bytes() != PROTOCOL_VERSION.as_bytes()).then(|| {
        reply::rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            &RpcError::protocol(
                INVALID_REQUEST,
                "unsupported MCP-Protocol-Version",
                "This bridge speaks MCP 2025-11-25 only: send MCP-Protocol-Version: 2025-11-25 (or none) and initialize with 2025-11-25.",
                request_trace(),
            )
            .with_data("supported", serde_json::json!([PROTOCOL_VERSION])),
        )
    })
}

/// `GET` with `Last-Event-ID`: the checks of a POST that apply (version, `Accept`,
/// token, session), then the resumed stream.
async fn get(
    s: &Shared,
    headers: &HeaderMap,
    last: &str,
    parent: Option<telemetry::Parent>,
) -> Response {
    if let Some(refused) = unsupported_version(headers) {
        return refused;
    }
    if !Accept::parse(headers).sse {
        return reply::protocol(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "not acceptable",
            "A resumed stream is text/event-stream: send Accept: text/event-stream.",
        );
    }
    let token = gate::bearer_token(headers);
    let principal = match s.app.identity().bearer_principal(token).await {
        Ok(p) => p,
        Err(e) => return unauthorized::refuse(s, token.is_some(), &e, None, None, parent),
    };
    if let Err(refused) = sessions::open(s, headers, &principal).await {
        return refused;
    }
    resume::resume(s, principal, last).await
}

async fn post(
    s: &Shared,
    headers: &HeaderMap,
    body: Body,
    parent: Option<telemetry::Parent>,
) -> Response {
    if let Some(refused) = unsupported_version(headers) {
        return refused;
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
    // The token is checked from the headers alone, before the request takes an in-flight
    // slot or any body byte is buffered: an unauthenticated client costs next to nothing.
    let token = gate::bearer_token(headers);
    let principal = match s.app.identity().bearer_principal(token).await {
        Ok(p) => p,
        Err(e) => {
            // A short body is still read (and parsed) so the 401 echoes its id and a
            // refused `tools/call` gets its span; a longer one is not read at all.
            let frame = body::prefix(&s.gauges.body_budget, body, headers).await;
            let (id, req) = match &frame {
                Some(Ok(Incoming::Request(r))) => (Some(&r.id), Some(r)),
                Some(Err(e)) => (e.id.as_ref(), None),
                _ => (None, None),
            };
            return unauthorized::refuse(s, token.is_some(), &e, id, req, parent);
        }
    };
    // A session the request names must be open, this principal's, and not ended.
    let session = match sessions::open(s, headers, &principal).await {
        Ok(session) => session,
        Err(refused) => return refused,
    };
    let Ok(permit) = Arc::clone(&s.gauges.inflight).try_acquire_owned() else {
        return reply::overloaded();
    };
    let frame = match body::read(&s.gauges.body_budget, body, headers).await {
        Ok(frame) => frame,
        Err(refused) => return refused,
    };
    match frame {
        Err(FrameError { code, message, id }) => reply::rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_ref(),
            &RpcError::protocol(
                code,
                message,
                "POST exactly one JSON-RPC 2.0 object per request.",
                request_trace(),
            ),
        ),
        Ok(Incoming::Request(req)) => {
            let client = match &session {
                Some(state) => state.client.as_deref(),
                None => gate::user_agent_product(headers),
            };
            let mint = match &req.method {
                Method::Initialize(params) => {
                    Some(sessions::new_state(s, &principal, params, client))
                }
                _ => None,
            };
            let caller = Caller {
                route: elicitation::route(s, session.as_ref(), accept, &req.method),
                principal,
                client,
            };
            let resp = request(s, accept, caller, req, parent, permit).await;
            match mint {
                Some(Some(state)) => sessions::issue(s, resp, &state),
                _ => resp,
            }
        }
        // A client's answer to one of our requests writes to the store: rate limited
        // like the requests that do.
        Ok(Incoming::Response(_)) if let Err(wait) = s.gauges.take_call(&principal.tenant) => {
            tracing::info!(tenant = %principal.tenant, "client response rate limited");
            reply::rate_limited(None, &principal.tenant, wait)
        }
        Ok(Incoming::Response(resp)) if let Some(state) = &session => {
            elicitation::deliver(s, state, resp).await
        }
        Ok(other) => {
            // Notifications, and responses outside a session (no request of ours can be
            // waiting for them): accepted; nothing is sent back on this POST.
            let (tx, _) = mpsc::channel(1);
            let session = Session::stateless(tx, principal, false, None);
            let _ = dispatch::handle(&s.app, &session, other).await;
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = StatusCode::ACCEPTED;
            resp
        }
    }
}

/// Who sends a request: the verified principal, the client's name, and where the answers
/// to our requests come back when the request may ask the user.
struct Caller<'a> {
    principal: Principal,
    client: Option<&'a str>,
    route: Option<AnswerRoute>,
}

/// A request: rate limit, then the dispatcher, answered as JSON or SSE.
async fn request(
    s: &Shared,
    accept: Accept,
    caller: Caller<'_>,
    req: RpcRequest,
    parent: Option<telemetry::Parent>,
    permit: OwnedSemaphorePermit,
) -> Response {
    let Caller {
        principal,
        client,
        route,
    } = caller;
    let id = req.id.clone();
    // Whether it is rate limited (a tool or task call, or an `initialize`, which opens a
    // session), may stream (progress, or a wait for a task), and waits for a task (and so
    // may outlive the per-request timeout).
    let (call, streams, waits) = match &req.method {
        Method::ToolsCall(params) => {
            let call = params.as_ref().ok();
            // A call that may ask the user streams, so the question can reach the client.
            let progress = call.is_some_and(|c| c.progress_token().is_some());
            (
                true,
                progress || route.is_some(),
                call.is_some_and(|c| waits_for_task(s, client, c)),
            )
        }
        Method::TasksResult(_) => (true, true, true),
        Method::TasksGet(_)
        | Method::TasksList(_)
        | Method::TasksCancel(_)
        | Method::Initialize(_) => (true, false, false),
        _ => (false, false, false),
    };
    if call && let Err(wait) = s.gauges.take_call(&principal.tenant) {
        tracing::info!(tenant = %principal.tenant, "request rate limited");
        return reply::rate_limited(Some(&id), &principal.tenant, wait);
    }
    // A wait gives its in-flight slot back for one of the tenant's few waits, so waits
    // starve neither other tenants nor plain requests.
    let permit = match waits {
        false => Hold::Slot { _permit: permit },
        true => match s.gauges.waits.enter(&principal.tenant) {
            Ok(wait) => Hold::Wait { _wait: wait },
            Err(Refused::Tenant) => {
                tracing::info!(tenant = %principal.tenant, "too many waits");
                return reply::too_many_waits(&id, &principal.tenant);
            }
            Err(Refused::Full) => return reply::overloaded(),
        },
    };
    let stream = (accept.sse && streams) || !accept.json;
    let asked = match req.method {
        Method::Initialize(_) => Asked::Initialize,
        Method::Discover => Asked::Discover,
        _ => Asked::Other,
    };
    let initialize = asked == Asked::Initialize;
    // A stream that waits for a task learns it from the handler, for resumable event ids.
    let resumable = match stream && waits {
        true => Resumable::of_request(s, &req, principal.tenant),
        false => None,
    };
    let (resumable, named) = resumable.unzip();
    let (tx, outbound) = mpsc::channel(OUTBOUND);
    let mut session =
        Session::stateless(tx, principal, initialize, client).with_traceparent(parent);
    if let Some(named) = named {
        session = session.telling_waited_task(named);
    }
    if let Some(route) = route {
        session = session.asking_through(route);
    }
    let app = s.app.clone();
    let mut work: Work = Box::pin(async move {
        AssertUnwindSafe(dispatch::answer(&app, &session, req))
            .catch_unwind()
            .await
    });
    if stream {
        let feed = sse::Feed {
            work,
            outbound,
            resumable,
            permit,
        };
        return sse::respond(s, accept, id, asked, feed).await;
    }
    // A plain answer: notifications have no way to the client, so they are dropped.
    drop(outbound);
    let outcome = if waits {
        tokio::select! {
            outcome = &mut work => outcome,
            // The call's run is this instance's: its outcome comes within the grace.
            () = s.last_call() => return reply::shutting_down(&id),
        }
    } else {
        match tokio::time::timeout(s.limits.request_timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => return reply::timed_out(&id),
        }
    };
    json_answer(s, &id, asked, outcome)
}

/// Whether a plain `tools/call` waits for a long-running tool (`--long-running wait`, or
/// `auto` for a User-Agent product of a host that never polls tasks): its deadline is the
/// tool's own `timeout_s`, not the per-request timeout.
fn waits_for_task(s: &Shared, client: Option<&str>, call: &CallParams) -> bool {
    s.app.settings().plain_calls_wait(client)
        && call.task.is_none()
        && Tool::from_name(&call.name)
            .is_some_and(|t| t.spec().task_support == TaskSupport::Optional)
}
