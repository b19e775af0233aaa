//! Optional sessions over stateless HTTP (MCP 2025-11-25 §3.5): a successful `initialize`
//! gets an `MCP-Session-Id` sealing what the bridge must remember (`session_id.rs`); a
//! request naming one must carry a token of the same tenant and subject, and any instance
//! can open it. A forged, expired, foreign or ended id → 404, so the client initialises
//! again. `DELETE` ends a session: its key is kept in the store's ledger until it expires.
//! Requests without an id work as before.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use super::answer::Succeeded;
use super::gate;
use super::reply;
use super::shared::Shared;
use crate::app::edge::rpc::{INVALID_REQUEST, InitializeParams, PROTOCOL_VERSION, RpcError};
use crate::app::telemetry::ids::request_trace;
use crate::domain::session::{SESSION_TTL_MS, SessionState};
use crate::domain::{DomainError, Principal};

/// `Mcp-Session-Id` (header names match case-insensitively).
pub(super) const HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static("mcp-session-id");
/// The code SDKs use for an unknown session.
const SESSION_NOT_FOUND: i32 = -32001;

/// The session the request names, if any: `Ok(None)` without the header, a 404 (or a 503
/// when the store cannot say whether it ended) when it cannot be used.
pub(super) async fn open(
    s: &Shared,
    headers: &HeaderMap,
    principal: &Principal,
) -> Result<Option<SessionState>, Response> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    let now = s.app.ports().clock.now();
    let state = value
        .to_str()
        .ok()
        .and_then(|id| s.sessions.open(id))
        .filter(|state| state.admits(principal, now))
        .ok_or_else(not_found)?;
    match s
        .app
        .ports()
        .ledger
        .used(&state.tenant, &state.ledger_key())
        .await
    {
        Ok(false) => Ok(Some(state)),
        Ok(true) => Err(not_found()),
        Err(e) => Err(store_down(&e)),
    }
}

/// The state a successful `initialize` by `principal` opens; `None` when no random
/// bytes could be drawn (the client then works without a session).
pub(super) fn new_state(
    s: &Shared,
    principal: &Principal,
    params: &InitializeParams,
    user_agent: Option<&str>,
) -> Option<SessionState> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).ok()?;
    Some(SessionState {
        nonce: data_encoding::HEXLOWER.encode(&nonce),
        protocol: PROTOCOL_VERSION.to_owned(),
        tenant: principal.tenant,
        subject: principal.actor.to_string(),
        client: params
            .client_name
            .clone()
            .or_else(|| user_agent.map(str::to_owned)),
        elicitation: params.elicitation,
        expires_at: s.app.ports().clock.now().plus_millis(SESSION_TTL_MS),
    })
}

/// Adds the session id to the answer of an `initialize` that succeeded.
pub(super) fn issue(s: &Shared, mut resp: Response, state: &SessionState) -> Response {
    if resp.extensions().get::<Succeeded>().is_some()
        && let Ok(value) = HeaderValue::from_str(&s.sessions.seal(state))
    {
        resp.headers_mut().insert(HEADER, value);
    }
    resp
}

/// `DELETE /mcp`: ends the session the header names (204), for its own tenant and
/// subject only.
pub(super) async fn end(s: &Shared, headers: &HeaderMap) -> Response {
    let principal = match s
        .app
        .identity()
        .bearer_principal(gate::bearer_token(headers))
        .await
    {
        Ok(p) => p,
        Err(e) => {
            let presented = gate::bearer_token(headers).is_some();
            return super::unauthorized::refuse(s, presented, &e, None, None, None);
        }
    };
    if headers.get(HEADER).is_none() {
        return reply::protocol(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "no MCP-Session-Id to end",
            "Send DELETE with the MCP-Session-Id header of the session to end.",
        );
    }
    // Ending a session writes its key to the store: rate limited like the requests that do.
    if let Err(wait) = s.gauges.take_call(&principal.tenant) {
        tracing::info!(tenant = %principal.tenant, "session end rate limited");
        return reply::rate_limited(None, &principal.tenant, wait);
    }
    let state = match open(s, headers, &principal).await {
        Ok(Some(state)) => state,
        Ok(None) => return not_found(),
        Err(refused) => return refused,
    };
    match s
        .app
        .ports()
        .ledger
        .claim(&state.tenant, &state.ledger_key(), state.expires_at)
        .await
    {
        Ok(_) => {
            let mut resp = Response::new(axum::body::Body::empty());
            *resp.status_mut() = StatusCode::NO_CONTENT;
            resp
        }
        // The tenant's ledger is full: 429, the session stays open until it expires.
        Err(
            e @ DomainError::UpstreamUnavailable {
                retry_after: Some(_),
                ..
            },
        ) => {
            let rpc = RpcError::from_domain(&e, request_trace());
            reply::rpc_error(StatusCode::TOO_MANY_REQUESTS, None, &rpc)
        }
        Err(e) => store_down(&e),
    }
}

fn not_found() -> Response {
    reply::protocol(
        StatusCode::NOT_FOUND,
        SESSION_NOT_FOUND,
        "session not found",
        "The session ended, expired or belongs to another token: initialize again without MCP-Session-Id.",
    )
}

pub(super) fn store_down(e: &DomainError) -> Response {
    let rpc = RpcError::from_domain(e, request_trace());
    reply::rpc_error(StatusCode::SERVICE_UNAVAILABLE, None, &rpc)
}
