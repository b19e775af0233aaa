//! Serving: health, the handshake, the tools and a call; a wildcard bind with a public
//! URL; bad serving flags refused at startup.

use std::process::Command;

use serde_json::json;

use super::LOCAL;
use crate::support::binary::binary;
use crate::support::fixtures;
use crate::support::http_server::{Server, error_body, rpc};
use crate::support::init_params;

#[tokio::test]
async fn the_binary_serves_health_the_handshake_the_tools_and_a_call() {
    let s = Server::start(&[]);
    let t = s.token(LOCAL, None);
    let health = s.send(s.client.get(s.url("/healthz"))).await;
    assert_eq!(
        (health.status, health.json()),
        (200, json!({"status": "ok"}))
    );
    let ready = s.send(s.client.get(s.url("/readyz"))).await;
    assert_eq!(
        (ready.status, ready.json()),
        (
            200,
            json!({"status": "ok", "checks": {"store": "ok", "cuo": "ok"}})
        )
    );

    let init = s.rpc(&t, 1, "initialize", init_params("2025-11-25")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "cyberos-mcp-bridge");
    let note = s
        .post(
            Some(&t),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert_eq!((note.status, note.text.as_str()), (202, ""));
    assert!(
        note.header("mcp-session-id").is_none(),
        "stateless: no session"
    );

    let list = s.rpc(&t, 2, "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 8);
    let call = s
        .call(&t, "cyberos.skill.list_skills", json!({"query": "release"}))
        .await;
    assert_eq!(
        call["result"]["structuredContent"]["skills"][0]["name"], "release-notes",
        "{call}"
    );
    // The well-known header is accepted; ping needs nothing else.
    let ping = s
        .post_with(
            Some(&t),
            rpc(3, "ping", json!({})).to_string(),
            &[("mcp-protocol-version", "2025-11-25")],
        )
        .await;
    assert_eq!((ping.status, &ping.json()["result"]), (200, &json!({})));
}

/// A wildcard bind (with a real key source: `--dev` refuses non-loopback binds) serves the
/// RFC 9728 document of its public URL, and local origins lose their loopback allowance.
/// That the port opens and /healthz answers is criterion 21 of the acceptance suite.
#[tokio::test]
async fn a_wildcard_bind_serves_the_public_url_and_refuses_local_origins() {
    let dir = tempfile::tempdir().unwrap();
    let key = fixtures().join("keys/rsa.pub");
    let s = Server::launch(
        dir.path(),
        &[
            "--listen",
            "0.0.0.0:0",
            "--jwt-public-key",
            key.to_str().unwrap(),
            "--jwt-issuer",
            "https://issuer.example",
            "--public-url",
            "https://bridge.example.com/mcp",
        ],
        &[],
    );
    let doc = s
        .send(
            s.client
                .get(s.url("/.well-known/oauth-protected-resource/mcp")),
        )
        .await
        .json();
    assert_eq!(doc["resource"], "https://bridge.example.com/mcp");
    assert_eq!(
        doc["authorization_servers"],
        json!(["https://issuer.example"])
    );
    // Not loopback: any Host; the public origin may call from a browser.
    let reply = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[
                ("host", "bridge.example.com"),
                ("origin", "https://bridge.example.com"),
            ],
        )
        .await;
    error_body(&reply, 401, -32000, "authz_denied");
    assert!(reply.header("www-authenticate").unwrap().contains(
        "resource_metadata=\"https://bridge.example.com/.well-known/oauth-protected-resource/mcp\""
    ));
    let local = s
        .post_with(
            None,
            rpc(1, "ping", json!({})).to_string(),
            &[("origin", "http://localhost:3000")],
        )
        .await;
    assert_eq!(
        local.status, 403,
        "local origins are a loopback-only allowance"
    );
}

#[test]
fn a_bad_cors_origin_or_public_url_is_a_usage_error() {
    for (flag, value, says) in [
        ("--cors-origin", "*", "--cors-origin"),
        ("--public-url", "bridge.example.com/mcp", "--public-url"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(binary())
            .args([
                "--dev",
                "--transport",
                "http",
                "--listen",
                "127.0.0.1:0",
                flag,
                value,
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{out:?}"
        );
    }
}

/// A probe that fails names the part, and nothing of its cause (no path, no command).
#[tokio::test]
async fn readiness_names_the_part_that_cannot_serve() {
    let s = Server::start(&["--cuo-command", "/nonexistent/cuo-supervisor"]);
    let ready = s.send(s.client.get(s.url("/readyz"))).await;
    assert_eq!(ready.status, 503, "{}", ready.text);
    let body = ready.json();
    assert_eq!(body["failed"], json!(["cuo"]), "{body}");
    assert_eq!(body["checks"]["store"], "ok");
    assert!(
        body["checks"]["cuo"]
            .as_str()
            .unwrap()
            .contains("unavailable"),
        "{body}"
    );
    assert!(!ready.text.contains("nonexistent"), "{}", ready.text);
}

#[tokio::test]
async fn an_http2_client_with_prior_knowledge_gets_100_concurrent_calls_on_one_connection() {
    // One connection allowed: a second one would get 503, so every answer below came on
    // the one connection, as concurrent HTTP/2 streams.
    let s = Server::start(&["--http-max-connections", "1", "--http-call-rate", "off"]);
    let t = s.token(LOCAL, None);
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let calls = (0..100).map(|n| {
        let req = h2
            .post(s.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(&t)
            .body(
                rpc(
                    n,
                    "tools/call",
                    json!({"name": "cyberos.skill.list_skills", "arguments": {}}),
                )
                .to_string(),
            );
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.version(), reqwest::Version::HTTP_2);
            assert_eq!(resp.status(), 200);
            let frame: serde_json::Value =
                serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            assert_eq!(frame["id"], n, "{frame}");
            assert!(
                frame["result"]["structuredContent"]["skills"].is_array(),
                "{frame}"
            );
        }
    });
    futures::future::join_all(calls).await;
    // HTTP/1.1 on the same port still works once the HTTP/2 connection is gone.
    drop(h2);
    crate::support::wait_for_async(std::time::Duration::from_secs(10), async || {
        let health = s.send(s.client.get(s.url("/healthz"))).await;
        (health.status == 200)
            .then_some(())
            .ok_or_else(|| format!("{}: {}", health.status, health.text))
    })
    .await;
}
