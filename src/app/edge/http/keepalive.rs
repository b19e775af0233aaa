//! HTTP/1.1 keep-alive without hyper's buffers between requests. hyper keeps a read and
//! a write buffer for a connection's whole life; here each exchange (one request and its
//! response) gets a hyper connection of its own, with hyper's keep-alive off, and between
//! exchanges the connection is parked: only the socket and this loop's small state are
//! held while the client is idle.
//!
//! Keep-alive itself is decided here, as hyper would: the connection is kept only when
//! the request was HTTP/1.1, neither side asked to close, the request's body was read to
//! its end, and the response went out whole. Anything else closes it. Bytes the client
//! sent ahead (pipelined requests) are carried to the next exchange.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderMap, Request, Response, Version, header};
use hyper::body::{Body, Buf, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Read at once when a parked connection wakes, before hyper's own buffer is made; most
/// requests fit whole.
const FIRST_READ: usize = 2048;

/// Serves HTTP/1.1 on `stream` until the client closes, an exchange cannot be followed
/// by another, the client is idle for `idle`, or `shutdown` (an exchange under way is
/// finished first).
pub(super) async fn serve<S>(
    mut stream: TcpStream,
    h1: &hyper::server::conn::http1::Builder,
    service: S,
    idle: Duration,
    shutdown: &CancellationToken,
) -> Result<(), hyper::Error>
where
    S: tower_service::Service<Request<Tracked>, Response = axum::response::Response>
        + Clone
        + Send
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
        track.0.store(0, Ordering::Relaxed);
        let service = TowerToHyperService::new(Exchange {
            inner: service.clone(),
            track: Arc::clone(&track),
        });
        let io = TokioIo::new(Prefixed { ahead, stream });
        // Boxed, so the connection's state is freed when the exchange ends.
        let parts = Box::pin(h1.serve_connection(io, service).without_shutdown()).await?;
        let Prefixed {
            ahead: rest,
            stream: s,
        } = parts.io.into_inner();
        stream = s;
        if !track.reusable() || shutdown.is_cancelled() {
            // hyper left the socket open: end it as hyper would have.
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

/// What one exchange showed about keeping the connection.
#[derive(Default)]
struct Track(AtomicU8);

/// A request was served.
const BEGUN: u8 = 1;
/// An HTTP/1.1 request that did not ask to close.
const KEEPABLE: u8 = 2;
/// The request's body was read to its end.
const READ_WHOLE: u8 = 4;
/// The response asked to close.
const CLOSING: u8 = 8;

impl Track {
    fn set(&self, bit: u8) {
        self.0.fetch_or(bit, Ordering::Relaxed);
    }

    fn reusable(&self) -> bool {
        self.0.load(Ordering::Relaxed) & (BEGUN | KEEPABLE | READ_WHOLE | CLOSING)
            == BEGUN | KEEPABLE | READ_WHOLE
    }
}

fn asks_to_close(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("close"))
        })
    })
}

/// The routes, watched for what decides keep-alive.
#[derive(Clone)]
struct Exchange<S> {
    inner: S,
    track: Arc<Track>,
}

impl<S> tower_service::Service<Request<Incoming>> for Exchange<S>
where
    S: tower_service::Service<Request<Tracked>, Response = axum::response::Response>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Watched<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let track = &self.track;
        track.set(BEGUN);
        if req.version() == Version::HTTP_11 && !asks_to_close(req.headers()) {
            track.set(KEEPABLE);
        }
        if req.body().is_end_stream() {
            track.set(READ_WHOLE);
        }
        let req = req.map(|inner| Tracked {
            inner,
            track: Arc::clone(track),
        });
        Watched {
            inner: self.inner.call(req),
            track: Arc::clone(track),
        }
    }
}

/// The response future, which notes a response that asks to close.
pub(super) struct Watched<F> {
    inner: F,
    track: Arc<Track>,
}

impl<F, E> Future for Watched<F>
where
    F: Future<Output = Result<axum::response::Response, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        if let Ok(resp) = &out {
            note_response(&self.track, resp);
        }
        Poll::Ready(out)
    }
}

fn note_response<B>(track: &Track, resp: &Response<B>) {
    if asks_to_close(resp.headers()) {
        track.set(CLOSING);
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
            self.track.set(READ_WHOLE);
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

/// The socket, with bytes already taken from it to be read first.
struct Prefixed {
    ahead: Bytes,
    stream: TcpStream,
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
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
