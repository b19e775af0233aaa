//! The command line and the TOML file: every flag is also a `CYBEROS_<FLAG>` variable,
//! and `--config` fills what neither set.

use std::path::PathBuf;

use clap::{Args, Parser, ValueEnum};
use serde::Deserialize;

pub use super::commands::Command;
use super::error::ConfigError;
use super::otel::OtlpProtocol;
use super::sources::Source;
use crate::app::{LongRunning, ToolErrors, ToolNames};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "cyberos-mcp-bridge",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("CYBEROS_COMMIT"), ")"),
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

/// Transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One JSON-RPC message per line on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, serde::Serialize)]
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
    /// Canonical resource URI (default http://ADDR/mcp, ADDR the bound --listen).
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
    /// Requests to the memory service in flight at once; past it a call is refused with
    /// Retry-After (default 256).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_MEMORY_MAX_INFLIGHT",
        value_name = "N"
    )]
    pub memory_max_inflight: Option<usize>,
    /// Hex key (32+ bytes) that signs HTTP session ids; every instance behind one balancer
    /// needs the same (default: one made in the data dir).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_SESSION_KEY_FILE",
        value_name = "FILE"
    )]
    pub session_key_file: Option<PathBuf>,
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
    /// OpenID Connect client id of the approval page's sign-in, at the `--jwt-issuer`
    /// (whose discovery document must be served at its `/.well-known/openid-configuration`).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_APPROVAL_CLIENT_ID",
        value_name = "ID"
    )]
    pub approval_client_id: Option<String>,
    /// File holding that client's secret (none: a public client, PKCE only).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_APPROVAL_CLIENT_SECRET_FILE",
        value_name = "PATH"
    )]
    pub approval_client_secret_file: Option<PathBuf>,
    /// Local development identity (`CYBEROS_DEV` takes 1/0, true/false, yes/no, on/off).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_DEV",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    #[serde(default)]
    pub dev: bool,
    /// OTLP collector for spans and metrics.
    #[arg(long, global = true, env = "CYBEROS_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// OTLP transport: grpc (default) or http/protobuf.
    #[arg(long, global = true, env = "CYBEROS_OTLP_PROTOCOL", value_enum)]
    pub otlp_protocol: Option<OtlpProtocol>,
    /// Serve Prometheus metrics at http://ADDR/metrics (off by default).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_METRICS_LISTEN",
        value_name = "ADDR"
    )]
    pub metrics_listen: Option<String>,
    /// Label metrics with the tenant: a series per tenant, so mind the cardinality.
    #[arg(
        long,
        global = true,
        env = "CYBEROS_METRICS_TENANT_LABEL",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    #[serde(default)]
    pub metrics_tenant_label: bool,
    /// How fixable tool errors are sent: jsonrpc (default) or result.
    #[arg(long, global = true, env = "CYBEROS_TOOL_ERRORS", value_enum)]
    pub tool_errors: Option<ToolErrors>,
    /// Plain calls of long-running tools: auto (default: wait for hosts known not to poll
    /// tasks, a task handle for the others), handle, or wait.
    #[arg(long, global = true, env = "CYBEROS_LONG_RUNNING", value_enum)]
    pub long_running: Option<LongRunning>,
    /// Tool names in tools/list: dotted (default, `cyberos.cuo.route`) or underscore
    /// (`cyberos_cuo_route`, for hosts that accept only `^[a-zA-Z0-9_-]{1,64}$`). Calls
    /// may use either spelling.
    #[arg(long, global = true, env = "CYBEROS_TOOL_NAMES", value_enum)]
    pub tool_names: Option<ToolNames>,
    /// Another client whose plain calls wait under --long-running auto: its clientInfo.name
    /// (stdio) or User-Agent product (HTTP) (repeatable; the built-in list names Claude
    /// Code, Codex, Claude Desktop, Cursor, VS Code and Windsurf).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_WAIT_CLIENT",
        value_name = "NAME",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub wait_client: Vec<String>,
    /// Cap on one tenant's tasks running at once on this bridge (default 32).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_MAX_TASKS_PER_TENANT",
        value_name = "N"
    )]
    pub max_tasks_per_tenant: Option<usize>,
    /// Cap on the CUO children running tasks at once on this bridge, all tenants together
    /// (default 64).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_MAX_CUO_CHILDREN",
        value_name = "N"
    )]
    pub max_cuo_children: Option<usize>,
    /// Cap on one tenant's tasks kept in the store, any status (default 1000).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_MAX_STORED_TASKS_PER_TENANT",
        value_name = "N"
    )]
    pub max_stored_tasks_per_tenant: Option<u32>,
    /// HTTP: open connections at once; past it a new one gets 503 and is closed (default:
    /// what the file-descriptor limit allows, less a reserve for the store and children).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_MAX_CONNECTIONS",
        value_name = "N"
    )]
    pub http_max_connections: Option<usize>,
    /// HTTP: requests in flight at once, all clients (default 1024).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_MAX_INFLIGHT",
        value_name = "N"
    )]
    pub http_max_inflight: Option<usize>,
    /// HTTP: requests waiting for a task at once, all clients (default 1024).
    #[arg(long, global = true, env = "CYBEROS_HTTP_MAX_WAITS", value_name = "N")]
    pub http_max_waits: Option<usize>,
    /// HTTP: requests waiting for a task at once, per tenant (default 16).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_MAX_WAITS_PER_TENANT",
        value_name = "N"
    )]
    pub http_max_waits_per_tenant: Option<usize>,
    /// HTTP: request body bytes buffered at once, in MiB (default 64, at least 4).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_BODY_BUDGET_MIB",
        value_name = "MIB"
    )]
    pub http_body_budget_mib: Option<usize>,
    /// HTTP: per-tenant rate of tools/call, tasks/*, initialize, DELETE and client
    /// responses, RATE/BURST per second or off
    /// (default 50/100).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_CALL_RATE",
        value_name = "RATE/BURST"
    )]
    pub http_call_rate: Option<String>,
    /// HTTP: deadline of a plain request in milliseconds (default 60000).
    #[arg(
        long,
        global = true,
        env = "CYBEROS_HTTP_REQUEST_TIMEOUT_MS",
        value_name = "MS"
    )]
    pub http_request_timeout_ms: Option<u64>,
    /// Log format on stderr: text (default) or json.
    #[arg(long, global = true, env = "CYBEROS_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Where each value came from (set by `main` from clap's matches, and by `merge_file`).
    #[arg(skip)]
    #[serde(skip)]
    pub sources: super::Sources,
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
            ($($field:ident),*) => { $( if self.$field.is_none() && file.$field.is_some() {
                self.$field = file.$field;
                self.sources.set(stringify!($field), Source::File);
            } )* };
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
            memory_max_inflight,
            session_key_file,
            token_file,
            jwks_url,
            jwt_public_key,
            jwt_issuer,
            jwt_audience,
            authorization_server,
            approval_client_id,
            approval_client_secret_file,
            otlp_endpoint,
            otlp_protocol,
            metrics_listen,
            tool_errors,
            long_running,
            tool_names,
            max_tasks_per_tenant,
            max_cuo_children,
            max_stored_tasks_per_tenant,
            http_max_connections,
            http_max_inflight,
            http_max_waits,
            http_max_waits_per_tenant,
            http_body_budget_mib,
            http_call_rate,
            http_request_timeout_ms,
            log_format
        );
        macro_rules! fill_vec {
            ($($field:ident),*) => { $( if self.$field.is_empty() && !file.$field.is_empty() {
                self.$field = file.$field;
                self.sources.set(stringify!($field), Source::File);
            } )* };
        }
        fill_vec!(cors_origin, cuo_env, skills_dir, wait_client);
        if !self.dev && file.dev {
            self.dev = true;
            self.sources.set("dev", Source::File);
        }
        if !self.metrics_tenant_label && file.metrics_tenant_label {
            self.metrics_tenant_label = true;
            self.sources.set("metrics_tenant_label", Source::File);
        }
        Ok(self)
    }
}
