//! The store's files hold tenant data: readable by their owner only. SQLite creates its
//! `-wal` and `-shm` files with the database file's mode, so the database file is created
//! `0600` before SQLite opens it, and files an older version left more open are tightened.

use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `db` with mode `0600` when it is missing, and takes group and other access
/// away from it and its `-wal`/`-shm` siblings when they have any (with a warning).
pub(super) fn ensure_private(db: &Path) -> io::Result<()> {
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
