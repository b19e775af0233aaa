//! The HTTP transport: criteria 18, 19 and 21.

use serde_json::json;

use crate::harness::{Adapters, Stack, Store};
use crate::sockets::{describe, inet_sockets};
use crate::support::http_server::{Reply, error_body};

fn ping() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})
}

/// The CORS headers of a reply.
fn cors_headers(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

/// Criterion 18: CORS denies by default: without `--cors-origin` no response carries CORS
/// headers, and a browser origin's preflight is refused (403 with a reason).
pub async fn c18_without_cors_origin_no_cors_headers_and_preflights_refused(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let http = stack.bridge().http().await;
    // A page on a loopback origin may call a loopback bridge, but gets no CORS grant.
    let local = http
        .post(
            Some(http.token()),
            &ping(),
            &[("origin", "http://localhost:5173")],
        )
        .await;
    assert_eq!(local.status, 200, "{}", local.text);
    assert!(cors_headers(&local).is_empty(), "{:?}", local.headers);
    for origin in ["https://example.com", "http://localhost:5173"] {
        let pre = http.preflight(origin).await;
        let frame = error_body(&pre, 403, -32600, "input_validation");
        assert!(
            frame["error"]["data"]["message"]
                .as_str()
                .unwrap()
                .contains("origin"),
            "{frame}"
        );
        assert!(cors_headers(&pre).is_empty(), "{:?}", pre.headers);
    }
    let foreign = http
        .post(
            Some(http.token()),
            &ping(),
            &[("origin", "https://example.com")],
        )
        .await;
    error_body(&foreign, 403, -32600, "input_validation");
    assert!(cors_headers(&foreign).is_empty(), "{:?}", foreign.headers);
}

/// Criterion 19: CORS allows a configured origin: with `--cors-origin https://example.com`,
/// requests and preflights from it get `Access-Control-Allow-Origin`; other origins do not.
pub async fn c19_a_configured_cors_origin_is_allowed(adapters: Adapters) {
    let stack = Stack::new(adapters).cors_origin("https://example.com").up();
    let http = stack.bridge().http().await;
    let allowed = http
        .post(
            Some(http.token()),
            &ping(),
            &[("origin", "https://example.com")],
        )
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.text);
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    let pre = http.preflight("https://example.com").await;
    assert_eq!(pre.status, 204, "{}", pre.text);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    assert!(
        pre.header("access-control-allow-methods")
            .is_some_and(|m| m.contains("POST")),
        "{:?}",
        pre.headers
    );
    let other = http
        .post(
            Some(http.token()),
            &ping(),
            &[("origin", "https://other.example")],
        )
        .await;
    error_body(&other, 403, -32600, "input_validation");
    assert!(other.header("access-control-allow-origin").is_none());
}

/// Criterion 21: The HTTP transport binds its port: `--listen 0.0.0.0:…` opens it and
/// /healthz answers 200.
pub async fn c21_listen_opens_the_port_and_healthz_answers_200(store: Store) {
    let stack = Stack::new(Adapters::Real(store)).up();
    let http = stack.bridge().listen("0.0.0.0:0").http().await;
    let port = http.address().port();
    let wildcard = format!("00000000:{port:04X}");
    let sockets = inet_sockets(http.process_id());
    assert!(
        sockets.iter().any(|s| s.listening && s.local == wildcard),
        "no listener on 0.0.0.0:{port}: {}",
        describe(&sockets)
    );
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the port accepts connections");
    let health = http.send("GET", "/healthz", &[], None).await;
    assert_eq!(health.status, 200, "{}", health.text);
}
