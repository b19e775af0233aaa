//! The embedded SQLite file and the data dir that holds it.

use std::sync::Arc;

use crate::adapters::sqlite::SqliteStore;
use crate::app::config::Config;
use crate::ports::Clock;

/// The embedded SQLite file: `--database-url sqlite:PATH`, else `<data-dir>/bridge.sqlite3`.
pub(super) fn store_path(config: &Config) -> std::path::PathBuf {
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
pub(super) async fn open_store(
    config: &Config,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<SqliteStore> {
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
