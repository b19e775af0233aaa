//! Responses of the HTTP transport. Every error body is a JSON-RPC error frame with the
//! contract's envelope (`class`, `trace_id`, `hint`), never a plain-text rejection.

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{ALLOW, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Map;

use crate::app::rpc::{self, INVALID_REQUEST, RequestId, RpcError};
use crate::app::trace::request_trace;
use crate::domain::ErrorClass;

/// A response with a JSON body.
pub fn json(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A JSON-RPC error frame as the body of `status`.
pub fn rpc_error(status: StatusCode, id: Option<&RequestId>, err: &RpcError) -> Response {
    json(status, rpc::failure(id, err))
}

/// A protocol error the client can fix (class `input_validation`), without an id.
pub fn protocol(status: StatusCode, code: i32, message: impl Into<String>, hint: &str) -> Response {
    let err = RpcError::protocol(code, message, hint, request_trace());
    rpc_error(status, None, &err)
}

/// A 403 for a request whose Origin or Host is refused.
pub fn forbidden(message: &str, hint: &str) -> Response {
    protocol(StatusCode::FORBIDDEN, INVALID_REQUEST, message, hint)
}

/// The envelope of a failure made by the transport itself (overload, rate limit,
/// timeout, panic) rather than by a domain operation.
pub fn envelope(class: ErrorClass, message: &str, hint: &str) -> RpcError {
    let mut data = Map::new();
    data.insert("class".into(), class.as_str().into());
    data.insert("trace_id".into(), request_trace().to_string().into());
    data.insert("hint".into(), hint.into());
    RpcError {
        code: class.code(),
        message: message.into(),
        data,
    }
}

/// 503 + `Retry-After`: too many requests in flight.
pub fn overloaded() -> Response {
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "the bridge is overloaded",
        "Retry in a second; the bridge sheds load when too many requests are in flight.",
    );
    retry_after(
        rpc_error(StatusCode::SERVICE_UNAVAILABLE, None, &err),
        Duration::from_secs(1),
    )
}

/// 429 + `Retry-After`: the tenant called tools faster than its rate.
pub fn rate_limited(id: &RequestId, wait: Duration) -> Response {
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "rate limited: too many tool calls",
        "Slow down and retry after the number of seconds in Retry-After.",
    );
    retry_after(
        rpc_error(StatusCode::TOO_MANY_REQUESTS, Some(id), &err),
        wait,
    )
}

/// 429 + `Retry-After`: the tenant already runs as many tasks as it may.
pub fn too_many_tasks(frame: String) -> Response {
    retry_after(
        json(StatusCode::TOO_MANY_REQUESTS, frame),
        Duration::from_secs(5),
    )
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

/// The frame sent when the bridge stops while a request still waits.
pub fn shutting_down_frame(id: &RequestId) -> String {
    let err = envelope(
        ErrorClass::UpstreamUnavailable,
        "the bridge is shutting down",
        "Retry the request; tasks keep their state in the store.",
    );
    rpc::failure(Some(id), &err)
}

/// 503 with [`shutting_down_frame`].
pub fn shutting_down(id: &RequestId) -> Response {
    retry_after(
        json(StatusCode::SERVICE_UNAVAILABLE, shutting_down_frame(id)),
        Duration::from_secs(1),
    )
}

/// The internal-error frame of a handler that panicked; the bridge keeps serving.
pub fn panic_frame(id: Option<&RequestId>) -> String {
    let err = envelope(
        ErrorClass::Internal,
        "internal error",
        "This is a bug in the bridge; retry, and report it with the trace_id if it persists.",
    );
    tracing::error!(trace_id = %err.data["trace_id"], "HTTP handler panicked");
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

fn retry_after(mut resp: Response, wait: Duration) -> Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    resp.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
    resp
}
