//! Compiles a snippet against the library this suite links (criterion 3 is about what
//! fails to build): with the rustc of the toolchain that built the suite, the library's
//! rlib and its dependencies from the suite's own target dir. Only metadata is emitted,
//! which is as far as a build goes before constants are evaluated.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What rustc said.
pub struct Outcome {
    pub success: bool,
    pub stderr: String,
}

/// Compiles `source` as a library crate that uses `cyberos_mcp_bridge`.
pub fn check(source: &str) -> Outcome {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .expect("the suite runs from its target dir's deps")
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lib.rs");
    std::fs::write(&file, source).unwrap();
    let out = Command::new(rustc())
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "lib",
            "--crate-name",
            "snippet",
        ])
        .args(["--emit", "metadata", "--out-dir"])
        .arg(dir.path())
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("cyberos_mcp_bridge={}", library(&deps).display()))
        .arg(&file)
        .output()
        .expect("rustc runs");
    Outcome {
        success: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The rustc next to the cargo running the tests (the toolchain that built them), else
/// the one on the PATH.
fn rustc() -> PathBuf {
    std::env::var_os("CARGO")
        .map(|cargo| Path::new(&cargo).with_file_name("rustc"))
        .filter(|rustc| rustc.exists())
        .unwrap_or_else(|| "rustc".into())
}

/// The newest build of the library in `deps`.
fn library(deps: &Path) -> PathBuf {
    std::fs::read_dir(deps)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("libcyberos_mcp_bridge-") && name.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .expect("the library's rlib next to the suite")
}
