//! What an operator installs: the declared toolchain floor and the version line.

use std::process::Command;

use crate::support::binary::binary;

/// `rust-version` is the highest any dependency declares, so `cargo install` on an older
/// toolchain fails up front with that version named, not deep inside a dependency.
#[test]
fn rust_version_is_the_highest_any_dependency_declares() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let parse = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    let (mut highest, mut by) = (vec![0], String::new());
    for p in meta["packages"].as_array().unwrap() {
        let Some(v) = p["rust_version"].as_str() else {
            continue;
        };
        if p["name"] != env!("CARGO_PKG_NAME") && parse(v) > highest {
            (highest, by) = (parse(v), p["name"].as_str().unwrap().to_owned());
        }
    }
    let ours = parse(env!("CARGO_PKG_RUST_VERSION"));
    let pad = |mut v: Vec<u32>| {
        v.resize(3, 0);
        v
    };
    assert_eq!(pad(ours), pad(highest), "rust-version must be {by}'s");
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(binary()).arg("--version").output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    let expected = format!("cyberos-mcp-bridge {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    // A checkout built from git names its commit (CI clones, so this always runs there).
    if let Some(head) = head.ok().filter(|h| h.status.success()) {
        let head = String::from_utf8(head.stdout).unwrap();
        assert_eq!(line.trim(), format!("{expected}{})", head.trim()));
    }
}
