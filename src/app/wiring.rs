//! The composition root: configuration in, real adapters out. The only module that names
//! concrete adapters.

use std::sync::Arc;

use crate::adapters::cuo_process::{CuoSettings, ProcessCuoRunner};
use crate::adapters::memory_http::HttpMemoryClient;
use crate::adapters::skills_fs::FsSkillIndex;
use crate::adapters::sqlite::SqliteStore;
use crate::adapters::system_clock::SystemClock;
use crate::adapters::unavailable::Unavailable;
use crate::app::config::Config;
use crate::app::identity::Identity;
use crate::app::{App, Settings};
use crate::domain::Upstream;
use crate::ports::{MemoryClient, Ports};

/// Builds the ports for `config`. An upstream that cannot be reached or opened is
/// allowed: its tools answer `upstream_unavailable` and `check` reports it.
pub async fn ports(config: &Config) -> Ports {
    let cuo = ProcessCuoRunner::new(CuoSettings {
        command: config.cuo_command.clone(),
        pass_env: config.cuo_env.clone(),
        call_timeout: config.cuo_timeout,
    });
    Ports {
        tasks: Arc::new(Unavailable::new(
            Upstream::TaskStore,
            "Long-running tools need the task store, which this build of the bridge does not include yet.",
        )),
        cuo: Arc::new(cuo),
        memory: memory(config).await,
        skills: Arc::new(FsSkillIndex::new(config.skills_dirs.clone())),
        clock: Arc::new(SystemClock),
    }
}

async fn memory(config: &Config) -> Arc<dyn MemoryClient> {
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
            Ok(client) => Arc::new(client),
            Err(e) => {
                tracing::error!("{e}");
                Arc::new(Unavailable::new(
                    Upstream::Memory,
                    "The memory service is misconfigured; ask an operator to check --memory-url.",
                ))
            }
        };
    }
    match open_store(config).await {
        Ok(store) => Arc::new(store),
        Err(why) => {
            tracing::error!("{why}");
            Arc::new(Unavailable::new(
                Upstream::Memory,
                "The embedded audit log cannot be opened; ask an operator to check --data-dir.",
            ))
        }
    }
}

async fn open_store(config: &Config) -> Result<SqliteStore, String> {
    let dir = &config.data_dir;
    create_private_dir(dir)
        .map_err(|e| format!("cannot create the data dir {}: {e}", dir.display()))?;
    SqliteStore::open(&dir.join("bridge.sqlite3"))
        .await
        .map_err(|e| format!("{e} ({})", dir.display()))
}

/// Creates the data dir readable by its owner only (it will hold keys and tenant data).
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Builds the application for `config`.
pub async fn app(config: &Config) -> App {
    let settings = Settings {
        tool_errors: config.tool_errors,
        long_running: config.long_running,
    };
    App::new(ports(config).await, settings, Identity::Local)
}
