//! Resolution: options (flags, environment, file) checked and turned into a [`Config`]
//! with every default applied.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::error::ConfigError;
use super::options::{LogFormat, Options, Transport};
use super::otel::{OtlpTarget, otlp};
use crate::app::service::tasks::{DEFAULT_MAX_CUO_CHILDREN, DEFAULT_MAX_TASKS_PER_TENANT};
use crate::app::{LongRunning, ToolErrors};
use crate::domain::task::DEFAULT_MAX_STORED_PER_TENANT;

/// The HTTP load limits as given (`--http-*`); `http::limits::Limits` checks their ranges.
#[derive(Debug, Clone, Default)]
pub struct HttpLimitOptions {
    pub max_connections: Option<usize>,
    pub max_inflight: Option<usize>,
    pub max_waits: Option<usize>,
    pub max_waits_per_tenant: Option<usize>,
    pub body_budget_mib: Option<usize>,
    pub call_rate: Option<String>,
    pub request_timeout_ms: Option<u64>,
}

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
    /// The approval page's OpenID Connect client id, and its secret's file.
    pub approval_client: Option<(String, Option<PathBuf>)>,
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
    /// `--memory-max-inflight`: requests to the memory service in flight at once.
    pub memory_max_inflight: usize,
    /// `--session-key-file`: the key of HTTP session ids (default: the data dir's own).
    pub session_key_file: Option<PathBuf>,
    /// Skills directories.
    pub skills_dirs: Vec<PathBuf>,
    /// Error carrier.
    pub tool_errors: ToolErrors,
    /// Long-running plain-call behaviour.
    pub long_running: LongRunning,
    /// More clientInfo.names whose plain calls wait under `auto`.
    pub wait_clients: Vec<String>,
    /// The spelling of tool names.
    pub tool_names: crate::domain::ToolNaming,
    /// Cap on one tenant's tasks running at once on this instance.
    pub max_tasks_per_tenant: usize,
    /// Cap on the CUO children running tasks at once on this instance, across tenants.
    pub max_cuo_children: usize,
    /// Cap on one tenant's tasks kept in the store, any status.
    pub max_stored_tasks_per_tenant: u32,
    /// HTTP load limits.
    pub http_limits: HttpLimitOptions,
    /// Log format.
    pub log_format: LogFormat,
    /// OTLP collector for spans (`--otlp-endpoint`, else the standard OTel variables).
    pub otlp_traces: Option<OtlpTarget>,
    /// OTLP collector for metrics (the same flags, else the standard OTel variables).
    pub otlp_metrics: Option<OtlpTarget>,
    /// `--metrics-listen`: where the Prometheus scrape is served.
    pub metrics_listen: Option<SocketAddr>,
    /// `--metrics-tenant-label`: metrics carry the tenant.
    pub metrics_tenant_label: bool,
    /// Identity settings.
    pub identity: IdentityConfig,
    /// Where each option's value came from.
    pub sources: super::Sources,
    /// `--config`, when given.
    pub config_file: Option<PathBuf>,
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

