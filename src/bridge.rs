//! The bridge as a library: [`Bridge::builder`] starts from the embedded defaults (or
//! [`Bridge::from_args`] from the command line), takes any port supplied in code, and
//! serves MCP on stdio or Streamable HTTP. The binary builds and serves through it too;
//! every port left unset comes from `app::wiring`, as the binary's do.

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
use crate::app::wiring::{self, Given};
use crate::ports::{
    Approvals, ClientAnswers, Clock, ConfirmationLedger, CuoRunner, MemoryClient, Ports,
    SkillIndex, TaskStore, TokenVerifier,
};

/// Exit code of a process that ends at once on a second stop signal.
const EXIT_FORCED: i32 = 1;

/// A built bridge: the application over its ports, ready to serve one transport.
pub struct Bridge {
    app: App,
    config: Config,
}

/// Chooses the bridge's ports and the few settings an embedding program sets in code;
/// [`build`](BridgeBuilder::build) makes the [`Bridge`].
#[must_use]
pub struct BridgeBuilder {
    base: Base,
    set: Overrides,
    given: Given,
}

/// Where the configuration starts.
enum Base {
    /// What the binary resolves from no flags, no variables and no file.
    Defaults,
    /// Resolved already (the command line).
    Resolved(Box<Config>),
}

/// The settings made in code, laid over the base at build time.
#[derive(Default)]
struct Overrides {
    data_dir: Option<PathBuf>,
    skills_dirs: Vec<PathBuf>,
    cuo_command: Option<Vec<String>>,
    token_file: Option<PathBuf>,
    dev: bool,
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
        BridgeBuilder {
            base: Base::Defaults,
            set: Overrides::default(),
            given: Given::default(),
        }
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
        BridgeBuilder {
            base: Base::Resolved(Box::new(config)),
            set: Overrides::default(),
            given: Given::default(),
        }
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

impl BridgeBuilder {
    /// The CUO orchestrator, instead of a child process of the CUO command.
    pub fn cuo(mut self, cuo: Arc<dyn CuoRunner>) -> Self {
        self.given.cuo = Some(cuo);
        self
    }

    /// The audit log, instead of the memory service or the embedded log.
    pub fn memory(mut self, memory: Arc<dyn MemoryClient>) -> Self {
        self.given.memory = Some(memory);
        self
    }

    /// The SKILL folders' index, instead of the skills directories.
    pub fn skills(mut self, skills: Arc<dyn SkillIndex>) -> Self {
        self.given.skills = Some(skills);
        self
    }

    /// Durable tasks, instead of the configured store's.
    pub fn tasks(mut self, tasks: Arc<dyn TaskStore>) -> Self {
        self.given.tasks = Some(tasks);
        self
    }

    /// Used confirmation-token ids, instead of the configured store's.
    pub fn ledger(mut self, ledger: Arc<dyn ConfirmationLedger>) -> Self {
        self.given.ledger = Some(ledger);
        self
    }

    /// Clients' answers over HTTP, instead of the configured store's. Instances behind
    /// one balancer must share them.
    pub fn answers(mut self, answers: Arc<dyn ClientAnswers>) -> Self {
        self.given.answers = Some(answers);
        self
    }

    /// Approvals, instead of the configured store's. Instances behind one balancer must
    /// share them.
    pub fn approvals(mut self, approvals: Arc<dyn Approvals>) -> Self {
        self.given.approvals = Some(approvals);
        self
    }

    /// One store for tasks, used confirmation ids, clients' answers and approvals, as the
    /// bundled stores serve all four. With all four supplied no task store is opened.
    pub fn store<S>(self, store: Arc<S>) -> Self
    where
        S: TaskStore + ConfirmationLedger + ClientAnswers + Approvals,
    {
        self.tasks(store.clone())
            .ledger(store.clone())
            .answers(store.clone())
            .approvals(store)
    }

    /// Wall-clock time, for the application and every adapter the builder makes.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.given.clock = Some(clock);
        self
    }

    /// Bearer and confirmation token verification, instead of the configured keys. The
    /// tenant of every call is the one the verifier's `Principal` names.
    pub fn verifier(mut self, verifier: Arc<dyn TokenVerifier>) -> Self {
        self.given.verifier = Some(verifier);
        self
    }

