//! Architecture invariants that Cargo cannot enforce in one crate.

use std::path::Path;

use crate::support::module_graph::{Graph, show};

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
        "Utc::now",
        "Local::now",
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
    let main = src("main.rs");
    let main = (
        main.display().to_string(),
        std::fs::read_to_string(&main).unwrap(),
    );
    let roots = rust_files(&src("bridge")).into_iter().chain([main]);
    for (path, text) in rust_files(&src("app")).into_iter().chain(roots) {
        // The composition root: `app/wiring` and its submodules.
        if path.contains("/app/wiring/") {
            continue;
        }
        for word in ["crate::adapters", "cyberos_mcp_bridge::adapters"] {
            assert!(!text.contains(word), "{path} names an adapter");
        }
    }
}

#[test]
fn nothing_prints_to_stdout_outside_the_cli() {
    for (path, text) in rust_files(&src("")) {
        if path.ends_with("cli.rs") {
            continue;
        }
        for word in ["println!", "print!(", "std::io::stdout", "dbg!("] {
            // The library's stdio serve hands stdout to the stdio transport, its one writer.
            if path.ends_with("src/bridge/process.rs") && word == "std::io::stdout" {
                continue;
            }
            // `eprintln!` and `eprint!` go to stderr and are fine.
            let hits = text
                .match_indices(word)
                .filter(|(i, _)| !text[..*i].ends_with('e'));
            assert_eq!(hits.count(), 0, "{path} writes to stdout with {word}");
        }
    }
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = Graph::of(&src(""));
    assert!(
        graph.edges.len() > 50,
        "the graph lost its modules: {}",
        graph.edges.len()
    );
    let cycles = graph.cycles();
    assert!(
        cycles.is_empty(),
        "import cycles (A uses B and B uses A, through any path):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_check_can_fail() {
    // A crate of three modules where `a` and `c` reach each other through `b`, one edge
    // written inline and one through a facade's re-export.
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    file(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n",
    );
    file("a.rs", "use crate::b::helper;\n");
    file("b.rs", "pub fn helper() { let _ = crate::Thing; }\n");
    file(
        "c.rs",
        "// crate::a in a comment is no edge\npub struct Thing;\nfn f() { super::a::g() }\n",
    );
    let cycles = Graph::of(dir.path()).cycles();
    assert_eq!(cycles, ["c → a → b → c"]);
}

#[test]
fn the_module_graph_sees_real_edges() {
    // The reader must see the edges the checks rely on, or a cycle could hide.
    let graph = Graph::of(&src(""));
    let edge = |from: &str, to: &str| {
        let path = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        graph.edges[&path(from)].contains(&path(to))
    };
    assert!(edge(
        "app::edge::dispatch::tasks",
        "app::service::tasks::methods"
    ));
    assert!(
        edge("app::service::call", "app::service::state"),
        "through the service facade"
    );
    assert!(
        edge("app::edge::http::mcp", "app::edge::http::sse"),
        "a sibling through super::"
    );
    assert!(edge(
        "app::service::tasks::runner",
        "app::service::tasks::run"
    ));
    assert!(edge("main", "app::cli"), "main.rs is read too");
}

#[test]
fn adapters_never_import_the_application() {
    for (module, targets) in &Graph::of(&src("")).edges {
        if module.first().is_some_and(|m| m == "adapters") {
            for t in targets {
                assert!(
                    t.first().is_none_or(|m| m != "app"),
                    "{} imports {}",
                    show(module),
                    show(t)
                );
            }
        }
    }
}

#[test]
fn adapters_read_wall_clock_time_only_through_the_clock_port() {
    // Expiry of ledgers, answers and sessions must follow a fixed clock in tests.
    for (path, text) in rust_files(&src("adapters")) {
        if path.ends_with("system_clock.rs") {
            continue;
        }
        for word in ["Utc::now", "Local::now", "SystemTime::now"] {
            assert!(!text.contains(word), "{path} reads {word}; take a Clock");
        }
    }
}

#[test]
fn the_service_never_names_the_wire() {
    // The use cases and the telemetry they record take and return their own types: a
    // second protocol lane or front end is an edge of its own, not a change to them.
    let graph = Graph::of(&src(""));
    let under = |m: &[String], prefix: &[&str]| {
        m.len() >= prefix.len() && m.iter().zip(prefix).all(|(a, b)| a == b)
    };
    let mut checked = 0;
    for (module, targets) in &graph.edges {
        if !under(module, &["app", "service"]) && !under(module, &["app", "telemetry"]) {
            continue;
        }
        checked += 1;
        for t in targets {
            assert!(
                !under(t, &["app", "edge"]),
                "{} imports {}",
                show(module),
                show(t)
            );
        }
    }
    assert!(
        checked > 20,
        "the service's modules were not found: {checked}"
    );
    for sub in ["app/service", "app/telemetry"] {
        for (path, text) in rust_files(&src(sub)) {
            for word in ["axum", "hyper", "crate::app::edge", "jsonrpc\":"] {
                assert!(!text.contains(word), "{path} mentions {word}");
            }
        }
    }
}

#[test]
fn the_runner_imports_only_what_architecture_md_names() {
    // The bundled CUO runner is a separate program: it shares the NDJSON line reader, the
    // SKILL.md front-matter splitter and the child-process death signal with the bridge,
    // nothing else.
    let allowed = [
        vec!["support", "ndjson"],
        vec!["domain", "skill"],
        vec!["support", "children"],
    ];
    for (module, targets) in &Graph::of(&src("")).edges {
        if module.first().is_some_and(|m| m == "runner") {
            for t in targets {
                let ok = t.first().is_some_and(|m| m == "runner")
                    || allowed.iter().any(|a| a.iter().eq(t.iter()));
                assert!(ok, "{} imports {}", show(module), show(t));
            }
        }
    }
}

/// Longest `#[cfg(test)] mod tests { }` kept inline; a longer one lives in
/// `<module>/tests.rs` (the convention `main.rs` states).
const INLINE_TESTS_MAX_LINES: usize = 150;

/// Every file under `dir`, raw, with its path relative to `src`.
fn raw_rust_files(dir: &Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            raw_rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
}

/// The layout faults of one source file's unit tests: more than one test module, one not
/// named `tests`, an inline one that is not last or is too long, a `#[path]`, a declared
/// `tests.rs` that is missing.
fn test_layout_faults(path: &Path, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut faults = Vec::new();
    let mut modules = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("#[path") {
            faults.push(format!("line {}: #[path]", i + 1));
        }
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        modules += 1;
        let item = lines[i + 1..]
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.starts_with("#["))
            .unwrap_or("");
        let item = item.strip_prefix("pub(crate) ").unwrap_or(item);
        if item == "mod tests;" {
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let dir = if matches!(stem, "mod" | "lib" | "main") {
                path.parent().unwrap().to_path_buf()
            } else {
                path.with_extension("")
            };
            if !dir.join("tests.rs").is_file() {
                faults.push(format!("{} is missing", dir.join("tests.rs").display()));
            }
        } else if item == "mod tests {" {
            let end = lines[i + 1..]
                .iter()
                .position(|l| *l == "}")
                .map_or(lines.len(), |p| i + 1 + p);
            if lines[end + 1..].iter().any(|l| !l.trim().is_empty()) {
                faults.push(format!("line {}: the test module is not last", i + 1));
            }
            let len = end - i;
            if len > INLINE_TESTS_MAX_LINES {
                faults.push(format!(
                    "line {}: {len} lines of inline tests (at most {INLINE_TESTS_MAX_LINES}; move them to tests.rs)",
                    i + 1
                ));
            }
        } else {
            faults.push(format!(
                "line {}: a test item other than `mod tests`: {item}",
                i + 1
            ));
        }
    }
    if modules > 1 {
        faults.push(format!("{modules} test items (at most one `mod tests`)"));
    }
    let name = path.file_name().unwrap().to_str().unwrap();
    if name.ends_with("_tests.rs") || name == "proptests.rs" {
        faults.push("a test file not named tests.rs".into());
    }
    faults
}

