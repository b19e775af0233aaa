//! A dispatched request on its way to becoming an HTTP response: the work (whose panic is
//! caught) and the status of a JSON answer, chosen from the typed answer, never its text.

use std::any::Any;
use std::pin::Pin;

use axum::http::StatusCode;
use axum::response::Response;

use super::reply;
use super::shared::Shared;
use crate::app::edge::dispatch::Answer;
use crate::app::edge::rpc::RequestId;

/// Marks a response whose JSON-RPC frame is a result (an `initialize` that succeeded
/// gets its session id).
#[derive(Debug, Clone, Copy)]
pub(super) struct Succeeded;

/// What the request was, as far as its HTTP answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// `initialize`: a success is marked [`Succeeded`], for its session id.
    Initialize,
    /// A newer client's `server/discover` probe: 400.
    Discover,
    Other,
}

/// The dispatcher's answer to one request, or the panic it raised.
pub(super) type Work = Pin<Box<dyn Future<Output = Result<Answer, Box<dyn Any + Send>>> + Send>>;

/// The status of a JSON answer: 403 with a step-up challenge for a missing scope, 429 +
/// `Retry-After` when the bridge is at a limit, 400 for a newer client's
/// `server/discover` probe (CONTRACT §3), else 200.
pub(super) fn json_answer(
    s: &Shared,
    id: &RequestId,
    asked: Asked,
    outcome: Result<Answer, Box<dyn Any + Send>>,
) -> Response {
    let Ok(answer) = outcome else {
        return reply::json(
            StatusCode::INTERNAL_SERVER_ERROR,
            reply::panic_frame(Some(id)),
        );
    };
    if !answer.step_up.is_empty() {
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            answer.step_up.join(" "),
            s.resource_metadata
        );
        return reply::challenge(reply::json(StatusCode::FORBIDDEN, answer.frame), &challenge);
    }
    if let Some(wait) = answer.retry_after {
        return reply::retry_after(
            reply::json(StatusCode::TOO_MANY_REQUESTS, answer.frame),
            wait,
        );
    }
    let status = if asked == Asked::Discover {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut resp = reply::json(status, answer.frame);
    // Only an `initialize` needs it: a response's first extension allocates its map.
    if answer.ok && asked == Asked::Initialize {
        resp.extensions_mut().insert(Succeeded);
    }
    resp
}
