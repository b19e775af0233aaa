//! Dispatch of one JSON-RPC message: lifecycle, ping, logging, tools and tasks. The
//! transports call [`handle`] or [`answer`]; a panicking handler is caught here and
//! answered with `internal_error` in the request's trace.

mod initialize;
mod tasks;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::json;

use super::listing::tools_list;
use super::results::{ProgressFrames, call_reply, tool_failure};
use super::rpc::{
    self, BadParams, CallParams, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Method, Notice,
    Reply, Request, RequestId, RpcError,
};
use super::session::Session;
use crate::app::App;
use crate::app::service::call;
use crate::app::service::caller::ProgressListener;
use crate::app::service::request::{CallError, ToolCall};
use crate::app::telemetry::{self, CallSpan, Outcome, Parent};
use crate::domain::{TraceId, respell};
use initialize::{initialize, instructions};
use tasks::{task_cancel, task_get, task_list, task_result_of};

/// A serialized response and what HTTP needs to pick its status.
pub struct Answer {
    /// The response frame.
    pub frame: String,
    /// Whether it is a result (not an error).
    pub ok: bool,
    /// When the token lacked scopes, those a step-up asks for (HTTP: 403).
    pub step_up: Vec<String>,
    /// The bridge is at a limit; retry after this long (HTTP: 429).
    pub retry_after: Option<Duration>,
}

/// Handles one incoming message; returns the response frame for requests.
pub async fn handle(app: &App, session: &Session, message: Incoming) -> Option<String> {
    match message {
        Incoming::Request(req) => Some(answer(app, session, req).await.frame),
        Incoming::Notification(notice) => {
            notify(session, &notice);
            None
        }
        Incoming::Response(resp) => {
            session.resolve(&resp.id, resp.outcome);
            None
        }
    }
}

/// Handles one request; also says what HTTP needs for its status.
pub async fn answer(app: &App, session: &Session, req: Request) -> Answer {
    // A `tools/call` is timed by its span.
    let started = (!matches!(req.method, Method::ToolsCall(_))).then(Instant::now);
    // The caller's trace: `params._meta.traceparent` (with its `tracestate`), else the
    // transport's (HTTP headers); otherwise a new one starts.
    let parent = Parent::from_headers(
        req.trace.traceparent.as_deref(),
        req.trace.tracestate.as_deref(),
    )
    .or_else(|| session.traceparent().cloned());
    let call = matches!(req.method, Method::ToolsCall(_)).then(|| {
        let tenant = session.principal().map(|p| p.tenant);
        CallSpan::start(
            parent.as_ref(),
            || req.id.to_text(),
            session.network(),
            tenant,
        )
    });
    let trace = telemetry::request_trace_id(call.as_ref(), parent.as_ref());
    let work =
        AssertUnwindSafe(dispatch(app, session, &req.method, trace, call.as_ref())).catch_unwind();
    let caught = match &call {
        Some(span) => in_span(span.span(), work).await,
        None => work.await,
    };
    let result = caught.unwrap_or_else(|_| {
        if let Some(call) = &call {
            call.finish(Outcome::Panic);
        }
        tracing::error!(method = req.method.name(), trace_id = %trace, "handler panicked");
        Err(RpcError::panicked(trace))
    });
    match &call {
        // Failures before the tool ran (params, unknown tool, session state); a call
        // that reached its tool has already recorded its outcome.
        Some(call) => {
            let _ = call.finish(match &result {
                Ok(_) => Outcome::Success,
                Err(e) => Outcome::Failed(e.class),
            });
        }
        None => telemetry::request_ended(
            req.method.known_name().unwrap_or(telemetry::OTHER),
            result.as_ref().err().map(|e| e.class),
            started.map_or_else(Duration::default, |s| s.elapsed()),
            session.network(),
        ),
    }
    if let Err(err) = &result {
        tracing::debug!(method = req.method.name(), code = err.code, trace_id = %trace, "request failed");
    }
    reply(app, &req.id, result)
}

/// The answer to request `id` whose handler returned `result`.
pub fn reply(app: &App, id: &RequestId, result: Result<Reply, RpcError>) -> Answer {
    match result {
        Ok(result) => Answer {
            frame: rpc::success(id, &result),
            ok: true,
            step_up: Vec::new(),
            retry_after: None,
        },
        Err(mut err) => {
            // Protocol errors name tools too (tasks/*, an unknown tool).
            err.respell(app.settings().tool_names);
            Answer {
                frame: rpc::failure(Some(id), &err),
                ok: false,
                step_up: err.step_up().to_vec(),
                retry_after: err.retry_after,
            }
        }
    }
}

