//! Approvals: a confirmation the bridge keeps for the user when the host cannot ask them.
//!
//! A call that needs confirmation, from a client that cannot be asked, records a pending
//! approval bound to the call (tenant, subject, tool, SHA-256 of the canonical arguments)
//! and is refused with a link the user opens (or a terminal command). The user, proved to
//! be the call's subject in the call's tenant, approves or denies it; the identical retry
//! within its life consumes the verdict once. Like a confirmation token: same bindings,
//! single use, a short life.

use std::fmt;

use crate::domain::{DomainError, TenantId, Timestamp, Tool, Upstream};

/// How long an approval may be decided and then used.
pub const LIFETIME_MS: i64 = 10 * 60 * 1000;
/// The most pending approvals one subject of a tenant may have at once.
pub const MAX_PENDING_PER_SUBJECT: u32 = 8;
/// How long the page's one-time secrets (a login's state, a form's token) stay usable.
pub const SECRET_LIFETIME_MS: i64 = 10 * 60 * 1000;

/// An approval's id: 128 random bits, in lowercase hex in links.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApprovalId([u8; 16]);

impl ApprovalId {
    /// The id of `bytes` (drawn from a CSPRNG by the caller).
    pub const fn from_random(bytes: [u8; 16]) -> ApprovalId {
        ApprovalId(bytes)
    }

    /// Parses the 32 lowercase hex digits of a link; `None` for anything else.
    pub fn parse(text: &str) -> Option<ApprovalId> {
        if text.len() != 32 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        crate::domain::ids::parse_hex(text).map(ApprovalId)
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::domain::ids::hex_lower(&self.0))
    }
}

impl fmt::Debug for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApprovalId({self})")
    }
}

/// What an approval is bound to: exactly one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallBinding {
    /// The caller's tenant.
    pub tenant: TenantId,
    /// The caller's subject (`sub`).
    pub subject: String,
    /// The tool called.
    pub tool: Tool,
    /// Hex SHA-256 of the RFC 8785 canonical JSON of the arguments.
    pub args_sha256: String,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Waiting for the user.
    Pending,
    /// The user approved it; the retry may proceed once.
    Approved,
    /// The user denied it; the retry is refused once.
    Denied,
}

impl Verdict {
    /// Stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Pending => "pending",
            Verdict::Approved => "approved",
            Verdict::Denied => "denied",
        }
    }

    /// The verdict of a stored name.
    pub fn parse(text: &str) -> Option<Verdict> {
        match text {
            "pending" => Some(Verdict::Pending),
            "approved" => Some(Verdict::Approved),
            "denied" => Some(Verdict::Denied),
            _ => None,
        }
    }
}

/// A recorded approval, as the page and the terminal show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Its id.
    pub id: ApprovalId,
    /// The call it is bound to.
    pub binding: CallBinding,
    /// The call's arguments as canonical JSON text, to show the user what they decide.
    pub arguments: String,
    /// Where it stands.
    pub verdict: Verdict,
    /// When it was asked for.
    pub created_at: Timestamp,
    /// When it can no longer be decided or used.
    pub expires_at: Timestamp,
}

impl Approval {
    /// Whether it can still be decided (pending and not expired at `now`).
    pub fn decidable(&self, now: Timestamp) -> bool {
        self.verdict == Verdict::Pending && now < self.expires_at
    }

    /// Whether `tenant`/`subject`, as a login proved them, may decide it: only the
    /// call's own subject in the call's own tenant.
    pub fn may_be_decided_by(&self, tenant: &TenantId, subject: &str) -> bool {
        self.binding.tenant == *tenant && self.binding.subject == subject
    }
}

/// What a retry found for its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// An approval the user granted, now used up.
    Approved,
    /// An approval the user denied, now used up.
    Denied,
}

/// Which one-time secret of the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// A login's `state`: its payload is what the callback needs (PKCE verifier, nonce).
    Login,
    /// The token an Approve/Deny form carries, bound to the subject the login proved.
    Form,
}

impl SecretKind {
    /// Stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            SecretKind::Login => "login",
            SecretKind::Form => "form",
        }
    }
}

/// A one-time secret of the page, stored by the digest of its value (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSecret {
    /// Which secret.
    pub kind: SecretKind,
    /// Hex SHA-256 of the secret's value.
    pub digest: String,
    /// The approval it serves.
    pub approval: ApprovalId,
    /// The approval's tenant.
    pub tenant: TenantId,
    /// The subject a login proved (form tokens); `None` before the login.
    pub subject: Option<String>,
    /// What the callback needs to finish a login (empty for a form token).
    pub payload: String,
    /// When it can no longer be used.
    pub expires_at: Timestamp,
}

