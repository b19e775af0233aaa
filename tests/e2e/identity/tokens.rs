//! Verified tokens on stdio: every kind of bad token refused without a leak, scopes,
//! the tenant of each request's own token, calls without a token, `CYBEROS_TOKEN`.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use super::{
    ALL, ISSUER, TENANT_A, TENANT_B, Verified, assert_denied_without_leak, b64, claims, key, now,
    rs256,
};
use crate::support::binary::Bridge;
use crate::support::{assert_envelope, fixtures};

#[test]
fn bad_tokens_are_all_authz_denied_without_leaking_or_panicking() {
    let mut v = Verified::start(&[]);
    let good = rs256(&claims(TENANT_A, ALL), None, "rsa.key");
    let ok = v
        .with_token(&good)
        .call("cyberos.skill.list_skills", json!({}));
    assert!(
        ok["result"]["structuredContent"]["skills"].is_array(),
        "{ok}"
    );

    let payload = claims(TENANT_A, ALL);
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&payload)
    );
    let confused = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &payload,
        &EncodingKey::from_secret(&key("rsa.pub")).unwrap(),
    )
    .unwrap();
    let mut wrong_aud = claims(TENANT_A, ALL);
    wrong_aud["aud"] = "someone-else".into();
    let mut wrong_iss = claims(TENANT_A, ALL);
    wrong_iss["iss"] = "https://evil.test".into();
    let mut expired = claims(TENANT_A, ALL);
    expired["exp"] = (now() - 120).into();
    let mut early = claims(TENANT_A, ALL);
    early["nbf"] = (now() + 600).into();
    let mut no_tenant = claims(TENANT_A, ALL);
    no_tenant.as_object_mut().unwrap().remove("tenant_id");
    let mut bad_tenant = claims(TENANT_A, ALL);
    bad_tenant["tenant_id"] = "tenant-a".into();
    // The tenant's UUID in spellings other than its canonical one: one tenant, one string.
    let mut upper_tenant = claims(TENANT_A, ALL);
    upper_tenant["tenant_id"] = TENANT_A.to_uppercase().into();
    let mut urn_tenant = claims(TENANT_A, ALL);
    urn_tenant["tenant_id"] = format!("urn:uuid:{TENANT_A}").into();
    let mut bare_tenant = claims(TENANT_A, ALL);
    bare_tenant["tenant_id"] = TENANT_A.replace('-', "").into();
    let mut no_exp = claims(TENANT_A, ALL);
    no_exp.as_object_mut().unwrap().remove("exp");
    let other_key = rs256(&claims(TENANT_A, ALL), None, "rsa2.key");
    let huge = format!(
        "{}.{}.{}",
        b64(&json!({"alg": "RS256"})),
        "A".repeat(100 * 1024),
        "B"
    );

    let cases: Vec<(&str, String, &str)> = vec![
        ("alg none", none, "invalid token"),
        ("HS256 with the RSA public key", confused, "invalid token"),
        (
            "wrong aud",
            rs256(&wrong_aud, None, "rsa.key"),
            "invalid token",
        ),
        (
            "wrong iss",
            rs256(&wrong_iss, None, "rsa.key"),
            "invalid token",
        ),
        ("expired", rs256(&expired, None, "rsa.key"), "token expired"),
        (
            "nbf in the future",
            rs256(&early, None, "rsa.key"),
            "token not yet valid",
        ),
        (
            "missing tenant_id",
            rs256(&no_tenant, None, "rsa.key"),
            "invalid token",
        ),
        (
            "non-UUID tenant_id",
            rs256(&bad_tenant, None, "rsa.key"),
            "invalid token",
        ),
        (
            "upper-case tenant_id",
            rs256(&upper_tenant, None, "rsa.key"),
            "invalid token",
        ),
        (
            "urn:uuid tenant_id",
            rs256(&urn_tenant, None, "rsa.key"),
            "invalid token",
        ),
        (
            "unhyphenated tenant_id",
            rs256(&bare_tenant, None, "rsa.key"),
            "invalid token",
        ),
        (
            "missing exp",
            rs256(&no_exp, None, "rsa.key"),
            "invalid token",
        ),
        ("another key", other_key, "invalid token"),
        ("garbage", "not-a-jwt".into(), "invalid token"),
        (
            "truncated",
            good[..good.len() - 12].to_owned(),
            "invalid token",
        ),
        ("100 KB", huge, "invalid token"),
        ("empty", String::new(), "authentication required"),
    ];
    for (name, token, message) in cases {
        let resp = v
            .with_token(&token)
            .call("cyberos.skill.list_skills", json!({}));
        let data = assert_denied_without_leak(&resp, &token);
        assert_eq!(resp["error"]["data"]["message"], message, "{name}: {resp}");
        assert!(data["hint"].as_str().unwrap().len() > 10, "{name}");
    }
    let expired_resp = v
        .with_token(&rs256(&expired, None, "rsa.key"))
        .call("cyberos.skill.list_skills", json!({}));
    assert!(
        expired_resp["error"]["data"]["hint"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    // Still serving, and a good token works again (nothing was cached).
    assert_eq!(v.bridge.request("ping", json!({}))["result"], json!({}));
    let ok = v
        .with_token(&good)
        .call("cyberos.skill.list_skills", json!({}));
    assert!(ok["result"].is_object(), "{ok}");
}

#[test]
fn scopes_come_from_scope_or_scp_and_a_missing_one_is_named() {
    let mut v = Verified::start(&[]);
    let read_only = rs256(
        &claims(TENANT_A, "cyberos:memory:read cyberos:skill:read"),
        None,
        "rsa.key",
    );
    let resp = v.with_token(&read_only).request(
        "tools/call",
        json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "decision", "body": {}},
               "_meta": {"com.cyberos/confirmed": true}}),
    );
    let data = assert_envelope(&resp, -32000, "authz_denied");
    assert_eq!(data["missing_scopes"], json!(["cyberos:memory:write"]));
    let mut scp = claims(TENANT_A, "");
    scp.as_object_mut().unwrap().remove("scope");
    scp["scp"] = json!(["cyberos:skill:read"]);
    let ok = v
        .with_token(&rs256(&scp, None, "rsa.key"))
        .call("cyberos.skill.list_skills", json!({}));
    assert!(ok["result"].is_object(), "{ok}");
    let denied = v.bridge.call("cyberos.cuo.list_personas", json!({}));
    assert_eq!(
        assert_envelope(&denied, -32000, "authz_denied")["missing_scopes"],
        json!(["cyberos:cuo:read"])
    );
}

