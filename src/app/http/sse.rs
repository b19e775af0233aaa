//! SSE answers of `POST /mcp`: a priming event with an id and empty data, each
//! notification the handler sends (progress), then the response, then the end. Only for
//! requests that may wait (`tools/call` with a `progressToken`, `tasks/result`) from
//! clients that accept `text/event-stream`; a quick answer still goes back as JSON.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::answer::{Work, json_answer};
use super::gate::Accept;
use super::reply;
use super::shared::Shared;
use super::waits::Hold;
use crate::app::rpc::RequestId;

/// How long a streamable request may run before it is answered as SSE: a quick answer
/// (or a quick refusal, which needs its HTTP status) comes back as plain JSON.
const STREAM_AFTER: Duration = Duration::from_millis(200);
/// SSE comment interval, so proxies do not close a stream that waits for a task.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Waits briefly: a quick answer goes back as JSON (with its proper status); progress or
/// a longer wait turns the response into an SSE stream that ends with the answer.
pub(super) async fn respond(
    s: &Shared,
    accept: Accept,
    id: RequestId,
    discover: bool,
    mut work: Work,
    mut outbound: mpsc::Receiver<String>,
    permit: Hold,
) -> Response {
    let mut first = None;
    if accept.json {
        tokio::select! {
            biased;
            outcome = &mut work => return json_answer(s, &id, discover, outcome),
            Some(frame) = outbound.recv() => first = Some(frame),
            () = tokio::time::sleep(STREAM_AFTER) => {}
            () = s.shutdown.cancelled() => return reply::shutting_down(&id),
        }
    }
    tracing::debug!(request_id = ?id, "answering as an SSE stream");
    let (events, mut body) = mpsc::channel::<Bytes>(16);
    let stream = Stream {
        events,
        name: hex(&crate::app::trace::random_bytes::<8>()),
        next: 0,
    };
    tokio::spawn(pump(
        stream,
        work,
        outbound,
        first,
        id,
        s.shutdown.clone(),
        permit,
    ));
    let body =
        futures::stream::poll_fn(move |cx| body.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>)));
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// One SSE stream: event ids are `<stream>-<n>`, unique across streams.
struct Stream {
    events: mpsc::Sender<Bytes>,
    name: String,
    next: u64,
}

impl Stream {
    /// Sends one event; `false` when the client has gone.
    async fn send(&mut self, data: &str) -> bool {
        let event = format!("id: {}-{}\ndata: {data}\n\n", self.name, self.next);
        self.next += 1;
        self.events.send(Bytes::from(event)).await.is_ok()
    }
}

/// Feeds the stream: a priming event, each notification, then the response. A client
/// that goes away stops the wait (the task itself keeps running); shutdown ends it
/// with an error the client can retry on.
async fn pump(
    mut stream: Stream,
    mut work: Work,
    mut outbound: mpsc::Receiver<String>,
    first: Option<String>,
    id: RequestId,
    shutdown: CancellationToken,
    _permit: Hold,
) {
    if !stream.send("").await {
        return;
    }
    if let Some(frame) = first
        && !stream.send(&frame).await
    {
        return;
    }
    let mut keepalive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
    loop {
        tokio::select! {
            biased;
            outcome = &mut work => {
                while let Ok(frame) = outbound.try_recv() {
                    if !stream.send(&frame).await {
                        return;
                    }
                }
                let frame = match outcome {
                    Ok(answer) => answer.frame,
                    Err(_) => reply::panic_frame(Some(&id)),
                };
                stream.send(&frame).await;
                return;
            }
            Some(frame) = outbound.recv() => {
                if !stream.send(&frame).await {
                    return;
                }
            }
            () = shutdown.cancelled() => {
                stream.send(&reply::shutting_down_frame(&id)).await;
                return;
            }
            _ = keepalive.tick() => {
                if stream.events.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                    return;
                }
            }
            () = stream.events.closed() => return,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
