//! Keys fetched from a JWKS URL, cached by `kid`: an unknown `kid` triggers at most one
//! refetch per [`REFETCH_EVERY`], and cached keys keep serving while the identity
//! provider is down.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;

use super::keys::VerifyingKey;
use crate::domain::{DomainError, Upstream};

/// Minimum time between JWKS fetches triggered by an unknown `kid`.
pub const REFETCH_EVERY: Duration = Duration::from_secs(5);
/// Largest JWKS body read; a longer one is refused after reading at most this much.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Keys fetched from a JWKS URL.
pub(super) struct Jwks {
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
    /// A key cache for `url` (`http://` only on loopback); nothing is fetched yet.
    ///
    /// # Errors
    /// When the URL is not acceptable.
    pub(super) fn new(url: &str) -> Result<Jwks, String> {
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
        Ok(Jwks {
            url,
            http,
            state: Mutex::new(JwksState::default()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    fn cached(&self) -> (Vec<VerifyingKey>, Option<Instant>) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.keys.clone(), s.last_fetch)
    }

    /// Keys that may verify a token with `kid`, refetching once if none is known.
    pub(super) async fn keys_for(
        &self,
        kid: Option<&str>,
    ) -> Result<Vec<VerifyingKey>, DomainError> {
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
        let mut resp = self
            .http
            .get(self.url.clone())
            .send()
            .await
            .map_err(|e| format!("fetch failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the JWKS URL answered {}", resp.status()));
        }
        let too_large = || format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes");
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(too_large());
        }
        // Read chunk by chunk so an oversized or endless body costs at most the cap;
        // dropping the response closes the connection.
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("read failed: {e}"))?
        {
            if bytes.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
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
