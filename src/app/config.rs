//! Configuration: command-line flags, each also a `CYBEROS_<FLAG>` environment variable,
//! and an optional TOML file (`--config`) with the same keys in kebab-case. Precedence:
//! flag, then environment, then file, then default.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Deserialize;

use crate::app::{LongRunning, ToolErrors};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "cyberos-mcp-bridge",
    version,
    about = "CyberOS as MCP 2025-11-25 tools over stdio or Streamable HTTP"
)]
pub struct Cli {
    /// Global options, valid before or after a subcommand.
    #[command(flatten)]
    pub options: Options,
    /// What to do; serving is the default.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the tools/list result as JSON.
    Tools,
    /// Check configuration, store and upstreams; exit 0 when all are fine, 1 otherwise.
    Check,
    /// Run the bundled reference CUO runner on stdin/stdout (the default --cuo-command).
    CuoRunner {
        /// Load persona JSON files from this directory instead of the bundled catalogue.
        #[arg(long, value_name = "DIR")]
        catalog: Option<PathBuf>,
        /// Simulated work time per workflow step, in milliseconds (demos and load tests).
        #[arg(long, value_name = "MS", default_value_t = 0)]
        pace_ms: u64,
    },
    /// Apply the Postgres task-store migrations to --database-url (an owner/admin URL).
    Migrate,
    /// Print a token signed with the dev key of --data-dir (created if missing).
    DevToken {
        /// Tenant UUID.
        #[arg(long)]
        tenant: String,
        /// Space-separated scopes (default: every scope).
        #[arg(long)]
        scopes: Option<String>,
        /// Lifetime, e.g. 30s, 15m, 1h, 30d (default 1h; at most 5m with --confirm).
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Subject (actor).
        #[arg(long, default_value = "dev-user")]
        sub: String,
        /// Mint a confirmation token for this tool instead of a bearer token.
        #[arg(long, value_name = "TOOL", requires = "args")]
        confirm: Option<String>,
        /// The exact arguments (JSON object) the confirmation token is for.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
    },
    /// Call one tool in-process and print its result (or error envelope) as JSON.
    Call {
        /// Tool name, e.g. cyberos.skill.list_skills.
        tool: String,
        /// Arguments as a JSON object (default {}).
        args: Option<String>,
    },
}

/// Transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One JSON-RPC message per line on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Every option, as given. `None` means "not set here".
#[derive(Debug, Default, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Options {
    /// TOML file with any of these options (kebab-case keys).
    #[arg(long, global = true, env = "CYBEROS_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// stdio (default) or http.
    #[arg(long, global = true, env = "CYBEROS_TRANSPORT", value_enum)]
    pub transport: Option<Transport>,
    /// HTTP listen address (default 127.0.0.1:8082).
    #[arg(long, global = true, env = "CYBEROS_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Canonical resource URI (default http://<listen>/mcp).
    #[arg(long, global = true, env = "CYBEROS_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// Allowed browser origin (repeatable; exact or https://*.example.com).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_CORS_ORIGIN",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub cors_origin: Vec<String>,
    /// Data directory (default $XDG_DATA_HOME/cyberos-mcp-bridge).
    #[arg(long, global = true, env = "CYBEROS_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Task store: sqlite://… or postgres://… (default: SQLite in the data dir).
    #[arg(long, global = true, env = "CYBEROS_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,
    /// CUO command, split like a shell would and run without one (default: the bundled runner).
    #[arg(long, global = true, env = "CYBEROS_CUO_COMMAND", value_name = "CMD")]
    pub cuo_command: Option<String>,
    /// Timeout of short CUO calls in seconds (default 10).
    #[arg(long, global = true, env = "CYBEROS_CUO_TIMEOUT", value_name = "SECS")]
    pub cuo_timeout: Option<u64>,
    /// Extra environment variable passed to CUO children (repeatable).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_CUO_ENV",
        value_name = "NAME",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub cuo_env: Vec<String>,
    /// Memory service base URL (default: the embedded audit log).
    #[arg(long, global = true, env = "CYBEROS_MEMORY_URL", value_name = "URL")]
    pub memory_url: Option<String>,
    /// File holding the bridge's bearer token for the memory service.
    #[arg(
        long,
        global = true,
        env = "CYBEROS_MEMORY_TOKEN_FILE",
        value_name = "FILE"
    )]
    pub memory_token_file: Option<PathBuf>,
    /// SKILL folders directory (repeatable; default ./skills if present).
    #[arg(long, global = true, env = "CYBEROS_SKILLS_DIR", value_name = "DIR")]
    #[serde(default)]
    pub skills_dir: Vec<PathBuf>,
    /// File holding the caller's token on stdio, re-read on every request.
    #[arg(long, global = true, env = "CYBEROS_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// JWKS URL of the identity provider.
    #[arg(long, global = true, env = "CYBEROS_JWKS_URL", value_name = "URL")]
    pub jwks_url: Option<String>,
    /// PEM public key that signs tokens.
    #[arg(
        long,
        global = true,
        env = "CYBEROS_JWT_PUBLIC_KEY",
        value_name = "FILE"
    )]
    pub jwt_public_key: Option<PathBuf>,
    /// Required token issuer.
    #[arg(long, global = true, env = "CYBEROS_JWT_ISSUER", value_name = "S")]
    pub jwt_issuer: Option<String>,
    /// Required token audience (default cyberos-mcp-bridge).
    #[arg(long, global = true, env = "CYBEROS_JWT_AUDIENCE", value_name = "S")]
    pub jwt_audience: Option<String>,
    /// Authorization server for the RFC 9728 document (default: the issuer).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_AUTHORIZATION_SERVER",
        value_name = "URL"
    )]
    pub authorization_server: Option<String>,
    /// Local development identity.
    #[arg(long, global = true, env = "CYBEROS_DEV")]
    #[serde(default)]
    pub dev: bool,
    /// OTLP gRPC endpoint for spans.
    #[arg(long, global = true, env = "CYBEROS_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// How fixable tool errors are sent: jsonrpc (default) or result.
    #[arg(long, global = true, env = "CYBEROS_TOOL_ERRORS", value_enum)]
    pub tool_errors: Option<ToolErrors>,
    /// Plain calls of long-running tools: handle (default) or wait.
    #[arg(long, global = true, env = "CYBEROS_LONG_RUNNING", value_enum)]
    pub long_running: Option<LongRunning>,
    /// Log format on stderr: text (default) or json.
    #[arg(long, global = true, env = "CYBEROS_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// A configuration problem, reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Transport.
    pub transport: Transport,
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// `--public-url`: the canonical resource URI (default `http://<bound address>/mcp`).
    pub public_url: Option<String>,
    /// `--cors-origin` patterns (exact origins or `https://*.example.com`).
    pub cors_origins: Vec<String>,
    /// `--authorization-server` for the RFC 9728 document (default: the issuer).
    pub authorization_server: Option<String>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Task store URL, if not the default SQLite file.
    pub database_url: Option<String>,
    /// CUO program and arguments.
    pub cuo_command: Vec<String>,
    /// Extra variables for CUO children.
    pub cuo_env: Vec<String>,
    /// Timeout of short CUO calls.
    pub cuo_timeout: std::time::Duration,
    /// Memory service URL, if not embedded.
    pub memory_url: Option<String>,
    /// Memory bearer token file.
    pub memory_token_file: Option<PathBuf>,
    /// Skills directories.
    pub skills_dirs: Vec<PathBuf>,
    /// Error carrier.
    pub tool_errors: ToolErrors,
    /// Long-running plain-call behaviour.
    pub long_running: LongRunning,
    /// Log format.
    pub log_format: LogFormat,
    /// OTLP/gRPC endpoint for spans (`--otlp-endpoint`, else the standard OTel variables).
    pub otlp_endpoint: Option<String>,
    /// Identity settings.
    pub identity: IdentityConfig,
}

/// How tokens are obtained and verified.
#[derive(Debug, Clone)]
pub struct IdentityConfig {
    /// `--dev`: a local key, a local tenant, every scope.
    pub dev: bool,
    /// Token file for stdio.
    pub token_file: Option<PathBuf>,
    /// JWKS URL.
    pub jwks_url: Option<String>,
    /// PEM public key file.
    pub jwt_public_key: Option<PathBuf>,
    /// Accepted issuer of external tokens.
    pub jwt_issuer: Option<String>,
    /// Required audience.
    pub audience: String,
}

