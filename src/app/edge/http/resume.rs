//! `GET /mcp` with `Last-Event-ID`: resumes a stream that waited for a task, on any
//! instance. The id names the task, the last progress step the client has and the
//! request the stream answers (`event_id`); the task must be the caller's tenant's (and
//! its tool in the token's scopes), else the answer is the one a missing task gets. The
//! stream replays the task's logged progress after that step, follows the log, and ends
//! with the response the original request would have had: the `CallToolResult` of a
//! waiting `tools/call`, or the `tasks/result` answer. It takes one of the tenant's waits.

use std::panic::AssertUnwindSafe;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::FutureExt;
use tokio::sync::mpsc;

use super::answer::Work;
use super::event_id::{self, Door, EventId};
use super::reply;
use super::resumable::Resumable;
use super::shared::Shared;
use super::sse;
use super::waits::{Hold, Refused};
use crate::app::edge::dispatch;
use crate::app::edge::results::{task_result, tool_failure};
use crate::app::edge::rpc::{
    INVALID_REQUEST, Method, Reply, Request, RpcError, TaskRef, TraceMeta,
};
use crate::app::edge::session::Session;
use crate::app::service::tasks::methods;
use crate::app::telemetry::ids::request_trace;
use crate::domain::{DomainError, ErrorClass, Principal};

/// Resumes the stream `last` (a `Last-Event-ID`) names for `principal`, whose token and
/// session the caller has checked.
pub(super) async fn resume(s: &Shared, principal: Principal, last: &str) -> Response {
    let Some(EventId { task, seq, origin }) = event_id::parse(last) else {
        return not_resumable();
    };
    let id = origin.request.clone();
    if let Err(wait) = s.gauges.take_call(&principal.tenant) {
        return reply::rate_limited(Some(&id), &principal.tenant, wait);
    }
    let permit = match s.gauges.waits.enter(&principal.tenant) {
        Ok(wait) => Hold::Wait { _wait: wait },
        Err(Refused::Tenant) => return reply::too_many_waits(&id, &principal.tenant),
        Err(Refused::Full) => return reply::overloaded(),
    };
    // Another tenant's task, or one this token may not act on, ends here.
    if let Err(e) = methods::visible(&s.app, &principal, task).await {
        let status = match e.class() {
            ErrorClass::InputValidation => StatusCode::NOT_FOUND,
            ErrorClass::AuthzDenied => StatusCode::FORBIDDEN,
            ErrorClass::UpstreamUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        return reply::rpc_error(status, Some(&id), &RpcError::logged(&e, request_trace()));
    }
    let tenant = principal.tenant;
    // `parse` takes only origins that encode again; this is for the type.
    let Some(resumable) = Resumable::resumed(s, &origin, task, seq, principal.tenant) else {
        return not_resumable();
    };
    let app = s.app.clone();
    let (token, request, trace) = (origin.token, id.clone(), request_trace());
    let work: Work = match origin.door {
        // What the original `tasks/result` answers, through the same handler.
        Door::Result => {
            let (tx, _) = mpsc::channel(1);
            let session = Session::stateless(tx, principal, false, None);
            let req = Request {
                id: request,
                method: Method::TasksResult(Ok(TaskRef {
                    id: task.to_string(),
                    seed_shape: false,
                    progress_token: token,
                })),
                trace: TraceMeta::default(),
            };
            Box::pin(async move {
                AssertUnwindSafe(dispatch::answer(&app, &session, req))
                    .catch_unwind()
                    .await
            })
        }
        // What the original waiting `tools/call` answers once its task is terminal.
        Door::Call => Box::pin(
            AssertUnwindSafe(async move {
                let result = match app.runner().wait_terminal(&principal.tenant, task).await {
                    Ok(done) => task_result(&done)
                        .or_else(|e: DomainError| tool_failure(&app, &e, done.trace_id)),
                    Err(e) => Err(RpcError::logged(&e, trace)),
                };
                dispatch::reply(&app, &request, result.map(Reply::Json))
            })
            .catch_unwind(),
        ),
    };
    tracing::info!(task_id = %task, after = seq, tenant = %tenant, "resuming a stream");
    let (_, outbound) = mpsc::channel(1);
    let feed = sse::Feed {
        work,
        outbound,
        resumable: Some(resumable),
        permit,
    };
    sse::stream(s, feed, None, id)
}

/// 400: an id this server did not issue as resumable.
fn not_resumable() -> Response {
    reply::protocol(
        StatusCode::BAD_REQUEST,
        INVALID_REQUEST,
        "the Last-Event-ID is not an event of a resumable stream",
        "Resume with the id of the last event you received on a stream that waited for a task; other streams cannot be resumed.",
    )
}

/// The `Last-Event-ID` of a `GET`, if it sent one (as text).
pub(super) fn last_event_id(headers: &HeaderMap) -> Option<Option<&str>> {
    headers
        .get("last-event-id")
        .map(|v| v.to_str().ok().filter(|t| !t.is_empty()))
}
