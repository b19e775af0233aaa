//! HTTP/1.1 keep-alive without hyper's buffers between requests. hyper keeps a read and
//! a write buffer for a connection's whole life; here, once a connection is idle (every
//! request answered in full), its hyper connection is stopped without closing the socket
//! and the socket is parked: only it and this loop's small state are held while the
//! client is idle. Its next bytes start a new hyper connection.
//!
//! hyper still decides keep-alive (HTTP/1.0, `Connection: close`, a body left unread): it
//! is stopped only while it waits for a next request — the last request's body read to
//! its end, every answer written out — which is the state hyper reaches only on a
//! connection it keeps. A connection hyper ends itself is closed, and one whose body the
//! routes left unread is left to hyper, so unread body bytes never pass for a request.
//! Bytes the client sent ahead (pipelined requests) are carried over.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Request;
use axum::response::Response;
use hyper::body::{Body, Buf, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Read at once when a parked connection wakes, before hyper's own buffer is made; most
/// requests fit whole.
const FIRST_READ: usize = 2048;

/// Serves HTTP/1.1 on `stream` until the client closes, hyper ends the connection, the
/// client is idle for `idle`, or `shutdown` (requests under way are answered first).
pub(super) async fn serve<S>(
    mut stream: TcpStream,
    h1: &hyper::server::conn::http1::Builder,
    service: S,
    idle: Duration,
    shutdown: &CancellationToken,
) -> Result<(), hyper::Error>
where
    S: tower_service::Service<Request<Tracked>, Response = Response>
        + Clone
        + Send
        + Unpin
        + 'static,
    S::Future: Send + Unpin + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let track = Arc::new(Track::default());
    let mut ahead = Bytes::new();
    loop {
        if ahead.is_empty() {
            ahead = match park(&stream, idle, shutdown).await {
                Some(first) => first,
                None => return Ok(()),
            };
        }
        track.reset();
        let service = TowerToHyperService::new(Exchange {
            inner: service.clone(),
            track: Arc::clone(&track),
        });
        let io = Prefixed {
            ahead,
            stream,
            track: Arc::clone(&track),
        };
        // Boxed, so the connection's state is freed when it is parked.
        let mut conn = Box::new(h1.serve_connection(TokioIo::new(io), service));
        let mut stopped = false;
        let cancelled = shutdown.cancelled();
        tokio::pin!(cancelled);
        std::future::poll_fn(|cx| {
            loop {
                if let Poll::Ready(ended) = conn.poll_without_shutdown(cx) {
                    return Poll::Ready(ended);
                }
                if stopped || !(track.waiting() || cancelled.as_mut().poll(cx).is_ready()) {
                    return Poll::Pending;
                }
                // Waiting for a next request: hyper ends at once. Mid-request (a stop):
                // once it is answered.
                Pin::new(&mut *conn).graceful_shutdown();
                stopped = true;
            }
        })
        .await?;
        let parts = conn.into_parts();
        let Prefixed {
            ahead: rest,
            stream: s,
            ..
        } = parts.io.into_inner();
        stream = s;
        if !stopped || shutdown.is_cancelled() {
            // hyper ended the connection itself, or the server is stopping; hyper leaves
            // the socket open.
            let _ = stream.shutdown().await;
            return Ok(());
        }
        ahead = join(parts.read_buf, rest);
    }
}

/// Waits, holding no buffer, for the client's next bytes and reads the first of them:
/// `None` when it closes, fails, stays idle past `idle`, or the server stops.
async fn park(stream: &TcpStream, idle: Duration, shutdown: &CancellationToken) -> Option<Bytes> {
    let wake = async {
        loop {
            stream.readable().await.ok()?;
            let mut first = [0u8; FIRST_READ];
            match stream.try_read(&mut first) {
                Ok(0) => return None,
                Ok(n) => return Some(Bytes::copy_from_slice(&first[..n])),
                // Readiness can be stale; wait for it again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return None,
            }
        }
    };
    tokio::select! {
        woke = tokio::time::timeout(idle, wake) => woke.ok().flatten(),
        () = shutdown.cancelled() => None,
    }
}

