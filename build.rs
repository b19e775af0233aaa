//! Embeds the persona catalogue: lists `catalog/personas/*.json` in name order and writes
//! `$OUT_DIR/catalog.rs`, a `&[(&str, &str)]` of (file name, contents) that the bundled
//! CUO runner (`src/runner/catalog.rs`) includes.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The directory's mtime changes when a file is added or removed; `include_str!` already
    // tracks edits to the files themselves.
    println!("cargo:rerun-if-changed=catalog/personas");
    println!("cargo:rerun-if-changed=build.rs");
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
