//! Dev mode: no key source without `--dev` refuses to start; dev tokens carry the
//! requested tenant and scopes, and racing `dev-token` processes share one key.

use jsonwebtoken::Algorithm;
use serde_json::{Value, json};

use super::dev_token;
use super::{TENANT_A, TENANT_B};
use crate::support::assert_envelope;
use crate::support::binary::{Bridge, binary};

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