#[test]
fn each_request_runs_as_the_tenant_of_its_own_token() {
    let mut v = Verified::start(&[]);
    let a = rs256(&claims(TENANT_A, ALL), None, "rsa.key");
    let b = rs256(&claims(TENANT_B, ALL), None, "rsa.key");
    let append = json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "decision", "body": {"owner": "a"}},
                        "_meta": {"com.cyberos/confirmed": true}});
    let receipt = v.with_token(&a).request("tools/call", append);
    let id = receipt["result"]["structuredContent"]["audit_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let seen_by_b = v
        .with_token(&b)
        .call("cyberos.memory.read_audit", json!({}));
    assert_eq!(
        seen_by_b["result"]["structuredContent"]["entries"],
        json!([]),
        "tenant B sees nothing of A"
    );
    let probe = v
        .bridge
        .call("cyberos.memory.read_audit", json!({"audit_id": id}));
    assert_eq!(probe["error"]["data"]["message"], "audit entry not found");
    let seen_by_a = v
        .with_token(&a)
        .call("cyberos.memory.read_audit", json!({}));
    assert_eq!(
        seen_by_a["result"]["structuredContent"]["entries"][0]["body"],
        json!({"owner": "a"})
    );
}

#[test]
fn without_a_token_only_calls_are_refused() {
    let pem = fixtures().join("keys/rsa.pub");
    let mut b = Bridge::spawn_with_env(
        &[
            "--jwt-public-key",
            pem.to_str().unwrap(),
            "--jwt-issuer",
            ISSUER,
        ],
        &[],
    );
    b.initialize();
    assert_eq!(
        b.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    assert_eq!(
        b.request("logging/setLevel", json!({"level": "info"}))["result"],
        json!({})
    );
    let resp = b.call("cyberos.skill.list_skills", json!({}));
    assert_eq!(resp["error"]["data"]["message"], "authentication required");
    assert!(
        assert_envelope(&resp, -32000, "authz_denied")["hint"]
            .as_str()
            .unwrap()
            .contains("--token-file")
    );
    let tasks = b.request("tasks/list", json!({}));
    assert_envelope(&tasks, -32000, "authz_denied");
}

#[test]
fn cyberos_token_is_used_when_no_token_file_is_given() {
    let pem = fixtures().join("keys/rsa.pub");
    let token = rs256(&claims(TENANT_A, ALL), None, "rsa.key");
    let mut b = Bridge::spawn_with_env(
        &[
            "--jwt-public-key",
            pem.to_str().unwrap(),
            "--jwt-issuer",
            ISSUER,
        ],
        &[("CYBEROS_TOKEN", token.as_str())],
    );
    b.initialize();
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
}
