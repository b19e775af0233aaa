//! Identity: the token verifier and its issuers, the session key, `--dev` tokens.

use std::sync::Arc;

use crate::adapters::jwt::{Issuer, JwtVerifier, VerifyingKey};
use crate::adapters::system_clock::SystemClock;
use crate::app::config::{Config, ConfigError};
use crate::app::keys::dev::{DEV_ISSUER, DevKey};
use crate::app::service::identity::{Identity, LOCAL_SUBJECT, LOCAL_TENANT, StdioToken};
use crate::domain::{Scope, Timestamp};
use crate::ports::{Clock, TokenVerifier};

/// Builds the token verifier, which checks tokens' times against `clock`, and the stdio
/// token source (a `--dev` token is issued at `clock`'s time).
///
/// # Errors
/// When no key source is configured (and no `--dev`), or a key cannot be loaded.
pub fn identity(config: &Config, clock: Arc<dyn Clock>) -> Result<Identity, ConfigError> {
    identity_with(config, clock, None)
}

/// [`identity`], verifying with `verifier` when given instead of the configured keys
/// (which are then not needed); `--dev` still makes the stdio token.
pub(super) fn identity_with(
    config: &Config,
    clock: Arc<dyn Clock>,
    verifier: Option<Arc<dyn TokenVerifier>>,
) -> Result<Identity, ConfigError> {
    let id = &config.identity;
    let (verifier, dev_key) = match verifier {
        Some(verifier) => {
            let dev_key = if id.dev {
                Some(DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?)
            } else {
                None
            };
            (verifier, dev_key)
        }
        None => {
            let (issuers, dev_key) = issuers(config)?;
            let jwt = JwtVerifier::new(issuers, id.audience.clone(), Arc::clone(&clock));
            (Arc::new(jwt) as Arc<dyn TokenVerifier>, dev_key)
        }
    };
    let dev_token = match &dev_key {
        Some(key) => Some(local_dev_token(config, key, clock.now())?),
        None => None,
    };
    let env_token = std::env::var("CYBEROS_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty());
    let stdio = match (&id.token_file, env_token, dev_token) {
        (Some(path), _, _) => StdioToken::File(path.clone()),
        (None, Some(token), _) => StdioToken::Literal(token.trim().to_owned()),
        (None, None, Some(token)) => StdioToken::Literal(token),
        (None, None, None) => StdioToken::None,
    };
    Ok(Identity::new(verifier, stdio))
}

/// The issuers whose tokens verify (the dev key, a PEM key, a JWKS), and the dev key
/// with `--dev`.
///
/// # Errors
/// When no key source is configured or one cannot be read.
pub fn issuers(config: &Config) -> Result<(Vec<Issuer>, Option<DevKey>), ConfigError> {
    let dev_key = if config.identity.dev {
        Some(DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?)
    } else {
        None
    };
    let issuers = issuers_with(config, dev_key.as_ref())?;
    Ok((issuers, dev_key))
}

/// [`issuers`] for `check`, creating nothing: with `--dev` and no dev key yet, the dev
/// issuer is left out and the path a start would create is returned.
///
/// # Errors
/// As [`issuers`], except a missing dev key.
pub fn existing_issuers(
    config: &Config,
) -> Result<(Vec<Issuer>, Option<std::path::PathBuf>), ConfigError> {
    let mut missing = None;
    let dev_key = if config.identity.dev {
        let key = DevKey::load_existing(&config.data_dir).map_err(ConfigError::from)?;
        if key.is_none() {
            missing = Some(DevKey::path(&config.data_dir));
        }
        key
    } else {
        None
    };
    match issuers_with(config, dev_key.as_ref()) {
        Ok(issuers) => Ok((issuers, missing)),
        // `--dev` alone, its key not made yet: the one issuer a start would have.
        Err(_) if missing.is_some() => Ok((Vec::new(), missing)),
        Err(e) => Err(e),
    }
}

/// The issuers of `dev_key` (with `--dev`), a PEM key and a JWKS.
fn issuers_with(config: &Config, dev_key: Option<&DevKey>) -> Result<Vec<Issuer>, ConfigError> {
    let id = &config.identity;
    let mut issuers = Vec::new();
    if let Some(key) = dev_key {
        issuers.push(Issuer::with_keys(
            DEV_ISSUER,
            vec![VerifyingKey::dev(key.decoding_key())],
        ));
    }
    if let (Some(path), Some(iss)) = (&id.jwt_public_key, &id.jwt_issuer) {
        let pem = std::fs::read(path).map_err(|e| {
            ConfigError(format!(
                "cannot read --jwt-public-key {}: {e}",
                path.display()
            ))
        })?;
        let key = VerifyingKey::from_pem(&pem)
            .map_err(|e| ConfigError(format!("--jwt-public-key: {e}")))?;
        issuers.push(Issuer::with_keys(iss.clone(), vec![key]));
    }
    if let (Some(url), Some(iss)) = (&id.jwks_url, &id.jwt_issuer) {
        issuers.push(Issuer::with_jwks(iss.clone(), url).map_err(ConfigError::from)?);
    }
    if issuers.is_empty() {
        return Err(ConfigError(
            "no way to verify tokens: pass --jwks-url or --jwt-public-key (with --jwt-issuer), or --dev for local use"
                .into(),
        ));
    }
    Ok(issuers)
}

/// The key of HTTP session ids for `check`, creating nothing: `Err` with the path a
/// start would create when the data dir's own does not exist yet.
///
/// # Errors
/// The outer error when the key cannot be read or is too short.
pub fn existing_session_key(
    config: &Config,
) -> Result<Result<Vec<u8>, std::path::PathBuf>, ConfigError> {
    let file = config.session_key_file.as_deref();
    match crate::app::keys::session::load_existing(file, &config.data_dir) {
        Ok(Some(key)) => Ok(Ok(key)),
        Ok(None) => Ok(Err(crate::app::keys::session::path(file, &config.data_dir))),
        Err(e) => Err(ConfigError::from(e)),
    }
}

/// The key of HTTP session ids: `--session-key-file`, else the data dir's own.
///
/// # Errors
/// When the key cannot be read or created, or is too short.
pub fn session_key(config: &Config) -> Result<Vec<u8>, ConfigError> {
    crate::app::keys::session::load(config.session_key_file.as_deref(), &config.data_dir)
        .map_err(ConfigError::from)
}

/// Lifetime of the `--dev` token: 30 days.
const DEV_TTL_S: i64 = 30 * 24 * 3600;

/// The `--dev` token, for printing on stderr when serving HTTP.
///
/// # Errors
/// When the dev key cannot be loaded.
pub fn dev_bearer_token(config: &Config) -> Result<String, ConfigError> {
    let key = DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?;
    local_dev_token(config, &key, SystemClock.now())
}

/// The `--dev` token issued `now`: the local tenant with every scope.
fn local_dev_token(config: &Config, key: &DevKey, now: Timestamp) -> Result<String, ConfigError> {
    let audience = &config.identity.audience;
    key.bearer_token(
        now,
        audience,
        LOCAL_TENANT,
        &all_scopes(),
        LOCAL_SUBJECT,
        DEV_TTL_S,
    )
    .map_err(ConfigError::from)
}

fn all_scopes() -> String {
    Scope::ALL
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What `dev-token` was asked for.
#[derive(Debug, Clone)]
pub struct DevTokenRequest {
    /// Tenant UUID.
    pub tenant: String,
    /// Scopes, space-separated (default: all).
    pub scopes: Option<String>,
    /// Lifetime, e.g. `1h`.
    pub ttl: String,
    /// Subject.
    pub sub: String,
    /// Tool to confirm (confirmation token).
    pub confirm: Option<String>,
    /// Arguments to confirm, a JSON object.
    pub args: Option<String>,
}

/// `dev-token`: a bearer token, or with `confirm` a confirmation token for one call.
///
/// # Errors
/// Bad arguments or an unusable dev key.
pub fn dev_token(config: &Config, req: &DevTokenRequest) -> Result<String, ConfigError> {
    crate::domain::TenantId::parse(&req.tenant)
        .map_err(|_| ConfigError("--tenant must be a UUID".into()))?;
    let ttl_s = parse_ttl(&req.ttl)?;
    let key = DevKey::load_or_create(&config.data_dir).map_err(ConfigError::from)?;
    let now = SystemClock.now();
    let Some(tool) = &req.confirm else {
        let scopes = req.scopes.clone().unwrap_or_else(all_scopes);
        return key
            .bearer_token(
                now,
                &config.identity.audience,
                &req.tenant,
                &scopes,
                &req.sub,
                ttl_s,
            )
            .map_err(ConfigError::from);
    };
    if crate::domain::Tool::from_name(tool).is_none() {
        return Err(ConfigError(format!("--confirm: unknown tool {tool:?}")));
    }
    let args: serde_json::Value = serde_json::from_str(req.args.as_deref().unwrap_or("{}"))
        .ok()
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| ConfigError("--args must be a JSON object".into()))?;
    let sha = crate::app::service::confirmation::args_sha256(&args);
    let audience = &config.identity.audience;
    key.confirmation_token(now, audience, &req.tenant, &req.sub, tool, &sha, ttl_s)
        .map_err(ConfigError::from)
}

/// `30s`, `15m`, `1h`, `30d`.
fn parse_ttl(s: &str) -> Result<i64, ConfigError> {
    let bad = || {
        ConfigError(format!(
            "--ttl {s:?}: use a number with s, m, h or d, e.g. 1h"
        ))
    };
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: i64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(bad()),
    };
    if secs <= 0 || secs > 366 * 86_400 {
        Err(bad())
    } else {
        Ok(secs)
    }
}