async fn dispatch(
    app: &App,
    session: &Session,
    method: &Method,
    trace: TraceId,
    call: Option<&CallSpan>,
) -> Result<Reply, RpcError> {
    let early = matches!(method, Method::Initialize(_) | Method::Ping);
    let known = !matches!(method, Method::Unknown(_) | Method::Discover);
    if known && !early && !session.is_initialized() {
        return Err(RpcError::protocol(
            INVALID_REQUEST,
            "the session is not initialized",
            "Send initialize (and notifications/initialized) before other requests.",
            trace,
        ));
    }
    let bad = |e: &BadParams| e.to_error(trace);
    match method {
        Method::Initialize(params) => {
            // The same rule `tasks::launch` applies to this session's plain calls: on HTTP
            // the later requests carry only their User-Agent, never this clientInfo.
            let client = session.client_name().or_else(|| {
                session
                    .remembers_client()
                    .then_some(params.client_name.as_deref())
                    .flatten()
            });
            let waits = app.settings().plain_calls_wait(client);
            let instructions = respell(instructions(waits), app.settings().tool_names).into_owned();
            initialize(session, params, trace, instructions).map(Reply::Json)
        }
        Method::Ping => Ok(Reply::Json(json!({}))),
        Method::SetLevel(level) => {
            session.set_log_level(*level.as_ref().map_err(bad)?);
            Ok(Reply::Json(json!({})))
        }
        Method::ToolsList(params) => {
            params.as_ref().map_err(bad)?;
            let waits = app.settings().plain_calls_wait(session.client_name());
            Ok(Reply::Raw(tools_list(app.settings().tool_names, waits)))
        }
        // The handlers' futures are boxed: inline, the largest of them set the size of every
        // request's future, which a transport moves into a task (kilobytes copied per
        // `ping`).
        Method::ToolsCall(params) => {
            let span = call.expect("answer() opens a span for every tools/call");
            let params = params.as_ref().map_err(bad)?;
            Box::pin(tools_call(app, session, params, span)).await
        }
        Method::TasksGet(task) => Box::pin(task_get(app, session, task, trace)).await,
        Method::TasksResult(task) => Box::pin(task_result_of(app, session, task, trace)).await,
        Method::TasksList(cursor) => Box::pin(task_list(app, session, cursor, trace)).await,
        Method::TasksCancel(task) => Box::pin(task_cancel(app, session, task, trace)).await,
        // Newer clients probe with `server/discover`; -32601 tells them to fall back to
        // `initialize`, and the session stays ready for it.
        Method::Discover | Method::Unknown(_) => Err(RpcError::protocol(
            METHOD_NOT_FOUND,
            format!("method not found: {}", method.name()),
            "This server speaks MCP 2025-11-25; start with initialize.",
            trace,
        )),
    }
}

/// `tools/call`: the service's pipeline, its outcome in MCP's shapes.
async fn tools_call(
    app: &App,
    session: &Session,
    params: &CallParams,
    span: &CallSpan,
) -> Result<Reply, RpcError> {
    let trace = span.trace_id();
    // Any JSON value as sent: the run's notifications carry it back unchanged.
    let progress = params.meta.get("progressToken").map(|token| {
        Arc::new(ProgressFrames {
            outbound: session.outbound(),
            token: token.clone(),
        }) as Arc<dyn ProgressListener>
    });
    let request = ToolCall {
        name: &params.name,
        arguments: &params.arguments,
        confirmed: params.confirmation(),
        confirmation_token: params.confirmation_token(),
        task: params.task.as_ref().map(|_| params.requested_ttl()),
        progress,
    };
    match call::call(app, session, request, span).await {
        Ok(outcome) => call_reply(app, outcome, trace),
        Err(CallError::Refused(e)) => Err(RpcError::logged(&e, trace)),
        Err(CallError::Failed(e)) => tool_failure(app, &e, trace).map(Reply::Json),
    }
}

fn notify(session: &Session, notice: &Notice) {
    match notice {
        Notice::Cancelled(Some(id)) => {
            if session.cancel(id) {
                tracing::debug!(request_id = ?id, "request cancelled by the client");
            }
        }
        // `initialized` needs no action; unknown notifications are ignored as MCP asks.
        Notice::Cancelled(None) | Notice::Initialized | Notice::Other => {}
    }
}

/// `work` polled inside `span`, as `Instrumented` polls it, without its second entry:
/// `Instrumented` enters the span again to drop the finished future, and each entry and
/// exit goes through every layer. A call's future
/// holds nothing whose drop logs.
async fn in_span<F: Future>(span: &tracing::Span, work: F) -> F::Output {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        let _entered = span.enter();
        work.as_mut().poll(cx)
    })
    .await
}
