//! [`Bridge`]: the built application, served on stdio or Streamable HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::process::{cancel_on_signal, stdio_streams};
use crate::app::App;
use crate::app::config::{Config, ConfigError};
use crate::app::edge::{http, stdio};
use crate::app::service::tasks::SHUTDOWN_GRACE;
use crate::app::wiring;

/// A built bridge: the application over its ports, ready to serve one transport.
pub struct Bridge {
    pub(super) app: App,
    pub(super) config: Config,
}

/// Why a bridge stopped serving, or could not start to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A bad setting: an HTTP option, the session key, `dev` beyond loopback.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Reading the stdio input failed.
    #[error("reading the input failed: {0}")]
    Input(#[source] std::io::Error),
}

impl From<http::ServeError> for ServeError {
    fn from(e: http::ServeError) -> ServeError {
        match e {
            http::ServeError::Config(e) => ServeError::Config(e),
            http::ServeError::Bind { addr, source } => ServeError::Bind { addr, source },
        }
    }
}

impl Bridge {
    /// Serves the configured transport: stdio, or HTTP on the configured address (what
    /// `--transport` and `--listen` chose for [`Bridge::from_args`]).
    ///
    /// # Errors
    /// As [`Bridge::serve_stdio`] or [`Bridge::serve_http`].
    pub async fn serve(self) -> Result<(), ServeError> {
        match self.config.transport {
            crate::app::config::Transport::Stdio => self.serve_stdio().await,
            crate::app::config::Transport::Http => {
                let addr = self.config.listen;
                self.serve_http(addr).await
            }
        }
    }

    /// Serves one MCP client on this process's stdin and stdout until stdin closes
    /// (running tasks then finish) or a SIGTERM or Ctrl-C (running tasks get a short
    /// grace); a second signal ends the process at once. Nothing else may write stdout.
    ///
    /// # Errors
    /// [`ServeError::Input`] when reading stdin fails.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            "serving MCP 2025-11-25 on stdio"
        );
        let (input, output) = stdio_streams();
        self.serve_io(input, output, shutdown).await
    }

    /// Serves one MCP client on `input` and `output`, one JSON-RPC message per line, until
    /// `input` ends (running tasks then finish) or `shutdown` is cancelled (running tasks
    /// get a short grace).
    ///
    /// # Errors
    /// [`ServeError::Input`] when reading `input` fails.
    pub async fn serve_io<R, W>(
        self,
        input: R,
        output: W,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let stop = shutdown.child_token();
        self.app.start_background(stop.clone());
        let runs = runs_end_on(&self.app, &stop);
        let served = stdio::serve(self.app.clone(), input, output, stop.clone()).await;
        if !stop.is_cancelled() {
            // EOF: running tasks finish (bounded by their timeouts) so a reconnecting host
            // finds their results.
            tracing::info!("stdin closed; waiting for running tasks");
            self.app.runner().drain().await;
            stop.cancel();
        }
        let _ = runs.await;
        served.map_err(ServeError::Input)
    }

    /// Serves Streamable HTTP on `addr` (`/mcp`, health and readiness, the approval
    /// page) until a SIGTERM or Ctrl-C, then drains in-flight requests within a bound; a
    /// second signal ends the process at once.
    ///
    /// # Errors
    /// The address cannot be bound, or as [`Bridge::serve_http_on`].
    pub async fn serve_http(mut self, addr: SocketAddr) -> Result<(), ServeError> {
        self.config.listen = addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        self.serve_http_on(listener, shutdown).await
    }

    /// Serves Streamable HTTP on a bound `listener` (`127.0.0.1:0`, say) until
    /// `shutdown` is cancelled, then drains in-flight requests within a bound. Its log
    /// line `listening on ADDR` names the bound address.
    ///
    /// # Errors
    /// A bad HTTP option or session key, or `dev` on an address beyond loopback.
    pub async fn serve_http_on(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError> {
        let config = self.config;
        if let Ok(bound) = listener.local_addr()
            && config.identity.dev
            && !bound.ip().is_loopback()
        {
            return Err(ConfigError(format!(
                "--dev refuses a non-loopback --listen ({bound}); bind 127.0.0.1"
            ))
            .into());
        }
        let sessions = http::SessionKey::new(&wiring::session_key(&config)?);
        let stop = shutdown.child_token();
        self.app.start_background(stop.clone());
        let runs = runs_end_on(&self.app, &stop);
        let served =
            http::serve_on(self.app.clone(), &config, listener, sessions, stop.clone()).await;
        stop.cancel();
        let _ = runs.await;
        served.map_err(ServeError::from)
    }
}

/// From the stop on, the runs get their grace and are then killed and failed, while the
/// transport drains: a request waiting for a run of this instance gets the run's
/// outcome, not an error. (After EOF's drain there is nothing left to stop.)
fn runs_end_on(app: &App, stop: &CancellationToken) -> tokio::task::JoinHandle<()> {
    let (runner, stop) = (Arc::clone(app.runner()), stop.clone());
    tokio::spawn(async move {
        stop.cancelled().await;
        runner.shutdown(SHUTDOWN_GRACE).await;
    })
}
