//! `TokenVerifier` over JWTs: keys from a PEM file, a JWKS URL or the dev key, each with
//! its own algorithm allow-list (never taken from the token header alone, never `none`).
//!
//! `iss`, `aud`, `exp` and `sub` are required, `nbf` is checked when present, leeway is
//! 30 s. JWKS keys are cached by `kid` and refreshed on a timer (`jwks.rs`); an unknown
//! `kid` triggers at most one refetch per [`REFETCH_EVERY`], and the last good set keeps
//! serving while the identity provider is down. `jku`/`x5u` headers are ignored;
//! symmetric and encryption (`use: enc`) JWKs are skipped.
//!
//! Verified bearer tokens are remembered (`cache.rs`): a token seen before costs a hash
//! and a clock check, not a signature check. Keys are parsed once per key set. `exp` and
//! `nbf` are checked against the verifier's clock (`times.rs`), on a fresh decode as on
//! a remembered token.

mod cache;
mod describe;
mod jwks;
mod keys;
mod times;

use std::sync::Arc;

use jsonwebtoken::{Validation, errors::ErrorKind};
use serde::Deserialize;

use crate::domain::confirm::{self, ConfirmationClaims};
use crate::domain::{
    DomainError, Principal, Scope, TenantId, Timestamp, TokenRejection, granted_words,
};
use crate::ports::{Clock, TokenVerifier};
use cache::{TokenKey, Verified, VerifiedTokens};
use jwks::{Jwks, Keys};
use times::NumericDate;

pub use describe::KeyInfo;
pub use jwks::{REFETCH_EVERY, REFRESH_DEFAULT, REFRESH_MAX, REFRESH_MIN};
pub use keys::VerifyingKey;

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_S: u64 = 30;

enum KeySource {
    Static(Keys),
    Jwks(Box<Jwks>),
}

/// Keys accepted for one issuer.
pub struct Issuer {
    name: String,
    source: KeySource,
}

impl Issuer {
    /// An issuer whose tokens verify with fixed keys.
    pub fn with_keys(name: impl Into<String>, keys: Vec<VerifyingKey>) -> Issuer {
        Issuer {
            name: name.into(),
            source: KeySource::Static(keys.into()),
        }
    }

    /// An issuer whose keys come from a JWKS URL (`http://` only on loopback).
    ///
    /// # Errors
    /// When the URL is not acceptable.
    pub fn with_jwks(name: impl Into<String>, url: &str) -> anyhow::Result<Issuer> {
        Ok(Issuer {
            name: name.into(),
            source: KeySource::Jwks(Box::new(Jwks::new(url)?)),
        })
    }
}

/// Verifies tokens from a set of accepted issuers for one audience.
pub struct JwtVerifier {
    issuers: Vec<Issuer>,
    audience: String,
    verified: Arc<VerifiedTokens>,
    clock: Arc<dyn Clock>,
}

/// What is read of a token before its signature is checked: the issuer selects the key
/// set; the times are checked once the signature holds.
#[derive(Deserialize)]
struct Peek {
    iss: Option<String>,
    #[serde(default)]
    exp: NumericDate,
    #[serde(default)]
    nbf: NumericDate,
}

