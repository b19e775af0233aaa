//! The resolved options `check` prints, each with where it came from, secrets masked.

use serde::Serialize;
use serde_json::{Value, json};

use super::mask::mask_url;
use crate::app::config::{Config, Source};
use crate::app::edge::http::Limits;
use crate::domain::ToolNaming;

/// One resolved option.
#[derive(Debug, Serialize)]
pub(super) struct Setting {
    pub(super) key: &'static str,
    pub(super) value: Value,
    pub(super) source: Source,
}

/// Every option as resolved, secrets masked: URLs (`mask::mask_url`), `--cuo-env` values,
/// `--cuo-command`'s arguments (only the program is shown).
pub(super) fn resolved(c: &Config) -> Vec<Setting> {
    let id = &c.identity;
    let path = |p: &Option<std::path::PathBuf>| json!(p.as_ref().map(|p| p.display().to_string()));
    let mut out = Vec::new();
    let mut put = |key: &'static str, value: Value| {
        out.push(Setting {
            key,
            value,
            source: c.sources.of(key),
        });
    };
    put("transport", json!(c.transport));
    put("listen", json!(c.listen.to_string()));
    put("public-url", json!(c.public_url));
    put("cors-origin", json!(c.cors_origins));
    put("authorization-server", json!(c.authorization_server));
    put("data-dir", json!(c.data_dir.display().to_string()));
    put(
        "database-url",
        json!(c.database_url.as_deref().map(mask_url)),
    );
    let program = c
        .cuo_command
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    let cuo_command = match c.cuo_command.len() {
        0 | 1 => program.to_owned(),
        2 => format!("{program} (1 argument not shown)"),
        n => format!("{program} ({} arguments not shown)", n - 1),
    };
    put("cuo-command", json!(cuo_command));
    let env_names: Vec<String> = c
        .cuo_env
        .iter()
        .map(|kv| format!("{}=…", kv.split('=').next().unwrap_or_default()))
        .collect();
    put("cuo-env", json!(env_names));
    put("cuo-timeout", json!(c.cuo_timeout.as_secs()));
    put("memory-url", json!(c.memory_url.as_deref().map(mask_url)));
    put("memory-token-file", path(&c.memory_token_file));
    put("memory-max-inflight", json!(c.memory_max_inflight));
    put("session-key-file", path(&c.session_key_file));
    let skills: Vec<String> = c
        .skills_dirs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    put("skills-dir", json!(skills));
    put("token-file", path(&id.token_file));
    put("jwks-url", json!(id.jwks_url.as_deref().map(mask_url)));
    put("jwt-public-key", path(&id.jwt_public_key));
    put("jwt-issuer", json!(id.jwt_issuer));
    put("jwt-audience", json!(id.audience));
    put("dev", json!(id.dev));
    // Spans' collector; metrics go to the same unless the OTEL_*_METRICS_* variables differ.
    let target = |t: &Option<crate::app::config::OtlpTarget>| {
        json!(t.as_ref().map(|t| mask_url(&t.endpoint)))
    };
    let protocol = |t: &crate::app::config::OtlpTarget| match t.protocol {
        crate::app::config::OtlpProtocol::Grpc => "grpc",
        crate::app::config::OtlpProtocol::HttpProtobuf => "http/protobuf",
    };
    put("otlp-endpoint", target(&c.otlp_traces));
    put("otlp-protocol", json!(c.otlp_traces.as_ref().map(protocol)));
    put(
        "metrics-listen",
        json!(c.metrics_listen.map(|a| a.to_string())),
    );
    put("metrics-tenant-label", json!(c.metrics_tenant_label));
    put("tool-errors", json!(c.tool_errors));
    put("long-running", json!(c.long_running));
    put("wait-client", json!(c.wait_clients));
    let names = match c.tool_names {
        ToolNaming::Dotted => "dotted",
        ToolNaming::Underscore => "underscore",
    };
    put("tool-names", json!(names));
    put("max-tasks-per-tenant", json!(c.max_tasks_per_tenant));
    put("max-cuo-children", json!(c.max_cuo_children));
    put(
        "max-stored-tasks-per-tenant",
        json!(c.max_stored_tasks_per_tenant),
    );
    // The limits as they apply (a bad value fails the `http` check; shown as given here).
    let given = &c.http_limits;
    match Limits::from_options(given) {
        Ok(l) => {
            put("http-max-connections", json!(l.max_connections));
            put("http-max-inflight", json!(l.max_inflight));
            put("http-max-waits", json!(l.max_waits));
            put("http-max-waits-per-tenant", json!(l.max_waits_per_tenant));
            put("http-body-budget-mib", json!(l.body_budget / (1024 * 1024)));
            let rate = l
                .call_rate
                .map_or("off".into(), |r| format!("{}/{}", r.per_second, r.burst));
            put("http-call-rate", json!(rate));
            put(
                "http-request-timeout-ms",
                json!(l.request_timeout.as_millis() as u64),
            );
        }
        Err(_) => {
            put("http-max-connections", json!(given.max_connections));
            put("http-max-inflight", json!(given.max_inflight));
            put("http-max-waits", json!(given.max_waits));
            put(
                "http-max-waits-per-tenant",
                json!(given.max_waits_per_tenant),
            );
            put("http-body-budget-mib", json!(given.body_budget_mib));
            put("http-call-rate", json!(given.call_rate));
            put("http-request-timeout-ms", json!(given.request_timeout_ms));
        }
    }
    put("log-format", json!(c.log_format));
    out
}
