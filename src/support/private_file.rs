//! Files kept private to their owner (mode 0600). The secrets the bridge creates for itself
//! in the data dir (the dev signing key, the session key) are written once, atomically, so
//! two processes racing to create one end up with the same content ([`publish`]). The
//! SQLite store holds tenant data: SQLite creates its `-wal` and `-shm` files with the
//! database file's mode, so the database file is created `0600` before SQLite opens it,
//! and files left more open are tightened ([`ensure_private`]).

use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir/name` holding `content` unless it exists: the content goes to a private
/// temporary file first, then is published with a hard link, which fails if another
/// process published first; either way one content wins.
///
/// # Errors
/// When the directory or the file cannot be created.
pub fn publish(dir: &Path, name: &str, content: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(name);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let tmp = dir.join(format!(".{name}.{}", u64::from_le_bytes(suffix)));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    options.mode(0o600);
    let written = options
        .open(&tmp)
        .and_then(|mut f| f.write_all(content).and_then(|()| f.sync_all()))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()));
    let published = written.and_then(|()| match std::fs::hard_link(&tmp, &path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", path.display())),
    });
    let _ = std::fs::remove_file(&tmp);
    published
}

/// Creates `db` with mode `0600` when it is missing, and takes group and other access
/// away from it and its `-wal`/`-shm` siblings when they have any (with a warning).
pub fn ensure_private(db: &Path) -> io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(db)
    {
        Ok(_) => {}
        // Another bridge process may be creating it at the same moment.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for path in [db.to_owned(), sibling(db, "-wal"), sibling(db, "-shm")] {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o700))?;
            tracing::warn!(
                path = %path.display(),
                was = format_args!("{mode:o}"),
                "the store file was readable by others; made it private to its owner"
            );
        }
    }
    Ok(())
}

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_file_is_private_and_an_open_one_is_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bridge.sqlite3");
        ensure_private(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        let wal = sibling(&db, "-wal");
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o664)).unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure_private(&db).unwrap();
        assert_eq!((mode(&db), mode(&wal)), (0o600, 0o600));
    }
}
