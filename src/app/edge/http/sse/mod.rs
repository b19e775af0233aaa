//! SSE answers of `POST /mcp`: a priming event with an id and empty data, each
//! notification the handler sends (progress), then the response, then the end. Only for
//! requests that may wait (`tools/call` with a `progressToken`, `tasks/result`) from
//! clients that accept `text/event-stream`; a quick answer still goes back as JSON.
//!
//! A stream that waits for a task is resumable (`event_id`): its priming event is sent
//! once the handler names the task, each progress event's id carries its step, and a
//! `GET` with `Last-Event-ID` (`resume`) continues it from the task's durable progress
//! log on any instance; a notification sent before the task is named waits for the
//! priming event, so it gets a resumable id too. Other events (and other streams) keep
//! ids of the form `<random stream name>-<n>`, which resume nothing.
//!
//! On shutdown a stream waits for a run of this instance until [`LAST_CALL`]; one that
//! follows a run elsewhere is handed over at once (`retry`, no response) to be resumed
//! on an instance that is still up.
//!
//! The stream's events are written by `pump`, which the response body polls (`outbox`):
//! a stream is driven by its connection, with no task or channel of its own, and ends
//! when the client goes (hyper drops the body).

mod outbox;
mod pump;

use std::time::Duration;

use axum::response::Response;

use super::answer::{Asked, json_answer};
use super::gate::Accept;
use super::shared::Shared;
use crate::app::edge::rpc::RequestId;
pub(super) use pump::{Feed, stream};

/// How long a streamable request may run before it is answered as SSE: a quick answer
/// (or a quick refusal, which needs its HTTP status) comes back as plain JSON.
const STREAM_AFTER: Duration = Duration::from_millis(200);

/// Waits briefly: a quick answer goes back as JSON (with its proper status); progress or
/// a longer wait turns the response into an SSE stream that ends with the answer.
pub(super) async fn respond(
    s: &Shared,
    accept: Accept,
    id: RequestId,
    asked: Asked,
    mut feed: Feed,
) -> Response {
    let mut first = None;
    if accept.json {
        tokio::select! {
            biased;
            outcome = &mut feed.work => return json_answer(s, &id, asked, outcome),
            Some(frame) = feed.outbound.recv() => first = Some(frame),
            () = tokio::time::sleep(STREAM_AFTER) => {}
        }
    }
    tracing::debug!(request_id = ?id, "answering as an SSE stream");
    stream(s, feed, first, id)
}
