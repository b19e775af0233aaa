//! The composition root: configuration in, real adapters out. The only module that names
//! concrete adapters.

use std::sync::Arc;

pub use crate::app::telemetry::install::{flush_telemetry, metrics, scrape, span_export};

use crate::adapters::cuo_process::{
    CuoSettings, ProcessCuoRunner, STARTING_FOR, starting_children,
};
use crate::adapters::jwt::{Issuer, JwtVerifier, VerifyingKey};
use crate::adapters::memory_http::HttpMemoryClient;
use crate::adapters::postgres::PgStore;
use crate::adapters::skills_fs::FsSkillIndex;
use crate::adapters::sqlite::SqliteStore;
use crate::adapters::system_clock::SystemClock;
use crate::adapters::unavailable::Unavailable;
use crate::app::config::{Config, ConfigError};
use crate::app::keys::dev::{DEV_ISSUER, DevKey};
use crate::app::service::identity::{Identity, LOCAL_SUBJECT, LOCAL_TENANT, StdioToken};
use crate::app::{App, Settings};
use crate::domain::{Scope, Timestamp, Upstream};
use crate::ports::{
    Approvals, ClientAnswers, Clock, ConfirmationLedger, CuoRunner, MemoryClient, Ports,
    SkillIndex, TaskStore, TokenVerifier,
};

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

fn memory(config: &Config, store: Option<SqliteStore>) -> Arc<dyn MemoryClient> {
    if let Some(url) = &config.memory_url {
        let token = match &config.memory_token_file {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(t) => Some(t.trim().to_owned()),
                Err(e) => {
                    tracing::error!(path = %path.display(), "cannot read --memory-token-file: {e}");
                    return Arc::new(Unavailable::new(
                        Upstream::Memory,
                        "The bridge's memory credential cannot be read; ask an operator to check --memory-token-file.",
                    ));
                }
            },
            None => {
                tracing::warn!(
                    "no --memory-token-file: calling the memory service without a credential"
                );
                None
            }
        };
        return match HttpMemoryClient::new(url, token) {
            Ok(client) => Arc::new(client.with_max_inflight(config.memory_max_inflight)),
            Err(e) => {
                tracing::error!("{e}");
                Arc::new(Unavailable::new(
                    Upstream::Memory,
                    "The memory service is misconfigured; ask an operator to check --memory-url.",
                ))
            }
        };
    }
    match store {
        Some(store) => Arc::new(store),
        None => Arc::new(Unavailable::new(
            Upstream::Memory,
            "The embedded audit log cannot be opened; ask an operator to check --data-dir.",
        )),
    }
}

/// What `check` asks to answer, opened without creating or writing anything.
pub struct Probes {
    /// The task store.
    pub tasks: Probe<Arc<dyn TaskStore>>,
    /// The memory service, or the embedded audit log.
    pub memory: Probe<Arc<dyn MemoryClient>>,
    /// The CUO program.
    pub cuo: Arc<dyn crate::ports::CuoRunner>,
    /// The skills directories.
    pub skills: Arc<dyn crate::ports::SkillIndex>,
}

/// A part as `check` found it.
pub enum Probe<T> {
    /// Opened; ask it to answer. The note says what a start would still do (migrations).
    Open(T, Option<String>),
    /// Not there yet: what a start creates.
    Missing(String),
    /// Cannot be opened, and why.
    Failed(String),
}

/// The parts of [`ports`] that `check` asks to answer, opened read-only: a missing data
/// dir or SQLite file is reported, not created, and nothing is migrated.
///
/// # Errors
/// When Postgres is reachable and row-level security would not hold.
pub async fn probes(config: &Config) -> Result<Probes, ConfigError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ports = ports_without_store(config, Arc::clone(&clock));
    let local = probe_store(config, clock.clone()).await;
    let as_memory = |p: &Probe<SqliteStore>| -> Probe<Arc<dyn MemoryClient>> {
        match p {
            Probe::Open(s, note) => Probe::Open(Arc::new(s.clone()), note.clone()),
            Probe::Missing(m) => Probe::Missing(m.clone()),
            Probe::Failed(m) => Probe::Failed(m.clone()),
        }
    };
    let memory = match &config.memory_url {
        Some(_) => Probe::Open(memory(config, None), None),
        None => as_memory(&local),
    };
    let tasks = match &config.database_url {
        Some(url) if url.starts_with("postgres") => {
            match PgStore::connect(url, Arc::clone(&clock)).await {
                Ok(pg) => {
                    pg.refuse_open_rls().await.map_err(ConfigError::from)?;
                    Probe::Open(Arc::new(pg) as Arc<dyn TaskStore>, None)
                }
                Err(why) => Probe::Failed(format!("{why:#}")),
            }
        }
        _ => match local {
            Probe::Open(s, note) => Probe::Open(Arc::new(s) as Arc<dyn TaskStore>, note),
            Probe::Missing(m) => Probe::Missing(m),
            Probe::Failed(m) => Probe::Failed(m),
        },
    };
    Ok(Probes {
        tasks,
        memory,
        cuo: ports.0,
        skills: ports.1,
    })
}

