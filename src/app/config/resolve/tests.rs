use super::*;
use crate::app::config::{Cli, Command};
use clap::Parser;

/// `options.resolve()` reads better in the tests below.
trait Resolve {
    fn resolve(self) -> Result<Config, ConfigError>;
}

impl Resolve for Options {
    fn resolve(self) -> Result<Config, ConfigError> {
        Config::resolve(self)
    }
}

fn options(args: &[&str]) -> Options {
    let mut argv = vec!["cyberos-mcp-bridge"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).unwrap().options
}

#[test]
fn flags_are_global_and_defaults_apply() {
    let cli = Cli::try_parse_from([
        "x",
        "tools",
        "--data-dir",
        "/tmp/d",
        "--tool-errors",
        "result",
    ])
    .unwrap();
    assert!(matches!(cli.command, Some(Command::Tools)));
    let cfg = Config::resolve(cli.options).unwrap();
    assert_eq!(cfg.data_dir, PathBuf::from("/tmp/d"));
    assert_eq!(cfg.tool_errors, ToolErrors::Result);
    assert_eq!(cfg.transport, Transport::Stdio);
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:8082");
    assert_eq!(
        cfg.cuo_command.last().map(String::as_str),
        Some("cuo-runner")
    );
}

#[test]
fn cuo_command_is_split_like_a_shell_would() {
    let cfg = options(&[
        "--data-dir",
        "/d",
        "--cuo-command",
        "python3 -m 'cyberos cuo' --x",
    ])
    .resolve()
    .unwrap();
    assert_eq!(cfg.cuo_command, ["python3", "-m", "cyberos cuo", "--x"]);
}

#[test]
fn bad_values_are_refused_with_the_flag_named() {
    let err = options(&["--data-dir", "/d", "--listen", "nope"])
        .resolve()
        .unwrap_err();
    assert!(err.0.contains("--listen"), "{err}");
    let err = options(&["--data-dir", "/d", "--database-url", "mysql://x"])
        .resolve()
        .unwrap_err();
    assert!(err.0.contains("--database-url"), "{err}");
    let err = options(&["--data-dir", "/d", "--cuo-command", "a 'b"])
        .resolve()
        .unwrap_err();
    assert!(err.0.contains("--cuo-command"), "{err}");
}

#[test]
fn a_memory_credential_never_crosses_the_network_in_clear() {
    let resolve = |url: &str, token: bool| {
        let mut args = vec!["--data-dir", "/d", "--memory-url", url];
        if token {
            args.extend(["--memory-token-file", "/run/secrets/memory-token"]);
        }
        options(&args).resolve().map(|_| ()).map_err(|e| e.0)
    };
    for url in [
        "http://cyberos-memory:8080",
        "http://10.0.0.5/",
        "http://[fd00::5]:8080",
        "http://localhost.example.com",
    ] {
        let err = resolve(url, true).unwrap_err();
        assert!(
            err.contains("--memory-url") && err.contains("in clear"),
            "{url}: {err}"
        );
    }
    let err = resolve("http://reader:s3cret@memory.example", false).unwrap_err();
    assert!(err.contains("password") && !err.contains("s3cret"), "{err}");
    for url in [
        "https://memory.example.com",
        "http://127.0.0.1:8080",
        "http://127.3.2.1/",
        "http://[::1]:8080",
        "http://LocalHost:8080",
    ] {
        assert_eq!(resolve(url, true), Ok(()), "{url}");
    }
    // No credential: nothing to leak (the bridge warns that it sends none).
    assert_eq!(resolve("http://memory.example", false), Ok(()));
}

#[test]
fn the_config_file_fills_what_flags_left_unset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "data-dir = \"/from/file\"\nlisten = \"127.0.0.1:9000\"\nskills-dir = [\"/s\"]\n",
    )
    .unwrap();
    let opts = options(&[
        "--config",
        path.to_str().unwrap(),
        "--listen",
        "127.0.0.1:9001",
    ])
    .merge_file()
    .unwrap();
    let cfg = opts.resolve().unwrap();
    assert_eq!(cfg.data_dir, PathBuf::from("/from/file"));
    assert_eq!(cfg.listen.port(), 9001);
    assert_eq!(cfg.skills_dirs, [PathBuf::from("/s")]);
}

#[test]
fn unknown_config_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "data_dir = \"/x\"\n").unwrap();
    let err = options(&["--config", path.to_str().unwrap()])
        .merge_file()
        .unwrap_err();
    assert!(err.0.contains("bad config file"), "{err}");
}
