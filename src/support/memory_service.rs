//! How the bridge reaches a memory service, shared by the adapter and `check-memory`, so
//! the checker judges the service as the bridge would call it: the base URL `--memory-url`
//! names, and an HTTP client with the bridge's timeouts that follows no redirect.

use std::time::Duration;

use reqwest::Url;

/// Requests to the memory service in flight at once, unless `--memory-max-inflight` says
/// otherwise.
pub const DEFAULT_MAX_INFLIGHT: usize = 256;

/// `--memory-url` as a base URL (a trailing slash added), or why it cannot be one.
///
/// # Errors
/// A user-safe message naming the flag.
pub fn base_url(base: &str) -> Result<Url, String> {
    let mut base = Url::parse(base).map_err(|e| format!("--memory-url: {e}"))?;
    if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
        return Err("--memory-url must be an http(s) URL".into());
    }
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    Ok(base)
}

/// The HTTP client for a memory service: 1 s to connect, 5 s per request, no redirects.
///
/// # Errors
/// When the client cannot be built.
pub fn client() -> Result<reqwest::Client, String> {
    // ring is this binary's TLS provider; installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}
