//! `check`, the doctor: the resolved configuration with where each value came from, then
//! one line per part the bridge needs (HTTP options and the listen address, the keys that
//! verify tokens, the task store, CUO, memory, skills), as text or one JSON object. The
//! CLI prints it (the only module that writes to stdout).
//!
//! `check` is read-only: it creates no data dir, store file or key (it says which a start
//! would create) and applies no migration, so running it as another user (root) on a
//! service's data dir leaves nothing the service cannot open. Every secret is masked
//! (`mask`).

mod mask;
mod settings;

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::config::{Config, Source, Transport};
use crate::app::edge::http::{HttpSettings, Limits};
use crate::app::wiring::{self, Probe};
use mask::Redactor;
use settings::{Setting, resolved};

/// One checked part.
#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

/// What `check` found: the resolved settings and one line per part.
pub struct Report {
    settings: Vec<Setting>,
    checks: Vec<Check>,
}

/// Runs every check.
pub async fn check(config: &Config) -> Report {
    let mut checks = vec![Check {
        name: "config",
        ok: true,
        detail: match &config.config_file {
            Some(path) => format!("resolved (file {})", path.display()),
            None => "resolved (flags, environment, defaults)".into(),
        },
    }];
    checks.push(http(config).await);
    checks.extend(identity(config).await);
    checks.extend(upstreams(config).await);
    let redact = Redactor::new(config);
    for c in &mut checks {
        c.detail = redact.text(&c.detail);
    }
    let mut settings = resolved(config);
    for s in &mut settings {
        redact_strings(&mut s.value, &redact);
    }
    Report { settings, checks }
}

fn redact_strings(value: &mut Value, redact: &Redactor) {
    match value {
        Value::String(s) => *s = redact.text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_strings(v, redact)),
        _ => {}
    }
}

impl Report {
    /// Whether every part is fine.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// `{"ok", "config": {key: {value, source}}, "checks": [{name, ok, detail}]}`.
    pub fn json(&self) -> Value {
        let config: serde_json::Map<String, Value> = self
            .settings
            .iter()
            .map(|s| {
                (
                    s.key.to_owned(),
                    json!({"value": s.value, "source": s.source}),
                )
            })
            .collect();
        json!({"ok": self.ok(), "config": config, "checks": self.checks})
    }

    /// The configuration (`key  value  (source)`), then `ok`/`FAIL` lines.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from("configuration:\n");
        let width = self.settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
        for s in &self.settings {
            let source = match s.source {
                Source::Env if s.key == "otlp-endpoint" => "env OTEL_EXPORTER_OTLP_*".into(),
                Source::Env => format!("env CYBEROS_{}", s.key.to_uppercase().replace('-', "_")),
                Source::Flag => format!("flag --{}", s.key),
                Source::File => "file".into(),
                Source::Default => "default".into(),
            };
            let _ = writeln!(out, "  {:width$}  {}  ({source})", s.key, s.value);
        }
        out.push('\n');
        for c in &self.checks {
            let status = if c.ok { "ok  " } else { "FAIL" };
            let _ = writeln!(out, "{status}  {}: {}", c.name, c.detail);
        }
        out
    }
}

/// The HTTP options, and (when serving HTTP) that `--listen` can be bound.
async fn http(config: &Config) -> Check {
    let fail = |detail: String| Check {
        name: "http",
        ok: false,
        detail,
    };
    let mut bound = config.listen;
    let mut note = "not serving HTTP (--transport stdio); the options are valid".to_owned();
    if config.transport == Transport::Http {
        match tokio::net::TcpListener::bind(config.listen).await {
            Ok(listener) => {
                bound = listener.local_addr().unwrap_or(config.listen);
                note = format!("{} can be bound", config.listen);
            }
            Err(e) => return fail(format!("cannot listen on {}: {e}", config.listen)),
        }
    }
    // A key only to check the options with when a start would create the real one.
    let (key, key_note) = match wiring::existing_session_key(config) {
        Ok(Ok(key)) => (key, String::new()),
        Ok(Err(path)) => (
            vec![0; crate::app::keys::session::MIN_KEY_BYTES],
            format!(
                "; the session key {} does not exist, a start creates it",
                path.display()
            ),
        ),
        Err(e) => return fail(e.to_string()),
    };
    let sessions = crate::app::edge::http::SessionKey::new(&key);
    match HttpSettings::from_config(config, bound, sessions) {
        Ok(s) => Check {
            name: "http",
            ok: true,
            detail: format!(
                "{note}; public URL {}; {}{key_note}",
                s.public_url,
                describe_limits(&s.limits)
            ),
        },
        Err(e) => fail(e.to_string()),
    }
}

