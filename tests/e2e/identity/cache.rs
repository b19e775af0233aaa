//! The verified-token cache, over HTTP: a remembered token stops working the moment it
//! expires (`exp` plus the 30 s leeway, checked against the clock on every use), and a
//! token whose key the IdP removed stops verifying once the key set is refreshed.

use std::time::Duration;

use serde_json::{Value, json};

use super::jwks::jwk;
use super::jwks_refresh::two_refreshes;
use super::{ALL, ISSUER, TENANT_A, claims, now, rs256};
use crate::support::http_server::{Server, error_body, rpc};
use crate::support::jwks_server::JwksServer;
use crate::support::{fixtures, wait_until_async};

/// Tokens are verified with this leeway on `exp` (the verifier's `LEEWAY_S`).
const LEEWAY_S: i64 = 30;

fn list_skills() -> Value {
    rpc(
        1,
        "tools/call",
        json!({"name": "cyberos.skill.list_skills", "arguments": {}}),
    )
}

/// A bridge on a fresh data dir verifying tokens of [`ISSUER`] with `keys`.
fn bridge(keys: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = keys.to_vec();
    args.extend_from_slice(&["--jwt-issuer", ISSUER]);
    (Server::launch(dir.path(), &args, &[]), dir)
}

#[tokio::test]
async fn a_remembered_token_stops_working_the_moment_it_expires() {
    let pem = fixtures().join("keys/rsa.pub");
    let (s, _dir) = bridge(&["--jwt-public-key", pem.to_str().unwrap()]);
    // Past its `exp` already, inside the leeway for about 4 s more.
    let exp = now() - LEEWAY_S + 4;
    let mut c = claims(TENANT_A, ALL);
    c["exp"] = exp.into();
    c["iat"] = (exp - 60).into();
    let token = rs256(&c, None, "rsa.key");
    for _ in 0..2 {
        let ok = s.post(Some(&token), &list_skills()).await;
        assert_eq!(ok.status, 200, "{}", ok.text);
        assert!(ok.json()["result"].is_object(), "{}", ok.text);
    }
    // The first whole second past `exp` + leeway.
    // The bridge's own wall clock must pass it: a real wait, ended as soon as it has.
    wait_until_async(Duration::from_secs(10), "past exp + leeway", async || {
        now() > exp + LEEWAY_S
    })
    .await;
    let expired = s.post(Some(&token), &list_skills()).await;
    let frame = error_body(&expired, 401, -32000, "authz_denied");
    assert_eq!(
        frame["error"]["data"]["message"], "token expired",
        "{frame}"
    );
}

#[tokio::test]
async fn a_remembered_token_stops_verifying_once_the_jwks_drops_its_key() {
    let idp = JwksServer::start(jwk("rsa.key", "k1"));
    idp.set_max_age(1);
    let (s, _dir) = bridge(&["--jwks-url", &idp.url]);
    let k1 = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa.key");
    let k2 = rs256(&claims(TENANT_A, ALL), Some("k2"), "rsa2.key");
    for _ in 0..2 {
        let ok = s.post(Some(&k1), &list_skills()).await;
        assert_eq!(ok.status, 200, "{}", ok.text);
    }
    // A refresh that brings the same set changes nothing.
    two_refreshes(&idp);
    assert_eq!(s.post(Some(&k1), &list_skills()).await.status, 200);

    idp.set(jwk("rsa2.key", "k2"));
    two_refreshes(&idp);
    let removed = s.post(Some(&k1), &list_skills()).await;
    let frame = error_body(&removed, 401, -32000, "authz_denied");
    assert_eq!(
        frame["error"]["data"]["message"], "invalid token",
        "{frame}"
    );
    assert_eq!(s.post(Some(&k2), &list_skills()).await.status, 200);
}
