//! `check-cuo` and `check-memory` through the built binary: every rule passes against the
//! bundled runner, a CUO written apart from it (`tests/fixtures/cuo/conformance_cuo.py`)
//! and the test memory service; each rule broken on its own is the one FAIL named, exit 1.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::binary::binary;
use crate::support::memory_server::{Break, MemoryServer};
use crate::support::{alive, fixtures};

/// The CUO rules of `docs/cuo-protocol.md` §7, as `check-cuo` names them.
const CUO_RULES: usize = 19;
/// The memory rules of `docs/memory-openapi.yaml`, as `check-memory` names them.
const MEMORY_RULES: usize = 16;

/// Runs the binary with `args`: exit code and stdout.
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (out.status.code().unwrap(), stdout)
}

/// A `--json` report: exit code, the names of the failed rules, and the report.
fn report(args: &[&str], env: &[(&str, &str)]) -> (i32, BTreeSet<String>, Value) {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, stdout) = run(&args, env);
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    let failed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    (code, failed, report)
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn fixture_cuo(breaks: &str) -> String {
    format!(
        "{} {breaks}",
        fixtures().join("cuo/conformance_cuo.py").display()
    )
}

#[test]
fn check_cuo_passes_the_bundled_runner_on_every_rule() {
    let (code, text) = run(&["check-cuo"], &[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(code, 0, "{text}");
    assert_eq!(lines.len(), CUO_RULES + 1, "{text}");
    assert!(
        lines[..CUO_RULES].iter().all(|l| l.starts_with("PASS  ")),
        "{text}"
    );
    assert_eq!(
        lines[CUO_RULES],
        format!("check-cuo: {CUO_RULES} checks, {CUO_RULES} passed, 0 failed")
    );
}

#[test]
fn check_cuo_passes_a_conforming_cuo_written_apart_from_the_runner() {
    let cmd = fixture_cuo("");
    let (code, failed, report) = report(&["--cuo-command", &cmd, "check-cuo"], &[]);
    assert_eq!((code, failed), (0, BTreeSet::new()), "{report:#}");
    assert_eq!(report["checks"].as_array().unwrap().len(), CUO_RULES);
}

#[test]
fn each_broken_cuo_rule_is_the_one_fail_named() {
    for (breaks, rule) in [
        ("pretty", "single-line JSON"),
        ("string-ids", "integer ids, no requests"),
        ("late-progress", "progress before the response"),
        ("no-32602", "unknown persona"),
        ("ignore-eof", "EOF exit"),
    ] {
        let cmd = fixture_cuo(breaks);
        let (code, failed, report) = report(&["--cuo-command", &cmd, "check-cuo"], &[]);
        assert_eq!((code, failed), (1, names(&[rule])), "{breaks}: {report:#}");
    }
}

#[test]
fn a_helper_that_leaves_the_process_group_fails_and_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = fixture_cuo("escape");
    let env = [("CUO_FIXTURE_DIR", dir.path().to_str().unwrap())];
    let args = [
        "--cuo-env",
        "CUO_FIXTURE_DIR",
        "--cuo-command",
        &cmd,
        "check-cuo",
    ];
    let (code, failed, report) = report(&args, &env);
    assert_eq!(
        (code, &failed),
        (1, &names(&["killed with the process group"])),
        "{report:#}"
    );
    let helper: i32 = std::fs::read_to_string(dir.path().join("helper"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let killed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "killed with the process group")
        .unwrap();
    assert!(
        killed["seen"]
            .as_str()
            .unwrap()
            .contains(&format!("process {helper} (sleep)")),
        "{killed}"
    );
    assert!(
        !alive(helper),
        "the checker left the escaped helper {helper} running"
    );
}

#[test]
fn a_cuo_that_hangs_fails_within_the_timeout() {
    let cmd = fixture_cuo("hang-route");
    let started = Instant::now();
    let (code, failed, report) = report(
        &["--cuo-timeout", "1", "--cuo-command", &cmd, "check-cuo"],
        &[],
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let want = names(&[
        "route result",
        "several requests at once",
        "EOF exit",
        "answers by id",
    ]);
    assert_eq!((code, failed), (1, want), "{report:#}");
    let route = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "route result")
        .unwrap();
    assert_eq!(route["seen"], "no answer within 1 s", "{route}");
}

#[test]
fn a_cuo_that_breaks_three_rules_gets_three_fails_in_text() {
    let cmd = fixture_cuo("pretty no-32602 ignore-eof");
    let (code, text) = run(&["--cuo-command", &cmd, "check-cuo"], &[]);
    assert_eq!(code, 1, "{text}");
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL  ")).collect();
    assert_eq!(fails.len(), 3, "{text}");
    for (line, rule) in fails
        .iter()
        .zip(["single-line JSON", "unknown persona", "EOF exit"])
    {
        assert!(line.starts_with(&format!("FAIL  {rule}: sent ")), "{line}");
        assert!(
            line.contains("; saw ") && line.contains("; expected "),
            "{line}"
        );
    }
    assert_eq!(
        text.lines().last().unwrap(),
        format!(
            "check-cuo: {CUO_RULES} checks, 16 passed, 3 failed (single-line JSON, unknown persona, EOF exit)"
        )
    );
}

#[test]
fn a_cuo_command_that_cannot_start_is_one_fail() {
    let (code, failed, _) = report(&["--cuo-command", "/nonexistent/cuo", "check-cuo"], &[]);
    assert_eq!((code, failed), (1, names(&["start"])));
}

/// `check-memory --json` against `server`, with `token` in a token file.
fn check_memory(server: &MemoryServer, token: Option<&str>) -> (i32, BTreeSet<String>, Value) {
    let file = tempfile::NamedTempFile::new().unwrap();
    let mut args = vec!["--memory-url", &server.url];
    if let Some(token) = token {
        std::fs::write(file.path(), format!("{token}\n")).unwrap();
        args.extend(["--memory-token-file", file.path().to_str().unwrap()]);
    }
    args.push("check-memory");
    report(&args, &[])
}

#[test]
fn check_memory_passes_the_test_memory_service_on_every_rule() {
    let server = MemoryServer::with_token("memory-secret-1");
    let (code, failed, report) = check_memory(&server, Some("memory-secret-1"));
    assert_eq!((code, failed), (0, BTreeSet::new()), "{report:#}");
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), MEMORY_RULES);
    assert!(checks.iter().all(|c| c["status"] == "pass"), "{report:#}");
    assert!(
        !report.to_string().contains("memory-secret-1"),
        "the token is never shown"
    );
    // Three entries under one fresh tenant, one under another; the refused appends wrote
    // nothing.
    assert_eq!(server.count(), 4);
}

