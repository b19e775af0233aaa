//! Two things the binary carries from its build:
//! - the persona catalogue: lists `catalog/personas/*.json` in name order and writes
//!   `$OUT_DIR/catalog.rs`, a `&[(&str, &str)]` of (file name, contents) that the bundled
//!   CUO runner (`src/runner/catalog.rs`) includes;
//! - the commit for `--version` (`CYBEROS_COMMIT`): `CYBEROS_BUILD_COMMIT` when set (a
//!   source package or an image build without `.git`), else `git rev-parse`, else `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    catalog()?;
    commit();
    Ok(())
}

fn catalog() -> Result<(), Box<dyn std::error::Error>> {
    // The directory's mtime changes when a file is added or removed; `include_str!` already
    // tracks edits to the files themselves.
    println!("cargo:rerun-if-changed=catalog/personas");
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let dir = manifest_dir.join("catalog").join("personas");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut out =
        String::from("/// The bundled persona files: (file name, JSON text), sorted by name.\n");
    out.push_str("pub static BUNDLED: &[(&str, &str)] = &[\n");
    for path in &files {
        let name = file_name(path)?;
        let absolute = path
            .to_str()
            .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
        // `{:?}` yields a valid Rust string literal, escapes included.
        out.push_str(&format!("    ({name:?}, include_str!({absolute:?})),\n"));
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var("OUT_DIR")?).join("catalog.rs");
    std::fs::write(&target, out)?;
    Ok(())
}

fn file_name(path: &Path) -> Result<&str, String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no UTF-8 file name", path.display()))
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn commit() {
    println!("cargo:rerun-if-env-changed=CYBEROS_BUILD_COMMIT");
    let commit = std::env::var("CYBEROS_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch it names, kept
    // as a loose ref or in packed-refs. Only paths that exist are named: cargo reruns the
    // script on every build for a path that does not. Where the ref is not loose, its
    // folder is watched, so the loose ref a commit writes is seen.
    let Some(dir) = git(&["rev-parse", "--git-dir"]) else {
        return emit(commit);
    };
    watch(Path::new(&dir).join("HEAD"));
    if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let common = PathBuf::from(git(&["rev-parse", "--git-common-dir"]).unwrap_or(dir));
        let loose = common.join(&head);
        if loose.exists() {
            watch(loose);
        } else if let Some(folder) = loose.parent() {
            watch(folder.to_path_buf());
        }
        watch(common.join("packed-refs"));
    }
    emit(commit);
}

/// Reruns the script when `path` changes, if it exists.
fn watch(path: PathBuf) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn emit(commit: Option<String>) {
    println!(
        "cargo:rustc-env=CYBEROS_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}
