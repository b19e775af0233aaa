//! Identity through the built binary: bad tokens of every kind, scopes, tenants, rotation
//! of the stdio token file (`tokens`), dev keys and dev tokens (`dev`), confirmation
//! tokens and elicitation (`confirmation`), their required claims
//! (`confirmation_claims`), JWKS with key rotation and size limits (`jwks`), JWKS
//! refresh on a timer (`jwks_refresh`), and the verified-token cache (`cache`).

mod cache;
mod confirmation;
mod confirmation_claims;
mod dev;
pub(crate) mod jwks;
mod jwks_refresh;
mod tokens;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::path::Path;

use serde_json::{Value, json};

use crate::support::binary::{Bridge, binary};
use crate::support::{assert_envelope, fixtures};

pub(crate) const ISSUER: &str = "https://idp.test";
pub(crate) const TENANT_A: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
pub(crate) const TENANT_B: &str = "bbbbbbbb-0000-4000-8000-00000000000b";
pub(crate) const ALL: &str = "cyberos:cuo:read cyberos:cuo:execute cyberos:memory:read cyberos:memory:write cyberos:skill:read cyberos:skill:invoke";

pub(crate) fn key(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("keys").join(name)).unwrap()
}

pub(crate) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub(crate) fn claims(tenant: &str, scopes: &str) -> Value {
    json!({"iss": ISSUER, "aud": "cyberos-mcp-bridge", "sub": "alice", "tenant_id": tenant,
           "scope": scopes, "iat": now(), "exp": now() + 600})
}

pub(crate) fn rs256(claims: &Value, kid: Option<&str>, key_file: &str) -> String {
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
pub(crate) struct Verified {
    pub(crate) bridge: Bridge,
    pub(crate) token_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Verified {
    pub(crate) fn start(extra: &[&str]) -> Verified {
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

    pub(crate) fn with_token(&mut self, token: &str) -> &mut Bridge {
        std::fs::write(&self.token_file, token).unwrap();
        &mut self.bridge
    }
}

pub(crate) fn assert_denied_without_leak(resp: &Value, token: &str) -> Value {
    let data = assert_envelope(resp, -32000, "authz_denied");
    let text = resp.to_string();
    for chunk in token.split('.').filter(|c| c.len() > 8) {
        assert!(!text.contains(chunk), "token bytes leaked: {text}");
    }
    data
}

pub(crate) fn b64(v: &Value) -> String {
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

/// A dev token from `data_dir`'s key, made by the `dev-token` subcommand with `args`.
pub(crate) fn dev_token(data_dir: &Path, args: &[&str]) -> String {
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
