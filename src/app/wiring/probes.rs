//! What `check` opens: the parts of the ports, read-only.

use std::sync::Arc;

use super::store::store_path;
use super::upstreams::{memory, ports_without_store};
use crate::adapters::postgres::PgStore;
use crate::adapters::sqlite::SqliteStore;
use crate::adapters::system_clock::SystemClock;
use crate::app::config::{Config, ConfigError};
use crate::ports::{Clock, MemoryClient, TaskStore};

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
