//! Keys fetched from a JWKS URL, cached by `kid` and refreshed on a timer.
//!
//! The timer refetches the set after the identity provider's `Cache-Control: max-age`,
//! clamped to [[`REFRESH_MIN`], [`REFRESH_MAX`]] ([`REFRESH_DEFAULT`] without one), so a
//! key the IdP removes stops verifying within that time. A failed refresh (IdP down, a
//! non-2xx answer, a body that is not a JWKS or holds no usable signing key) keeps the
//! last good set and is retried within [`RETRY_MAX`]. An unknown `kid` also triggers a
//! refetch, at most one per [`REFETCH_EVERY`]: within that window of the last fetch, the
//! token waits for the window to end and the refetch, so a key rotated in just after a
//! fetch verifies at most that much later instead of being refused. A set that differs from the last one
//! empties the verified-token cache (`cache.rs`).

use std::sync::{Arc, Mutex, Once, OnceLock, Weak};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};

use super::cache::VerifiedTokens;
use super::keys::VerifyingKey;
use crate::domain::{DomainError, Upstream};

/// Minimum time between JWKS fetches triggered by an unknown `kid`.
pub const REFETCH_EVERY: Duration = Duration::from_secs(5);
/// Largest JWKS body read; a longer one is refused after reading at most this much.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Shortest refresh interval, whatever `max-age` says (`max-age=0` and `no-store` included).
pub const REFRESH_MIN: Duration = Duration::from_secs(1);
/// Longest refresh interval: a removed key is trusted at most this long after removal.
pub const REFRESH_MAX: Duration = Duration::from_secs(3600);
/// Refresh interval when the IdP sends no `max-age`.
pub const REFRESH_DEFAULT: Duration = Duration::from_secs(300);
/// Longest wait before retrying a failed refresh.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// Keys fetched from a JWKS URL.
pub(super) struct Jwks {
    inner: Arc<Inner>,
    timer: Once,
}

struct Inner {
    url: reqwest::Url,
    http: reqwest::Client,
    state: Mutex<JwksState>,
    /// Held for the whole of a fetch, so concurrent misses and the timer share one.
    fetching: tokio::sync::Mutex<()>,
    /// Told when the set changes.
    verified: OnceLock<Arc<VerifiedTokens>>,
}

/// The keys of the last good set, parsed once per fetch and shared by every verification.
pub(super) type Keys = Arc<[VerifyingKey]>;

struct JwksState {
    keys: Keys,
    /// The JWKs those keys came from, to tell a changed set from the same one refetched.
    jwks: Vec<Jwk>,
    last_fetch: Option<Instant>,
    /// When the timer refreshes next; `None` before the first fetch.
    next_refresh: Option<Instant>,
    /// The interval of the last good set.
    interval: Duration,
}

impl Jwks {
    /// A key cache for `url` (`http://` only on loopback); nothing is fetched yet.
    ///
    /// # Errors
    /// When the URL is not acceptable.
    pub(super) fn new(url: &str) -> anyhow::Result<Jwks> {
        let url = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("--jwks-url: {e}"))?;
        let loopback = matches!(
            url.host_str(),
            Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
        );
        if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) {
            return Err(anyhow::anyhow!(
                "--jwks-url must be https:// (http:// only for a loopback host)"
            ));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
        Ok(Jwks {
            inner: Arc::new(Inner {
                url,
                http,
                state: Mutex::new(JwksState {
                    keys: Arc::new([]),
                    jwks: Vec::new(),
                    last_fetch: None,
                    next_refresh: None,
                    interval: REFRESH_DEFAULT,
                }),
                fetching: tokio::sync::Mutex::new(()),
                verified: OnceLock::new(),
            }),
            timer: Once::new(),
        })
    }

    /// Empties `verified` whenever this set changes.
    pub(super) fn empties(&self, verified: Arc<VerifiedTokens>) {
        let _ = self.inner.verified.set(verified);
    }

    /// Keys that may verify a token with `kid`, refetching once if none is known.
    pub(super) async fn keys_for(&self, kid: Option<&str>) -> Result<Keys, DomainError> {
        self.start_timer();
        let inner = &self.inner;
        let (keys, last) = inner.cached();
        if has_kid(&keys, kid) {
            return Ok(keys);
        }
        // One fetch at a time; late arrivals reuse its result.
        let _turn = inner.fetching.lock().await;
        let (keys, last_now) = inner.cached();
        if last_now != last && has_kid(&keys, kid) {
            return Ok(keys);
        }
        // A key the IdP published just after the last fetch (a rotation) is not refused:
        // the rest of the rate limit's window is waited out once, with the turn held, so
        // fetches stay one per window however many tokens wait.
        if let Some(t) = last_now
            && t.elapsed() < REFETCH_EVERY
        {
            tokio::time::sleep_until((t + REFETCH_EVERY).into()).await;
        }
        match inner.refresh().await {
            Ok(()) => Ok(inner.cached().0),
            Err(e) if keys.is_empty() => Err(DomainError::unavailable(
                Upstream::IdentityProvider,
                Some(e.into()),
            )),
            Err(_) => Ok(keys),
        }
    }

    /// The JWKS URL.
    pub(super) fn url(&self) -> &str {
        self.inner.url.as_str()
    }

    /// Fetches the set now, bypassing the cache (for `check`).
    pub(super) async fn fetch_now(&self) -> anyhow::Result<Vec<VerifyingKey>> {
        self.inner.fetch().await.map(|(keys, _, _)| keys)
    }

    /// Starts the refresh timer once, on the runtime of the first verification; it ends
    /// when the verifier is dropped.
    fn start_timer(&self) {
        self.timer.call_once(|| {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(refresh_loop(Arc::downgrade(&self.inner)));
            }
        });
    }
}

