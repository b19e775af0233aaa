//! The stdio transport: one JSON-RPC message per line in, one per line out.
//!
//! One loop reads requests and writes answers. A request is polled once where it is read:
//! one that finishes then (a `ping`, `tools/list`, a short tool answered from memory) is
//! answered from the loop, with no task and no hand-off; one that waits (upstream, the
//! store, a child) becomes a task of its own, so a slow call never blocks a `ping`, and
//! its answer comes back to the loop through a channel, as notifications do. Invariant:
//! the output carries only protocol frames; logs go to stderr. A line over [`MAX_LINE`]
//! is refused and reading goes on; EOF stops reading, lets in-flight requests finish,
//! and returns.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::rpc::{self, INVALID_REQUEST, Incoming, Request, RpcError};
use crate::app::session::{Held, Session};
use crate::app::tasks::SHUTDOWN_GRACE;
use crate::app::trace::new_trace_id;
use crate::app::{App, server};
use crate::lines::{Line, LineReader};

/// The longest line accepted (4 MiB, CONTRACT §10).
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// How long SIGTERM waits for in-flight requests: the runs' grace, then the time to
/// kill and fail the rest and for their waiters to read that.
const DRAIN: Duration = SHUTDOWN_GRACE.saturating_add(Duration::from_secs(3));
/// Unwritten output past which the loop stops reading and only writes: a client that
/// does not read its answers stops being read, instead of growing our memory.
const WRITE_FIRST: usize = 64 * 1024;

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
    let (tx, mut rx) = mpsc::channel::<String>(1024);
    let held = Arc::new(Held::default());
    let session = Arc::new(Session::new(tx.clone()).releasing_runs_with(Arc::clone(&held)));
    let tracker = TaskTracker::new();
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, input), MAX_LINE);
    let mut out = Outbox::new(output, held);

    // One wait for the shutdown, not one registered and dropped per message.
    let stop = shutdown.cancelled();
    tokio::pin!(stop);
    let result = loop {
        let reading = !out.backed_up();
        // Biased: input already buffered is read before answers are written, so the
        // answers to pipelined requests share a write.
        let line = tokio::select! {
            biased;
            () = &mut stop => break Ok(()),
            Some(frame) = rx.recv(), if reading => {
                out.push(&frame);
                continue;
            }
            line = lines.next_line(), if reading => line,
            () = out.write_some(), if out.has_work() => continue,
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
                out.push(&rpc::failure(None, &err));
                continue;
            }
            Ok(Line::Eof) => break Ok(()),
            Err(e) => break Err(e),
        };
        match rpc::parse_frame(&bytes) {
            Err(e) => {
                let hint = "Send one JSON-RPC 2.0 object per line.";
                let err = RpcError::protocol(e.code, e.message, hint, new_trace_id());
                out.push(&rpc::failure(e.id.as_ref(), &err));
            }
            Ok(Incoming::Request(req)) => {
                let mut reply = respond(app.clone(), Arc::clone(&session), req);
                // Polled here first: most requests finish without waiting, and answering
                // them in place saves a task, a channel hop and a wake-up per request.
                match futures::poll!(reply.as_mut()) {
                    Poll::Ready(frame) => {
                        // Whatever the request sent before its answer (a notification)
                        // is written first.
                        while let Ok(earlier) = rx.try_recv() {
                            out.push(&earlier);
                        }
                        if let Some(frame) = frame {
                            out.push(&frame);
                        }
                    }
                    Poll::Pending => {
                        let tx = tx.clone();
                        tracker.spawn(async move {
                            if let Some(frame) = reply.await {
                                let _ = tx.send(frame).await;
                            }
                        });
                    }
                }
            }
            Ok(other) => {
                // Notifications and responses are cheap; handle them in order.
                let _ = server::handle(&app, &session, other).await;
            }
        }
    };
    // The rest of the answers are written as the requests still running finish.
    let writer = tokio::spawn(out.finish(rx));
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

type Reply = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// One request's answer frame; `None` when the client cancelled it (MCP: a cancelled
/// request gets no response). Boxed: it is polled where it is read and, when it waits,
/// moved into a task, and a box moves as a pointer (the answer's future is about 1 KB).
fn respond(app: App, session: Arc<Session>, req: Request) -> Reply {
    let cancelled = session.track(&req.id);
    Box::pin(async move {
        let id = req.id.clone();
        let method = req.method.name().to_owned();
        let work = AssertUnwindSafe(server::answer(&app, &session, req)).catch_unwind();
        let frame = tokio::select! {
            () = cancelled.cancelled() => None,
            outcome = work => Some(match outcome {
                Ok(answer) => answer.frame,
                Err(_) => panic_frame(&id, &method),
            }),
        };
        session.untrack(&id);
        if frame.is_none() {
            // No answer will be written: nothing to wait for.
            session.release_held();
        }
        frame
    })
}

/// The internal-error response for a handler that panicked; the bridge keeps serving.
fn panic_frame(id: &rpc::RequestId, method: &str) -> String {
    let trace = new_trace_id();
    tracing::error!(method, trace_id = %trace, "handler panicked");
    rpc::failure(Some(id), &RpcError::panicked(trace))
}

/// The output and what is waiting to be written to it. Frames are appended as they are
/// answered and written when the loop has nothing to read, so pipelined answers share a
/// write; after each write that empties it, the runs held for the answers written start.
struct Outbox<W> {
    output: W,
    pending: Vec<u8>,
    /// Written since the last flush (a flush cut short by `select!` is done again).
    unflushed: bool,
    held: Arc<Held>,
    /// The output failed (the client is gone): frames are dropped from then on.
    closed: bool,
}

impl<W: AsyncWrite + Unpin> Outbox<W> {
    fn new(output: W, held: Arc<Held>) -> Self {
        Outbox {
            output,
            pending: Vec::with_capacity(WRITE_FIRST),
            unflushed: false,
            held,
            closed: false,
        }
    }

    fn push(&mut self, frame: &str) {
        if !self.closed {
            // serde_json escapes newlines inside strings, so a frame is always one line.
            self.pending.extend_from_slice(frame.as_bytes());
            self.pending.push(b'\n');
        }
    }

    /// Whether there is anything to write or flush.
    fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.unflushed
    }

    fn backed_up(&self) -> bool {
        self.pending.len() >= WRITE_FIRST
    }

    /// One write of what is pending, or the flush once all of it is written; then the
    /// held runs start. Cancel-safe: an unfinished write wrote nothing, an unfinished
    /// flush is done again.
    async fn write_some(&mut self) {
        if !self.pending.is_empty() {
            match self.output.write(&self.pending).await {
                Ok(n) if n > 0 => {
                    self.pending.drain(..n);
                    self.unflushed = true;
                }
                _ => self.close(),
            }
            if !self.pending.is_empty() {
                return;
            }
        }
        if self.output.flush().await.is_err() {
            self.close();
        }
        self.unflushed = false;
        self.held.release();
    }

    fn close(&mut self) {
        self.closed = true;
        self.pending = Vec::new();
    }

    /// Writes what is pending and every frame still to come, until all senders are gone.
    async fn finish(mut self, mut rx: mpsc::Receiver<String>) {
        loop {
            tokio::select! {
                biased;
                frame = rx.recv() => match frame {
                    Some(frame) => self.push(&frame),
                    None => break,
                },
                () = self.write_some(), if self.has_work() => {}
            }
        }
        while self.has_work() {
            self.write_some().await;
        }
        self.held.release();
    }
}
