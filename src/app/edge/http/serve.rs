//! The accept loop: HTTP/1.1 on hyper with the limits `axum::serve` does not set
//! (RELIABILITY §6.1) — a header-read timer, which also closes idle keep-alive
//! connections, fewer and smaller headers, a cap on open connections — and a graceful
//! stop that drains in-flight requests within a deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::router::{HttpSettings, router};
use super::session_id::SessionKey;
use crate::app::App;
use crate::app::config::{Config, ConfigError};

/// Time a client has to send a request's headers, and the longest idle keep-alive.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Headers per request (hyper answers 431 beyond).
const MAX_HEADERS: usize = 64;
/// Read buffer per connection, which bounds the header block (431 beyond).
const MAX_BUF: usize = 64 * 1024;
/// Open connections; further clients wait in the listen backlog.
const MAX_CONNECTIONS: usize = 4096;
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
    let bound = listener.local_addr().map_err(bind_error)?;
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
    let service = router(app, settings, shutdown.clone());
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "listening on {bound}");
    accept(listener, service, shutdown).await;
    Ok(())
}

/// Serves `service` on `listener` with the connection limits above until `shutdown`;
/// then stops accepting and drains in-flight requests (bounded by [`DRAIN`]).
pub(super) async fn accept<S>(listener: TcpListener, service: S, shutdown: CancellationToken)
where
    S: tower_service::Service<
            axum::http::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let service = TowerToHyperService::new(service);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_BUF);
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => permit,
            () = shutdown.cancelled() => break,
        };
        let Ok(permit) = permit else { break };
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
        let _ = stream.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(stream), service.clone());
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!("stopped accepting; draining in-flight requests");
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some requests did not finish within {DRAIN:?}; closing them");
    }
}
