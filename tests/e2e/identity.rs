//! Identity through the built binary: bad tokens of every kind, scopes, tenants, rotation
//! of the stdio token file, JWKS with key rotation, confirmation tokens and elicitation.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::binary::{Bridge, binary};
use crate::support::{assert_envelope, fixtures};

const ISSUER: &str = "https://idp.test";
const TENANT_A: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
const TENANT_B: &str = "bbbbbbbb-0000-4000-8000-00000000000b";
const ALL: &str = "cyberos:cuo:read cyberos:cuo:execute cyberos:memory:read cyberos:memory:write cyberos:skill:read cyberos:skill:invoke";

fn key(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("keys").join(name)).unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims(tenant: &str, scopes: &str) -> Value {
    json!({"iss": ISSUER, "aud": "cyberos-mcp-bridge", "sub": "alice", "tenant_id": tenant,
           "scope": scopes, "iat": now(), "exp": now() + 600})
}

fn rs256(claims: &Value, kid: Option<&str>, key_file: &str) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_rsa_pem(&key(key_file)).unwrap(),
    )
    .unwrap()
}

/// A bridge verifying RS256 tokens from `rsa.pub`, reading its token from a file.
struct Verified {
    bridge: Bridge,
    token_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Verified {
    fn start(extra: &[&str]) -> Verified {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "").unwrap();
        let pem = fixtures().join("keys/rsa.pub");
        let mut args = vec![
            "--jwt-public-key",
            pem.to_str().unwrap(),
            "--jwt-issuer",
            ISSUER,
            "--token-file",
            token_file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut bridge = Bridge::spawn_with_env(&args, &[]);
        bridge.initialize();
        Verified {
            bridge,
            token_file,
            _dir: dir,
        }
    }

    fn with_token(&mut self, token: &str) -> &mut Bridge {
        std::fs::write(&self.token_file, token).unwrap();
        &mut self.bridge
    }
}

fn assert_denied_without_leak(resp: &Value, token: &str) -> Value {
    let data = assert_envelope(resp, -32000, "authz_denied");
    let text = resp.to_string();
    for chunk in token.split('.').filter(|c| c.len() > 8) {
        assert!(!text.contains(chunk), "token bytes leaked: {text}");
    }
    data
}

fn b64(v: &Value) -> String {
    use base64_engine as b;
    b::encode(v.to_string().as_bytes())
}

/// Unpadded base64url, enough to forge headers in tests.
mod base64_engine {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    pub fn encode(input: &[u8]) -> String {
        let mut out = String::new();
        for chunk in input.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }
}

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
        assert_eq!(resp["error"]["message"], message, "{name}: {resp}");
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
    assert_eq!(probe["error"]["message"], "audit entry not found");
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
    assert_eq!(resp["error"]["message"], "authentication required");
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

#[test]
fn no_key_source_and_no_dev_refuses_to_start() {
    for transport in ["stdio", "http"] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(binary())
            .args(["--transport", transport, "--data-dir"])
            .arg(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{transport}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--dev"),
            "{transport}"
        );
    }
    let out = std::process::Command::new(binary())
        .args(["--dev", "--transport", "http", "--listen", "0.0.0.0:8082"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("non-loopback"));
}

fn dev_token(data_dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(binary())
        .arg("--data-dir")
        .arg(data_dir)
        .arg("dev-token")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn dev_tokens_carry_the_requested_tenant_scopes_and_the_dev_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let token = dev_token(
        dir.path(),
        &[
            "--tenant",
            TENANT_B,
            "--scopes",
            "cyberos:skill:read",
            "--ttl",
            "10m",
            "--sub",
            "bob",
        ],
    );
    let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(&token).unwrap();
    assert_eq!(
        (
            claims["iss"].as_str(),
            claims["aud"].as_str(),
            claims["sub"].as_str()
        ),
        (
            Some("urn:cyberos:dev"),
            Some("cyberos-mcp-bridge"),
            Some("bob")
        )
    );
    assert_eq!(claims["tenant_id"], TENANT_B);
    let ttl = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(ttl, 600);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("dev-signing-key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // A bridge with --dev on that data dir accepts it (CYBEROS_TOKEN wins over the dev token).
    let mut b = Bridge::spawn_in(dir, &["--dev"], &[("CYBEROS_TOKEN", token.as_str())]);
    b.initialize();
    let skills = b.call("cyberos.skill.list_skills", json!({}));
    assert!(skills["result"].is_object(), "{skills}");
    let denied = b.call("cyberos.cuo.list_personas", json!({}));
    assert_envelope(&denied, -32000, "authz_denied");
}

#[test]
fn racing_dev_token_processes_share_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..6)
        .map(|_| {
            std::process::Command::new(binary())
                .arg("--data-dir")
                .arg(dir.path())
                .args(["dev-token", "--tenant", TENANT_A])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let tokens: Vec<String> = children
        .into_iter()
        .map(|c| {
            String::from_utf8(c.wait_with_output().unwrap().stdout)
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();
    let pem = std::fs::read_to_string(dir.path().join("dev-signing-key.pem")).unwrap();
    let public = {
        use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePublicKey};
        ed25519_dalek::SigningKey::from_pkcs8_pem(&pem)
            .unwrap()
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap()
    };
    let key = jsonwebtoken::DecodingKey::from_ed_pem(public.as_bytes()).unwrap();
    let mut validation = jsonwebtoken::Validation::new(Algorithm::EdDSA);
    validation.set_audience(&["cyberos-mcp-bridge"]);
    for token in tokens {
        jsonwebtoken::decode::<Value>(&token, &key, &validation)
            .expect("signed by the one published key");
    }
}

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
        replay["error"]["message"], "the confirmation token was already used",
        "{replay}"
    );
    let other = call(&mut b, &json!({"kind": "decision", "body": {"adr": 8}}));
    assert_envelope(&other, -32000, "authz_denied");
}

#[test]
fn a_client_with_elicitation_is_asked_and_only_a_yes_confirms() {
    let mut b = Bridge::spawn(&[]);
    let mut params = crate::support::init_params("2025-11-25");
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

/// A JWKS endpoint whose key set can be swapped, on 127.0.0.1:0.
struct JwksServer {
    url: String,
    keys: Arc<Mutex<Value>>,
}

impl JwksServer {
    fn start(initial: Value) -> JwksServer {
        let keys = Arc::new(Mutex::new(initial));
        let shared = Arc::clone(&keys);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let keys = Arc::clone(&shared);
                async move {
                    let v = keys.lock().unwrap().clone();
                    if v.is_null() {
                        (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            axum::Json(json!({})),
                        )
                            .into_response_parts()
                    } else {
                        (axum::http::StatusCode::OK, axum::Json(v)).into_response_parts()
                    }
                }
            }),
        );
        JwksServer {
            url: format!("http://{}/jwks", crate::support::serve_http(app)),
            keys,
        }
    }

    fn set(&self, keys: Value) {
        *self.keys.lock().unwrap() = keys;
    }
}

trait IntoParts {
    fn into_response_parts(self) -> axum::response::Response;
}

impl<T: axum::response::IntoResponse> IntoParts for T {
    fn into_response_parts(self) -> axum::response::Response {
        self.into_response()
    }
}

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