/// The CUO runner and the skill index, which touch no store.
fn ports_without_store(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> (
    Arc<dyn crate::ports::CuoRunner>,
    Arc<dyn crate::ports::SkillIndex>,
) {
    let cuo = ProcessCuoRunner::new(
        CuoSettings {
            command: config.cuo_command.clone(),
            pass_env: config.cuo_env.clone(),
            call_timeout: config.cuo_timeout,
            starting: starting_children(),
            starting_for: STARTING_FOR,
        },
        clock,
    );
    (
        Arc::new(cuo),
        Arc::new(FsSkillIndex::new(config.skills_dirs.clone())),
    )
}

/// The embedded SQLite file opened read-only, or what a start would create.
async fn probe_store(config: &Config, clock: Arc<dyn Clock>) -> Probe<SqliteStore> {
    let dir = &config.data_dir;
    if !dir.exists() {
        return Probe::Missing(format!(
            "the data dir {} does not exist; a start creates it (mode 0700)",
            dir.display()
        ));
    }
    let path = store_path(config);
    if !path.exists() {
        return Probe::Missing(format!(
            "{} does not exist; a start creates it",
            path.display()
        ));
    }
    match SqliteStore::open_read_only(&path, clock).await {
        Ok((store, schema)) => {
            let note = (schema.found < schema.current).then(|| {
                format!(
                    "schema version {} of {}; a start applies the rest",
                    schema.found, schema.current
                )
            });
            Probe::Open(store, note)
        }
        Err(e) => Probe::Failed(format!("{e} ({})", path.display())),
    }
}

/// The embedded SQLite file: `--database-url sqlite:PATH`, else `<data-dir>/bridge.sqlite3`.
fn store_path(config: &Config) -> std::path::PathBuf {
    match config
        .database_url
        .as_deref()
        .and_then(|u| u.strip_prefix("sqlite:"))
    {
        Some(p) => std::path::PathBuf::from(p.trim_start_matches("//")),
        None => config.data_dir.join("bridge.sqlite3"),
    }
}

/// Opens (creating the data dir and the file if needed) the embedded SQLite file.
async fn open_store(config: &Config, clock: Arc<dyn Clock>) -> anyhow::Result<SqliteStore> {
    let dir = &config.data_dir;
    create_private_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot create the data dir {}: {e}", dir.display()))?;
    let path = store_path(config);
    SqliteStore::open(&path, clock)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", path.display()))
}

/// Creates the data dir readable by its owner only (it will hold keys and tenant data).
/// A dir that already exists is the operator's: it is not changed, but a warning says
/// when others may read it.
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            dir = %dir.display(),
            mode = format_args!("{mode:o}"),
            "the data dir is open to other users; it holds tenant data and keys (its files \
             are kept private, but consider chmod 700)"
        );
    }
    Ok(())
}

/// Builds the token verifier, which checks tokens' times against `clock`, and the stdio
/// token source (a `--dev` token is issued at `clock`'s time).
///
/// # Errors
/// When no key source is configured (and no `--dev`), or a key cannot be loaded.
pub fn identity(config: &Config, clock: Arc<dyn Clock>) -> Result<Identity, ConfigError> {
    identity_with(config, clock, None)
}

