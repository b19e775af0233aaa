//! The subcommands of the built binary.

use std::process::Command;

use serde_json::Value;

use crate::support::binary::binary;
use crate::support::fixtures;

fn run(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--dev")
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("CYBEROS_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn tools_prints_the_tools_list_result() {
    let (code, stdout, _) = run(&["tools"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    crate::support::schema::assert_valid("ListToolsResult", &v);
    assert_eq!(v["tools"].as_array().unwrap().len(), 8);
}

#[test]
fn call_prints_the_result_and_exits_0() {
    let skills = fixtures().join("skills");
    let (code, stdout, _) = run(&[
        "call",
        "cyberos.skill.list_skills",
        r#"{"query":"release"}"#,
        "--skills-dir",
        skills.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["structuredContent"]["skills"][0]["name"], "release-notes");
}

#[test]
fn call_prints_the_envelope_and_exits_1_on_a_tool_error() {
    let (code, stdout, _) = run(&["call", "cyberos.cuo.route", r#"{"query":""}"#]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["data"]["class"], "input_validation");
    assert_eq!(v["data"]["pointer"], "/query");
}

#[test]
fn call_exits_2_on_usage_errors() {
    assert_eq!(run(&["call", "cyberos.cuo.nope", "{}"]).0, 2);
    assert_eq!(run(&["call", "cyberos.skill.list_skills", "[1]"]).0, 2);
    assert_eq!(run(&["call", "cyberos.skill.list_skills", "{oops"]).0, 2);
}

#[test]
fn bad_configuration_exits_2_with_a_clear_message() {
    let (code, _, stderr) = run(&["tools", "--listen", "not-an-address"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--listen"), "{stderr}");
    let (code, _, stderr) = run(&["--config", "/nonexistent/bridge.toml", "tools"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("config file"), "{stderr}");
    let (code, _, _) = run(&["--transport", "carrier-pigeon"]);
    assert_eq!(code, 2);
}

#[test]
fn environment_variables_configure_like_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .args(["call", "cyberos.skill.list_skills", "{}"])
        .env("CYBEROS_DATA_DIR", dir.path())
        .env("CYBEROS_DEV", "true")
        .env("CYBEROS_SKILLS_DIR", fixtures().join("skills"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["structuredContent"]["skills"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn cyberos_dev_takes_the_usual_boolean_spellings_and_one_shot_commands_log_quietly() {
    let call = |dev: &str| {
        let dir = tempfile::tempdir().unwrap();
        Command::new(binary())
            .args(["call", "cyberos.skill.list_skills", "{}"])
            .env("CYBEROS_DATA_DIR", dir.path())
            .env("CYBEROS_DEV", dev)
            .env_remove("RUST_LOG")
            .env("CYBEROS_SKILLS_DIR", fixtures().join("skills"))
            .output()
            .unwrap()
    };
    for on in ["1", "yes", "on", "true"] {
        let out = call(on);
        assert_eq!(out.status.code(), Some(0), "CYBEROS_DEV={on}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("INFO"),
            "call logs at warn unless asked: {stderr}"
        );
    }
    // Off: no identity is configured, so the command refuses to run.
    let out = call("0");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn check_reports_each_part_and_fails_when_one_is_down() {
    let skills = fixtures().join("skills");
    let (code, stdout, _) = run(&[
        "check",
        "--skills-dir",
        skills.to_str().unwrap(),
        "--memory-url",
        "http://127.0.0.1:9",
        "--cuo-command",
        "/nonexistent/cuo",
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("ok    skills")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("FAIL  cuo")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("FAIL  memory")),
        "{stdout}"
    );
}

#[test]
fn a_memory_token_over_plain_http_off_this_host_is_a_usage_error() {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "t0k3n\n").unwrap();
    let with = |url: &str| {
        run(&[
            "--memory-url",
            url,
            "--memory-token-file",
            token.path().to_str().unwrap(),
            "tools",
        ])
    };
    let (code, _, stderr) = with("http://cyberos-memory:8080");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--memory-url") && stderr.contains("in clear"),
        "{stderr}"
    );
    for url in ["https://cyberos-memory:8443", "http://127.0.0.1:8080"] {
        let (code, _, stderr) = with(url);
        assert_eq!(code, 0, "{url}: {stderr}");
    }
}

#[test]
fn the_example_config_names_every_option_and_loads() {
    use clap::CommandFactory;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cyberos.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let options: Vec<String> = cyberos_mcp_bridge::app::config::Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .filter(|l| !matches!(l.as_str(), "config" | "help" | "version"))
        .collect();
    // Each option is a key, or (an alternative to another) a commented-out key.
    for option in &options {
        let commented = text.contains(&format!("# {option} ="));
        assert!(
            table.contains_key(option) || commented,
            "examples/cyberos.toml lacks {option}"
        );
    }
    for key in table.keys() {
        assert!(options.contains(key), "{key} is no option");
    }
    // The bridge resolves the whole file (`tools` reaches no upstream; a temp data dir
    // keeps it local).
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .arg("--config")
        .arg(&path)
        .args(["--dev", "--data-dir"])
        .arg(dir.path())
        .arg("tools")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn call_confirm_is_the_operators_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let append = |confirm: bool| {
        let mut cmd = Command::new(binary());
        cmd.args(["--dev", "--data-dir"]).arg(dir.path()).args([
            "call",
            "cyberos.memory.append_audit",
            r#"{"kind": "decision", "body": {"adr": 7}}"#,
        ]);
        if confirm {
            cmd.arg("--confirm");
        }
        let out = cmd.output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v)
    };
    let (code, refused) = append(false);
    assert_eq!(code, Some(1), "{refused}");
    assert_eq!(refused["data"]["class"], "authz_denied", "{refused}");
    let (code, receipt) = append(true);
    assert_eq!(code, Some(0), "{receipt}");
    assert!(
        receipt["structuredContent"]["audit_id"].is_string(),
        "{receipt}"
    );
}
