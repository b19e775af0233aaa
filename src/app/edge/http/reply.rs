//! Responses of the HTTP transport. Every error body is a JSON-RPC error frame with the
//! contract's envelope (`class`, `trace_id`, `hint`), never a plain-text rejection.

use std::time::Duration;

use crate::app::edge::rpc::{self, INVALID_REQUEST, RequestId, RpcError};
use crate::app::telemetry::ids::request_trace;
use crate::app::telemetry::{self, Refusal};
use crate::domain::{ErrorClass, TenantId};
use axum::body::Body;
use axum::http::header::{ALLOW, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;

/// A response with a JSON body.
pub fn json(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A JSON-RPC error frame as the body of `status`, with `Retry-After` when the error says
/// when to retry.
pub fn rpc_error(status: StatusCode, id: Option<&RequestId>, err: &RpcError) -> Response {
    let resp = json(status, rpc::failure(id, err));
    match err.retry_after {
        Some(wait) => retry_after(resp, wait),
        None => resp,
    }
}

/// A protocol error the client can fix (class `input_validation`), without an id.
pub fn protocol(status: StatusCode, code: i32, message: impl Into<String>, hint: &str) -> Response {
    let err = RpcError::protocol(code, message, hint, request_trace());
    rpc_error(status, None, &err)
}

/// A 403 for a request whose Origin or Host is refused.
pub fn forbidden(message: &str, hint: &str) -> Response {
    telemetry::refused(Refusal::Origin, None);
    protocol(StatusCode::FORBIDDEN, INVALID_REQUEST, message, hint)
}

/// The envelope of a failure made by the transport itself (overload, rate limit,
/// timeout, shutdown) rather than by a domain operation, in the request's trace.
fn envelope(class: ErrorClass, message: &str, hint: &str) -> RpcError {
    RpcError::of_class(class, message, hint, request_trace())
}

/// 503 + `Retry-After`: too many requests in flight.
pub fn overloaded() -> Response {
    telemetry::refused(Refusal::Shed, None);
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "the bridge is overloaded",
        "Retry in a second; the bridge sheds load when too many requests are in flight.",
    )
    .with_retry_after(Duration::from_secs(1));
    rpc_error(StatusCode::SERVICE_UNAVAILABLE, None, &err)
}

/// 503 + `Retry-After`: the bytes of the bodies being read fill the body budget.
pub fn over_budget() -> Response {
    telemetry::refused(Refusal::Shed, None);
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "too many request bodies are being read",
        "Retry in a second; the bridge buffers a bounded number of body bytes at once.",
    )
    .with_retry_after(Duration::from_secs(1));
    rpc_error(StatusCode::SERVICE_UNAVAILABLE, None, &err)
}

/// 429 + `Retry-After`: the tenant already has as many requests waiting for tasks as it
/// may.
pub fn too_many_waits(id: &RequestId, tenant: &TenantId) -> Response {
    telemetry::refused(Refusal::Rate, Some(tenant));
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "too many requests waiting for tasks",
        "Poll with tasks/get, or retry once one of your waiting requests has been answered.",
    )
    .with_retry_after(Duration::from_secs(1));
    rpc_error(StatusCode::TOO_MANY_REQUESTS, Some(id), &err)
}

/// 429 + `Retry-After`: the tenant called tools or tasks faster than its rate.
pub fn rate_limited(id: Option<&RequestId>, tenant: &TenantId, wait: Duration) -> Response {
    telemetry::refused(Refusal::Rate, Some(tenant));
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "rate limited: too many requests for this tenant",
        "Slow down and retry after the number of seconds in Retry-After.",
    )
    .with_retry_after(wait);
    rpc_error(StatusCode::TOO_MANY_REQUESTS, id, &err)
}

/// 504: a plain request ran past the per-request deadline.
pub fn timed_out(id: &RequestId) -> Response {
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "the request timed out",
        "Retry later; long-running tools should be called as tasks (params.task) and polled.",
    );
    rpc_error(StatusCode::GATEWAY_TIMEOUT, Some(id), &err)
}

/// The bridge is stopping while the request still waits.
fn shutting_down_error() -> RpcError {
    envelope(
        ErrorClass::UpstreamUnavailable,
        "the bridge is shutting down",
        "Retry the request; tasks keep their state in the store.",
    )
    .with_retry_after(Duration::from_secs(1))
}

/// The frame sent on an SSE stream when the bridge stops while the request still waits.
pub fn shutting_down_frame(id: &RequestId) -> String {
    rpc::failure(Some(id), &shutting_down_error())
}

/// 503 + `Retry-After`: the bridge stops while the request still waits.
pub fn shutting_down(id: &RequestId) -> Response {
    rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(id),
        &shutting_down_error(),
    )
}

/// The internal-error frame of a handler that panicked; the bridge keeps serving.
pub fn panic_frame(id: Option<&RequestId>) -> String {
    let err = RpcError::panicked(request_trace());
    tracing::error!(trace_id = %err.trace, "HTTP handler panicked");
    rpc::failure(id, &err)
}

/// 405 with `Allow`.
pub fn method_not_allowed(allow: &'static str, hint: &str) -> Response {
    let mut resp = protocol(
        StatusCode::METHOD_NOT_ALLOWED,
        INVALID_REQUEST,
        "method not allowed",
        hint,
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

/// Adds `WWW-Authenticate`.
pub fn challenge(mut resp: Response, value: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    resp
}

/// Adds `Retry-After` in whole seconds (at least 1).
pub fn retry_after(mut resp: Response, wait: Duration) -> Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    resp.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
    resp
}
