//! Reading a POST's body, within a size limit, a deadline and the listener's byte budget.
//!
//! Bytes are taken from the budget before they are buffered: by the declared
//! `Content-Length` at once (so a request never holds part of the budget while it waits
//! for the rest), or chunk by chunk for a body of unknown length. A request that cannot
//! get its bytes within [`BUDGET_WAIT`] is shed (503 + `Retry-After`). An unauthenticated
//! body is read only as far as [`PREFIX`], and only when the budget has room at once.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::reply;
use crate::app::edge::rpc::{self, FrameError, INVALID_REQUEST, Incoming};

/// The largest body accepted (CONTRACT §10).
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a client may take to send its body.
const BODY_DEADLINE: Duration = Duration::from_secs(30);
/// How long a request waits for body budget before it is shed.
pub const BUDGET_WAIT: Duration = Duration::from_secs(1);
/// The most read of a body whose token failed: enough for the id and the tool name of
/// an ordinary request, little enough that refusals cost nothing.
pub const PREFIX: usize = 8 * 1024;
/// How long a refused client may take to send that prefix.
const PREFIX_DEADLINE: Duration = Duration::from_millis(500);

/// The listener's body budget: one permit per byte that may be buffered.
pub struct Budget {
    bytes: Arc<Semaphore>,
    total: usize,
}

impl Budget {
    /// A budget of `total` bytes.
    pub fn new(total: usize) -> Budget {
        Budget {
            bytes: Arc::new(Semaphore::new(total)),
            total,
        }
    }
}

/// A parsed frame, or the response refusing the body.
pub type Read = Result<Result<Incoming, FrameError>, Response>;

/// The body's declared length, if it sent a well-formed one.
fn declared(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Reads and parses the whole body (at most [`MAX_BODY`] within [`BODY_DEADLINE`]); its
/// bytes hold `budget` until parsed.
pub async fn read(budget: &Budget, body: Body, headers: &HeaderMap) -> Read {
    let declared = declared(headers);
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(body_error(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let mut held = Held::new(budget);
    if let Some(n) = declared {
        held.grow(n as usize).await?;
    }
    let bytes = tokio::time::timeout(BODY_DEADLINE, collect(body, &mut held, declared.is_none()))
        .await
        .unwrap_or(Err(StatusCode::REQUEST_TIMEOUT))
        .map_err(body_error)?;
    Ok(rpc::parse_frame(&bytes))
}

/// The frame of an unauthenticated request, when its body is at most [`PREFIX`] bytes,
/// arrives within [`PREFIX_DEADLINE`] and the budget has room now; else nothing (its 401
/// then carries no id).
pub async fn prefix(
    budget: &Budget,
    body: Body,
    headers: &HeaderMap,
) -> Option<Result<Incoming, FrameError>> {
    let want = declared(headers).map_or(Some(PREFIX), |n| {
        usize::try_from(n).ok().filter(|n| *n <= PREFIX)
    })?;
    let _held = Arc::clone(&budget.bytes)
        .try_acquire_many_owned(u32::try_from(want).ok()?)
        .ok()?;
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.ok()?;
            if buf.len() + chunk.len() > want {
                return None;
            }
            buf.extend_from_slice(&chunk);
        }
        Some(buf)
    };
    let bytes = tokio::time::timeout(PREFIX_DEADLINE, read).await.ok()??;
    Some(rpc::parse_frame(&bytes))
}

/// Budget bytes a request holds; returned when dropped.
struct Held<'a> {
    budget: &'a Budget,
    permits: Vec<OwnedSemaphorePermit>,
    bytes: usize,
}

impl<'a> Held<'a> {
    fn new(budget: &'a Budget) -> Held<'a> {
        Held {
            budget,
            permits: Vec::new(),
            bytes: 0,
        }
    }

    /// Takes `n` more bytes, waiting at most [`BUDGET_WAIT`]; a request larger than the
    /// whole budget is shed at once.
    async fn grow(&mut self, n: usize) -> Result<(), Response> {
        if n == 0 {
            return Ok(());
        }
        let count = match u32::try_from(n) {
            Ok(count) if self.bytes + n <= self.budget.total => count,
            _ => return Err(reply::over_budget()),
        };
        let take = Arc::clone(&self.budget.bytes).acquire_many_owned(count);
        match tokio::time::timeout(BUDGET_WAIT, take).await {
            Ok(Ok(permit)) => {
                self.permits.push(permit);
                self.bytes += n;
                Ok(())
            }
            _ => Err(reply::over_budget()),
        }
    }
}

/// Collects the body, taking budget per chunk when `metered` (no declared length).
async fn collect(body: Body, held: &mut Held<'_>, metered: bool) -> Result<Bytes, StatusCode> {
    let mut stream = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut first: Option<Bytes> = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| StatusCode::BAD_REQUEST)?;
        let len = first.as_ref().map_or(buf.len(), Bytes::len) + chunk.len();
        if len > MAX_BODY {
            return Err(StatusCode::PAYLOAD_TOO_LARGE);
        }
        if metered {
            held.grow(chunk.len())
                .await
                .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        } else if len > held.bytes {
            // More than declared: hyper refuses that, but never buffer past the budget.
            return Err(StatusCode::BAD_REQUEST);
        }
        // Most bodies arrive in one chunk: keep it without copying.
        match first.take() {
            None if buf.is_empty() => first = Some(chunk),
            None => buf.extend_from_slice(&chunk),
            Some(f) => {
                // The declared length when known, so the buffer never doubles past it.
                buf.reserve_exact(if metered { len } else { held.bytes.max(len) });
                buf.extend_from_slice(&f);
                buf.extend_from_slice(&chunk);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buf)))
}

/// The refusal of a body that could not be read.
fn body_error(status: StatusCode) -> Response {
    let (message, hint) = match status {
        StatusCode::SERVICE_UNAVAILABLE => return reply::over_budget(),
        StatusCode::PAYLOAD_TOO_LARGE => {
            crate::app::telemetry::refused(crate::app::telemetry::Refusal::Size, None);
            (
                "the message exceeds 4 MiB",
                "Send smaller messages; large payloads belong in upstream storage.",
            )
        }
        StatusCode::REQUEST_TIMEOUT => (
            "the request body arrived too slowly",
            "Send the whole body within 30 seconds.",
        ),
        _ => ("the request body could not be read", "Retry the request."),
    };
    reply::protocol(status, INVALID_REQUEST, message, hint)
}
