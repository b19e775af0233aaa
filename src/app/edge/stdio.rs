//! The stdio transport: one JSON-RPC message per line in, one per line out.
//!
//! Requests run concurrently (a slow call never blocks a `ping`), up to [`MAX_IN_FLIGHT`]
//! unanswered, and up to [`MAX_QUEUED`] more wait their turn; responses and notifications
//! are read and handled meanwhile, since they are what frees a request waiting on the
//! client (an elicitation's answer, `notifications/cancelled`). One writer task owns the
//! output, so frames never interleave. Invariant: the output carries only protocol
//! frames; logs go to stderr. A line over [`MAX_LINE`] is refused and reading goes on;
//! EOF stops reading, lets queued and in-flight requests finish, and returns.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::App;
use crate::app::edge::dispatch;
use crate::app::edge::rpc::{self, INVALID_REQUEST, Incoming, RpcError};
use crate::app::edge::session::{Held, Session};
use crate::app::service::tasks::SHUTDOWN_GRACE;
use crate::app::telemetry::ids::new_trace_id;
use crate::support::ndjson::{Line, LineReader};

/// The longest line accepted, as CONTRACT §10 sets it.
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// The most requests unanswered at once. Past it requests queue ([`MAX_QUEUED`]), and with
/// the queue full reading waits: a client that stops reading its answers (the writer
/// blocks, then the answers waiting for it) stops being read, instead of the bridge
/// reading on and starting a task for every request while their answers pile up.
pub const MAX_IN_FLIGHT: usize = 1024;
/// The most requests read but not yet started. With this queue full too, reading waits.
pub const MAX_QUEUED: usize = 1024;
/// How long SIGTERM waits for in-flight requests: the runs' grace, then the time to
/// kill and fail the rest and for their waiters to read that.
const DRAIN: Duration = SHUTDOWN_GRACE.saturating_add(Duration::from_secs(3));

/// Serves one connection until EOF or `shutdown`.
///
/// # Errors
/// Returns an IO error when reading the input fails; a closed output just ends writing.
pub async fn serve<R, W>(
    app: App,
    input: R,
    output: W,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<String>(1024);
    let held = Arc::new(Held::default());
    let writer = tokio::spawn(write_frames(rx, output, Arc::clone(&held)));
    let session = Arc::new(Session::new(tx.clone()).releasing_runs_with(held));
    let tracker = TaskTracker::new();
    let (queue, queued) = mpsc::channel(MAX_QUEUED);
    let starter = tokio::spawn(start_requests(
        queued,
        app.clone(),
        Arc::clone(&session),
        tx.clone(),
        tracker.clone(),
        shutdown.clone(),
    ));
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, input), MAX_LINE);

    let result = loop {
        let line = tokio::select! {
            line = lines.next_line() => line,
            () = shutdown.cancelled() => break Ok(()),
        };
        let bytes = match line {
            Ok(Line::Frame(bytes)) => bytes,
            Ok(Line::TooLong) => {
                let err = RpcError::protocol(
                    INVALID_REQUEST,
                    "invalid request: the message exceeds 4 MiB",
                    "Send smaller messages; large payloads belong in upstream storage.",
                    new_trace_id(),
                );
                let _ = tx.send(rpc::failure(None, &err)).await;
                continue;
            }
            Ok(Line::Eof) => break Ok(()),
            Err(e) => break Err(e),
        };
        match rpc::parse_frame(&bytes) {
            Err(e) => {
                let hint = "Send one JSON-RPC 2.0 object per line.";
                let err = RpcError::protocol(e.code, e.message, hint, new_trace_id());
                let _ = tx.send(rpc::failure(e.id.as_ref(), &err)).await;
            }
            Ok(Incoming::Request(req)) => {
                // Tracked from now, so a cancel reaches it while it is queued.
                let cancelled = session.track(&req.id);
                let queued = tokio::select! {
                    sent = queue.send((req, cancelled)) => sent,
                    () = shutdown.cancelled() => break Ok(()),
                };
                if queued.is_err() {
                    break Ok(());
                }
            }
            Ok(other) => {
                // Notifications and responses are cheap; handle them in order.
                let _ = dispatch::handle(&app, &session, other).await;
            }
        }
    };
    // Every request read is started (or, on SIGTERM, dropped) before the tracker closes.
    drop(queue);
    let _ = starter.await;
    tracker.close();
    if shutdown.is_cancelled() {
        // SIGTERM: waits for runs end within the runs' grace (which started with the
        // signal); anything still unanswered after that is not waited for.
        if tokio::time::timeout(DRAIN, tracker.wait()).await.is_err() {
            tracing::warn!("some requests did not finish within {DRAIN:?} of SIGTERM; exiting");
        }
    } else {
        tracker.wait().await;
    }
    drop(session);
    drop(tx);
    let _ = writer.await;
    result
}

/// Starts the queued requests in order, each once one of [`MAX_IN_FLIGHT`] slots is free,
/// until the queue closes; on `shutdown` the rest are not started.
async fn start_requests(
    mut queued: mpsc::Receiver<(rpc::Request, CancellationToken)>,
    app: App,
    session: Arc<Session>,
    tx: mpsc::Sender<String>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some((req, cancelled)) = queued.recv().await {
        // Held until the answer is queued for the writer.
        let permit = tokio::select! {
            permit = Arc::clone(&in_flight).acquire_owned() => permit,
            () = shutdown.cancelled() => return,
        };
        let Ok(permit) = permit else { return };
        let app = app.clone();
        let session = Arc::clone(&session);
        let tx = tx.clone();
        tracker.spawn(async move {
            let id = req.id.clone();
            let method = req.method.name().to_owned();
            let frame = if cancelled.is_cancelled() {
                // Cancelled while it waited its turn.
                None
            } else {
                // Boxed: inline, the answer's future, which is large, would be copied
                // each time the task's future moves (into the task, between its stages).
                let work = AssertUnwindSafe(Box::pin(dispatch::answer(&app, &session, req)))
                    .catch_unwind();
                tokio::select! {
                    // MCP: a cancelled request gets no response.
                    () = cancelled.cancelled() => None,
                    outcome = work => Some(match outcome {
                        Ok(answer) => answer.frame,
                        Err(_) => panic_frame(&id, &method),
                    }),
                }
            };
            session.untrack(&id);
            match frame {
                Some(frame) => {
                    let _ = tx.send(frame).await;
                }
                // No answer will be written: nothing to wait for.
                None => session.release_held(),
            }
            drop(permit);
        });
    }
}

/// The internal-error response for a handler that panicked; the bridge keeps serving.
fn panic_frame(id: &rpc::RequestId, method: &str) -> String {
    let trace = new_trace_id();
    tracing::error!(method, trace_id = %trace, "handler panicked");
    rpc::failure(Some(id), &RpcError::panicked(trace))
}

/// Writes frames, flushing whenever the queue runs dry so pipelined responses share a
/// write; after each flush the runs held for the answers written start.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<String>,
    output: W,
    held: Arc<Held>,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    while let Some(frame) = rx.recv().await {
        let mut next = Some(frame);
        while let Some(frame) = next {
            // serde_json escapes newlines inside strings, so a frame is always one line.
            if out.write_all(frame.as_bytes()).await.is_err() || out.write_all(b"\n").await.is_err()
            {
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
        held.release();
    }
    let _ = out.flush().await;
}