#[derive(Deserialize)]
struct BearerClaims {
    sub: String,
    exp: u64,
    nbf: Option<u64>,
    purpose: Option<String>,
    tenant_id: Option<String>,
    scope: Option<String>,
    scp: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ConfirmClaims {
    sub: String,
    purpose: Option<String>,
    tenant_id: Option<String>,
    tool: String,
    args_sha256: String,
    jti: String,
    exp: i64,
    iat: Option<i64>,
}

impl JwtVerifier {
    /// A verifier for `audience` accepting `issuers`; tokens' times, fresh or
    /// remembered, are checked against `clock`.
    pub fn new(
        issuers: Vec<Issuer>,
        audience: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> JwtVerifier {
        let verified = Arc::new(VerifiedTokens::new(cache::CAPACITY, LEEWAY_S));
        // Static keys never change while the process runs; a JWKS empties the cache
        // whenever its set does.
        for issuer in &issuers {
            if let KeySource::Jwks(jwks) = &issuer.source {
                jwks.empties(verified.clone());
            }
        }
        JwtVerifier {
            issuers,
            audience: audience.into(),
            verified,
            clock,
        }
    }

    /// Verifies signature, issuer, audience, expiry and `nbf`, then decodes the claims;
    /// a refusal is logged and turned into an error by `on_reject`.
    async fn decode<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        on_reject: OnReject,
    ) -> Result<T, DomainError> {
        let reject = |r: TokenRejection| refuse(r, on_reject);
        if token.is_empty() {
            return Err(reject(TokenRejection::Missing));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(reject(TokenRejection::Oversized));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| reject(TokenRejection::Malformed))?;
        // The issuer only selects the key set here; the verified decode checks it again.
        let peek: Peek = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| reject(TokenRejection::Malformed))?;
        let issuer = peek
            .iss
            .as_deref()
            .and_then(|iss| self.issuers.iter().find(|i| i.name == iss))
            .ok_or_else(|| reject(TokenRejection::WrongIssuer))?;
        let keys: Keys = match &issuer.source {
            KeySource::Static(keys) => keys.clone(),
            KeySource::Jwks(jwks) => jwks.keys_for(header.kid.as_deref()).await?,
        };
        let candidates: Vec<&VerifyingKey> = keys
            .iter()
            .filter(|k| header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
            .collect();
        if candidates.is_empty() {
            return Err(reject(TokenRejection::UnknownKey));
        }
        let in_force = || times::in_force(peek.exp, peek.nbf, self.clock.now(), LEEWAY_S);
        let mut last = TokenRejection::AlgorithmNotAllowed;
        for key in candidates {
            if !key.algorithms.contains(&header.alg) {
                continue;
            }
            let mut v = Validation::new(header.alg);
            v.set_issuer(&[&issuer.name]);
            v.set_audience(&[&self.audience]);
            v.validate_aud = true;
            v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            // `in_force` checks them, against the clock.
            v.validate_exp = false;
            v.validate_nbf = false;
            match jsonwebtoken::decode::<T>(token, &key.key, &v) {
                Ok(data) => {
                    in_force().map_err(reject)?;
                    return Ok(data.claims);
                }
                Err(e) => {
                    last = match e.kind() {
                        ErrorKind::InvalidSignature => TokenRejection::BadSignature,
                        ErrorKind::ExpiredSignature => TokenRejection::Expired,
                        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
                        ErrorKind::InvalidIssuer => TokenRejection::WrongIssuer,
                        ErrorKind::InvalidAudience => TokenRejection::WrongAudience,
                        ErrorKind::MissingRequiredClaim(c) => {
                            TokenRejection::MissingClaim(c.clone())
                        }
                        ErrorKind::InvalidAlgorithm => TokenRejection::AlgorithmNotAllowed,
                        _ => TokenRejection::Malformed,
                    };
                    // jsonwebtoken checks the times after the signature and the required
                    // claims and before `sub`, `iss` and `aud`: a token failing both is
                    // refused for its times.
                    if matches!(
                        e.kind(),
                        ErrorKind::InvalidSubject
                            | ErrorKind::InvalidIssuer
                            | ErrorKind::InvalidAudience
                            | ErrorKind::InvalidClaimFormat(_)
                    ) && let Err(times) = in_force()
                    {
                        last = times;
                    }
                    // Another key may share the kid during rotation; only a bad signature is worth a retry.
                    if last != TokenRejection::BadSignature {
                        break;
                    }
                }
            }
        }
        Err(reject(last))
    }
}

/// How a refusal becomes the caller's error: bearer and confirmation tokens word it apart.
type OnReject = fn(TokenRejection) -> DomainError;

fn refuse(r: TokenRejection, on_reject: OnReject) -> DomainError {
    // The precise reason at debug: the caller logs the refusal itself, rate-limited.
    tracing::debug!(reason = %r.reason(), "token rejected");
    on_reject(r)
}

fn tenant(claim: Option<&str>, on_reject: OnReject) -> Result<TenantId, DomainError> {
    claim
        .and_then(|t| TenantId::parse(t).ok())
        .ok_or_else(|| refuse(TokenRejection::BadTenant, on_reject))
}

#[async_trait::async_trait]
impl TokenVerifier for JwtVerifier {
    async fn verify(&self, token: &str) -> Result<Principal, DomainError> {
        self.verify_keyed(token, VerifiedTokens::key).await
    }