    /// Changes the ports once they are built, before the bridge takes them: to wrap a
    /// configured adapter in one of your own that reports, meters or polices its calls.
    /// A clock swapped in here reaches the application, not the adapters already built
    /// on the first; set [`clock`](BridgeBuilder::clock) for both.
    pub fn map_ports(mut self, map: impl FnOnce(Ports) -> Ports + Send + 'static) -> Self {
        self.given.map = Some(Box::new(map));
        self
    }

    /// Where the embedded store, the dev key and the HTTP session key live.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.set.data_dir = Some(dir.into());
        self
    }

    /// A SKILL folder to serve; repeatable, replacing the default `./skills`.
    pub fn skills_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.set.skills_dirs.push(dir.into());
        self
    }

    /// The CUO program and its arguments, run without a shell.
    pub fn cuo_command<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.set.cuo_command = Some(words.into_iter().map(Into::into).collect());
        self
    }

    /// The file holding the stdio client's token, read on every request.
    pub fn token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.set.token_file = Some(path.into());
        self
    }

    /// Local development, as `--dev`: a signing key made in the data dir, whose token
    /// (the local tenant, every scope) the stdio client uses; HTTP then serves loopback
    /// only.
    pub fn dev(mut self) -> Self {
        self.set.dev = true;
        self
    }

    /// Builds the bridge: opens the configured ports that were not supplied (an
    /// upstream that cannot be reached is allowed: its tools answer
    /// `upstream_unavailable`) and loads the keys.
    ///
    /// # Errors
    /// A bad setting, no way to verify tokens, a key that cannot be read or made, or a
    /// Postgres store whose row-level security would not hold.
    pub async fn build(self) -> Result<Bridge, ConfigError> {
        let mut config = match self.base {
            Base::Defaults => Config::resolve(Options {
                data_dir: self.set.data_dir.clone(),
                ..Options::default()
            })?,
            Base::Resolved(config) => *config,
        };
        self.set.apply(&mut config)?;
        let app = wiring::app_with(&config, self.given).await?;
        Ok(Bridge { app, config })
    }
}

impl Overrides {
    fn apply(self, config: &mut Config) -> Result<(), ConfigError> {
        if let Some(dir) = self.data_dir {
            config.data_dir = dir;
        }
        if !self.skills_dirs.is_empty() {
            config.skills_dirs = self.skills_dirs;
        }
        if let Some(words) = self.cuo_command {
            if words.first().is_none_or(String::is_empty) {
                return Err(ConfigError("the CUO command names no program".into()));
            }
            config.cuo_command = words;
        }
        if let Some(path) = self.token_file {
            config.identity.token_file = Some(path);
        }
        config.identity.dev |= self.dev;
        Ok(())
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

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout as async streams. Hosts connect us with pipes, which are read and
/// written directly on the reactor; anything else (a terminal, a file) goes through
/// tokio's blocking-thread adapters, which cost a thread hand-off per read or write.
fn stdio_streams() -> (Input, Output) {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use tokio::net::unix::pipe;
        let input: Input = match std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(pipe::Receiver::from_owned_fd)
        {
            Ok(Ok(rx)) => Box::new(rx),
            _ => Box::new(tokio::io::stdin()),
        };
        let output: Output = match std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(pipe::Sender::from_owned_fd)
        {
            Ok(Ok(tx)) => Box::new(tx),
            _ => Box::new(tokio::io::stdout()),
        };
        (input, output)
    }
    #[cfg(not(unix))]
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// SIGTERM or Ctrl-C starts the graceful stop; a second one ends the process at once,
/// for an operator who will not wait for the grace and the drain.
async fn cancel_on_signal(token: CancellationToken) {
    if !stop_signal().await {
        return;
    }
    tracing::info!("shutting down (a second SIGTERM or Ctrl-C exits at once)");
    token.cancel();
    if stop_signal().await {
        tracing::warn!("second stop signal: exiting without waiting for runs or requests");
        crate::app::telemetry::logs::flush();
        std::process::exit(EXIT_FORCED);
    }
}

/// Waits for SIGTERM or Ctrl-C; `false` when they cannot be listened for.
async fn stop_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return false;
        };
        tokio::select! {
            _ = term.recv() => true,
            r = tokio::signal::ctrl_c() => r.is_ok(),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.is_ok()
}