fn describe_limits(l: &Limits) -> String {
    let rate = match l.call_rate {
        Some(r) => format!("{}/s (burst {}) calls per tenant", r.per_second, r.burst),
        None => "no call rate limit".into(),
    };
    format!(
        "{} connections, {} requests in flight, {} MiB of bodies, {} waits ({} per tenant), {rate}, {} ms request timeout",
        l.max_connections,
        l.max_inflight,
        l.body_budget / (1024 * 1024),
        l.max_waits,
        l.max_waits_per_tenant,
        l.request_timeout.as_millis()
    )
}

/// One line per issuer: where its keys come from, and each key's id and algorithms
/// (a JWKS is fetched now).
async fn identity(config: &Config) -> Vec<Check> {
    let (issuers, missing_dev_key) = match wiring::existing_issuers(config) {
        Ok(found) => found,
        Err(e) => {
            return vec![Check {
                name: "identity",
                ok: false,
                detail: e.to_string(),
            }];
        }
    };
    let mut checks = Vec::new();
    if let Some(path) = missing_dev_key {
        checks.push(Check {
            name: "identity",
            ok: true,
            detail: format!(
                "issuer {} (--dev): the key {} does not exist, a start creates it",
                crate::app::keys::dev::DEV_ISSUER,
                path.display()
            ),
        });
    }
    for issuer in issuers {
        let (ok, keys) = match issuer.describe().await {
            Ok(keys) => (
                true,
                keys.iter()
                    .map(|k| {
                        format!(
                            "kid {} ({})",
                            k.kid.as_deref().unwrap_or("-"),
                            k.algorithms.join(", ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Err(e) => (false, format!("{e:#}")),
        };
        checks.push(Check {
            name: "identity",
            ok,
            detail: format!(
                "issuer {} from {}: {keys}",
                issuer.name(),
                issuer.key_source()
            ),
        });
    }
    checks
}

/// The task store, CUO, memory and skills, each asked to answer (a store that does not
/// exist yet is reported, not created).
async fn upstreams(config: &Config) -> Vec<Check> {
    let ports = match wiring::probes(config).await {
        Ok(ports) => ports,
        Err(e) => {
            return vec![Check {
                name: "task store",
                ok: false,
                detail: e.to_string(),
            }];
        }
    };
    // The operator's own terminal: the underlying cause is shown, unlike in client errors.
    let line = |name: &'static str, result: Result<(), crate::domain::DomainError>| {
        let (ok, detail) = match result {
            Ok(()) => (true, "answers".to_owned()),
            Err(e) => match std::error::Error::source(&e) {
                Some(cause) => (false, format!("{e} ({cause})")),
                None => (false, format!("{e}. {}", e.hint())),
            },
        };
        Check { name, ok, detail }
    };
    let tasks = match &ports.tasks {
        Probe::Open(tasks, note) => with_note(line("task store", tasks.check().await), note),
        Probe::Missing(what) => missing("task store", what),
        Probe::Failed(why) => failed("task store", why),
    };
    let memory = match &ports.memory {
        Probe::Open(memory, note) => with_note(line("memory", memory.check().await), note),
        Probe::Missing(what) => missing("memory", what),
        Probe::Failed(why) => failed("memory", why),
    };
    let mut checks = vec![tasks, line("cuo", ports.cuo.check().await), memory];
    checks.push(if config.skills_dirs.is_empty() {
        Check {
            name: "skills",
            ok: true,
            detail: "no skills directory (pass --skills-dir)".into(),
        }
    } else {
        line("skills", ports.skills.check().await)
    });
    checks
}

fn with_note(mut check: Check, note: &Option<String>) -> Check {
    if let Some(note) = note {
        check.detail = format!("{}; {note}", check.detail);
    }
    check
}

fn missing(name: &'static str, what: &str) -> Check {
    Check {
        name,
        ok: true,
        detail: what.to_owned(),
    }
}

fn failed(name: &'static str, why: &str) -> Check {
    Check {
        name,
        ok: false,
        detail: why.to_owned(),
    }
}