#[test]
fn unit_tests_follow_one_layout() {
    let mut files = Vec::new();
    raw_rust_files(&src(""), &mut files);
    let mut faults = Vec::new();
    let mut test_files = 0;
    for (path, text) in &files {
        for fault in test_layout_faults(path, text) {
            faults.push(format!("{}: {fault}", path.display()));
        }
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            test_files += 1;
            // Declared by its parent module, so it is a test module and nothing else.
            let dir = path.parent().unwrap();
            let declared = [dir.with_extension("rs"), dir.join("mod.rs")]
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .any(|parent| {
                    ["mod tests;", "pub(crate) mod tests;"]
                        .iter()
                        .any(|m| parent.contains(&format!("#[cfg(test)]\n{m}")))
                });
            if !declared {
                faults.push(format!(
                    "{}: not declared `#[cfg(test)] mod tests;`",
                    path.display()
                ));
            }
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
    assert!(
        test_files >= 5,
        "the test files were not found: {test_files}"
    );
}

#[test]
fn the_test_layout_check_can_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thing.rs");
    let two = "fn f() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n\n#[cfg(test)]\nmod proptests {\n}\n";
    let faults = test_layout_faults(&path, two);
    assert_eq!(faults.len(), 3, "{faults:?}");
    assert!(faults[0].contains("not last") && faults[1].contains("mod proptests"));
    let declared = "#[cfg(test)]\n#[path = \"thing_tests.rs\"]\nmod tests;\n";
    let faults = test_layout_faults(&path, declared);
    assert!(faults.iter().any(|f| f.contains("#[path]")), "{faults:?}");
    assert!(
        faults.iter().any(|f| f.contains("is missing")),
        "{faults:?}"
    );
    let long = format!(
        "#[cfg(test)]\nmod tests {{\n{}}}\n",
        "    // a line\n".repeat(INLINE_TESTS_MAX_LINES)
    );
    assert_eq!(test_layout_faults(&path, &long).len(), 1);
}
