//! Architecture invariants that Cargo cannot enforce in one crate.

use std::path::Path;

fn rust_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            // Comments may name what the code must not use.
            let code: String = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            out.push((path.display().to_string(), code));
        }
    }
    out
}

fn src(sub: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(sub)
}

#[test]
fn the_domain_does_no_io_and_imports_no_infrastructure() {
    let forbidden = [
        "tokio",
        "serde_json",
        "sqlx",
        "reqwest",
        "axum",
        "std::fs",
        "std::net",
        "std::process",
        "std::time::SystemTime",
        "Instant::now",
        "getrandom",
        "crate::app",
        "crate::adapters",
        "crate::ports",
    ];
    for (path, text) in rust_files(&src("domain")) {
        for word in forbidden {
            assert!(!text.contains(word), "{path} mentions {word}");
        }
    }
}

#[test]
fn ports_speak_domain_types_only() {
    for (path, text) in rust_files(&src("ports")) {
        for word in [
            "serde_json",
            "sqlx",
            "reqwest",
            "axum",
            "crate::app",
            "crate::adapters",
        ] {
            assert!(!text.contains(word), "{path} mentions {word}");
        }
    }
}

#[test]
fn only_wiring_names_concrete_adapters() {
    for (path, text) in rust_files(&src("app")) {
        if path.ends_with("wiring.rs") {
            continue;
        }
        assert!(!text.contains("crate::adapters"), "{path} names an adapter");
    }
}

#[test]
fn nothing_prints_to_stdout_outside_the_cli() {
    for (path, text) in rust_files(&src("")) {
        if path.ends_with("cli.rs") {
            continue;
        }
        for word in ["println!", "print!(", "std::io::stdout", "dbg!("] {
            // `eprintln!` and `eprint!` go to stderr and are fine.
            let hits = text
                .match_indices(word)
                .filter(|(i, _)| !text[..*i].ends_with('e'));
            assert_eq!(hits.count(), 0, "{path} writes to stdout with {word}");
        }
    }
}
