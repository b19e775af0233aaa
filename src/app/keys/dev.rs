//! The local development signing key: an Ed25519 key created once (mode 0600) in the data
//! dir, used by `--dev` and `dev-token` to mint tokens with issuer `urn:cyberos:dev`.
//! Creation is atomic, so two processes racing to create it end up with the same key.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::{Value, json};

use crate::domain::Timestamp;

/// Issuer of every dev token.
pub const DEV_ISSUER: &str = "urn:cyberos:dev";
const FILE_NAME: &str = "dev-signing-key.pem";

/// The dev key pair.
pub struct DevKey {
    encoding: EncodingKey,
    decoding: DecodingKey,
    path: PathBuf,
}

impl std::fmt::Debug for DevKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevKey")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl DevKey {
    /// Loads the key of `data_dir`, creating it first if it does not exist.
    ///
    /// # Errors
    /// When the file cannot be created or read, or does not hold an Ed25519 key.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<DevKey> {
        if !Self::path(data_dir).exists() {
            create(data_dir)?;
        }
        Self::load(data_dir)
    }

    /// Where the key of `data_dir` is kept.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE_NAME)
    }

    /// Loads the key of `data_dir`, `None` when it does not exist yet. Creates nothing.
    ///
    /// # Errors
    /// When the file cannot be read or does not hold an Ed25519 key.
    pub fn load_existing(data_dir: &Path) -> anyhow::Result<Option<DevKey>> {
        if Self::path(data_dir).exists() {
            Self::load(data_dir).map(Some)
        } else {
            Ok(None)
        }
    }

    fn load(data_dir: &Path) -> anyhow::Result<DevKey> {
        let path = Self::path(data_dir);
        let pem = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let signing = SigningKey::from_pkcs8_pem(&pem)
            .map_err(|_| anyhow::anyhow!("{} does not hold an Ed25519 key", path.display()))?;
        let public = signing
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| anyhow::anyhow!("cannot encode the dev public key: {e}"))?;
        let encoding = EncodingKey::from_ed_pem(pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("dev key: {e}"))?;
        let decoding = DecodingKey::from_ed_pem(public.as_bytes())
            .map_err(|e| anyhow::anyhow!("dev key: {e}"))?;
        Ok(DevKey {
            encoding,
            decoding,
            path,
        })
    }

    /// The verification key.
    pub fn decoding_key(&self) -> DecodingKey {
        self.decoding.clone()
    }

    /// Signs `claims` (issuer and the rest as given) with EdDSA.
    ///
    /// # Errors
    /// Only if signing fails, which would be a bug.
    pub fn sign(&self, claims: &Value) -> anyhow::Result<String> {
        jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &self.encoding)
            .map_err(|e| anyhow::anyhow!("cannot sign: {e}"))
    }

    /// A bearer token for `tenant` with `scopes` (space-separated), issued `now` and valid
    /// `ttl_s` seconds.
    ///
    /// # Errors
    /// As for [`DevKey::sign`], or when the system has no randomness for the `jti`.
    pub fn bearer_token(
        &self,
        now: Timestamp,
        audience: &str,
        tenant: &str,
        scopes: &str,
        sub: &str,
        ttl_s: i64,
    ) -> anyhow::Result<String> {
        let now = unix_seconds(now);
        self.sign(&json!({
            "iss": DEV_ISSUER, "aud": audience, "sub": sub, "tenant_id": tenant,
            "scope": scopes, "iat": now, "exp": now + ttl_s, "jti": jti()?
        }))
    }

    /// A single-use confirmation token for one call of `tool` by `sub` with the arguments
    /// whose canonical hash is `args_sha256`, issued `now` and valid at most five minutes.
    ///
    /// # Errors
    /// As for [`DevKey::bearer_token`].
    #[allow(clippy::too_many_arguments)]
    pub fn confirmation_token(
        &self,
        now: Timestamp,
        audience: &str,
        tenant: &str,
        sub: &str,
        tool: &str,
        args_sha256: &str,
        ttl_s: i64,
    ) -> anyhow::Result<String> {
        let now = unix_seconds(now);
        self.sign(&json!({
            "iss": DEV_ISSUER, "aud": audience, "sub": sub, "tenant_id": tenant,
            "purpose": crate::domain::confirm::PURPOSE, "tool": tool, "args_sha256": args_sha256,
            "jti": jti()?, "iat": now, "exp": now + ttl_s.min(300)
        }))
    }
}

/// `iat` and `exp` are whole Unix seconds.
fn unix_seconds(t: Timestamp) -> i64 {
    t.unix_millis().div_euclid(1000)
}

/// A fresh token id: 128 random bits in hex.
fn jti() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(data_encoding::HEXLOWER.encode(&bytes))
}

/// Writes a new key, atomically and privately.
fn create(data_dir: &Path) -> anyhow::Result<()> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let pem = SigningKey::from_bytes(&seed)
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| anyhow::anyhow!("cannot encode the dev key: {e}"))?;
    crate::support::private_file::publish(data_dir, FILE_NAME, pem.as_bytes())
}
