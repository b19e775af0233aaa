//! JWKS: keys cached by kid, rotated on an unknown kid, and kept when the IdP is down;
//! an oversized key set is refused without being buffered.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey};

use crate::support::assert_envelope;
use crate::support::jwks_server::{JwksServer, Reply};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::{ALL, ISSUER, TENANT_A, claims, key, rs256};
use crate::support::binary::Bridge;

/// A bridge whose keys come from `url`, reading its token from a file.
pub(super) struct JwksBridge {
    pub(super) bridge: Bridge,
    token_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl JwksBridge {
    pub(super) fn start(url: &str) -> JwksBridge {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "").unwrap();
        let mut bridge = Bridge::spawn_with_env(
            &[
                "--jwks-url",
                url,
                "--jwt-issuer",
                ISSUER,
                "--token-file",
                token_file.to_str().unwrap(),
            ],
            &[],
        );
        bridge.initialize();
        JwksBridge {
            bridge,
            token_file,
            _dir: dir,
        }
    }

    /// `list_skills` with `token`.
    pub(super) fn call(&mut self, token: &str) -> Value {
        std::fs::write(&self.token_file, token).unwrap();
        self.bridge.call("cyberos.skill.list_skills", json!({}))
    }
}

/// The JWK of `key_file`'s public key with `kid`, as a one-key set.
pub(crate) fn jwk(key_file: &str, kid: &str) -> Value {
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
    let mut b = JwksBridge::start(&server.url);
    let k1 = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa.key");
    assert!(b.call(&k1)["result"].is_object());
    // A different key claiming the known kid fails its signature.
    let forged = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa2.key");
    assert_eq!(b.call(&forged)["error"]["data"]["message"], "invalid token");
    // The IdP goes down: cached keys keep serving.
    server.set(Value::Null);
    assert!(b.call(&k1)["result"].is_object());
    // Rotation, within the 5 s rate limit of the last fetch: the IdP now publishes k2
    // only. The timer waits its default 5 minutes (no max-age), so only the unknown kid
    // can fetch k2: the call waits out the rest of the window and verifies, first time.
    server.set(jwk("rsa2.key", "k2"));
    let before = server.fetches();
    let k2 = rs256(&claims(TENANT_A, ALL), Some("k2"), "rsa2.key");
    let resp = b.call(&k2);
    assert!(resp["result"].is_object(), "{resp}");
    assert_eq!(server.fetches(), before + 1);
    // A kid the IdP does not publish is refused after its own wait and one fetch.
    let unknown = rs256(&claims(TENANT_A, ALL), Some("k9"), "rsa2.key");
    assert_eq!(
        b.call(&unknown)["error"]["data"]["message"],
        "invalid token"
    );
    assert_eq!(server.fetches(), before + 2);
}

#[test]
fn an_oversized_jwks_is_refused_after_reading_about_the_cap_without_buffering_it() {
    const TOTAL: usize = 96 << 20;
    // Streamed (chunked) and with an honest Content-Length: both refused early.
    for declare_length in [false, true] {
        let server = JwksServer::serving(Reply::Oversized {
            total: TOTAL,
            declare_length,
        });
        let mut b = JwksBridge::start(&server.url);
        let token = rs256(&claims(TENANT_A, ALL), Some("k1"), "rsa.key");
        let resp = b.call(&token);
        assert_envelope(&resp, -32050, "upstream_unavailable");
        // The server sees the connection go away long before the end of the body: the
        // bridge took the 1 MiB cap plus what the socket buffers hold.
        let (sent, cut_off) = server
            .wait_oversized_closed(Duration::from_secs(10))
            .expect("the bridge closes the connection");
        assert!(cut_off, "the whole {TOTAL}-byte body was read");
        assert!(
            sent < 32 << 20,
            "{sent} bytes taken (declare_length {declare_length})"
        );
        // Buffering the body whole would take at least its 96 MiB.
        let peak = crate::support::peak_rss_kib(b.bridge.pid());
        eprintln!("declare_length {declare_length}: {sent} bytes taken, peak RSS {peak} KiB");
        assert!(peak < 64 * 1024, "peak RSS {peak} KiB");
    }
}
