//! Cost of verifying one bearer token, per algorithm, through the bridge's real verifier:
//! a token seen for the first time (signature, issuer, audience, expiry, claims; each
//! iteration a distinct token) and one remembered by the verified-token cache (hash and
//! clock check). Run: `cargo bench --bench jwt`.

use std::sync::Arc;
use std::time::Instant;

use cyberos_mcp_bridge::adapters::jwt::{Issuer, JwtVerifier, VerifyingKey};
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::ports::TokenVerifier;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

fn key(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 200 } else { 3_000 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let claims = |jti: u32| {
        json!({"iss": "https://idp.bench", "aud": "cyberos-mcp-bridge", "sub": "bench", "jti": jti,
        "tenant_id": "aaaaaaaa-0000-4000-8000-00000000000a", "scope": "cyberos:skill:read", "exp": now + 3600})
    };
    println!(
        "{:<8} {:>18} {:>18} {:>18}",
        "alg", "µs/first verify", "µs/remembered", "remembered/s"
    );
    let cases: [(Algorithm, EncodingKey, &str); 3] = [
        (
            Algorithm::RS256,
            EncodingKey::from_rsa_pem(&key("rsa.key")).unwrap(),
            "rsa.pub",
        ),
        (
            Algorithm::ES256,
            EncodingKey::from_ec_pem(&key("ec.key")).unwrap(),
            "ec.pub",
        ),
        (
            Algorithm::EdDSA,
            EncodingKey::from_ed_pem(&key("ed.key")).unwrap(),
            "ed.pub",
        ),
    ];
    for (alg, signing, public) in cases {
        let tokens: Vec<String> = (0..=n)
            .map(|jti| jsonwebtoken::encode(&Header::new(alg), &claims(jti), &signing).unwrap())
            .collect();
        let verifying = VerifyingKey::from_pem(&key(public)).unwrap();
        let verifier = JwtVerifier::new(
            vec![Issuer::with_keys("https://idp.bench", vec![verifying])],
            "cyberos-mcp-bridge",
            Arc::new(SystemClock),
        );
        rt.block_on(async {
            let t = Instant::now();
            for token in &tokens[1..] {
                verifier
                    .verify(token)
                    .await
                    .expect("the bench token verifies");
            }
            let first = t.elapsed().as_secs_f64() / f64::from(n);
            verifier.verify(&tokens[0]).await.unwrap();
            let t = Instant::now();
            for _ in 0..n * 10 {
                verifier.verify(&tokens[0]).await.unwrap();
            }
            let hit = t.elapsed().as_secs_f64() / f64::from(n * 10);
            println!(
                "{:<8} {:>18.1} {:>18.2} {:>18.0}",
                format!("{alg:?}"),
                first * 1e6,
                hit * 1e6,
                1.0 / hit
            );
        });
    }
}
