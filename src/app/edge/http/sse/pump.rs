//! The stream itself: its events, written out by [`pump`], which the response body
//! polls (`outbox`), and their ids.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::outbox::{Outbox, Pumped};
use crate::app::edge::http::answer::Work;
use crate::app::edge::http::reply;
use crate::app::edge::http::resumable::Resumable;
use crate::app::edge::http::shared::{LAST_CALL, Shared};
use crate::app::edge::http::waits::Hold;
use crate::app::edge::results::progress_notification;
use crate::app::edge::rpc::RequestId;
use crate::app::service::tasks::TaskRunner;
use crate::domain::TaskId;
use crate::domain::ids::hex_lower;

/// SSE comment interval, so proxies do not close a stream that waits for a task.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How often a stream that follows a task's progress log reads it (as often as a
/// `tasks/result` on another instance than the owner polls the task).
const FOLLOW_EVERY: Duration = Duration::from_millis(500);
/// Log entries read at a time.
const FOLLOW_BATCH: u32 = 64;
/// The `retry` of a stream handed over on shutdown: how long the client waits before it
/// resumes the stream (on another instance, behind the same address).
const RESUME_AFTER: Duration = Duration::from_secs(1);

/// What a stream is made of: the handler's work, its notifications, what makes the
/// stream resumable (if it is), and the slot or wait the request holds until it ends.
pub(crate) struct Feed {
    pub(crate) work: Work,
    pub(crate) outbound: mpsc::Receiver<String>,
    pub(crate) resumable: Option<Resumable>,
    pub(crate) permit: Hold,
}

