//! Confirmation-token claims through the binary: the bridge's audience, the purpose claim,
//! the caller's `sub` and an `exp` bounded against the clock are all required; each
//! refusal is `authz_denied` with a message naming the fault and no token bytes; the
//! right token works once, and a confirmation token is never a bearer token.

use serde_json::{Value, json};

use cyberos_mcp_bridge::app::service::confirmation::args_sha256;

use super::{ALL, ISSUER, TENANT_A, Verified, assert_denied_without_leak, claims, now, rs256};

const TOOL: &str = "cyberos.memory.append_audit";

/// A refusal case: its name, how it changes a good token's claims, the expected message.
type Case = (&'static str, Box<dyn FnOnce(&mut Value)>, &'static str);

/// A confirmation token for `args`, signed like the bearer, changed by `edit`.
fn confirmation(args: &Value, jti: &str, edit: impl FnOnce(&mut Value)) -> String {
    let mut c = json!({
        "iss": ISSUER, "aud": "cyberos-mcp-bridge", "sub": "alice", "tenant_id": TENANT_A,
        "purpose": "com.cyberos/confirmation", "tool": TOOL, "args_sha256": args_sha256(args),
        "jti": jti, "iat": now(), "exp": now() + 120
    });
    edit(&mut c);
    rs256(&c, None, "rsa.key")
}

fn append(v: &mut Verified, args: &Value, confirm: &str) -> Value {
    let bearer = rs256(&claims(TENANT_A, ALL), None, "rsa.key");
    v.with_token(&bearer).request(
        "tools/call",
        json!({"name": TOOL, "arguments": args,
               "_meta": {"com.cyberos/confirmation_token": confirm}}),
    )
}

#[test]
fn confirmation_tokens_need_the_audience_the_purpose_the_caller_and_a_bounded_expiry() {
    let mut v = Verified::start(&[]);
    let args = json!({"kind": "decision", "body": {"adr": 9}});
    let year = 365 * 24 * 3600;
    let cases: Vec<Case> = vec![
        (
            "wrong aud",
            Box::new(|c| c["aud"] = json!("another-service")),
            "the confirmation token was not issued for this bridge (aud)",
        ),
        (
            "no aud",
            Box::new(|c| drop(c.as_object_mut().unwrap().remove("aud"))),
            "the confirmation token lacks the aud claim",
        ),
        (
            "no purpose",
            Box::new(|c| drop(c.as_object_mut().unwrap().remove("purpose"))),
            "the confirmation token lacks the purpose \"com.cyberos/confirmation\"",
        ),
        (
            "other sub",
            Box::new(|c| c["sub"] = json!("mallory")),
            "the confirmation token was issued to another user",
        ),
        (
            // Five minutes "from iat", but iat is a year ahead: valid for a year.
            "exp a year ahead",
            Box::new(move |c| {
                c["iat"] = json!(now() + year);
                c["exp"] = json!(now() + year + 240);
            }),
            "the confirmation token lives longer than 5 minutes",
        ),
        (
            "expired",
            Box::new(|c| {
                c["iat"] = json!(now() - 300);
                c["exp"] = json!(now() - 120);
            }),
            "the confirmation token has expired",
        ),
    ];
    // Every case is tried and every wrong answer reported, so one run names them all.
    let mut wrong = Vec::new();
    for (i, (case, edit, message)) in cases.into_iter().enumerate() {
        let token = confirmation(&args, &format!("bad-{i}"), edit);
        let resp = append(&mut v, &args, &token);
        if resp["error"]["data"]["message"] != message {
            wrong.push(format!("{case}: {resp}"));
            continue;
        }
        let data = assert_denied_without_leak(&resp, &token);
        assert!(
            data["hint"].as_str().unwrap().contains("purpose"),
            "{case}: {resp}"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The right token works once.
    let good = confirmation(&args, "good-1", |_| {});
    let first = append(&mut v, &args, &good);
    assert!(
        first["result"]["structuredContent"]["audit_id"].is_string(),
        "{first}"
    );
    let replay = append(&mut v, &args, &good);
    assert_eq!(
        replay["error"]["data"]["message"], "the confirmation token was already used",
        "{replay}"
    );
    // Presented as a bearer token, it is refused.
    let as_bearer = v
        .with_token(&good)
        .call("cyberos.skill.list_skills", json!({}));
    assert_eq!(
        as_bearer["error"]["data"]["message"], "invalid token",
        "{as_bearer}"
    );
}
