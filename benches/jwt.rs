//! Cost of verifying one bearer token, per algorithm, through the bridge's real verifier
//! (signature, issuer, audience, expiry, claims). Run: `cargo bench --bench jwt`.

use std::time::Instant;

use cyberos_mcp_bridge::adapters::jwt::{Issuer, JwtVerifier, VerifyingKey};
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
    let claims = json!({"iss": "https://idp.bench", "aud": "cyberos-mcp-bridge", "sub": "bench",
        "tenant_id": "aaaaaaaa-0000-4000-8000-00000000000a", "scope": "cyberos:skill:read", "exp": now + 3600});
    println!("{:<8} {:>12} {:>14}", "alg", "µs/verify", "verifies/s");
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
        let token = jsonwebtoken::encode(&Header::new(alg), &claims, &signing).unwrap();
        let verifying = VerifyingKey::from_pem(&key(public)).unwrap();
        let verifier = JwtVerifier::new(
            vec![Issuer::with_keys("https://idp.bench", vec![verifying])],
            "cyberos-mcp-bridge",
        );
        rt.block_on(async {
            verifier
                .verify(&token)
                .await
                .expect("the bench token verifies");
            let t = Instant::now();
            for _ in 0..n {
                verifier.verify(&token).await.unwrap();
            }
            let per = t.elapsed().as_secs_f64() / f64::from(n);
            println!(
                "{:<8} {:>12.1} {:>14.0}",
                format!("{alg:?}"),
                per * 1e6,
                1.0 / per
            );
        });
    }
}
