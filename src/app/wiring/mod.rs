//! The composition root: configuration in, real adapters out. The only module that names
//! concrete adapters.

mod identity;
mod probes;
mod store;
mod upstreams;

use std::sync::Arc;

pub use crate::app::telemetry::install::{flush_telemetry, metrics, scrape, span_export};
pub use identity::{
    DevTokenRequest, dev_bearer_token, dev_token, existing_issuers, existing_session_key, identity,
    issuers, session_key,
};
pub use probes::{Probe, Probes, probes};

use crate::adapters::postgres::PgStore;
use crate::adapters::system_clock::SystemClock;
use crate::adapters::unavailable::Unavailable;
use crate::app::config::{Config, ConfigError};
use crate::app::{App, Settings};
use crate::domain::Upstream;
use crate::ports::{
    Approvals, ClientAnswers, Clock, ConfirmationLedger, CuoRunner, MemoryClient, Ports,
    SkillIndex, TaskStore, TokenVerifier,
};
use identity::identity_with;
use store::open_store;
use upstreams::{memory, ports_without_store};

/// The ports a caller supplies in code (the `Bridge` builder); each one left `None` is
/// built from the configuration, exactly as the binary builds it.
#[derive(Default)]
pub struct Given {
    /// Durable tasks.
    pub tasks: Option<Arc<dyn TaskStore>>,
    /// Used confirmation-token ids.
    pub ledger: Option<Arc<dyn ConfirmationLedger>>,
    /// Clients' answers over HTTP.
    pub answers: Option<Arc<dyn ClientAnswers>>,
    /// Approvals.
    pub approvals: Option<Arc<dyn Approvals>>,
    /// The CUO orchestrator.
    pub cuo: Option<Arc<dyn CuoRunner>>,
    /// The audit log.
    pub memory: Option<Arc<dyn MemoryClient>>,
    /// SKILL folders.
    pub skills: Option<Arc<dyn SkillIndex>>,
    /// Wall-clock time, for the application and every adapter built here.
    pub clock: Option<Arc<dyn Clock>>,
    /// Bearer and confirmation token verification, instead of the configured keys.
    pub verifier: Option<Arc<dyn TokenVerifier>>,
    /// Applied to the ports once built, before the application takes them.
    pub map: Option<PortsMap>,
}

/// A change to the built ports (wrapping an adapter in one of the caller's).
pub type PortsMap = Box<dyn FnOnce(Ports) -> Ports + Send>;

/// Builds the ports for `config` on the system's clock. An upstream that cannot be
/// reached or opened is allowed: its tools answer `upstream_unavailable` and `check`
/// reports it.
pub async fn ports(config: &Config) -> Result<Ports, ConfigError> {
    ports_on(config, Arc::new(SystemClock), Given::default()).await
}

/// [`ports`] with `clock` in `Ports` and in every adapter that tells the time, and the
/// ports of `given` in place of the configured ones.
async fn ports_on(
    config: &Config,
    clock: Arc<dyn Clock>,
    given: Given,
) -> Result<Ports, ConfigError> {
    let ports = configured_ports(config, clock, &given).await?;
    Ok(Ports {
        tasks: given.tasks.unwrap_or(ports.tasks),
        ledger: given.ledger.unwrap_or(ports.ledger),
        answers: given.answers.unwrap_or(ports.answers),
        approvals: given.approvals.unwrap_or(ports.approvals),
        cuo: given.cuo.unwrap_or(ports.cuo),
        memory: given.memory.unwrap_or(ports.memory),
        skills: given.skills.unwrap_or(ports.skills),
        clock: ports.clock,
    })
}