impl Config {
    /// Applies defaults to `options` and checks their values.
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn resolve(options: Options) -> Result<Config, ConfigError> {
        let listen = options.listen.as_deref().unwrap_or("127.0.0.1:8082");
        let listen: SocketAddr = listen.parse().map_err(|_| {
            ConfigError(format!(
                "--listen {listen:?} is not an address like 127.0.0.1:8082"
            ))
        })?;
        let metrics_listen: Option<SocketAddr> = match options.metrics_listen.as_deref() {
            Some(addr) => Some(addr.parse().map_err(|_| {
                ConfigError(format!(
                    "--metrics-listen {addr:?} is not an address like 127.0.0.1:9464"
                ))
            })?),
            None => None,
        };
        let otlp = otlp(options.otlp_endpoint, options.otlp_protocol)?;
        if let Some(url) = &options.database_url
            && !(url.starts_with("sqlite:")
                || url.starts_with("postgres://")
                || url.starts_with("postgresql://"))
        {
            return Err(ConfigError(
                "--database-url must start with sqlite:, postgres:// or postgresql://".into(),
            ));
        }
        if let Some(url) = &options.memory_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ConfigError(
                "--memory-url must be an http:// or https:// URL".into(),
            ));
        }
        if let Some(url) = &options.memory_url {
            no_credential_in_clear(url, options.memory_token_file.is_some())?;
        }
        if options.dev && options.transport == Some(Transport::Http) && !listen.ip().is_loopback() {
            return Err(ConfigError(format!(
                "--dev refuses a non-loopback --listen ({listen}); bind 127.0.0.1"
            )));
        }
        if let Some(metrics) = metrics_listen
            && options.dev
            && !metrics.ip().is_loopback()
        {
            return Err(ConfigError(format!(
                "--dev refuses a non-loopback --metrics-listen ({metrics}); bind 127.0.0.1"
            )));
        }
        if (options.jwks_url.is_some() || options.jwt_public_key.is_some())
            && options.jwt_issuer.is_none()
        {
            return Err(ConfigError(
                "--jwks-url and --jwt-public-key need --jwt-issuer (the accepted iss)".into(),
            ));
        }
        if options.jwks_url.is_some() && options.jwt_public_key.is_some() {
            return Err(ConfigError(
                "use either --jwks-url or --jwt-public-key, not both".into(),
            ));
        }
        let cuo_command = match &options.cuo_command {
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
        let skills_dirs = if options.skills_dir.is_empty() {
            let local = PathBuf::from("skills");
            if local.is_dir() {
                vec![local]
            } else {
                Vec::new()
            }
        } else {
            options.skills_dir
        };
        Ok(Config {
            transport: options.transport.unwrap_or(Transport::Stdio),
            listen,
            public_url: options.public_url,
            cors_origins: options.cors_origin,
            authorization_server: options.authorization_server,
            approval_client: options
                .approval_client_id
                .map(|id| (id, options.approval_client_secret_file)),
            data_dir: match options.data_dir {
                Some(d) => d,
                None => default_data_dir()?,
            },
            database_url: options.database_url,
            cuo_command,
            cuo_env: options.cuo_env,
            cuo_timeout: std::time::Duration::from_secs(match options.cuo_timeout {
                Some(0) => {
                    return Err(ConfigError(
                        "--cuo-timeout must be at least 1 second".into(),
                    ));
                }
                Some(s) => s,
                None => 10,
            }),
            memory_url: options.memory_url,
            memory_token_file: options.memory_token_file,
            memory_max_inflight: at_least_one(
                options.memory_max_inflight,
                crate::support::memory_service::DEFAULT_MAX_INFLIGHT,
                "--memory-max-inflight",
            )?,
            session_key_file: options.session_key_file,
            skills_dirs,
            tool_errors: options.tool_errors.unwrap_or(ToolErrors::Jsonrpc),
            long_running: options.long_running.unwrap_or(LongRunning::Auto),
            wait_clients: options.wait_client,
            tool_names: options.tool_names.map(Into::into).unwrap_or_default(),
            max_tasks_per_tenant: at_least_one(
                options.max_tasks_per_tenant,
                DEFAULT_MAX_TASKS_PER_TENANT,
                "--max-tasks-per-tenant",
            )?,
            max_cuo_children: at_least_one(
                options.max_cuo_children,
                DEFAULT_MAX_CUO_CHILDREN,
                "--max-cuo-children",
            )?,
            max_stored_tasks_per_tenant: at_least_one(
                options.max_stored_tasks_per_tenant,
                DEFAULT_MAX_STORED_PER_TENANT,
                "--max-stored-tasks-per-tenant",
            )?,
            http_limits: HttpLimitOptions {
                max_connections: options.http_max_connections,
                max_inflight: options.http_max_inflight,
                max_waits: options.http_max_waits,
                max_waits_per_tenant: options.http_max_waits_per_tenant,
                body_budget_mib: options.http_body_budget_mib,
                call_rate: options.http_call_rate,
                request_timeout_ms: options.http_request_timeout_ms,
            },
            log_format: options.log_format.unwrap_or(LogFormat::Text),
            otlp_traces: otlp.traces,
            otlp_metrics: otlp.metrics,
            metrics_listen,
            metrics_tenant_label: options.metrics_tenant_label,
            identity: IdentityConfig {
                dev: options.dev,
                token_file: options.token_file,
                jwks_url: options.jwks_url,
                jwt_public_key: options.jwt_public_key,
                jwt_issuer: options.jwt_issuer,
                audience: options
                    .jwt_audience
                    .unwrap_or_else(|| "cyberos-mcp-bridge".into()),
            },
            sources: options.sources,
            config_file: options.config,
        })
    }
}

/// Refuses a memory URL that would carry a credential (the bearer of
/// `--memory-token-file`, or a password in the URL) over plain HTTP off this host: anyone
/// on the path could read it and act as the bridge. `https://` goes anywhere; `http://`
/// only to a loopback host (127.0.0.0/8, ::1, localhost).
fn no_credential_in_clear(url: &str, token: bool) -> Result<(), ConfigError> {
    use std::net::IpAddr;
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| ConfigError(format!("--memory-url is not a URL: {e}")))?;
    if parsed.scheme() != "http" || !(token || parsed.password().is_some()) {
        return Ok(());
    }
    // The parser writes IPv4 hosts in dotted form and IPv6 ones in brackets.
    let host = parsed.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare.eq_ignore_ascii_case("localhost")
        || match bare.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => ip.is_loopback(),
            Ok(IpAddr::V6(ip)) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            Err(_) => false,
        };
    if loopback {
        return Ok(());
    }
    let credential = if token {
        "the memory token (--memory-token-file)"
    } else {
        "the URL's password"
    };
    Err(ConfigError(format!(
        "--memory-url is plain http:// to {host}, which is not this host: {credential} would \
         cross the network in clear; use https://, or http:// only to 127.0.0.1, ::1 or \
         localhost (a sidecar)"
    )))
}

/// A cap: `default` when unset, refused when 0.
fn at_least_one<N: From<u8> + PartialEq>(
    value: Option<N>,
    default: N,
    flag: &str,
) -> Result<N, ConfigError> {
    match value {
        Some(n) if n == N::from(0) => Err(ConfigError(format!("{flag} must be at least 1"))),
        Some(n) => Ok(n),
        None => Ok(default),
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
mod tests;