/// Answers with an SSE stream fed by [`pump`]: a POST's (`first` is a notification the
/// handler already sent) or a resumed one.
pub(crate) fn stream(s: &Shared, feed: Feed, first: Option<String>, id: RequestId) -> Response {
    let Feed {
        work,
        outbound,
        resumable,
        permit,
    } = feed;
    let outbox = Arc::new(Outbox::default());
    let stream = Stream {
        outbox: Arc::clone(&outbox),
        name: hex_lower(&crate::support::random::random_bytes::<8>()),
        next: 0,
        resumable,
        naming: false,
        early: Vec::new(),
    };
    let stop = Stop {
        shutdown: s.shutdown.clone(),
        runner: Arc::clone(s.app.runner()),
    };
    let pump = Box::pin(pump(stream, work, outbound, first, id, stop, permit));
    let mut resp = Response::new(Body::new(Pumped::new(pump, outbox)));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// One SSE stream: plain event ids are `<stream>-<n>`, unique across streams; a
/// resumable stream's task events carry [`event_id`]s instead.
struct Stream {
    outbox: Arc<Outbox>,
    name: String,
    next: u64,
    resumable: Option<Resumable>,
    /// The handler has yet to name the task of this resumable stream: notifications wait
    /// in `early`, so that every event of the stream carries a resumable id.
    naming: bool,
    early: Vec<String>,
}

/// The most notifications kept while a resumable stream waits for its task to be named;
/// past it they go out with plain ids.
const MAX_EARLY: usize = 64;

impl Stream {
    /// Sends one event with a plain id.
    async fn send(&mut self, data: &str) {
        let id = format!("{}-{}", self.name, self.next);
        self.next += 1;
        self.emit(Some(&id), data).await;
    }

    async fn emit(&mut self, id: Option<&str>, data: &str) {
        let event = match id {
            Some(id) => format!("id: {id}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        };
        self.outbox.put(Bytes::from(event)).await;
    }

    /// The task this stream waits for, once known.
    fn task(&self) -> Option<TaskId> {
        self.resumable.as_ref().and_then(|r| r.task)
    }

    /// Whether the stream reads its task's progress log: it knows its task and follows it.
    fn follows(&self) -> bool {
        self.resumable
            .as_ref()
            .is_some_and(|r| r.task.is_some() && r.follow.is_some())
    }

    /// The handler named the task: the priming event of the resumable stream, then the
    /// notifications that came before it.
    async fn named(&mut self, task: TaskId) {
        self.naming = false;
        let Some(r) = self.resumable.as_mut() else {
            return;
        };
        r.task = Some(task);
        let id = r.id(task, r.seq);
        self.emit(Some(&id), "").await;
        self.flush_early().await;
    }

    /// The handler will not name a task (it answered without one): the notifications
    /// kept for it go out with plain ids.
    async fn unnamed(&mut self) {
        self.naming = false;
        self.flush_early().await;
    }

    async fn flush_early(&mut self) {
        for frame in std::mem::take(&mut self.early) {
            self.notify(&frame).await;
        }
    }

    /// A notification from the handler: a progress event of the stream's task gets the
    /// resumable id of its step (one already sent is dropped); any other, a plain id.
    /// Before the task is named it waits, up to [`MAX_EARLY`] of them.
    async fn notify(&mut self, frame: &str) {
        if self.naming && self.early.len() < MAX_EARLY {
            self.early.push(frame.to_owned());
            return;
        }
        let Some(task) = self.task() else {
            return self.send(frame).await;
        };
        match progress_step(frame, task) {
            Some(seq) => {
                let r = self.resumable.as_mut().expect("a known task is resumable");
                if seq <= r.seq {
                    return;
                }
                r.seq = seq;
                let id = r.id(task, seq);
                self.emit(Some(&id), frame).await;
            }
            None => self.send(frame).await,
        }
    }

    /// Sends what the task's log holds past the last step sent. A store that does not
    /// answer sends nothing now (the next read catches up).
    async fn follow(&mut self) {
        let Some(task) = self.task() else {
            return;
        };
        let r = self.resumable.as_ref().expect("a known task is resumable");
        let Some((store, tenant)) = &r.follow else {
            return;
        };
        let entries = match store
            .progress_after(tenant, task, r.seq, FOLLOW_BATCH)
            .await
        {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(task_id = %task, "cannot read the progress log yet: {e}");
                return;
            }
        };
        let token = r.token.clone().unwrap_or(Value::Null);
        for entry in entries {
            let frame = progress_notification(task, &token, &entry);
            let r = self.resumable.as_mut().expect("a known task is resumable");
            r.seq = entry.seq;
            let id = r.id(task, entry.seq);
            self.emit(Some(&id), &frame).await;
        }
    }

    /// Ends the stream without its response, for the client to resume it (after
    /// `RESUME_AFTER`, with a `GET` and the last event id it has) on another instance.
    async fn hand_over(&mut self) {
        tracing::debug!(task_id = ?self.task(), "shutting down; the client resumes the stream elsewhere");
        let retry = format!("retry: {}\n\n", RESUME_AFTER.as_millis());
        self.outbox.put(Bytes::from(retry)).await;
    }

    /// The response: without an id on a resumable stream (the stream is over; resuming
    /// from the last progress id gives the response again, and a stream whose task was
    /// never named has no event to resume from).
    async fn answer(&mut self, frame: &str) {
        if self.resumable.is_some() {
            self.emit(None, frame).await;
        } else {
            self.send(frame).await;
        }
    }
}

/// The step of `frame` if it is a progress notification of `task`.
fn progress_step(frame: &str, task: TaskId) -> Option<u64> {
    let v: Value = serde_json::from_str(frame).ok()?;
    let params = v.get("params")?;
    let related = params.pointer("/_meta/io.modelcontextprotocol~1related-task/taskId")?;
    (v.get("method")? == "notifications/progress" && related.as_str()? == task.to_string())
        .then(|| params.get("progress")?.as_u64())
        .flatten()
}

/// What a stream needs to know of a shutdown: when it starts, and whether the stream's
/// task runs here (its outcome comes within the runs' grace) or elsewhere.
struct Stop {
    shutdown: CancellationToken,
    runner: Arc<TaskRunner>,
}

/// Feeds the stream: a priming event (a resumable POST stream's once its task is
/// named; none for a resumed one), each notification and each logged progress step,
/// then the response. A client that goes away drops it with the body, which stops the
/// wait (the task itself keeps running).
///
/// On shutdown, a stream whose task runs on another instance is handed over at once (the
/// client resumes it there); any other keeps waiting until [`LAST_CALL`], as its run ends
/// or is failed within the grace. Past that, a resumable stream is handed over too, and
/// the rest end with an error the client can retry on.
async fn pump(
    mut stream: Stream,
    mut work: Work,
    mut outbound: mpsc::Receiver<String>,
    first: Option<String>,
    id: RequestId,
    stop: Stop,
    _permit: Hold,
) {
    let mut named = stream.resumable.as_mut().and_then(|r| r.named.take());
    stream.naming = named.is_some();
    if stream.resumable.is_none() {
        stream.send("").await;
    }
    if let Some(frame) = first {
        stream.notify(&frame).await;
    }
    let mut keepalive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
    // Read only while the stream follows a log: a stream that waits on anything else
    // (a question to the client, a run here) is not woken for it.
    let mut follow = tokio::time::interval(FOLLOW_EVERY);
    follow.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_call = None;
    loop {
        tokio::select! {
            biased;
            told = async { named.as_mut().expect("guarded").await }, if named.is_some() => {
                named = None;
                let Ok(task) = told else {
                    stream.unnamed().await;
                    continue;
                };
                stream.named(task).await;
                // Named after the shutdown began: a run elsewhere is handed over now.
                if last_call.is_some() && !stop.runner.is_live(task) {
                    stream.hand_over().await;
                    return;
                }
            }
            outcome = &mut work => {
                // The task may be named only now (a quick one): prime before its events.
                match named.take().map(|mut rx| rx.try_recv()) {
                    Some(Ok(task)) => stream.named(task).await,
                    _ => stream.unnamed().await,
                }
                while let Ok(frame) = outbound.try_recv() {
                    stream.notify(&frame).await;
                }
                // The task is terminal: everything it logged is in the log by now.
                for _ in 0..=crate::domain::task::PROGRESS_LOG_MAX / FOLLOW_BATCH {
                    let before = stream.resumable.as_ref().map(|r| r.seq);
                    stream.follow().await;
                    if stream.resumable.as_ref().map(|r| r.seq) == before {
                        break;
                    }
                }
                let frame = match outcome {
                    Ok(answer) => answer.frame,
                    Err(_) => reply::panic_frame(Some(&id)),
                };
                stream.answer(&frame).await;
                return;
            }
            Some(frame) = outbound.recv() => stream.notify(&frame).await,
            () = stop.shutdown.cancelled(), if last_call.is_none() => {
                if stream.task().is_some_and(|task| !stop.runner.is_live(task)) {
                    stream.hand_over().await;
                    return;
                }
                last_call = Some(Box::pin(tokio::time::sleep(LAST_CALL)));
            }
            () = async { last_call.as_mut().expect("guarded").await }, if last_call.is_some() => {
                if stream.task().is_some() {
                    stream.hand_over().await;
                } else {
                    stream.send(&reply::shutting_down_frame(&id)).await;
                }
                return;
            }
            _ = follow.tick(), if stream.follows() => stream.follow().await,
            _ = keepalive.tick() => {
                stream.outbox.put(Bytes::from_static(b": keepalive\n\n")).await;
            }
        }
    }
}
