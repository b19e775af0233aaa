//! The transport's gate: Origin, Host and CORS, and the order of its checks, each
//! refusal with a JSON-RPC body.

use serde_json::json;

use super::LOCAL;
use crate::support::http_server::{Reply, Server, error_body, rpc};

/// A POST of `declared` body bytes that sends its headers only, and the reply it gets.
pub(crate) async fn headers_only(s: &Server, token: &str, declared: usize) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {declared}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut raw),
    )
    .await
    .expect("a reply in time")
    .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    for line in lines {
        let (k, v) = line.split_once(':').unwrap();
        headers.append(
            reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()).unwrap(),
            v.trim().parse().unwrap(),
        );
    }
    assert!(headers.get("transfer-encoding").is_none(), "{head}");
    Reply {
        status,
        headers,
        text: body.to_owned(),
    }
}

fn cors_headers(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-") || k == "vary")
        .collect()
}

#[tokio::test]
async fn without_cors_origin_there_are_no_cors_headers_and_preflights_are_refused() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    // A local page may call a loopback bridge, but gets no CORS grant.
    let local = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "http://localhost:5173")],
        )
        .await;
    assert_eq!(local.status, 200);
    assert!(cors_headers(&local).is_empty(), "{:?}", local.headers);
    for origin in ["http://localhost:5173", "https://example.com"] {
        let pre = s
            .send(
                s.client
                    .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                    .header("origin", origin)
                    .header("access-control-request-method", "POST"),
            )
            .await;
        let frame = error_body(&pre, 403, -32600, "input_validation");
        assert!(
            frame["error"]["data"]["message"]
                .as_str()
                .unwrap()
                .contains("origin"),
            "{frame}"
        );
        assert!(cors_headers(&pre).is_empty());
    }
    let evil = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://evil.example")],
        )
        .await;
    let frame = error_body(&evil, 403, -32600, "input_validation");
    assert_eq!(frame["error"]["data"]["message"], "origin not allowed");
    // Refused before the token is even looked at.
    let evil = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "null")],
        )
        .await;
    assert_eq!(evil.status, 403);
}

#[tokio::test]
async fn a_cors_origin_is_granted_exactly_and_others_are_refused() {
    let s = Server::start(&["--cors-origin", "https://example.com"]);
    let t = s.token(LOCAL, None);
    let ok = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://example.com")],
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    assert_eq!(ok.header("vary"), Some("Origin"));
    assert_eq!(
        ok.header("access-control-expose-headers"),
        Some("WWW-Authenticate, MCP-Session-Id")
    );
    // A browser client can read the 401 challenge.
    let denied = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "https://example.com")],
        )
        .await;
    assert_eq!(denied.status, 401);
    assert_eq!(
        denied.header("access-control-allow-origin"),
        Some("https://example.com")
    );

    let pre = s
        .send(
            s.client
                .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                .header("origin", "https://example.com")
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                ),
        )
        .await;
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    assert_eq!(
        pre.header("access-control-allow-methods"),
        Some("POST, GET, DELETE, OPTIONS")
    );
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("Authorization, Content-Type, MCP-Protocol-Version, Last-Event-ID, MCP-Session-Id")
    );
    for origin in [
        "https://other.example",
        "http://example.com",
        "https://a.example.com",
    ] {
        let post = s
            .post_with(
                Some(&t),
                rpc(1, "ping", json!({})).to_string(),
                &[("origin", origin)],
            )
            .await;
        error_body(&post, 403, -32600, "input_validation");
        assert!(post.header("access-control-allow-origin").is_none());
        let pre = s
            .send(
                s.client
                    .request(reqwest::Method::OPTIONS, s.url("/mcp"))
                    .header("origin", origin),
            )
            .await;
        error_body(&pre, 403, -32600, "input_validation");
    }
}

#[tokio::test]
async fn a_foreign_host_header_on_a_loopback_bind_is_refused() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let evil = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("host", &format!("attacker.example:{port}"))],
        )
        .await;
    let frame = error_body(&evil, 403, -32600, "input_validation");
    assert_eq!(frame["error"]["data"]["message"], "host not allowed");
    let local = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("host", &format!("localhost:{port}"))],
        )
        .await;
    assert_eq!(local.status, 200);
}

#[tokio::test]
async fn transport_errors_come_in_order_with_json_rpc_bodies() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    // A 2026 client's probe learns "legacy server", not "unauthorized".
    let probe = s
        .post_with(
            None,
            rpc(1, "server/discover", json!({})).to_string(),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "server/discover"),
            ],
        )
        .await;
    let frame = error_body(&probe, 400, -32600, "input_validation");
    assert!(frame.get("id").is_none());
    // Without the header it reaches the dispatcher: 400 with method-not-found.
    let discover = s
        .post(Some(&t), &rpc(2, "server/discover", json!({})))
        .await;
    assert_eq!(
        error_body(&discover, 400, -32601, "input_validation")["id"],
        2
    );

    let batch = s
        .post_with(Some(&t), format!("[{}]", rpc(1, "ping", json!({}))), &[])
        .await;
    assert!(
        error_body(&batch, 400, -32600, "input_validation")
            .get("id")
            .is_none()
    );
    let junk = s.post_with(Some(&t), "{\"jsonrpc\":".into(), &[]).await;
    error_body(&junk, 400, -32700, "input_validation");

    let text = s
        .send(
            s.client
                .post(s.url("/mcp"))
                .header("content-type", "text/plain")
                .header("authorization", format!("Bearer {t}"))
                .body(rpc(1, "ping", json!({})).to_string()),
        )
        .await;
    error_body(&text, 415, -32600, "input_validation");
    let html = s
        .post_with(
            Some(&t),
            rpc(1, "ping", json!({})).to_string(),
            &[("accept", "text/html")],
        )
        .await;
    error_body(&html, 406, -32600, "input_validation");

    // No GET stream (DELETE ends a session: tests/e2e/http/sessions.rs).
    let reply = s.send(s.client.get(s.url("/mcp"))).await;
    error_body(&reply, 405, -32600, "input_validation");
    assert_eq!(reply.header("allow"), Some("POST, DELETE, OPTIONS"));
    let missing = s.send(s.client.get(s.url("/nope"))).await;
    error_body(&missing, 404, -32600, "input_validation");

    // Refused from the declared length, before any body byte is read: the client sends
    // only the headers (a client that kept writing 4 MiB could meet a closed socket).
    let reply = headers_only(&s, &t, 4 * 1024 * 1024 + 1).await;
    error_body(&reply, 413, -32600, "input_validation");
    // The bridge still serves.
    assert_eq!(
        s.post(Some(&t), &rpc(1, "ping", json!({}))).await.status,
        200
    );
}
