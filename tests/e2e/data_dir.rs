//! The data dir holds tenant data and keys: the bridge's files in it are readable by their
//! owner only, also in a dir the operator made, and a dir open to others is reported.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::binary::binary;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Runs the bridge on `dir` until EOF (stdin closed at once); returns its stderr.
fn run_on(dir: &Path) -> String {
    let out = Command::new(binary())
        .args(["--dev", "--data-dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn store_files_are_private_even_in_an_open_data_dir() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();

    let stderr = run_on(&dir);
    let db = dir.join("bridge.sqlite3");
    assert_eq!(mode(&db), 0o600, "a new store file");
    assert!(
        stderr.contains("the data dir is open to other users") && stderr.contains("755"),
        "{stderr}"
    );
    assert_eq!(mode(&dir), 0o755, "the operator's dir is left as it is");

    // A store file an earlier version left readable is made private.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let stderr = run_on(&dir);
    assert_eq!(mode(&db), 0o600);
    assert!(stderr.contains("made it private"), "{stderr}");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path) & 0o077, 0, "{} is private", path.display());
    }
}

#[test]
fn a_data_dir_the_bridge_creates_is_private_and_not_reported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("new");
    let stderr = run_on(&dir);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("bridge.sqlite3")), 0o600);
    assert!(!stderr.contains("open to other users"), "{stderr}");
}