#[test]
fn without_a_token_the_credential_rule_is_skipped_not_failed() {
    let server = MemoryServer::start();
    let (code, failed, report) = check_memory(&server, None);
    assert_eq!((code, failed), (0, BTreeSet::new()), "{report:#}");
    let skipped: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "skip")
        .collect();
    assert_eq!(skipped.len(), 1, "{report:#}");
    assert_eq!(skipped[0]["name"], "401 bad credential");
}

#[test]
fn each_broken_memory_rule_is_the_one_fail_named() {
    for (rule, name) in [
        (Break::LeakOtherTenants, "tenant isolation"),
        (Break::MissingIs500, "404 unknown id"),
        (Break::EchoCredential, "error bodies"),
        (Break::AnyCredential, "401 bad credential"),
        (Break::IgnoreLimit, "pagination"),
        (Break::InternalsInErrors, "error bodies"),
    ] {
        let server = MemoryServer::with_token("memory-secret-2");
        server.break_rule(rule);
        let (code, failed, report) = check_memory(&server, Some("memory-secret-2"));
        assert_eq!((code, failed), (1, names(&[name])), "{rule:?}: {report:#}");
    }
}

#[test]
fn an_echoed_credential_is_named_but_never_shown() {
    let server = MemoryServer::with_token("memory-secret-3");
    server.break_rule(Break::EchoCredential);
    let (_, _, report) = check_memory(&server, Some("memory-secret-3"));
    let text = report.to_string();
    assert!(!text.contains("memory-secret-3"), "{text}");
    assert!(text.contains("<a credential>"), "{text}");
}

#[test]
fn check_memory_without_a_memory_url_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(dir.path())
        .arg("check-memory")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--memory-url"),
        "{out:?}"
    );
}
