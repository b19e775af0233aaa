//! `check`, the doctor, through the binary: the resolved configuration with each value's
//! source, the keys of a real JWKS endpoint, and a FAIL line for what cannot serve.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::identity::jwks::jwk;
use crate::support::binary::binary;
use crate::support::jwks_server::{JwksServer, Reply};

/// `check --json` with `args` (and `env`) in a fresh data dir: exit code and report.
fn check(args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (code, report, _) = check_in(dir.path(), args, env);
    (code, report)
}

/// `check --json` with `args` (and `env`) on `data_dir`: exit code, report and stderr.
fn check_in(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .args(["check", "--json"])
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("not JSON: {out:?}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap(), report, stderr)
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
    // Secrets where URLs carry them: a password, query values (which error text quotes).
    let jwks = idp
        .url
        .replace("http://", "http://idp:jwks-pw-1@")
        .replace("/jwks", "/jwks?access_token=jwks-tok-1");
    let dir = tempfile::tempdir().unwrap();
    let (code, report, stderr) = check_in(
        dir.path(),
        &[
            "--transport",
            "http",
            "--listen",
            &addr,
            "--jwks-url",
            &jwks,
            "--jwt-issuer",
            "https://idp.test",
            "--memory-url",
            "http://reader:s3cret@127.0.0.1:9/?token=mem-tok-1",
            "--database-url",
            "postgres://app@127.0.0.1:9/db?password=pg-pw-1&sslmode=disable",
            "--otlp-endpoint",
            "https://otel.invalid:4317/?api_key=otlp-key-1",
            "--cuo-command",
            "/nonexistent/cuo --token=cuo-arg-1",
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
    assert!(why.contains("JWKS http://idp:***@"), "{why}");
    assert!(why.contains("/jwks?access_token=***"), "{why}");
    let (ok, why) = part(&report, "memory");
    // The HTTP client's error quotes the URL it called, query and all.
    assert!(!ok && why.contains("?token=***"), "{why}");
    let value = |key: &str| report["config"][key]["value"].clone();
    assert_eq!(
        value("memory-url"),
        "http://reader:***@127.0.0.1:9/?token=***"
    );
    // Every query value is masked but a connection setting's.
    assert_eq!(
        value("database-url"),
        "postgres://app@127.0.0.1:9/db?password=***&sslmode=disable"
    );
    assert_eq!(
        value("otlp-endpoint"),
        "https://otel.invalid:4317/?api_key=***"
    );
    assert_eq!(
        value("cuo-command"),
        "/nonexistent/cuo (1 argument not shown)"
    );
    for secret in [
        "s3cret",
        "mem-tok-1",
        "jwks-pw-1",
        "jwks-tok-1",
        "pg-pw-1",
        "otlp-key-1",
        "cuo-arg-1",
    ] {
        assert!(!report.to_string().contains(secret), "{secret}: {report:#}");
        assert!(!stderr.contains(secret), "{secret}: {stderr}");
    }
    // A bad HTTP option fails the http part even on stdio.
    let (code, report) = check(&["--dev", "--http-call-rate", "fast"], &[]);
    assert_eq!(code, 1);
    let (ok, why) = part(&report, "http");
    assert!(!ok && why.contains("--http-call-rate"), "{why}");
}

/// Every file in `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn check_creates_nothing_and_says_what_a_start_would_create() {
    let root = tempfile::tempdir().unwrap();
    let args = ["--dev", "--transport", "http", "--listen", "127.0.0.1:0"];
    // No data dir: none is made, and each part says what a start creates.
    let absent = root.path().join("state");
    let (code, report, _) = check_in(&absent, &args, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert!(!absent.exists(), "check created the data dir");
    let (ok, why) = part(&report, "http");
    assert!(
        ok && why.contains("session.key does not exist, a start creates it"),
        "{why}"
    );
    let (ok, why) = part(&report, "identity");
    assert!(
        ok && why.contains("dev-signing-key.pem does not exist, a start creates it"),
        "{why}"
    );
    let (ok, why) = part(&report, "task store");
    assert!(
        ok && why.contains("does not exist; a start creates it"),
        "{why}"
    );
    // An empty data dir stays empty.
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, report, _) = check_in(&empty, &args, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(snapshot(&empty), [], "check wrote into an empty data dir");
    let (ok, why) = part(&report, "memory");
    assert!(
        ok && why.contains("bridge.sqlite3 does not exist; a start creates it"),
        "{why}"
    );
    // A used data dir: the store is read where it is, and no byte of it changes.
    let used = root.path().join("used");
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(&used)
        .args(["--dev", "call", "cyberos.memory.append_audit"])
        .arg(r#"{"kind": "decision", "body": {"adr": 1}}"#)
        .arg("--confirm")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let before = snapshot(&used);
    let (code, report, _) = check_in(&used, &args, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(part(&report, "task store"), (true, "answers"));
    assert_eq!(part(&report, "memory"), (true, "answers"));
    let after = snapshot(&used);
    let names = |s: &[(String, Vec<u8>)]| s.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&after),
        names(&before),
        "check added or removed a file"
    );
    for ((name, was), (_, is)) in before.iter().zip(&after) {
        // The WAL index is shared memory every reader takes its read lock in.
        if !name.ends_with("-shm") {
            assert!(was == is, "check changed {name}");
        }
    }
    // Stopped cleanly (the WAL copied back, its files gone) and a schema behind this
    // build: nothing is migrated, and no WAL file appears.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use sqlx::{Connection, Executor};
        let options =
            sqlx::sqlite::SqliteConnectOptions::new().filename(used.join("bridge.sqlite3"));
        let mut conn = sqlx::SqliteConnection::connect_with(&options)
            .await
            .unwrap();
        conn.execute("PRAGMA user_version = 3").await.unwrap();
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            .await
            .unwrap();
        conn.close().await.unwrap();
    });
    let before = snapshot(&used);
    assert!(
        !names(&before).iter().any(|n| n.ends_with("-wal")),
        "{:?}",
        names(&before)
    );
    let (code, report, _) = check_in(&used, &args, &[]);
    assert_eq!(code, 0, "{report:#}");
    let (ok, why) = part(&report, "task store");
    assert!(
        ok && why.starts_with("answers; schema version 3 of ")
            && why.ends_with("; a start applies the rest"),
        "{why}"
    );
    assert!(snapshot(&used) == before, "check changed the stopped store");
}
