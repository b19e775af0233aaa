//! `TokenVerifier` over JWTs: keys from a PEM file, a JWKS URL or the dev key, each with
//! its own algorithm allow-list (never taken from the token header alone, never `none`).
//!
//! `iss`, `aud`, `exp` and `sub` are required, `nbf` is checked when present, leeway is
//! 30 s. JWKS keys are cached by `kid`; an unknown `kid` triggers at most one refetch per
//! [`REFETCH_EVERY`], and cached keys keep serving while the identity provider is down.
//! `jku`/`x5u` headers are ignored and symmetric JWKs are skipped.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde::Deserialize;

use crate::domain::confirm::ConfirmationClaims;
use crate::domain::{DomainError, Principal, Scope, TenantId, Timestamp, TokenRejection, Upstream};
use crate::ports::TokenVerifier;

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_S: u64 = 30;
/// Minimum time between JWKS fetches triggered by an unknown `kid`.
pub const REFETCH_EVERY: Duration = Duration::from_secs(5);

/// A verification key and the algorithms it may verify.
#[derive(Clone)]
pub struct VerifyingKey {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

impl VerifyingKey {
    /// A key from a PEM file's bytes: RSA (RS256/384/512, PS256/384/512), EC (ES256/384)
    /// or Ed25519 (EdDSA).
    ///
    /// # Errors
    /// When the PEM holds none of those.
    pub fn from_pem(pem: &[u8]) -> Result<VerifyingKey, String> {
        use Algorithm::*;
        let (key, algorithms) = if let Ok(k) = DecodingKey::from_rsa_pem(pem) {
            (k, vec![RS256, RS384, RS512, PS256, PS384, PS512])
        } else if let Ok(k) = DecodingKey::from_ec_pem(pem) {
            (k, vec![ES256, ES384])
        } else if let Ok(k) = DecodingKey::from_ed_pem(pem) {
            (k, vec![EdDSA])
        } else {
            return Err("not an RSA, EC or Ed25519 public key in PEM".into());
        };
        Ok(VerifyingKey {
            kid: None,
            key,
            algorithms,
        })
    }

    /// The Ed25519 dev key.
    pub fn dev(key: DecodingKey) -> VerifyingKey {
        VerifyingKey {
            kid: None,
            key,
            algorithms: vec![Algorithm::EdDSA],
        }
    }

    fn from_jwk(jwk: &Jwk) -> Option<VerifyingKey> {
        use Algorithm::*;
        let algorithms = match (&jwk.algorithm, jwk.common.key_algorithm) {
            // Symmetric keys would let anyone holding the JWKS forge tokens.
            (AlgorithmParameters::OctetKey(_), _) => return None,
            (_, Some(alg)) => vec![key_algorithm(alg)?],
            (AlgorithmParameters::RSA(_), None) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
            (AlgorithmParameters::EllipticCurve(p), None) => match p.curve {
                EllipticCurve::P256 => vec![ES256],
                EllipticCurve::P384 => vec![ES384],
                _ => return None,
            },
            (AlgorithmParameters::OctetKeyPair(_), None) => vec![EdDSA],
            _ => return None,
        };
        let key = DecodingKey::from_jwk(jwk).ok()?;
        Some(VerifyingKey {
            kid: jwk.common.key_id.clone(),
            key,
            algorithms,
        })
    }
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    use Algorithm::*;
    Some(match alg {
        KeyAlgorithm::RS256 => RS256,
        KeyAlgorithm::RS384 => RS384,
        KeyAlgorithm::RS512 => RS512,
        KeyAlgorithm::PS256 => PS256,
        KeyAlgorithm::PS384 => PS384,
        KeyAlgorithm::PS512 => PS512,
        KeyAlgorithm::ES256 => ES256,
        KeyAlgorithm::ES384 => ES384,
        KeyAlgorithm::EdDSA => EdDSA,
        _ => return None,
    })
}

/// Keys fetched from a JWKS URL.
struct Jwks {
    url: reqwest::Url,
    http: reqwest::Client,
    state: Mutex<JwksState>,
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct JwksState {
    keys: Vec<VerifyingKey>,
    last_fetch: Option<Instant>,
}

impl Jwks {
    fn cached(&self) -> (Vec<VerifyingKey>, Option<Instant>) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.keys.clone(), s.last_fetch)
    }

    /// Keys that may verify a token with `kid`, refetching once if none is known.
    async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<VerifyingKey>, DomainError> {
        let (keys, last) = self.cached();
        if has_kid(&keys, kid) {
            return Ok(keys);
        }
        // One fetch at a time; late arrivals reuse its result.
        let _turn = self.fetching.lock().await;
        let (keys, last_now) = self.cached();
        if last_now != last && has_kid(&keys, kid) {
            return Ok(keys);
        }
        if last_now.is_some_and(|t| t.elapsed() < REFETCH_EVERY) {
            return Ok(keys);
        }
        match self.fetch().await {
            Ok(fresh) => {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                s.keys = fresh;
                s.last_fetch = Some(Instant::now());
                Ok(s.keys.clone())
            }
            Err(e) => {
                self.state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .last_fetch = Some(Instant::now());
                tracing::warn!(
                    "cannot refresh the JWKS: {e}; serving with {} cached keys",
                    keys.len()
                );
                if keys.is_empty() {
                    Err(DomainError::unavailable(
                        Upstream::IdentityProvider,
                        Some(e.into()),
                    ))
                } else {
                    Ok(keys)
                }
            }
        }
    }

