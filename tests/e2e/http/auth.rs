//! Tokens and scopes over HTTP: 401 with the RFC 9728 challenge, 403 for a missing
//! scope, and tokens without a subject. (Each token confined to its own tenant is
//! criterion 16 of the acceptance suite.)

use serde_json::json;

use super::LOCAL;
use crate::support::http_server::{Server, error_body, rpc};
use crate::support::init_params;

const ALL_SCOPES: &str = "cyberos:cuo:read cyberos:cuo:execute cyberos:memory:read cyberos:memory:write cyberos:skill:read cyberos:skill:invoke";

#[tokio::test]
async fn missing_and_bad_tokens_get_401_with_the_rfc_9728_challenge() {
    let s = Server::start(&[]);
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", s.base);

    let none = s.post(None, &rpc(7, "tools/list", json!({}))).await;
    let frame = error_body(&none, 401, -32000, "authz_denied");
    assert_eq!(frame["id"], 7, "the request id is echoed");
    assert_eq!(
        none.header("www-authenticate").unwrap(),
        format!("Bearer resource_metadata=\"{metadata}\", scope=\"{ALL_SCOPES}\"")
    );

    let bad = s
        .post(
            Some("not.a.jwt"),
            &rpc(8, "initialize", init_params("2025-11-25")),
        )
        .await;
    error_body(&bad, 401, -32000, "authz_denied");
    let challenge = bad.header("www-authenticate").unwrap();
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");

    // A notification carries no id, so the 401 carries none either.
    let note = s
        .post(
            None,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    assert!(
        error_body(&note, 401, -32000, "authz_denied")
            .get("id")
            .is_none()
    );

    // A token of another key (another data dir) is refused too.
    let elsewhere = Server::start(&[]);
    let foreign = elsewhere.token(LOCAL, None);
    let reply = s
        .post(Some(&foreign), &rpc(9, "tools/list", json!({})))
        .await;
    error_body(&reply, 401, -32000, "authz_denied");

    let doc = s
        .send(
            s.client
                .get(s.url("/.well-known/oauth-protected-resource/mcp")),
        )
        .await;
    assert_eq!(doc.status, 200);
    let doc = doc.json();
    assert_eq!(doc["resource"], format!("{}/mcp", s.base));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    assert_eq!(doc["scopes_supported"].as_array().unwrap().len(), 6);
    assert!(doc["authorization_servers"].is_array());
    let root = s
        .send(s.client.get(s.url("/.well-known/oauth-protected-resource")))
        .await;
    assert_eq!(root.json(), doc);
}

#[tokio::test]
async fn a_read_only_token_gets_403_insufficient_scope_for_a_write() {
    let s = Server::start(&[]);
    let t = s.token(
        LOCAL,
        Some("cyberos:memory:read offline_access cyberos:skill:read bad\"word"),
    );
    let reply = s
        .post(
            Some(&t),
            &rpc(
                4,
                "tools/call",
                json!({
                    "name": "cyberos.memory.append_audit",
                    "arguments": {"kind": "test.note", "body": {"x": 1}},
                    "_meta": {"com.cyberos/confirmed": true}
                }),
            ),
        )
        .await;
    let frame = error_body(&reply, 403, -32000, "authz_denied");
    assert_eq!(frame["id"], 4);
    assert_eq!(
        frame["error"]["data"]["missing_scopes"],
        json!(["cyberos:memory:write"])
    );
    let challenge = reply.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\""),
        "{challenge}"
    );
    // What the call needs together with what the token holds, known or not, so a
    // client that replaces its scopes with the challenge's keeps them; a word that would
    // break the quoted parameter is left out.
    assert!(
        challenge.contains(
            "scope=\"cyberos:memory:read offline_access cyberos:skill:read cyberos:memory:write\""
        ),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata=\""), "{challenge}");
    // What the token does allow still works.
    let ok = s.call(&t, "cyberos.skill.list_skills", json!({})).await;
    assert!(ok.get("result").is_some(), "{ok}");
}

#[tokio::test]
async fn a_token_whose_subject_is_empty_is_refused() {
    // Sessions, approvals and confirmations bind to the subject: an empty one names nobody.
    let s = Server::start(&[]);
    for sub in ["", "  "] {
        let token = s.token_with("00000000-0000-4000-8000-000000000001", &["--sub", sub]);
        let reply = s
            .post(
                Some(&token),
                &rpc(3, "initialize", init_params("2025-11-25")),
            )
            .await;
        error_body(&reply, 401, -32000, "authz_denied");
        assert!(reply.header("mcp-session-id").is_none());
    }
    let named = s.token_with("00000000-0000-4000-8000-000000000001", &["--sub", "ann"]);
    let reply = s
        .post(
            Some(&named),
            &rpc(3, "initialize", init_params("2025-11-25")),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[tokio::test]
async fn a_repeated_session_or_resume_header_is_refused() {
    let s = Server::start(&[]);
    let token = s.token("00000000-0000-4000-8000-000000000001", None);
    for (name, shown) in [
        ("mcp-session-id", "MCP-Session-Id"),
        ("last-event-id", "Last-Event-ID"),
    ] {
        let reply = s
            .post_with(
                Some(&token),
                rpc(4, "tools/list", json!({})).to_string(),
                &[(name, "a"), (name, "b")],
            )
            .await;
        let frame = error_body(&reply, 400, -32600, "input_validation");
        let message = frame["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains(shown), "{message}");
    }
}
