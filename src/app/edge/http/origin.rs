//! Who may talk to the bridge from a browser: the Origin and Host checks (CSRF, DNS
//! rebinding) and the `--cors-origin` patterns.
//!
//! CORS is not access control (a browser sends the POST whatever the preflight said), so
//! the Origin check refuses disallowed origins with 403 before any work is done, and
//! CORS headers only tell a browser which allowed origin may read the response.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};
use reqwest::Url;

use crate::app::config::ConfigError;

/// An allowed browser origin: exact (`https://app.example.com`), or every subdomain of a
/// domain (`https://*.example.com`) with the same scheme and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginPattern {
    /// One origin, serialized as browsers send it.
    Exact(String),
    /// Any origin `scheme://<one or more labels><suffix>:port`.
    Subdomains {
        /// `http` or `https`.
        scheme: String,
        /// `.example.com`.
        suffix: String,
        /// The port, explicit or the scheme's default.
        port: u16,
    },
}

impl OriginPattern {
    /// Parses a `--cors-origin` value.
    ///
    /// # Errors
    /// A sentence saying what is wrong with it.
    pub fn parse(pattern: &str) -> Result<OriginPattern, ConfigError> {
        let bad = |why: &str| ConfigError(format!("--cors-origin {pattern:?}: {why}"));
        let (scheme, rest) = pattern
            .split_once("://")
            .ok_or_else(|| bad("use an origin like https://app.example.com"))?;
        if !matches!(scheme, "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('?') || rest.contains('#') {
            return Err(bad("an origin has no path, query or fragment"));
        }
        if let Some(domain) = rest.strip_prefix("*.") {
            if domain.contains('*') || domain.split(':').next().is_none_or(|h| !h.contains('.')) {
                return Err(bad(
                    "a wildcard covers the subdomains of a registrable domain, e.g. https://*.example.com",
                ));
            }
            // Validate the rest as a host by giving the wildcard a stand-in label.
            let url =
                Url::parse(&format!("{scheme}://x.{domain}")).map_err(|e| bad(&e.to_string()))?;
            let host = url.host_str().ok_or_else(|| bad("no host"))?;
            let suffix = host
                .strip_prefix('x')
                .filter(|s| s.starts_with('.'))
                .ok_or_else(|| bad("no domain after *."))?;
            return Ok(OriginPattern::Subdomains {
                scheme: scheme.to_owned(),
                suffix: suffix.to_owned(),
                port: url.port_or_known_default().unwrap_or(0),
            });
        }
        if rest.contains('*') {
            return Err(bad(
                "a wildcard may only be the first label, e.g. https://*.example.com",
            ));
        }
        let url = Url::parse(&format!("{scheme}://{rest}")).map_err(|e| bad(&e.to_string()))?;
        Ok(OriginPattern::Exact(url.origin().ascii_serialization()))
    }

    fn matches(&self, origin: &Url, serialized: &str) -> bool {
        match self {
            OriginPattern::Exact(o) => o == serialized,
            OriginPattern::Subdomains {
                scheme,
                suffix,
                port,
            } => {
                origin.scheme() == scheme
                    && origin.port_or_known_default() == Some(*port)
                    && origin
                        .host_str()
                        .is_some_and(|h| h.len() > suffix.len() && h.ends_with(suffix.as_str()))
            }
        }
    }
}

/// What the Origin header says about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// No Origin header: not a browser, or a same-origin navigation.
    Absent,
    /// Allowed; `cors` when it matched a `--cors-origin` pattern and so gets CORS headers.
    Allowed {
        /// Whether CORS headers go on the response.
        cors: bool,
    },
    /// Present and not allowed.
    Denied,
}

/// The Origin and Host rules of one listener.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    /// Bound to a loopback address: local origins are allowed and the Host must be local.
    pub loopback: bool,
    /// The origin of `--public-url`, serialized.
    pub public_origin: String,
    /// `--cors-origin` patterns.
    pub cors: Vec<OriginPattern>,
}

impl OriginPolicy {
    /// Whether CORS is enabled at all.
    pub fn cors_enabled(&self) -> bool {
        !self.cors.is_empty()
    }

    /// Classifies the request's Origin header.
    pub fn origin(&self, headers: &HeaderMap) -> Origin {
        let Some(value) = headers.get(ORIGIN) else {
            return Origin::Absent;
        };
        let Some(url) = value
            .to_str()
            .ok()
            .and_then(|v| Url::parse(v).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        else {
            // `null` (sandboxed frames, file://) and anything unparsable.
            return Origin::Denied;
        };
        let serialized = url.origin().ascii_serialization();
        if self.cors.iter().any(|p| p.matches(&url, &serialized)) {
            Origin::Allowed { cors: true }
        } else if serialized == self.public_origin || (self.loopback && is_local_host(&url)) {
            Origin::Allowed { cors: false }
        } else {
            Origin::Denied
        }
    }

    /// On a loopback bind, whether the Host header names this machine (a DNS-rebound
    /// page sends its own domain). Requests without a Host header are not from browsers.
    pub fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if !self.loopback {
            return true;
        }
        let Some(host) = headers.get(HOST) else {
            return true;
        };
        host.to_str()
            .ok()
            .and_then(host_name)
            .is_some_and(is_local_name)
    }
}

fn is_local_host(url: &Url) -> bool {
    url.host_str().is_some_and(is_local_name)
}

/// `localhost` or a loopback address, possibly bracketed (`[::1]`).
fn is_local_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    // The usual names first, before an address is parsed.
    name == "127.0.0.1"
        || name.eq_ignore_ascii_case("localhost")
        || name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host part of a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`).
fn host_name(value: &str) -> Option<&str> {
    if value.starts_with('[') {
        let end = value.find(']')?;
        let rest = &value[end + 1..];
        return (rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port))
            .then_some(&value[..=end]);
    }
    match value.rsplit_once(':') {
        Some((name, port)) if is_port(port) => Some(name),
        Some(_) => None,
        None => Some(value),
    }
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
pub(crate) mod tests;