/// What hyper had read past the exchange, then what it had not yet read of `ahead`.
fn join(read: Bytes, rest: Bytes) -> Bytes {
    match (read.is_empty(), rest.is_empty()) {
        (_, true) => read,
        (true, false) => rest,
        (false, false) => [read, rest].concat().into(),
    }
}

/// What one hyper connection is doing, as far as parking it goes.
#[derive(Default)]
struct Track {
    /// Requests handed to the routes.
    begun: AtomicU32,
    /// Of those, the ones whose response hyper has taken whole.
    answered: AtomicU32,
    /// The latest request's body has been read to its end.
    read_whole: AtomicBool,
    /// The socket's last write or flush could not finish.
    write_blocked: AtomicBool,
}

impl Track {
    fn reset(&self) {
        self.begun.store(0, Ordering::Relaxed);
        self.answered.store(0, Ordering::Relaxed);
        self.read_whole.store(false, Ordering::Relaxed);
        self.write_blocked.store(false, Ordering::Relaxed);
    }

    /// Every request so far read whole, answered and written out: hyper is waiting for
    /// the next.
    fn waiting(&self) -> bool {
        let begun = self.begun.load(Ordering::Acquire);
        begun > 0
            && self.answered.load(Ordering::Acquire) == begun
            && self.read_whole.load(Ordering::Acquire)
            && !self.write_blocked.load(Ordering::Acquire)
    }
}

/// The routes, with each request and its response's end counted.
#[derive(Clone)]
struct Exchange<S> {
    inner: S,
    track: Arc<Track>,
}

impl<S> tower_service::Service<Request<Incoming>> for Exchange<S>
where
    S: tower_service::Service<Request<Tracked>, Response = Response>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Watched<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let track = &self.track;
        track
            .read_whole
            .store(req.body().is_end_stream(), Ordering::Release);
        track.begun.fetch_add(1, Ordering::AcqRel);
        let req = req.map(|inner| Tracked {
            inner,
            track: Arc::clone(track),
        });
        Watched {
            inner: self.inner.call(req),
            track: Some(Arc::clone(&self.track)),
        }
    }
}

/// The response future, whose body counts the request as answered once hyper has taken
/// all of it (or dropped it).
pub(super) struct Watched<F> {
    inner: F,
    track: Option<Arc<Track>>,
}

impl<F, E> Future for Watched<F>
where
    F: Future<Output = Result<Response, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        let track = self.track.take();
        Poll::Ready(out.map(|resp| match track {
            Some(track) => resp.map(|inner| axum::body::Body::new(Answering { inner, track })),
            None => resp,
        }))
    }
}

/// A response body that counts its request as answered when hyper drops it.
struct Answering {
    inner: axum::body::Body,
    track: Arc<Track>,
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.track.answered.fetch_add(1, Ordering::AcqRel);
    }
}

impl Body for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that notes when it has been read to its end.
pub(super) struct Tracked {
    inner: Incoming,
    track: Arc<Track>,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() || self.inner.is_end_stream() {
            self.track.read_whole.store(true, Ordering::Release);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, with bytes already taken from it to be read first; it notes whether its
/// last write could not finish.
struct Prefixed {
    ahead: Bytes,
    stream: TcpStream,
    track: Arc<Track>,
}

impl Prefixed {
    fn note<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        self.track
            .write_blocked
            .store(polled.is_pending(), Ordering::Release);
        polled
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.ahead.is_empty() {
            return Pin::new(&mut self.stream).poll_read(cx, buf);
        }
        let n = self.ahead.len().min(buf.remaining());
        buf.put_slice(&self.ahead[..n]);
        if n == self.ahead.len() {
            // Frees the copy rather than keep it for the rest of the exchange.
            self.ahead = Bytes::new();
        } else {
            self.ahead.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.note(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(cx);
        self.note(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
