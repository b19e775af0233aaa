//! Unit tests of the Origin and Host checks.

use axum::http::HeaderValue;

use super::*;
use proptest::prelude::*;

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

proptest! {
    #[test]
    fn any_pattern_text_parses_or_is_refused_with_the_flag_named(text in "\\PC{0,40}|https?://[*a-z.:0-9/]{0,20}") {
        if let Err(e) = OriginPattern::parse(&text) {
            prop_assert!(e.0.starts_with("--cors-origin "), "{}", e);
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
        let p = policy(false, &[&exact]);
        prop_assert_eq!(origin(&p, &exact), Origin::Allowed { cors: true });
        let other = format!("https://{label}x.{domain}{port}");
        prop_assert_eq!(origin(&p, &other), Origin::Denied);
        let http = format!("http://{label}.{domain}{port}");
        prop_assert_eq!(origin(&p, &http), Origin::Denied);

        let wild = policy(false, &[&format!("https://*.{domain}{port}")]);
        prop_assert_eq!(origin(&wild, &exact), Origin::Allowed { cors: true });
        let bare = format!("https://{domain}{port}");
        prop_assert_eq!(origin(&wild, &bare), Origin::Denied);
        let lookalike = format!("https://{label}{domain}{port}");
        prop_assert_eq!(origin(&wild, &lookalike), Origin::Denied);
    }
}
