//! [`BridgeBuilder`]: the ports supplied in code and the settings made in code, laid over
//! the embedded defaults or a resolved configuration.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};

use super::Bridge;
use crate::app::config::{Config, ConfigError, Options, Sources};
use crate::app::wiring::{self, Given};
use crate::ports::{
    Approvals, ClientAnswers, Clock, ConfirmationLedger, CuoRunner, MemoryClient, Ports,
    SkillIndex, TaskStore, TokenVerifier,
};

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
}

impl BridgeBuilder {
    fn new(base: Base) -> Self {
        BridgeBuilder {
            base,
            set: Overrides::default(),
            given: Given::default(),
        }
    }

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
