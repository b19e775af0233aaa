//! What `check` shows of a key set: each key's id and algorithms.

use super::keys::VerifyingKey;

/// One verification key as `check` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyInfo {
    /// `kid`, when the key has one.
    pub kid: Option<String>,
    /// The algorithms it may verify, e.g. `RS256`, `EdDSA`.
    pub algorithms: Vec<String>,
}

/// The reports of `keys`.
pub(super) fn key_infos(keys: &[VerifyingKey]) -> Vec<KeyInfo> {
    keys.iter()
        .map(|k| KeyInfo {
            kid: k.kid.clone(),
            algorithms: k.algorithms.iter().map(|a| format!("{a:?}")).collect(),
        })
        .collect()
}
