//! The accept loop: HTTP/1.1 and cleartext HTTP/2 (prior knowledge, as load balancers
//! use it) on one port, on hyper with the limits `axum::serve` does not set (RELIABILITY
//! §6.1) — a header-read timer, an idle limit on HTTP/1.1 keep-alive connections, which
//! hold no buffers while idle (`keepalive.rs`), fewer and smaller headers, a bounded number of concurrent HTTP/2 streams and a
//! keep-alive ping that drops dead HTTP/2 peers, a cap on open connections past which a
//! new one is answered `503` + `Retry-After` and closed (never left in the backlog or
//! reset; `overflow.rs`) — and a graceful stop that drains in-flight requests within a
//! deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::keepalive::{self, Tracked};
use super::overflow;
use super::router::{HttpSettings, router};
use super::session_id::SessionKey;
use crate::app::App;
use crate::app::config::{Config, ConfigError};
use crate::app::telemetry::{self, Refusal};

/// Time a client has to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an HTTP/1.1 connection may stay idle between requests.
const IDLE: Duration = HEADER_READ_TIMEOUT;
/// Headers per request (hyper answers 431 beyond).
const MAX_HEADERS: usize = 64;
/// Read buffer per connection, which bounds the header block (431 beyond).
const MAX_BUF: usize = 64 * 1024;
/// Concurrent streams of one HTTP/2 connection.
const MAX_STREAMS: u32 = 128;
/// HTTP/2: a ping after this long without frames; no answer within as long closes.
const H2_PING: Duration = Duration::from_secs(20);
/// Connections past the cap being answered 503 at once; past these they are closed
/// unanswered.
const MAX_REFUSING: usize = 256;
/// How long a connection past the cap has to take its 503.
const REFUSE_FOR: Duration = Duration::from_secs(2);
/// The open connections of the metrics listener.
pub(super) const SCRAPE_CONNECTIONS: usize = 64;
/// How long a graceful stop waits for in-flight requests.
const DRAIN: Duration = Duration::from_secs(10);
const _: () = assert!(super::shared::LAST_CALL.as_millis() < DRAIN.as_millis());

/// Why the transport could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A bad HTTP option: exit code 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// `--listen`.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Binds `--listen`, logs `listening on ADDR` with the bound address, and serves until
/// `shutdown`; then stops accepting and drains (bounded by a 10 s deadline).
///
/// # Errors
/// Bad HTTP options, or the address cannot be bound.
pub async fn serve(
    app: App,
    config: &Config,
    sessions: SessionKey,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let bind_error = |source| ServeError::Bind {
        addr: config.listen,
        source,
    };
    let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
    serve_on(app, config, listener, sessions, shutdown).await
}

/// [`serve`] on a listener already bound (to `127.0.0.1:0`, say); `config.listen` is
/// not read.
///
/// # Errors
/// Bad HTTP options, or the listener's address cannot be read.
pub async fn serve_on(
    app: App,
    config: &Config,
    listener: TcpListener,
    sessions: SessionKey,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let bound = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: config.listen,
        source,
    })?;
    let settings = HttpSettings::from_config(config, bound, sessions)?;
    if !settings.policy.loopback && config.public_url.is_none() {
        tracing::warn!(
            "listening beyond loopback without --public-url: tokens' audience and the RFC 9728 resource will name {}",
            settings.public_url
        );
    }
    if settings.authorization_servers.is_empty() && !config.identity.dev {
        tracing::warn!(
            "no --authorization-server or --jwt-issuer: clients cannot discover where to get tokens"
        );
    }
    let max_connections = settings.limits.max_connections;
    let service = router(app, settings, shutdown.clone());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        max_connections,
        "listening on {bound}"
    );
    accept(listener, service, max_connections, shutdown).await;
    Ok(())
}

/// Serves `service` on `listener` with the limits above and at most `max_connections`
/// open until `shutdown`; then stops accepting and drains in-flight requests (bounded
/// by [`DRAIN`]).
pub(super) async fn accept<S>(
    listener: TcpListener,
    service: S,
    max_connections: usize,
    shutdown: CancellationToken,
) where
    S: tower_service::Service<
            axum::http::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + tower_service::Service<
            axum::http::Request<Tracked>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Unpin
        + 'static,
    <S as tower_service::Service<axum::http::Request<hyper::body::Incoming>>>::Future:
        Send + 'static,
    <S as tower_service::Service<axum::http::Request<Tracked>>>::Future: Send + Unpin + 'static,
{
    let mut h1 = hyper::server::conn::http1::Builder::new();
    h1.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_BUF);
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(u32::try_from(MAX_BUF).unwrap_or(u32::MAX))
        .keep_alive_interval(H2_PING)
        .keep_alive_timeout(H2_PING);
    let (h1, h2) = (Arc::new(h1), Arc::new(h2));
    let connections = Arc::new(Semaphore::new(max_connections));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            // At the cap: a 503 now rather than a wait in the backlog; past the few being
            // refused, the connection is closed at once.
            telemetry::refused(Refusal::Shed, None);
            if let Ok(refusal) = Arc::clone(&refusing).try_acquire_owned() {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSE_FOR, overflow::refuse(stream)).await;
                    drop(refusal);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (h1, h2, service) = (Arc::clone(&h1), Arc::clone(&h2), service.clone());
        let (watcher, shutdown) = (graceful.watcher(), shutdown.clone());
        tokio::spawn(async move {
            // Each protocol's connection is boxed on its own, so an HTTP/1.1 connection
            // holds only HTTP/1.1 state for as long as it is kept alive.
            let sniffed = tokio::select! {
                first = overflow::opens_with_h2_preface(&stream, HEADER_READ_TIMEOUT) => first,
                () = shutdown.cancelled() => None,
            };
            let ended = match sniffed {
                Some(true) => {
                    let conn = h2
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                    Box::pin(watcher.watch(conn)).await
                }
                Some(false) => {
                    drop(watcher);
                    Box::pin(keepalive::serve(stream, &h1, service, IDLE, &shutdown)).await
                }
                // Closed, or silent past the header-read timer, before a first byte.
                None => Ok(()),
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!("stopped accepting; draining in-flight requests");
    // HTTP/2 connections are told to stop by `graceful`; HTTP/1.1 ones see `shutdown`
    // themselves. Every connection holds a permit until it has ended.
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let drained = async {
        graceful.shutdown().await;
        let _ = connections.acquire_many(all).await;
    };
    if tokio::time::timeout(DRAIN, drained).await.is_err() {
        tracing::warn!("some requests did not finish within {DRAIN:?}; closing them");
    }
}