/// The refusal of a call that waits for the user's approval: what the model must tell
/// the user (`how`: open the link, or run the terminal command) and that the first call
/// is not run.
pub fn asked(tool: Tool, how: &str) -> DomainError {
    DomainError::denied(
        format!(
            "tool '{}' changes durable state and needs the user's confirmation",
            tool.name()
        ),
        format!(
            "Tell the user: {how} Approvals expire in 10 minutes. Once they have approved, call \
             the tool again with exactly the same arguments; this call did not run."
        ),
    )
}

/// What the user does to approve approval `id`: the page at `page_url` when the bridge
/// serves HTTP, else the terminal command.
pub fn how_to_approve(id: &ApprovalId, page_url: Option<&str>) -> String {
    match page_url {
        Some(url) => format!("open {url} in a browser, check the call, and approve it."),
        None => format!(
            "run `cyberos-mcp-bridge approve {id}` in a terminal on the machine where the bridge runs, check the call, and answer yes."
        ),
    }
}

/// The refusal of a retry whose approval the user denied.
pub fn declined() -> DomainError {
    DomainError::denied(
        "the user declined the call",
        "The user denied this call on the approval page; do not retry it unless they ask.",
    )
}

/// The refusal when a subject already has [`MAX_PENDING_PER_SUBJECT`] approvals pending.
pub fn too_many_pending() -> DomainError {
    DomainError::UpstreamUnavailable {
        upstream: Upstream::TaskStore,
        message: "too many approvals are waiting for the user".into(),
        hint: format!(
            "{MAX_PENDING_PER_SUBJECT} approvals are pending for this user, the most the bridge keeps; ask them to approve or deny those first, or wait for them to expire."
        ),
        retry_after: Some(std::time::Duration::from_secs(60)),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(verdict: Verdict, expires_at: i64) -> Approval {
        Approval {
            id: ApprovalId::from_random([7; 16]),
            binding: CallBinding {
                tenant: TenantId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
                subject: "alice".into(),
                tool: Tool::AppendAudit,
                args_sha256: "00".repeat(32),
            },
            arguments: "{}".into(),
            verdict,
            created_at: Timestamp::from_unix_millis(0),
            expires_at: Timestamp::from_unix_millis(expires_at),
        }
    }

    #[test]
    fn ids_are_32_lowercase_hex_digits_and_nothing_else() {
        let id = ApprovalId::from_random([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        assert_eq!(ApprovalId::parse(&id.to_string()), Some(id));
        for bad in [
            "",
            "AB".repeat(16).as_str(),
            &"a".repeat(31),
            &"a".repeat(33),
            &"g".repeat(32),
        ] {
            assert_eq!(ApprovalId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_a_pending_unexpired_approval_can_be_decided() {
        let now = Timestamp::from_unix_millis(1_000);
        assert!(approval(Verdict::Pending, 1_001).decidable(now));
        assert!(!approval(Verdict::Pending, 1_000).decidable(now));
        assert!(!approval(Verdict::Approved, 5_000).decidable(now));
        assert!(!approval(Verdict::Denied, 5_000).decidable(now));
    }

    #[test]
    fn only_the_calls_own_subject_in_its_tenant_decides() {
        let a = approval(Verdict::Pending, 1);
        let tenant = a.binding.tenant;
        let other = TenantId::parse("00000000-0000-4000-8000-000000000002").unwrap();
        assert!(a.may_be_decided_by(&tenant, "alice"));
        assert!(!a.may_be_decided_by(&tenant, "bob"));
        assert!(!a.may_be_decided_by(&other, "alice"));
    }

    #[test]
    fn the_refusal_says_what_to_do_and_that_the_call_did_not_run() {
        let id = ApprovalId::from_random([1; 16]);
        let e = asked(
            Tool::AppendAudit,
            &how_to_approve(&id, Some("http://h/approve/x")),
        );
        assert_eq!(e.class(), crate::domain::ErrorClass::AuthzDenied);
        assert!(e.hint().contains("open http://h/approve/x"), "{}", e.hint());
        assert!(e.hint().contains("did not run"));
        let e = asked(Tool::AppendAudit, &how_to_approve(&id, None));
        assert!(
            e.hint()
                .contains(&format!("cyberos-mcp-bridge approve {id}"))
        );
    }

    #[test]
    fn verdicts_round_trip_through_their_stored_names() {
        for v in [Verdict::Pending, Verdict::Approved, Verdict::Denied] {
            assert_eq!(Verdict::parse(v.as_str()), Some(v));
        }
        assert_eq!(Verdict::parse("used"), None);
    }
}
