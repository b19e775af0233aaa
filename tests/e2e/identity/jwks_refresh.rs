//! JWKS refresh: the key set is refetched on a timer set by the IdP's `max-age` (at least
//! 1 s), so a removed key stops verifying; an outage or a garbage answer keeps the last
//! good set; encryption keys never verify signatures.

use std::time::Duration;

use serde_json::{Value, json};

use super::jwks::{JwksBridge, jwk};
use super::{ALL, TENANT_A, claims, rs256};
use crate::support::jwks_server::{JwksServer, Reply};

/// Two refreshes after now: the first may have started before the change, the second
/// certainly saw it (the timer fetches one at a time).
pub(super) fn two_refreshes(server: &JwksServer) {
    let n = server.fetches();
    assert!(
        server.wait_fetches(n + 2, Duration::from_secs(15)),
        "the bridge refetched the JWKS {} times in 15 s with max-age=1",
        server.fetches() - n
    );
}

#[test]
fn a_removed_key_stops_verifying_after_the_refresh_and_an_outage_keeps_the_last_good_set() {
    let server = JwksServer::start(jwk("rsa.key", "k1"));
    server.set_max_age(1);
    let mut b = JwksBridge::start(&server.url);
    let k1 = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa.key");
    let k2 = rs256(&claims(TENANT_A, ALL), Some("k2"), "rsa2.key");
    let ok = |resp: Value| assert!(resp["result"].is_object(), "{resp}");
    ok(b.call(&k1));

    // Down, then answering garbage: refreshes fail, the last good set keeps serving.
    server.reply(Reply::Down);
    two_refreshes(&server);
    ok(b.call(&k1));
    server.reply(Reply::Garbage);
    two_refreshes(&server);
    ok(b.call(&k1));

    // The IdP drops k1 and publishes k2: once refreshed, k1 no longer verifies.
    server.set(jwk("rsa2.key", "k2"));
    two_refreshes(&server);
    let removed = b.call(&k1);
    assert_eq!(
        removed["error"]["data"]["message"], "invalid token",
        "{removed}"
    );
    assert_eq!(removed["error"]["data"]["class"], "authz_denied");
    ok(b.call(&k2));
}

#[test]
fn an_encryption_key_never_verifies_a_signature() {
    let mut enc = jwk("rsa.key", "k1")["keys"][0].clone();
    enc["use"] = json!("enc");
    let mut encrypt_only = jwk("rsa.key", "k3")["keys"][0].clone();
    encrypt_only["key_ops"] = json!(["encrypt"]);
    let sig = jwk("rsa2.key", "k2")["keys"][0].clone();
    let server = JwksServer::start(json!({"keys": [enc, encrypt_only, sig]}));
    let mut b = JwksBridge::start(&server.url);
    for (kid, key) in [("k1", "rsa.key"), ("k3", "rsa.key")] {
        let token = rs256(&claims(TENANT_A, ALL), Some(kid), key);
        let resp = b.call(&token);
        assert_eq!(
            resp["error"]["data"]["message"], "invalid token",
            "{kid}: {resp}"
        );
    }
    let k2 = rs256(&claims(TENANT_A, ALL), Some("k2"), "rsa2.key");
    let resp = b.call(&k2);
    assert!(resp["result"].is_object(), "{resp}");
}
