//! JWKS: keys cached by kid, rotated on an unknown kid, and kept when the IdP is down.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey};

use crate::support::jwks_server::JwksServer;
use std::time::Duration;

use serde_json::{Value, json};

use super::{ALL, ISSUER, TENANT_A, claims, key, rs256};
use crate::support::binary::Bridge;

fn jwk(key_file: &str, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(
        &EncodingKey::from_rsa_pem(&key(key_file)).unwrap(),
        Algorithm::RS256,
    )
    .unwrap();
    jwk.common.key_id = Some(kid.into());
    serde_json::to_value(JwkSet { keys: vec![jwk] }).unwrap()
}

#[test]
fn jwks_keys_are_cached_by_kid_rotated_on_an_unknown_kid_and_kept_when_the_idp_is_down() {
    let server = JwksServer::start(jwk("rsa.key", "k1"));
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "").unwrap();
    let mut b = Bridge::spawn_with_env(
        &[
            "--jwks-url",
            &server.url,
            "--jwt-issuer",
            ISSUER,
            "--token-file",
            token_file.to_str().unwrap(),
        ],
        &[],
    );
    b.initialize();
    let mut call = |token: &str| {
        std::fs::write(&token_file, token).unwrap();
        b.call("cyberos.skill.list_skills", json!({}))
    };
    let k1 = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa.key");
    assert!(call(&k1)["result"].is_object());
    // A different key claiming the known kid fails its signature.
    let forged = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa2.key");
    assert_eq!(call(&forged)["error"]["message"], "invalid token");
    // The IdP goes down: cached keys keep serving.
    server.set(Value::Null);
    assert!(call(&k1)["result"].is_object());
    // Rotation: the IdP now publishes k2 only; an unknown kid triggers one refetch once
    // the rate limit allows it.
    server.set(jwk("rsa2.key", "k2"));
    std::thread::sleep(Duration::from_millis(5200));
    let k2 = rs256(&claims(TENANT_A, ALL), Some("k2"), "rsa2.key");
    let rotated = call(&k2);
    assert!(rotated["result"].is_object(), "{rotated}");
    let unknown = rs256(&claims(TENANT_A, ALL), Some("k9"), "rsa2.key");
    assert_eq!(call(&unknown)["error"]["message"], "invalid token");
}
