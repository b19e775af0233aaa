//! The bridge as a library: [`Bridge::builder`] starts from the embedded defaults (or
//! [`Bridge::from_args`] from the command line), takes any port supplied in code, and
//! serves MCP on stdio or Streamable HTTP. The binary builds and serves through it too;
//! every port left unset comes from `app::wiring`, as the binary's do.

mod builder;
mod process;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::app::config::{Config, ConfigError, Options, Sources};
use crate::app::edge::{http, stdio};
use crate::app::service::tasks::SHUTDOWN_GRACE;
use crate::app::wiring;
use builder::Base;
use process::{cancel_on_signal, stdio_streams};

pub use builder::BridgeBuilder;

/// A built bridge: the application over its ports, ready to serve one transport.
pub struct Bridge {
    app: App,
    config: Config,
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
    /// A builder on the embedded defaults, as the binary runs with no options: the SQLite
    /// store and audit log in the data dir (`$XDG_DATA_HOME/cyberos-mcp-bridge`), the
    /// bundled CUO runner, SKILL folders from `./skills` when it exists, and tokens
    /// verified by configured keys (none, so set [`BridgeBuilder::dev`] or
    /// [`BridgeBuilder::verifier`]).
    ///
    /// The bundled CUO runner is started as `<this program> cuo-runner`: a program that
    /// keeps it starts from [`Bridge::from_args`], which answers that command, or sets
    /// [`BridgeBuilder::cuo_command`] (e.g. to `cyberos-mcp-bridge cuo-runner`).
    pub fn builder() -> BridgeBuilder {
        BridgeBuilder::new(Base::Defaults)
    }

    /// A builder configured as the `cyberos-mcp-bridge` binary is: the process's
    /// command-line flags, `CYBEROS_*` variables and `--config` file (`--help` lists
    /// them). Bad usage and `--help` end the process, as for any command line.
    ///
    /// Started as `<this program> cuo-runner`, which is how the default CUO command runs
    /// the bundled runner, it serves the CUO protocol on stdin/stdout instead and ends
    /// the process when that input closes.
    ///
    /// # Errors
    /// An option's value is bad, or the `--config` file cannot be read.
    pub async fn from_args() -> Result<BridgeBuilder, ConfigError> {
        let matches = Args::command().get_matches();
        let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        if let Some(Runner::CuoRunner { catalog, pace_ms }) = args.command {
            let options = crate::runner::RunnerOptions { catalog, pace_ms };
            std::process::exit(crate::runner::run(options).await);
        }
        args.options.sources = Sources::from_matches(&matches);
        let config = args.options.merge_file().and_then(Config::resolve)?;
        Ok(Bridge::from_config(config))
    }

    /// A builder on a resolved configuration: the binary's way in.
    #[doc(hidden)]
    pub fn from_config(config: Config) -> BridgeBuilder {
        BridgeBuilder::new(Base::Resolved(Box::new(config)))
    }

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

/// The command line of [`Bridge::from_args`]: the binary's options, and the bundled CUO
/// runner the default CUO command starts.
#[derive(clap::Parser)]
#[command(
    version,
    about = "CyberOS as MCP 2025-11-25 tools over stdio or Streamable HTTP"
)]
struct Args {
    #[command(flatten)]
    options: Options,
    #[command(subcommand)]
    command: Option<Runner>,
}

#[derive(clap::Subcommand)]
enum Runner {
    /// Run the bundled reference CUO runner on stdin/stdout (the default CUO command).
    CuoRunner {
        /// Load persona JSON files from this directory instead of the bundled catalogue.
        #[arg(long, value_name = "DIR")]
        catalog: Option<PathBuf>,
        /// Simulated work time per workflow step, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 0)]
        pace_ms: u64,
    },
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