/// The ports `config` names. When `given` holds every port the task store serves, no
/// task store is opened, nor the embedded file unless it is the audit log; the slots
/// `given` fills are then refusing placeholders it replaces.
async fn configured_ports(
    config: &Config,
    clock: Arc<dyn Clock>,
    given: &Given,
) -> Result<Ports, ConfigError> {
    let (cuo, skills) = ports_without_store(config, Arc::clone(&clock));
    let store_given = given.tasks.is_some()
        && given.ledger.is_some()
        && given.answers.is_some()
        && given.approvals.is_some();
    if store_given && (given.memory.is_some() || config.memory_url.is_some()) {
        let none = Unavailable::new(Upstream::TaskStore, "replaced by the caller's port");
        return Ok(Ports {
            tasks: Arc::new(none.clone()),
            ledger: Arc::new(none.clone()),
            answers: Arc::new(none.clone()),
            approvals: Arc::new(none.clone()),
            cuo,
            memory: match given.memory {
                Some(_) => Arc::new(none),
                None => memory(config, None),
            },
            skills,
            clock,
        });
    }
    let store = open_store(config, Arc::clone(&clock)).await;
    if let Err(why) = &store {
        tracing::error!("{why}");
    }
    let ledger: Arc<dyn ConfirmationLedger> = match &store {
        Ok(store) => Arc::new(store.clone()),
        Err(_) => Arc::new(Unavailable::new(
            Upstream::TaskStore,
            "The local store cannot be opened, so confirmation tokens cannot be checked; ask an operator to check --data-dir.",
        )),
    };
    // Clients' answers go where the tasks are: instances that share a task store share it.
    // Approvals too: any instance serves the page and the retry.
    let (tasks, ledger, answers, approvals): StorePorts = match (&config.database_url, &store) {
        (Some(url), _) if url.starts_with("postgres") && !store_given => {
            match PgStore::connect(url, Arc::clone(&clock)).await {
                Ok(pg) => {
                    pg.refuse_open_rls().await.map_err(ConfigError::from)?;
                    (
                        Arc::new(pg.clone()),
                        Arc::new(pg.clone()),
                        Arc::new(pg.clone()),
                        Arc::new(pg),
                    )
                }
                Err(why) => {
                    tracing::error!("cannot use the Postgres task store: {why}");
                    let down = Unavailable::new(
                        Upstream::TaskStore,
                        "The task store is unreachable; ask an operator to check --database-url.",
                    );
                    (
                        Arc::new(down.clone()),
                        Arc::new(down.clone()),
                        Arc::new(down.clone()),
                        Arc::new(down),
                    )
                }
            }
        }
        (_, Ok(store)) => (
            Arc::new(store.clone()),
            ledger,
            Arc::new(store.clone()),
            Arc::new(store.clone()),
        ),
        (_, Err(_)) => {
            let down = Unavailable::new(
                Upstream::TaskStore,
                "The task store cannot be opened; ask an operator to check --data-dir or --database-url.",
            );
            (
                Arc::new(down.clone()),
                ledger,
                Arc::new(down.clone()),
                Arc::new(down),
            )
        }
    };
    Ok(Ports {
        ledger,
        answers,
        approvals,
        tasks,
        cuo,
        memory: memory(config, store.ok()),
        skills,
        clock,
    })
}

/// The ports one task store serves: tasks, used confirmation ids, clients' answers and
/// approvals.
type StorePorts = (
    Arc<dyn TaskStore>,
    Arc<dyn ConfirmationLedger>,
    Arc<dyn ClientAnswers>,
    Arc<dyn Approvals>,
);

/// Builds the application for `config`.
///
/// # Errors
/// When identity cannot be set up.
pub async fn app(config: &Config) -> Result<App, ConfigError> {
    app_with(config, Given::default()).await
}

/// [`app`] with the ports of `given` in place of the configured ones.
///
/// # Errors
/// As [`app`].
pub async fn app_with(config: &Config, mut given: Given) -> Result<App, ConfigError> {
    let settings = Settings {
        tool_errors: config.tool_errors,
        long_running: config.long_running,
        wait_clients: config.wait_clients.clone(),
        tool_names: config.tool_names,
        max_tasks_per_tenant: config.max_tasks_per_tenant,
        max_cuo_children: config.max_cuo_children,
        max_stored_tasks_per_tenant: config.max_stored_tasks_per_tenant,
    };
    // One clock for the whole application.
    let clock: Arc<dyn Clock> = given.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
    let identity = identity_with(config, Arc::clone(&clock), given.verifier.take())?;
    let map = given.map.take();
    let mut ports = ports_on(config, clock, given).await?;
    if let Some(map) = map {
        ports = map(ports);
    }
    Ok(App::new(ports, settings, identity))
}

/// Applies the Postgres migrations (the `migrate` subcommand).
///
/// # Errors
/// A user-safe description of what failed.
pub async fn migrate_postgres(url: &str) -> anyhow::Result<()> {
    crate::adapters::postgres::migrate(url).await
}