impl Options {
    /// Fills every option not set on the command line or in the environment from the
    /// `--config` file.
    ///
    /// # Errors
    /// When the file cannot be read or has unknown keys or bad values.
    pub fn merge_file(mut self) -> Result<Options, ConfigError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        let file: Options = toml::from_str(&text)
            .map_err(|e| ConfigError(format!("bad config file {}: {e}", path.display())))?;
        macro_rules! fill {
            ($($field:ident),*) => { $( if self.$field.is_none() { self.$field = file.$field; } )* };
        }
        fill!(
            transport,
            listen,
            public_url,
            data_dir,
            database_url,
            cuo_command,
            cuo_timeout,
            memory_url,
            memory_token_file,
            token_file,
            jwks_url,
            jwt_public_key,
            jwt_issuer,
            jwt_audience,
            authorization_server,
            otlp_endpoint,
            tool_errors,
            long_running,
            log_format
        );
        macro_rules! fill_vec {
            ($($field:ident),*) => { $( if self.$field.is_empty() { self.$field = file.$field; } )* };
        }
        fill_vec!(cors_origin, cuo_env, skills_dir);
        self.dev |= file.dev;
        Ok(self)
    }

    /// Applies defaults and checks values.
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let listen = self.listen.as_deref().unwrap_or("127.0.0.1:8082");
        let listen: SocketAddr = listen.parse().map_err(|_| {
            ConfigError(format!(
                "--listen {listen:?} is not an address like 127.0.0.1:8082"
            ))
        })?;
        if let Some(url) = &self.database_url
            && !(url.starts_with("sqlite:")
                || url.starts_with("postgres://")
                || url.starts_with("postgresql://"))
        {
            return Err(ConfigError(
                "--database-url must start with sqlite:, postgres:// or postgresql://".into(),
            ));
        }
        if let Some(url) = &self.memory_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ConfigError(
                "--memory-url must be an http:// or https:// URL".into(),
            ));
        }
        if self.dev && self.transport == Some(Transport::Http) && !listen.ip().is_loopback() {
            return Err(ConfigError(format!(
                "--dev refuses a non-loopback --listen ({listen}); bind 127.0.0.1"
            )));
        }
        if (self.jwks_url.is_some() || self.jwt_public_key.is_some()) && self.jwt_issuer.is_none() {
            return Err(ConfigError(
                "--jwks-url and --jwt-public-key need --jwt-issuer (the accepted iss)".into(),
            ));
        }
        if self.jwks_url.is_some() && self.jwt_public_key.is_some() {
            return Err(ConfigError(
                "use either --jwks-url or --jwt-public-key, not both".into(),
            ));
        }
        let cuo_command = match &self.cuo_command {
            Some(cmd) => {
                let words = shell_words::split(cmd)
                    .map_err(|e| ConfigError(format!("--cuo-command: {e}")))?;
                if words.is_empty() {
                    return Err(ConfigError("--cuo-command is empty".into()));
                }
                words
            }
            None => default_cuo_command()?,
        };
        let skills_dirs = if self.skills_dir.is_empty() {
            let local = PathBuf::from("skills");
            if local.is_dir() {
                vec![local]
            } else {
                Vec::new()
            }
        } else {
            self.skills_dir
        };
        Ok(Config {
            transport: self.transport.unwrap_or(Transport::Stdio),
            listen,
            public_url: self.public_url,
            cors_origins: self.cors_origin,
            authorization_server: self.authorization_server,
            data_dir: match self.data_dir {
                Some(d) => d,
                None => default_data_dir()?,
            },
            database_url: self.database_url,
            cuo_command,
            cuo_env: self.cuo_env,
            cuo_timeout: std::time::Duration::from_secs(match self.cuo_timeout {
                Some(0) => {
                    return Err(ConfigError(
                        "--cuo-timeout must be at least 1 second".into(),
                    ));
                }
                Some(s) => s,
                None => 10,
            }),
            memory_url: self.memory_url,
            memory_token_file: self.memory_token_file,
            skills_dirs,
            tool_errors: self.tool_errors.unwrap_or(ToolErrors::Jsonrpc),
            long_running: self.long_running.unwrap_or(LongRunning::Handle),
            log_format: self.log_format.unwrap_or(LogFormat::Text),
            otlp_endpoint: otlp_endpoint(self.otlp_endpoint)?,
            identity: IdentityConfig {
                dev: self.dev,
                token_file: self.token_file,
                jwks_url: self.jwks_url,
                jwt_public_key: self.jwt_public_key,
                jwt_issuer: self.jwt_issuer,
                audience: self
                    .jwt_audience
                    .unwrap_or_else(|| "cyberos-mcp-bridge".into()),
            },
        })
    }
}

