//! HTTP sessions whose state travels with the client (CONTRACT §10): what a session
//! remembers of its `initialize`, and when a request may use it. Sealing (the MAC) and the
//! wire form live in `app::http::session_id`; the denylist of ended sessions in the store.

use crate::domain::{DomainError, JsonText, Principal, TenantId, Timestamp, Upstream};

/// How long a session lives after `initialize`.
pub const SESSION_TTL_MS: i64 = 24 * 3600 * 1000;

/// Questions (elicitations) one subject may have open at once, across instances: each
/// holds an HTTP request and a store row for up to the elicitation wait. Counted per
/// subject, so one user's open forms never keep the tenant's other users from being asked.
pub const MAX_OPEN_QUESTIONS: u32 = 16;

/// Questions one tenant may have open at once, all its subjects together: what bounds the
/// store.
pub const MAX_OPEN_QUESTIONS_PER_TENANT: u32 = 256;

/// One of our requests to a client of an HTTP session, until it is answered: the session's
/// nonce and our JSON-RPC request id (random, so no client can guess another's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QuestionKey {
    /// [`SessionState::nonce`] of the session that was asked.
    pub session: String,
    /// Our request id, as sent.
    pub request: String,
}

/// A client's answer to one of our requests: its `result`, or its `error` object.
pub type ClientAnswer = Result<JsonText, JsonText>;

/// The refusal when a subject already has [`MAX_OPEN_QUESTIONS`] questions open, or its
/// tenant [`MAX_OPEN_QUESTIONS_PER_TENANT`].
pub fn too_many_open_questions() -> DomainError {
    DomainError::UpstreamUnavailable {
        upstream: Upstream::TaskStore,
        message: "too many confirmations are waiting for an answer".into(),
        hint: format!(
            "At most {MAX_OPEN_QUESTIONS} confirmation forms may be open per user, and {MAX_OPEN_QUESTIONS_PER_TENANT} per tenant; answer or dismiss yours, then retry."
        ),
        retry_after: Some(std::time::Duration::from_secs(30)),
        source: None,
    }
}

/// What the bridge must remember of a client between its stateless requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Random, so every session id is unique; the key of its denylist entry.
    pub nonce: String,
    /// The negotiated protocol version.
    pub protocol: String,
    /// The tenant of the token that initialised it.
    pub tenant: TenantId,
    /// The subject (`sub`) of that token.
    pub subject: String,
    /// `clientInfo.name`, clipped.
    pub client: Option<String>,
    /// Whether the client declared the `elicitation` capability.
    pub elicitation: bool,
    /// When it ends.
    pub expires_at: Timestamp,
}

impl SessionState {
    /// Whether a request by `principal` at `now` may use this session: the same tenant and
    /// subject as the token that opened it, and not expired. A session never authenticates:
    /// the request's own token did that already.
    pub fn admits(&self, principal: &Principal, now: Timestamp) -> bool {
        self.tenant == principal.tenant
            && *self.subject == *principal.actor
            && now < self.expires_at
    }

    /// The key under which an ended session is remembered until it expires.
    pub fn ledger_key(&self) -> String {
        format!("session:{}", self.nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(tenant: &str, actor: &str) -> Principal {
        Principal::new(TenantId::parse(tenant).unwrap(), actor, &[])
    }

    #[test]
    fn only_its_own_tenant_and_subject_use_a_session_until_it_expires() {
        let a = "aaaaaaaa-0000-4000-8000-00000000000a";
        let s = SessionState {
            nonce: "n".into(),
            protocol: "2025-11-25".into(),
            tenant: TenantId::parse(a).unwrap(),
            subject: "alice".into(),
            client: None,
            elicitation: true,
            expires_at: Timestamp::from_unix_millis(1_000),
        };
        let now = Timestamp::from_unix_millis(999);
        assert!(s.admits(&principal(a, "alice"), now));
        assert!(!s.admits(&principal(a, "bob"), now));
        assert!(!s.admits(
            &principal("bbbbbbbb-0000-4000-8000-00000000000b", "alice"),
            now
        ));
        assert!(!s.admits(&principal(a, "alice"), Timestamp::from_unix_millis(1_000)));
        assert_eq!(s.ledger_key(), "session:n");
    }
}