    async fn verify_recurring(&self, token: &str) -> Result<Principal, DomainError> {
        self.verify_keyed(token, VerifiedTokens::recurring_key)
            .await
    }

    async fn verify_confirmation(&self, token: &str) -> Result<ConfirmationClaims, DomainError> {
        let c: ConfirmClaims = self.decode(token, confirm::token_rejected).await?;
        Ok(ConfirmationClaims {
            tenant: tenant(c.tenant_id.as_deref(), confirm::token_rejected)?,
            subject: c.sub,
            purpose: c.purpose,
            tool: c.tool,
            args_sha256: c.args_sha256,
            jti: c.jti,
            expires_at: Timestamp::from_unix_millis(c.exp.saturating_mul(1000)),
            issued_at: c
                .iat
                .map(|t| Timestamp::from_unix_millis(t.saturating_mul(1000))),
        })
    }
}

impl JwtVerifier {
    /// A bearer token's principal, remembered under the cache key `key_of` gives it (once
    /// the token's size is checked: an oversized token is refused before it is hashed).
    async fn verify_keyed(
        &self,
        token: &str,
        key_of: fn(&VerifiedTokens, &str) -> TokenKey,
    ) -> Result<Principal, DomainError> {
        let bearer: OnReject = TokenRejection::into_error;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(refuse(TokenRejection::Oversized, bearer));
        }
        let key = key_of(&self.verified, token);
        if let Some(principal) = self.verified.get(&key, self.clock.now()) {
            return Ok(principal);
        }
        // Read before the keys are: a key set replaced meanwhile voids this verification.
        let generation = self.verified.generation();
        let claims: BearerClaims = self.decode(token, bearer).await?;
        if claims.purpose.as_deref() == Some(confirm::PURPOSE) {
            return Err(refuse(TokenRejection::ConfirmationAsBearer, bearer));
        }
        // An empty subject names nobody: sessions, approvals and confirmations bind to it.
        if claims.sub.trim().is_empty() {
            return Err(refuse(TokenRejection::MissingClaim("sub".into()), bearer));
        }
        let tenant = tenant(claims.tenant_id.as_deref(), bearer)?;
        let (scopes, granted) = match (claims.scope, claims.scp) {
            (Some(s), _) => (Scope::parse_list(&s), granted_words(s.split(' '))),
            (None, Some(list)) => (
                list.iter().filter_map(|w| Scope::parse(w)).collect(),
                granted_words(list.iter().map(String::as_str)),
            ),
            (None, None) => (Vec::new(), granted_words([])),
        };
        let principal = Principal {
            tenant,
            actor: claims.sub.into(),
            scopes: scopes.into(),
            granted,
        };
        let verified = Verified {
            principal: principal.clone(),
            exp: claims.exp,
            nbf: claims.nbf,
        };
        self.verified.insert(key, generation, verified);
        Ok(principal)
    }
}

/// What `check` reports of an issuer.
impl Issuer {
    /// The accepted `iss`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the keys come from: `keys` (fixed) or `JWKS <url>`.
    pub fn key_source(&self) -> String {
        match &self.source {
            KeySource::Static(_) => "keys".into(),
            KeySource::Jwks(jwks) => format!("JWKS {}", jwks.url()),
        }
    }

    /// Each usable key's id and algorithms, fetching a JWKS now.
    ///
    /// # Errors
    /// Why the JWKS could not be fetched or held no usable key.
    pub async fn describe(&self) -> anyhow::Result<Vec<KeyInfo>> {
        Ok(match &self.source {
            KeySource::Static(keys) => describe::key_infos(keys),
            KeySource::Jwks(jwks) => describe::key_infos(&jwks.fetch_now().await?),
        })
    }
}