/// [`identity`], verifying with `verifier` when given instead of the configured keys
/// (which are then not needed); `--dev` still makes the stdio token.
fn identity_with(
    config: &Config,
    clock: Arc<dyn Clock>,
    verifier: Option<Arc<dyn TokenVerifier>>,
) -> Result<Identity, ConfigError> {
    let id = &config.identity;
    let (verifier, dev_key) = match verifier {
        Some(verifier) => {
            let dev_key = if id.dev {
                Some(DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?)
            } else {
                None
            };
            (verifier, dev_key)
        }
        None => {
            let (issuers, dev_key) = issuers(config)?;
            let jwt = JwtVerifier::new(issuers, id.audience.clone(), Arc::clone(&clock));
            (Arc::new(jwt) as Arc<dyn TokenVerifier>, dev_key)
        }
    };
    let dev_token = match &dev_key {
        Some(key) => Some(local_dev_token(config, key, clock.now())?),
        None => None,
    };
    let env_token = std::env::var("CYBEROS_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty());
    let stdio = match (&id.token_file, env_token, dev_token) {
        (Some(path), _, _) => StdioToken::File(path.clone()),
        (None, Some(token), _) => StdioToken::Literal(token.trim().to_owned()),
        (None, None, Some(token)) => StdioToken::Literal(token),
        (None, None, None) => StdioToken::None,
    };
    Ok(Identity::new(verifier, stdio))
}

/// The issuers whose tokens verify (the dev key, a PEM key, a JWKS), and the dev key
/// with `--dev`.
///
/// # Errors
/// When no key source is configured or one cannot be read.
pub fn issuers(config: &Config) -> Result<(Vec<Issuer>, Option<DevKey>), ConfigError> {
    let dev_key = if config.identity.dev {
        Some(DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?)
    } else {
        None
    };
    let issuers = issuers_with(config, dev_key.as_ref())?;
    Ok((issuers, dev_key))
}

/// [`issuers`] for `check`, creating nothing: with `--dev` and no dev key yet, the dev
/// issuer is left out and the path a start would create is returned.
///
/// # Errors
/// As [`issuers`], except a missing dev key.
pub fn existing_issuers(
    config: &Config,
) -> Result<(Vec<Issuer>, Option<std::path::PathBuf>), ConfigError> {
    let mut missing = None;
    let dev_key = if config.identity.dev {
        let key = DevKey::load_existing(&config.data_dir).map_err(ConfigError::from)?;
        if key.is_none() {
            missing = Some(DevKey::path(&config.data_dir));
        }
        key
    } else {
        None
    };
    match issuers_with(config, dev_key.as_ref()) {
        Ok(issuers) => Ok((issuers, missing)),
        // `--dev` alone, its key not made yet: the one issuer a start would have.
        Err(_) if missing.is_some() => Ok((Vec::new(), missing)),
        Err(e) => Err(e),
    }
}

/// The issuers of `dev_key` (with `--dev`), a PEM key and a JWKS.
fn issuers_with(config: &Config, dev_key: Option<&DevKey>) -> Result<Vec<Issuer>, ConfigError> {
    let id = &config.identity;
    let mut issuers = Vec::new();
    if let Some(key) = dev_key {
        issuers.push(Issuer::with_keys(
            DEV_ISSUER,
            vec![VerifyingKey::dev(key.decoding_key())],
        ));
    }
    if let (Some(path), Some(iss)) = (&id.jwt_public_key, &id.jwt_issuer) {
        let pem = std::fs::read(path).map_err(|e| {
            ConfigError(format!(
                "cannot read --jwt-public-key {}: {e}",
                path.display()
            ))
        })?;
        let key = VerifyingKey::from_pem(&pem)
            .map_err(|e| ConfigError(format!("--jwt-public-key: {e}")))?;
        issuers.push(Issuer::with_keys(iss.clone(), vec![key]));
    }
    if let (Some(url), Some(iss)) = (&id.jwks_url, &id.jwt_issuer) {
        issuers.push(Issuer::with_jwks(iss.clone(), url).map_err(ConfigError::from)?);
    }
    if issuers.is_empty() {
        return Err(ConfigError(
            "no way to verify tokens: pass --jwks-url or --jwt-public-key (with --jwt-issuer), or --dev for local use"
                .into(),
        ));
    }
    Ok(issuers)
}

/// The key of HTTP session ids for `check`, creating nothing: `Err` with the path a
/// start would create when the data dir's own does not exist yet.
///
/// # Errors
/// The outer error when the key cannot be read or is too short.
pub fn existing_session_key(
    config: &Config,
) -> Result<Result<Vec<u8>, std::path::PathBuf>, ConfigError> {
    let file = config.session_key_file.as_deref();
    match crate::app::keys::session::load_existing(file, &config.data_dir) {
        Ok(Some(key)) => Ok(Ok(key)),
        Ok(None) => Ok(Err(crate::app::keys::session::path(file, &config.data_dir))),
        Err(e) => Err(ConfigError::from(e)),
    }
}

/// The key of HTTP session ids: `--session-key-file`, else the data dir's own.
///
/// # Errors
/// When the key cannot be read or created, or is too short.
pub fn session_key(config: &Config) -> Result<Vec<u8>, ConfigError> {
    crate::app::keys::session::load(config.session_key_file.as_deref(), &config.data_dir)
        .map_err(ConfigError::from)
}

/// Lifetime of the `--dev` token: 30 days.
const DEV_TTL_S: i64 = 30 * 24 * 3600;

/// The `--dev` token, for printing on stderr when serving HTTP.
///
/// # Errors
/// When the dev key cannot be loaded.
pub fn dev_bearer_token(config: &Config) -> Result<String, ConfigError> {
    let key = DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?;
    local_dev_token(config, &key, SystemClock.now())
}

/// The `--dev` token issued `now`: the local tenant with every scope.
fn local_dev_token(config: &Config, key: &DevKey, now: Timestamp) -> Result<String, ConfigError> {
    let audience = &config.identity.audience;
    key.bearer_token(
        now,
        audience,
        LOCAL_TENANT,
        &all_scopes(),
        LOCAL_SUBJECT,
        DEV_TTL_S,
    )
    .map_err(ConfigError::from)
}

fn all_scopes() -> String {
    Scope::ALL
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What `dev-token` was asked for.
#[derive(Debug, Clone)]
pub struct DevTokenRequest {
    /// Tenant UUID.
    pub tenant: String,
    /// Scopes, space-separated (default: all).
    pub scopes: Option<String>,
    /// Lifetime, e.g. `1h`.
    pub ttl: String,
    /// Subject.
    pub sub: String,
    /// Tool to confirm (confirmation token).
    pub confirm: Option<String>,
    /// Arguments to confirm, a JSON object.
    pub args: Option<String>,
}

/// `dev-token`: a bearer token, or with `confirm` a confirmation token for one call.
///
/// # Errors
/// Bad arguments or an unusable dev key.
pub fn dev_token(config: &Config, req: &DevTokenRequest) -> Result<String, ConfigError> {
    crate::domain::TenantId::parse(&req.tenant)
        .map_err(|_| ConfigError("--tenant must be a UUID".into()))?;
    let ttl_s = parse_ttl(&req.ttl)?;
    let key = DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?;
    let now = SystemClock.now();
    let Some(tool) = &req.confirm else {
        let scopes = req.scopes.clone().unwrap_or_else(all_scopes);
        return key
            .bearer_token(
                now,
                &config.identity.audience,
                &req.tenant,
                &scopes,
                &req.sub,
                ttl_s,
            )
            .map_err(ConfigError::from);
    };
    if crate::domain::Tool::from_name(tool).is_none() {
        return Err(ConfigError(format!("--confirm: unknown tool {tool:?}")));
    }
    let args: serde_json::Value = serde_json::from_str(req.args.as_deref().unwrap_or("{}"))
        .ok()
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| ConfigError("--args must be a JSON object".into()))?;
    let sha = crate::app::service::confirmation::args_sha256(&args);
    let audience = &config.identity.audience;
    key.confirmation_token(now, audience, &req.tenant, &req.sub, tool, &sha, ttl_s)
        .map_err(ConfigError::from)
}

/// `30s`, `15m`, `1h`, `30d`.
fn parse_ttl(s: &str) -> Result<i64, ConfigError> {
    let bad = || {
        ConfigError(format!(
            "--ttl {s:?}: use a number with s, m, h or d, e.g. 1h"
        ))
    };
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: i64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(bad()),
    };
    if secs <= 0 || secs > 366 * 86_400 {
        Err(bad())
    } else {
        Ok(secs)
    }
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