/// Refreshes the set whenever it is due, until the verifier is gone.
async fn refresh_loop(inner: Weak<Inner>) {
    loop {
        let due = match inner.upgrade() {
            Some(i) => i.due(),
            None => return,
        };
        // Before the first fetch, look again shortly: the first verification fetches.
        let wake = due.unwrap_or_else(|| Instant::now() + REFRESH_MIN);
        tokio::time::sleep_until(wake.into()).await;
        let Some(inner) = inner.upgrade() else { return };
        let _turn = inner.fetching.lock().await;
        // An unknown-kid fetch may have refreshed the set meanwhile.
        if inner.due().is_some_and(|d| d <= Instant::now()) {
            let _ = inner.refresh().await;
        }
    }
}

impl Inner {
    fn cached(&self) -> (Keys, Option<Instant>) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.keys.clone(), s.last_fetch)
    }

    fn due(&self) -> Option<Instant> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_refresh
    }

    /// Fetches the set and replaces the cached one if the answer is good; otherwise
    /// keeps the last good set and schedules a retry. Call with `fetching` held.
    async fn refresh(&self) -> anyhow::Result<()> {
        let fetched = self.fetch().await;
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        s.last_fetch = Some(now);
        match fetched {
            Ok((keys, jwks, max_age)) => {
                let changed = s.jwks != jwks;
                s.keys = keys.into();
                s.jwks = jwks;
                s.interval = refresh_interval(max_age);
                s.next_refresh = Some(now + s.interval);
                // After the new keys are in place: a verification that read the old
                // generation cannot remember what it verified with the old keys.
                if let (true, Some(verified)) = (changed, self.verified.get()) {
                    verified.key_set_changed();
                }
                Ok(())
            }
            Err(e) => {
                s.next_refresh = Some(now + s.interval.min(RETRY_MAX));
                tracing::warn!(
                    "cannot refresh the JWKS: {e}; serving with {} cached keys",
                    s.keys.len()
                );
                Err(e)
            }
        }
    }

    /// The usable signing keys of the set, the JWKs they came from, and its `max-age`.
    async fn fetch(&self) -> anyhow::Result<(Vec<VerifyingKey>, Vec<Jwk>, Option<Duration>)> {
        let mut resp = self
            .http
            .get(self.url.clone())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("fetch failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(anyhow::anyhow!("the JWKS URL answered {}", resp.status()));
        }
        let max_age = max_age(resp.headers());
        let too_large = || anyhow::anyhow!("the JWKS is larger than {MAX_JWKS_BYTES} bytes");
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
            .map_err(|e| anyhow::anyhow!("read failed: {e}"))?
        {
            if bytes.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        let set: JwkSet =
            serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("not a JWKS: {e}"))?;
        let (keys, jwks): (Vec<VerifyingKey>, Vec<Jwk>) = set
            .keys
            .into_iter()
            .filter_map(|jwk| Some((VerifyingKey::from_jwk(&jwk)?, jwk)))
            .unzip();
        // An IdP never means "trust nothing" while tokens are live; treat it as a fault.
        if keys.is_empty() {
            return Err(anyhow::anyhow!("the JWKS holds no usable signing key"));
        }
        Ok((keys, jwks, max_age))
    }
}

/// `max-age` of a `Cache-Control` header; `no-store`/`no-cache` count as zero.
fn max_age(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::CACHE_CONTROL)?.to_str().ok()?;
    let mut found = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(secs) = lower.strip_prefix("max-age=") {
            // A value too large for u64 is "a very long time".
            let secs = secs.trim_matches('"');
            if !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit()) {
                found = Some(Duration::from_secs(secs.parse().unwrap_or(u64::MAX)));
            }
        }
    }
    found
}

/// The IdP's `max-age` clamped to [[`REFRESH_MIN`], [`REFRESH_MAX`]].
fn refresh_interval(max_age: Option<Duration>) -> Duration {
    max_age
        .unwrap_or(REFRESH_DEFAULT)
        .clamp(REFRESH_MIN, REFRESH_MAX)
}

fn has_kid(keys: &[VerifyingKey], kid: Option<&str>) -> bool {
    match kid {
        Some(kid) => keys.iter().any(|k| k.kid.as_deref() == Some(kid)),
        None => !keys.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reqwest::header::{CACHE_CONTROL, HeaderMap, HeaderValue};

    fn cc(v: &str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert(CACHE_CONTROL, HeaderValue::from_str(v).unwrap());
        max_age(&h)
    }

    #[test]
    fn max_age_is_read_and_clamped() {
        assert_eq!(cc("public, max-age=120"), Some(Duration::from_secs(120)));
        assert_eq!(
            cc("Max-Age=7, must-revalidate"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(cc("no-store"), Some(Duration::ZERO));
        assert_eq!(cc("max-age=-1"), None);
        assert_eq!(cc("private"), None);
        assert_eq!(max_age(&HeaderMap::new()), None);
        assert_eq!(refresh_interval(None), REFRESH_DEFAULT);
        assert_eq!(refresh_interval(Some(Duration::ZERO)), REFRESH_MIN);
        assert_eq!(
            refresh_interval(cc("max-age=99999999999999999999999")),
            REFRESH_MAX
        );
    }

    proptest! {
        #[test]
        fn any_header_gives_an_interval_within_bounds(v in "[ -~]{0,80}") {
            if let Ok(value) = HeaderValue::from_str(&v) {
                let mut h = HeaderMap::new();
                h.insert(CACHE_CONTROL, value);
                let i = refresh_interval(max_age(&h));
                prop_assert!((REFRESH_MIN..=REFRESH_MAX).contains(&i));
            }
        }
    }
}
