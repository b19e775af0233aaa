//! `check`, the doctor, through the binary: the resolved configuration with each value's
//! source, the keys of a real JWKS endpoint, and a FAIL line for what cannot serve.

use std::process::Command;

use serde_json::Value;

use crate::identity::jwks::jwk;
use crate::support::binary::binary;
use crate::support::jwks_server::{JwksServer, Reply};

/// `check --json` with `args` (and `env`) in a fresh data dir: exit code and report.
fn check(args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .args(["check", "--json"])
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("not JSON: {out:?}"));
    (out.status.code().unwrap(), report)
}

/// The check named `name` as (ok, detail).
fn part<'a>(report: &'a Value, name: &str) -> (bool, &'a str) {
    let c = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {report:#}"));
    (c["ok"].as_bool().unwrap(), c["detail"].as_str().unwrap())
}

#[test]
fn check_lists_the_jwks_keys_and_where_each_value_came_from() {
    let idp = JwksServer::start(jwk("rsa.key", "k1"));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "tool-names = \"underscore\"\ncuo-timeout = 9\n",
    )
    .unwrap();
    let (code, report) = check(
        &[
            "--config",
            file.path().to_str().unwrap(),
            "--jwks-url",
            &idp.url,
            "--jwt-issuer",
            "https://idp.test",
            "--cuo-timeout",
            "7",
        ],
        &[("CYBEROS_LONG_RUNNING", "wait")],
    );
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    let (ok, keys) = part(&report, "identity");
    assert!(
        ok && keys.contains("https://idp.test") && keys.contains("kid k1 (RS256)"),
        "{keys}"
    );
    assert!(idp.fetches() >= 1, "the JWKS is fetched, not assumed");
    let setting = |key: &str| {
        (
            report["config"][key]["value"].clone(),
            report["config"][key]["source"].clone(),
        )
    };
    // The flag beats the file; the file fills what no flag or variable set.
    assert_eq!(setting("cuo-timeout"), (7.into(), "flag".into()));
    assert_eq!(setting("tool-names"), ("underscore".into(), "file".into()));
    assert_eq!(setting("long-running"), ("wait".into(), "env".into()));
    assert_eq!(setting("transport"), ("stdio".into(), "default".into()));
    assert_eq!(
        setting("http-call-rate"),
        ("50/100".into(), "default".into())
    );
}

#[test]
fn check_fails_on_what_cannot_serve_and_shows_no_secret() {
    // The listen address is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let idp = JwksServer::serving(Reply::Down);
    let (code, report) = check(
        &[
            "--transport",
            "http",
            "--listen",
            &addr,
            "--jwks-url",
            &idp.url,
            "--jwt-issuer",
            "https://idp.test",
            "--memory-url",
            "http://reader:s3cret@127.0.0.1:9/",
        ],
        &[],
    );
    assert_eq!(code, 1, "{report:#}");
    let (ok, why) = part(&report, "http");
    assert!(
        !ok && why.contains(&format!("cannot listen on {addr}")),
        "{why}"
    );
    let (ok, why) = part(&report, "identity");
    assert!(!ok && why.contains("503"), "{why}");
    assert!(!part(&report, "memory").0);
    assert_eq!(
        report["config"]["memory-url"]["value"],
        "http://reader:***@127.0.0.1:9/"
    );
    assert!(!report.to_string().contains("s3cret"), "{report:#}");
    // A bad HTTP option fails the http part even on stdio.
    let (code, report) = check(&["--dev", "--http-call-rate", "fast"], &[]);
    assert_eq!(code, 1);
    let (ok, why) = part(&report, "http");
    assert!(!ok && why.contains("--http-call-rate"), "{why}");
}