/// The span collector: the flag (or `CYBEROS_OTLP_ENDPOINT`, or the config file), else the
/// OTel SDK's standard variables, traces-specific first. An empty value means none.
fn otlp_endpoint(flag: Option<String>) -> Result<Option<String>, ConfigError> {
    otlp_endpoint_from(flag, |name| std::env::var(name).ok())
}

/// [`otlp_endpoint`] over an environment. The standard variables are read as the OTel SDKs
/// read them, but only when the flag is absent (the flag always means OTLP/gRPC):
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn export off, and a
/// `…_PROTOCOL` other than `grpc` is refused rather than sent to the wrong port in silence.
fn otlp_endpoint_from(
    flag: Option<String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    let var = |name| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let url = match flag {
        Some(url) => Some(url),
        None => {
            let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
                || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
            let url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
                .filter(|_| !disabled);
            let protocol = [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]
            .into_iter()
            .find_map(|name| Some((name, var(name)?)));
            match protocol {
                Some((name, p)) if url.is_some() && p != "grpc" => {
                    return Err(ConfigError(format!(
                        "{name}={p}: spans are exported over OTLP/gRPC only; set it to grpc and point the endpoint at the collector's gRPC port (usually 4317), or pass --otlp-endpoint"
                    )));
                }
                _ => url,
            }
        }
    };
    let url = url.filter(|u| !u.trim().is_empty());
    match url {
        Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => Err(ConfigError(
            "--otlp-endpoint must be an http:// or https:// URL (OTLP over gRPC, e.g. http://localhost:4317)".into(),
        )),
        other => Ok(other),
    }
}

/// The bundled reference runner: this same binary's `cuo-runner` subcommand.
fn default_cuo_command() -> Result<Vec<String>, ConfigError> {
    let exe = std::env::current_exe()
        .map_err(|e| ConfigError(format!("cannot locate this executable: {e}")))?;
    Ok(vec![exe.display().to_string(), "cuo-runner".into()])
}

/// `$XDG_DATA_HOME/cyberos-mcp-bridge`, else `~/.local/share/cyberos-mcp-bridge`.
fn default_data_dir() -> Result<PathBuf, ConfigError> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/share"),
            None => {
                return Err(ConfigError(
                    "set --data-dir (neither XDG_DATA_HOME nor HOME is set)".into(),
                ));
            }
        },
    };
    Ok(base.join("cyberos-mcp-bridge"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let cfg = cli.options.resolve().unwrap();
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

    #[test]
    fn the_standard_otel_variables_choose_the_collector_as_the_sdks_do() {
        let run = |flag: Option<&str>, vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            otlp_endpoint_from(flag.map(str::to_owned), |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })
        };
        let grpc = "http://collector:4317";
        assert_eq!(run(None, &[]).unwrap(), None);
        assert_eq!(
            run(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", grpc)])
                .unwrap()
                .as_deref(),
            Some(grpc)
        );
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", grpc),
        ];
        assert_eq!(run(None, &both).unwrap().as_deref(), Some(grpc));
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", grpc), off];
            assert_eq!(run(None, &vars).unwrap(), None, "{off:?}");
            // The flag is explicit and wins.
            assert_eq!(run(Some(grpc), &vars).unwrap().as_deref(), Some(grpc));
        }
        let http = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        let err = run(None, &http).unwrap_err();
        assert!(
            err.0
                .starts_with("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
            "{err}"
        );
        // The traces-specific protocol wins; a protocol without an endpoint is no error.
        let traces_grpc = [
            http[0],
            http[1],
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ];
        assert!(run(None, &traces_grpc).unwrap().is_some());
        assert_eq!(run(None, &[http[1]]).unwrap(), None);
        assert!(run(Some(grpc), &http).unwrap().is_some());
        assert!(run(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]).is_err());
    }
}
