//! The upstreams that need no task store: the CUO runner, the skill index and the memory
//! service's client (or the embedded audit log).

use std::sync::Arc;

use crate::adapters::cuo_process::{
    CuoSettings, ProcessCuoRunner, STARTING_FOR, starting_children,
};
use crate::adapters::memory_http::HttpMemoryClient;
use crate::adapters::skills_fs::FsSkillIndex;
use crate::adapters::sqlite::SqliteStore;
use crate::adapters::unavailable::Unavailable;
use crate::app::config::Config;
use crate::domain::Upstream;
use crate::ports::{Clock, MemoryClient};

/// The memory service's client, or the embedded audit log in `store`.
pub(super) fn memory(config: &Config, store: Option<SqliteStore>) -> Arc<dyn MemoryClient> {
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

/// The CUO runner and the skill index, which touch no store.
pub(super) fn ports_without_store(
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