    async fn fetch(&self) -> Result<Vec<VerifyingKey>, String> {
        let resp = self
            .http
            .get(self.url.clone())
            .send()
            .await
            .map_err(|e| format!("fetch failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the JWKS URL answered {}", resp.status()));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        if bytes.len() > 1024 * 1024 {
            return Err("the JWKS is larger than 1 MiB".into());
        }
        let set: JwkSet = serde_json::from_slice(&bytes).map_err(|e| format!("not a JWKS: {e}"))?;
        Ok(set.keys.iter().filter_map(VerifyingKey::from_jwk).collect())
    }
}

fn has_kid(keys: &[VerifyingKey], kid: Option<&str>) -> bool {
    match kid {
        Some(kid) => keys.iter().any(|k| k.kid.as_deref() == Some(kid)),
        None => !keys.is_empty(),
    }
}

enum KeySource {
    Static(Vec<VerifyingKey>),
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
            source: KeySource::Static(keys),
        }
    }

    /// An issuer whose keys come from a JWKS URL (`http://` only on loopback).
    ///
    /// # Errors
    /// When the URL is not acceptable.
    pub fn with_jwks(name: impl Into<String>, url: &str) -> Result<Issuer, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("--jwks-url: {e}"))?;
        let loopback = matches!(
            url.host_str(),
            Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
        );
        if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) {
            return Err("--jwks-url must be https:// (http:// only for a loopback host)".into());
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let jwks = Jwks {
            url,
            http,
            state: Mutex::new(JwksState::default()),
            fetching: tokio::sync::Mutex::new(()),
        };
        Ok(Issuer {
            name: name.into(),
            source: KeySource::Jwks(Box::new(jwks)),
        })
    }
}

/// Verifies tokens from a set of accepted issuers for one audience.
pub struct JwtVerifier {
    issuers: Vec<Issuer>,
    audience: String,
}

#[derive(Deserialize)]
struct Peek {
    iss: Option<String>,
}

#[derive(Deserialize)]
struct BearerClaims {
    sub: String,
    tenant_id: Option<String>,
    scope: Option<String>,
    scp: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ConfirmClaims {
    tenant_id: Option<String>,
    tool: String,
    args_sha256: String,
    jti: String,
    exp: i64,
    iat: Option<i64>,
}

impl JwtVerifier {
    /// A verifier for `audience` accepting `issuers`.
    pub fn new(issuers: Vec<Issuer>, audience: impl Into<String>) -> JwtVerifier {
        JwtVerifier {
            issuers,
            audience: audience.into(),
        }
    }

    /// Verifies signature, issuer, audience (when `need_aud`), expiry and `nbf`, then
    /// decodes the claims.
    async fn decode<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        required: &[&str],
    ) -> Result<T, DomainError> {
        let reject = |r: TokenRejection| {
            tracing::info!(reason = %r.reason(), "token rejected");
            r.into_error()
        };
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
        let keys = match &issuer.source {
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
        let mut last = TokenRejection::AlgorithmNotAllowed;
        for key in candidates {
            if !key.algorithms.contains(&header.alg) {
                continue;
            }
            let mut v = Validation::new(header.alg);
            v.set_issuer(&[&issuer.name]);
            v.set_audience(&[&self.audience]);
            v.validate_aud = required.contains(&"aud");
            v.set_required_spec_claims(required);
            v.leeway = LEEWAY_S;
            v.validate_nbf = true;
            match jsonwebtoken::decode::<T>(token, &key.key, &v) {
                Ok(data) => return Ok(data.claims),
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

fn tenant(claim: Option<&str>) -> Result<TenantId, DomainError> {
    claim.and_then(|t| TenantId::parse(t).ok()).ok_or_else(|| {
        tracing::info!(reason = %TokenRejection::BadTenant.reason(), "token rejected");
        TokenRejection::BadTenant.into_error()
    })
}

#[async_trait::async_trait]
impl TokenVerifier for JwtVerifier {
    async fn verify(&self, token: &str) -> Result<Principal, DomainError> {
        let claims: BearerClaims = self.decode(token, &["exp", "iss", "aud", "sub"]).await?;
        let tenant = tenant(claims.tenant_id.as_deref())?;
        let words: Vec<String> = match (claims.scope, claims.scp) {
            (Some(s), _) => s.split_whitespace().map(str::to_owned).collect(),
            (None, Some(list)) => list,
            (None, None) => Vec::new(),
        };
        let scopes = words.iter().filter_map(|w| Scope::parse(w)).collect();
        Ok(Principal {
            tenant,
            actor: claims.sub,
            scopes,
        })
    }

    async fn verify_confirmation(&self, token: &str) -> Result<ConfirmationClaims, DomainError> {
        let c: ConfirmClaims = self.decode(token, &["exp", "iss"]).await?;
        Ok(ConfirmationClaims {
            tenant: tenant(c.tenant_id.as_deref())?,
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
