//! Telling HTTP/2 from HTTP/1.1 by a connection's first bytes, and the connections past
//! `--http-max-connections`: answered `503` with `Retry-After` and a JSON-RPC error, then
//! closed without a reset. An HTTP/1.1 client gets a plain response; a client that opens
//! with the HTTP/2 preface gets the same answer on its first stream, then a `GOAWAY`, so
//! either kind sees a refusal it can retry, not a broken connection.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::app::edge::rpc::{self, RpcError};
use crate::app::telemetry::ids::request_trace;
use crate::domain::ErrorClass;

/// How long the refusal waits for the request's head (HTTP/1.1) or the preface (HTTP/2).
const HEAD_WAIT: Duration = Duration::from_millis(500);
/// The most of a refused request's head that is read before the answer.
const MAX_HEAD: usize = 64 * 1024;
/// What every HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Answers a connection past the cap and closes it; the caller bounds how long it takes.
pub(super) async fn refuse(stream: TcpStream) {
    if opens_with_h2_preface(&stream, HEAD_WAIT).await == Some(true) {
        refuse_h2(stream).await;
    } else {
        refuse_h1(stream).await;
    }
}

/// Whether the connection opens with the HTTP/2 preface, looked at without consuming
/// anything: `None` when it closes, fails or sends nothing within `wait`.
pub(super) async fn opens_with_h2_preface(stream: &TcpStream, wait: Duration) -> Option<bool> {
    let mut buf = [0u8; H2_PREFACE.len()];
    let sniff = async {
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) if buf[..n] != H2_PREFACE[..n] => return Some(false),
                Ok(n) if n == H2_PREFACE.len() => return Some(true),
                // A prefix of the preface so far: look again once more has come.
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    };
    tokio::time::timeout(wait, sniff).await.ok().flatten()
}

/// Once the request's head is in (or a moment has passed), `503` and the end of the
/// connection. What else the client sent is read and dropped before the socket closes,
/// so the client sees the answer, not a reset.
async fn refuse_h1(mut stream: TcpStream) {
    // An HTTP client takes an answer that comes before its request for a broken
    // connection: wait for the end of the head, within a bounded read.
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(HEAD_WAIT, async {
        while head.len() < MAX_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
    })
    .await;
    let body = over_connections_body();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).await.is_err()
        || stream.write_all(body.as_bytes()).await.is_err()
        || stream.shutdown().await.is_err()
    {
        return;
    }
    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// Serves the connection with hyper's HTTP/2 server, one stream at a time, every stream
/// answered `503`; after the first, a graceful `GOAWAY` ends it.
async fn refuse_h2(stream: TcpStream) {
    let (answered, first) = tokio::sync::oneshot::channel::<()>();
    let answered = std::sync::Mutex::new(Some(answered));
    let service = hyper::service::service_fn(move |_request| {
        if let Some(tx) = answered.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(());
        }
        std::future::ready(Ok::<_, Infallible>(over_connections_response()))
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(1)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = first => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

fn over_connections_response() -> Response<Body> {
    let mut response = Response::new(Body::from(over_connections_body()));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The error a connection past the cap gets.
fn over_connections_body() -> String {
    let err = RpcError::of_class(
        ErrorClass::UpstreamUnavailable,
        "the bridge has too many open connections",
        "Retry after the number of seconds in Retry-After, or reuse a connection; the bridge is at its --http-max-connections.",
        request_trace(),
    )
    .with_retry_after(Duration::from_secs(1));
    rpc::failure(None, &err)
}
