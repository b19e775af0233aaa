//! What `check` shows of an issuer: its name, and each key's id and algorithms (the JWKS
//! fetched afresh, so a doctor run sees what the identity provider serves now).

use super::{Issuer, KeySource};

/// One verification key as `check` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyInfo {
    /// `kid`, when the key has one.
    pub kid: Option<String>,
    /// The algorithms it may verify, e.g. `RS256`, `EdDSA`.
    pub algorithms: Vec<String>,
}

impl Issuer {
    /// The accepted `iss`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the keys come from: `keys` (fixed) or `JWKS <url>`.
    pub fn key_source(&self) -> String {
        match &self.source {
            KeySource::Static(_) => "keys".into(),
            KeySource::Jwks(jwks) => format!("JWKS {}", jwks.url()),
        }
    }

    /// The usable keys, fetching a JWKS now.
    ///
    /// # Errors
    /// Why the JWKS could not be fetched or held no usable key.
    pub async fn describe(&self) -> Result<Vec<KeyInfo>, String> {
        let keys = match &self.source {
            KeySource::Static(keys) => keys.clone(),
            KeySource::Jwks(jwks) => jwks.fetch_now().await?,
        };
        Ok(keys
            .iter()
            .map(|k| KeyInfo {
                kid: k.kid.clone(),
                algorithms: k.algorithms.iter().map(|a| format!("{a:?}")).collect(),
            })
            .collect())
    }
}
