//! `MCP-Session-Id` values: the session's state (`domain::session`) as compact JSON in
//! base64url, a `.`, and its HMAC-SHA256 under the shared session key, also base64url.
//! Any instance holding the key opens any session; nothing is stored but the denylist of
//! ended ones. The state is signed, not hidden: it holds nothing the client's own token
//! does not already show it.

use data_encoding::BASE64URL_NOPAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::domain::session::SessionState;
use crate::domain::{TenantId, Timestamp};

/// Longer ids are refused unread.
const MAX_ID_BYTES: usize = 2048;

/// The key that signs and checks session ids.
#[derive(Clone)]
pub struct SessionKey(Hmac<Sha256>);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// The signed fields, short-named: the id rides on every request.
#[derive(Serialize, Deserialize)]
struct Wire {
    n: String,
    v: String,
    t: String,
    s: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c: Option<String>,
    e: bool,
    x: i64,
}

impl SessionKey {
    /// A key from its bytes (32 or more; see `adapters::session_key`).
    pub fn new(bytes: &[u8]) -> SessionKey {
        SessionKey(Hmac::new_from_slice(bytes).expect("HMAC takes keys of any length"))
    }

    /// The id for `state`.
    pub fn seal(&self, state: &SessionState) -> String {
        let wire = Wire {
            n: state.nonce.clone(),
            v: state.protocol.clone(),
            t: state.tenant.to_string(),
            s: state.subject.clone(),
            c: state.client.clone(),
            e: state.elicitation,
            x: state.expires_at.unix_millis(),
        };
        let body = BASE64URL_NOPAD.encode(&serde_json::to_vec(&wire).expect("plain fields"));
        let mut mac = self.0.clone();
        mac.update(body.as_bytes());
        let tag = BASE64URL_NOPAD.encode(&mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The state of `id` when this key signed it; `None` for anything forged, altered or
    /// malformed (expiry and ownership are the caller's: `SessionState::admits`).
    pub fn open(&self, id: &str) -> Option<SessionState> {
        if id.len() > MAX_ID_BYTES {
            return None;
        }
        let (body, tag) = id.split_once('.')?;
        let tag = BASE64URL_NOPAD.decode(tag.as_bytes()).ok()?;
        let mut mac = self.0.clone();
        mac.update(body.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&tag).ok()?;
        let wire: Wire =
            serde_json::from_slice(&BASE64URL_NOPAD.decode(body.as_bytes()).ok()?).ok()?;
        Some(SessionState {
            nonce: wire.n,
            protocol: wire.v,
            tenant: TenantId::parse(&wire.t).ok()?,
            subject: wire.s,
            client: wire.c,
            elicitation: wire.e,
            expires_at: Timestamp::from_unix_millis(wire.x),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn state() -> SessionState {
        SessionState {
            nonce: "0f".repeat(16),
            protocol: "2025-11-25".into(),
            tenant: TenantId::parse("aaaaaaaa-0000-4000-8000-00000000000a").unwrap(),
            subject: "alice".into(),
            client: Some("claude-code".into()),
            elicitation: true,
            expires_at: Timestamp::from_unix_millis(1_700_000_000_000),
        }
    }

    #[test]
    fn a_sealed_session_opens_with_its_key_only() {
        let key = SessionKey::new(&[7; 32]);
        let id = key.seal(&state());
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert_eq!(key.open(&id), Some(state()));
        assert_eq!(SessionKey::new(&[8; 32]).open(&id), None);
        // Another tenant written into the body fails the MAC.
        let (body, tag) = id.split_once('.').unwrap();
        let text = String::from_utf8(BASE64URL_NOPAD.decode(body.as_bytes()).unwrap()).unwrap();
        let forged = text.replace("aaaaaaaa", "bbbbbbbb");
        let forged = format!("{}.{tag}", BASE64URL_NOPAD.encode(forged.as_bytes()));
        assert_eq!(key.open(&forged), None);
    }

    proptest! {
        #[test]
        fn no_altered_id_opens(i in 0usize..400, b in any::<u8>()) {
            let key = SessionKey::new(&[7; 32]);
            let mut id = key.seal(&state()).into_bytes();
            let i = i % id.len();
            prop_assume!(id[i] != b);
            id[i] = b;
            if let Ok(id) = String::from_utf8(id) {
                prop_assert_eq!(key.open(&id), None);
            }
        }
    }
}
