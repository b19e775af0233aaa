//! [`BridgeBuilder`]: the ports supplied in code and the settings made in code, laid over
//! the embedded defaults or a resolved configuration.

use std::path::PathBuf;
use std::sync::Arc;

use super::Bridge;
use crate::app::config::{Config, ConfigError, Options};
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
pub(super) enum Base {
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

impl BridgeBuilder {
    pub(super) fn new(base: Base) -> Self {
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
