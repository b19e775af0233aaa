//! Confirmation: a confirmation token confirms exactly one matching call, and a client
//! with elicitation is asked (only a yes confirms).

use serde_json::{Value, json};

use super::dev_token;
use crate::support::binary::Bridge;
use crate::support::{assert_envelope, init_params};

#[test]
fn a_confirmation_token_confirms_exactly_one_matching_call() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"kind": "decision", "body": {"adr": 7}});
    let local = "00000000-0000-4000-8000-000000000001";
    let confirm = dev_token(
        dir.path(),
        &[
            "--tenant",
            local,
            "--confirm",
            "cyberos.memory.append_audit",
            "--args",
            &args.to_string(),
        ],
    );
    let data = tempfile::TempDir::new().unwrap();
    std::fs::copy(
        dir.path().join("dev-signing-key.pem"),
        data.path().join("dev-signing-key.pem"),
    )
    .unwrap();
    let mut b = Bridge::spawn_in(data, &["--dev"], &[]);
    b.initialize();
    let call = |b: &mut Bridge, arguments: &Value| {
        b.request(
            "tools/call",
            json!({"name": "cyberos.memory.append_audit", "arguments": arguments,
                                      "_meta": {"com.cyberos/confirmation_token": confirm}}),
        )
    };
    // Same arguments, keys in another order: the canonical hash still matches.
    let reordered: Value = serde_json::from_str(r#"{"body":{"adr":7},"kind":"decision"}"#).unwrap();
    let first = call(&mut b, &reordered);
    assert!(
        first["result"]["structuredContent"]["audit_id"].is_string(),
        "{first}"
    );
    let replay = call(&mut b, &args);
    assert_eq!(
        replay["error"]["data"]["message"], "the confirmation token was already used",
        "{replay}"
    );
    let other = call(&mut b, &json!({"kind": "decision", "body": {"adr": 8}}));
    assert_envelope(&other, -32000, "authz_denied");
}

#[test]
fn a_client_with_elicitation_is_asked_and_only_a_yes_confirms() {
    let mut b = Bridge::spawn(&[]);
    let mut params = init_params("2025-11-25");
    params["capabilities"]["elicitation"] = json!({"form": {}});
    b.request("initialize", params);
    b.notify("notifications/initialized", json!({}));
    for (answer, confirmed) in [
        (
            json!({"action": "accept", "content": {"confirm": true}}),
            true,
        ),
        (
            json!({"action": "accept", "content": {"confirm": false}}),
            false,
        ),
        (json!({"action": "decline"}), false),
        (json!({"action": "cancel"}), false),
    ] {
        let id = b.send_request("tools/call", json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "note", "body": {}}}));
        let ask = b.recv();
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        assert_eq!(
            ask["params"]["requestedSchema"]["properties"]["confirm"]["type"],
            "boolean"
        );
        b.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": answer}));
        let resp = b.recv();
        assert_eq!(resp["id"], id);
        if confirmed {
            assert!(
                resp["result"]["structuredContent"]["audit_id"].is_string(),
                "{resp}"
            );
        } else {
            assert_envelope(&resp, -32000, "authz_denied");
        }
    }
}

#[test]
fn questions_past_the_in_flight_cap_are_still_answered() {
    use cyberos_mcp_bridge::app::edge::stdio::MAX_IN_FLIGHT;
    let mut b = Bridge::spawn(&[]);
    let mut params = init_params("2025-11-25");
    params["capabilities"]["elicitation"] = json!({"form": {}});
    b.request("initialize", params);
    b.notify("notifications/initialized", json!({}));
    // More calls than may run at once, each waiting for the user: the answers come after
    // them, and only reading them frees a slot for the calls past the cap.
    let calls = MAX_IN_FLIGHT + 76;
    for _ in 0..calls {
        b.send_request(
            "tools/call",
            json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "note", "body": {}}}),
        );
    }
    let (mut asked, mut answered) = (0, 0);
    while answered < calls {
        let frame = b.recv();
        if frame["method"] == "elicitation/create" {
            asked += 1;
            let yes = json!({"action": "accept", "content": {"confirm": true}});
            b.send(&json!({"jsonrpc": "2.0", "id": frame["id"], "result": yes}));
        } else {
            // Confirmed by the user's answer, not refused when the question went unread.
            assert!(
                frame["result"]["structuredContent"]["audit_id"].is_string(),
                "{frame}"
            );
            answered += 1;
        }
    }
    assert_eq!(asked, calls);
}
