//! Who may talk to the bridge from a browser: the Origin and Host checks (CSRF, DNS
//! rebinding) and the `--cors-origin` patterns.
//!
//! CORS is not access control (a browser sends the POST whatever the preflight said), so
//! the Origin check refuses disallowed origins with 403 before any work is done, and
//! CORS headers only tell a browser which allowed origin may read the response.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};
use reqwest::Url;

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
    pub fn parse(pattern: &str) -> Result<OriginPattern, String> {
        let bad = |why: &str| format!("--cors-origin {pattern:?}: {why}");
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
pub(crate) mod tests {
    use axum::http::HeaderValue;

    use super::*;

    pub(crate) fn headers(pairs: &[(axum::http::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn policy(loopback: bool, cors: &[&str]) -> OriginPolicy {
        OriginPolicy {
            loopback,
            public_origin: "https://bridge.example.com".into(),
            cors: cors
                .iter()
                .map(|p| OriginPattern::parse(p).unwrap())
                .collect(),
        }
    }

    fn origin(p: &OriginPolicy, o: &str) -> Origin {
        p.origin(&headers(&[(ORIGIN, o)]))
    }

    #[test]
    fn local_origins_are_allowed_on_a_loopback_bind_only() {
        let local = policy(true, &[]);
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:8080",
        ] {
            assert_eq!(origin(&local, o), Origin::Allowed { cors: false }, "{o}");
        }
        for o in [
            "https://evil.example",
            "null",
            "file://x",
            "http://localhost.evil.com",
        ] {
            assert_eq!(origin(&local, o), Origin::Denied, "{o}");
        }
        let public = policy(false, &[]);
        assert_eq!(origin(&public, "http://localhost:3000"), Origin::Denied);
        assert_eq!(
            origin(&public, "https://bridge.example.com"),
            Origin::Allowed { cors: false }
        );
        assert_eq!(origin(&public, "x"), Origin::Denied);
        assert_eq!(public.origin(&HeaderMap::new()), Origin::Absent);
    }

    #[test]
    fn cors_patterns_match_exact_origins_and_subdomains() {
        let p = policy(
            false,
            &["https://app.example.com/", "https://*.tools.example.org"],
        );
        let cors = Origin::Allowed { cors: true };
        assert_eq!(origin(&p, "https://app.example.com"), cors);
        assert_eq!(origin(&p, "https://app.example.com:443"), cors);
        assert_eq!(origin(&p, "https://a.tools.example.org"), cors);
        assert_eq!(origin(&p, "https://a.b.tools.example.org"), cors);
        for o in [
            "http://app.example.com",
            "https://app.example.com:8443",
            "https://tools.example.org",
            "https://eviltools.example.org",
            "http://a.tools.example.org",
        ] {
            assert_eq!(origin(&p, o), Origin::Denied, "{o}");
        }
    }

    #[test]
    fn bad_cors_patterns_are_refused() {
        for bad in [
            "*",
            "example.com",
            "ftp://x.example.com",
            "https://*",
            "https://*.com",
            "https://a.*.example.com",
            "https://x.example.com/path",
        ] {
            assert!(OriginPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_loopback_bind_refuses_foreign_host_headers() {
        let p = policy(true, &[]);
        for ok in [
            "localhost",
            "localhost:8082",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST.",
        ] {
            assert!(p.host_allowed(&headers(&[(HOST, ok)])), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8082",
            "127.0.0.1.evil.com",
            "[::1]x",
            "",
        ] {
            assert!(!p.host_allowed(&headers(&[(HOST, bad)])), "{bad}");
        }
        assert!(p.host_allowed(&HeaderMap::new()));
        assert!(policy(false, &[]).host_allowed(&headers(&[(HOST, "evil.example")])));
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn policy(cors: Vec<OriginPattern>) -> OriginPolicy {
        OriginPolicy {
            loopback: false,
            public_origin: "https://bridge.example.com".into(),
            cors,
        }
    }

    fn origin_of(p: &OriginPolicy, origin: &str) -> Origin {
        let mut h = HeaderMap::new();
        h.insert(ORIGIN, origin.parse().unwrap());
        p.origin(&h)
    }

    proptest! {
        #[test]
        fn any_pattern_text_parses_or_is_refused_with_the_flag_named(text in "\\PC{0,40}|https?://[*a-z.:0-9/]{0,20}") {
            if let Err(e) = OriginPattern::parse(&text) {
                prop_assert!(e.starts_with("--cors-origin "), "{}", e);
            }
        }

        /// An exact origin admits itself only; a wildcard admits subdomains of its domain
        /// with the same scheme and port, never the domain itself or a look-alike.
        #[test]
        fn patterns_admit_what_they_name_and_nothing_next_to_it(
            label in "[a-z][a-z0-9]{0,8}",
            domain in "[a-z]{2,8}\\.(com|org|dev)",
            port in proptest::option::of(1024u16..65535),
        ) {
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            let exact = format!("https://{label}.{domain}{port}");
            let p = policy(vec![OriginPattern::parse(&exact).unwrap()]);
            prop_assert_eq!(origin_of(&p, &exact), Origin::Allowed { cors: true });
            let other = format!("https://{label}x.{domain}{port}");
            prop_assert_eq!(origin_of(&p, &other), Origin::Denied);
            let http = format!("http://{label}.{domain}{port}");
            prop_assert_eq!(origin_of(&p, &http), Origin::Denied);

            let wild = policy(vec![OriginPattern::parse(&format!("https://*.{domain}{port}")).unwrap()]);
            prop_assert_eq!(origin_of(&wild, &exact), Origin::Allowed { cors: true });
            let bare = format!("https://{domain}{port}");
            prop_assert_eq!(origin_of(&wild, &bare), Origin::Denied);
            let lookalike = format!("https://{label}{domain}{port}");
            prop_assert_eq!(origin_of(&wild, &lookalike), Origin::Denied);
        }
    }
}
