//! Verification keys and the algorithms each may verify: from a PEM file, a JWK or the
//! dev key. Symmetric JWKs, and JWKs published for anything but signatures (`use` other
//! than `sig`, or `key_ops` without `verify`), are never accepted.

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};

/// A verification key and the algorithms it may verify.
#[derive(Clone)]
pub struct VerifyingKey {
    pub(super) kid: Option<String>,
    pub(super) key: DecodingKey,
    pub(super) algorithms: Vec<Algorithm>,
}

impl VerifyingKey {
    /// A key from a PEM file's bytes: RSA (RS256/384/512, PS256/384/512), EC (ES256/384)
    /// or Ed25519 (EdDSA).
    ///
    /// # Errors
    /// When the PEM holds none of those.
    pub fn from_pem(pem: &[u8]) -> anyhow::Result<VerifyingKey> {
        use Algorithm::*;
        let (key, algorithms) = if let Ok(k) = DecodingKey::from_rsa_pem(pem) {
            (k, vec![RS256, RS384, RS512, PS256, PS384, PS512])
        } else if let Ok(k) = DecodingKey::from_ec_pem(pem) {
            (k, vec![ES256, ES384])
        } else if let Ok(k) = DecodingKey::from_ed_pem(pem) {
            (k, vec![EdDSA])
        } else {
            return Err(anyhow::anyhow!(
                "not an RSA, EC or Ed25519 public key in PEM"
            ));
        };
        Ok(VerifyingKey {
            kid: None,
            key,
            algorithms,
        })
    }

    /// The Ed25519 dev key.
    pub fn dev(key: DecodingKey) -> VerifyingKey {
        VerifyingKey {
            kid: None,
            key,
            algorithms: vec![Algorithm::EdDSA],
        }
    }

    pub(super) fn from_jwk(jwk: &Jwk) -> Option<VerifyingKey> {
        use Algorithm::*;
        // An encryption key must not verify signatures (RFC 7517 §4.2, §4.3).
        if !matches!(
            jwk.common.public_key_use,
            None | Some(PublicKeyUse::Signature)
        ) {
            return None;
        }
        if jwk
            .common
            .key_operations
            .as_ref()
            .is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
        {
            return None;
        }
        let algorithms = match (&jwk.algorithm, jwk.common.key_algorithm) {
            // Symmetric keys would let anyone holding the JWKS forge tokens.
            (AlgorithmParameters::OctetKey(_), _) => return None,
            (_, Some(alg)) => vec![key_algorithm(alg)?],
            (AlgorithmParameters::RSA(_), None) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
            (AlgorithmParameters::EllipticCurve(p), None) => match p.curve {
                EllipticCurve::P256 => vec![ES256],
                EllipticCurve::P384 => vec![ES384],
                _ => return None,
            },
            (AlgorithmParameters::OctetKeyPair(_), None) => vec![EdDSA],
            _ => return None,
        };
        let key = DecodingKey::from_jwk(jwk).ok()?;
        Some(VerifyingKey {
            kid: jwk.common.key_id.clone(),
            key,
            algorithms,
        })
    }
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    use Algorithm::*;
    Some(match alg {
        KeyAlgorithm::RS256 => RS256,
        KeyAlgorithm::RS384 => RS384,
        KeyAlgorithm::RS512 => RS512,
        KeyAlgorithm::PS256 => PS256,
        KeyAlgorithm::PS384 => PS384,
        KeyAlgorithm::PS512 => PS512,
        KeyAlgorithm::ES256 => ES256,
        KeyAlgorithm::ES384 => ES384,
        KeyAlgorithm::EdDSA => EdDSA,
        _ => return None,
    })
}
