//! Who is calling: scopes, the verified principal, and the per-call context sent upstream.

use std::sync::Arc;

use crate::domain::{DomainError, TenantId, TraceId};

/// An OAuth scope the bridge knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Read personas, workflows, routes.
    CuoRead,
    /// Run workflows.
    CuoExecute,
    /// Read the audit log.
    MemoryRead,
    /// Append to the audit log.
    MemoryWrite,
    /// List skills.
    SkillRead,
    /// Run skills.
    SkillInvoke,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 6] = [
        Scope::CuoRead,
        Scope::CuoExecute,
        Scope::MemoryRead,
        Scope::MemoryWrite,
        Scope::SkillRead,
        Scope::SkillInvoke,
    ];

    /// The wire form, e.g. `cyberos:cuo:read`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::CuoRead => "cyberos:cuo:read",
            Scope::CuoExecute => "cyberos:cuo:execute",
            Scope::MemoryRead => "cyberos:memory:read",
            Scope::MemoryWrite => "cyberos:memory:write",
            Scope::SkillRead => "cyberos:skill:read",
            Scope::SkillInvoke => "cyberos:skill:invoke",
        }
    }

    /// Parses a known scope; unknown scopes are ignored by callers.
    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|sc| sc.as_str() == s)
    }

    /// The known scopes of an OAuth `scope` string, in order; words the bridge does not
    /// know are ignored. Only the ASCII space separates (RFC 6749 §3.3): any other
    /// whitespace is part of a word, so `read\u{a0}write` is one unknown word, not two.
    pub fn parse_list(s: &str) -> Vec<Scope> {
        s.split(' ').filter_map(Scope::parse).collect()
    }
}

/// A verified caller. Shared, not copied: a request's principal is cloned from the
/// verified-token cache, into its session and into its call's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant, from the verified token only.
    pub tenant: TenantId,
    /// The actor (`sub`).
    pub actor: Arc<str>,
    /// The scopes the token grants that the bridge knows.
    pub scopes: Arc<[Scope]>,
    /// Every scope word the token grants, known or not ([`granted_words`]): a step-up
    /// challenge repeats them, so a client that replaces its scopes with the challenge's
    /// keeps what it had.
    pub granted: Arc<str>,
}

impl Principal {
    /// A principal granted exactly `scopes`.
    pub fn new(tenant: TenantId, actor: impl Into<Arc<str>>, scopes: &[Scope]) -> Principal {
        Principal {
            tenant,
            actor: actor.into(),
            scopes: scopes.into(),
            granted: granted_words(scopes.iter().map(|s| s.as_str())),
        }
    }

    /// Whether the principal holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Denied because this principal lacks `scope`; `what` is the thing that needs it
    /// (e.g. "tool 'cyberos.memory.append_audit'").
    pub fn lacks(&self, scope: Scope, what: &str) -> DomainError {
        let name = scope.as_str();
        DomainError::AuthzDenied {
            message: format!("{what} requires scope '{name}' which is not in your token"),
            hint: format!(
                "Re-authorise the plugin with the '{name}' scope, or have an admin grant it."
            ),
            missing_scopes: vec![name.to_owned()],
            step_up: self.step_up(scope),
        }
    }

    /// The scopes to ask for when a call needs `needed`: those the token grants, then
    /// `needed` (MCP 2025-11-25 authorization, step-up: the challenge names what the
    /// request needs together with what is already granted).
    pub fn step_up(&self, needed: Scope) -> Vec<String> {
        let mut words: Vec<String> = self
            .granted
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        if !words.iter().any(|w| w == needed.as_str()) {
            words.push(needed.as_str().to_owned());
        }
        words
    }
}

/// The most bytes of scope words a principal keeps for a challenge.
const MAX_GRANTED: usize = 1024;

/// A token's scope words as a challenge may repeat them: RFC 6749 §3.3 scope tokens only
/// (no space, quote, backslash or control character, so none can break out of the quoted
/// `scope` parameter), each once, at most `MAX_GRANTED` bytes in all.
pub fn granted_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Arc<str> {
    let mut out = String::new();
    for word in words {
        let valid = !word.is_empty()
            && word
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !valid || out.split(' ').any(|w| w == word) {
            continue;
        }
        if out.len() + word.len() + 1 > MAX_GRANTED {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.into()
}

/// Why a bearer token was refused. Logged precisely; the client gets a user-safe hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenRejection {
    /// No token was presented.
    Missing,
    /// The token is longer than any real token.
    Oversized,
    /// Not a JWT, or bad encoding.
    Malformed,
    /// No key with the token's `kid` (or none matched).
    UnknownKey,
    /// The header's algorithm is not allowed for the key.
    AlgorithmNotAllowed,
    /// The signature does not verify.
    BadSignature,
    /// `exp` is in the past.
    Expired,
    /// `nbf` is in the future.
    NotYetValid,
    /// `iss` is not an accepted issuer.
    WrongIssuer,
    /// `aud` does not name this bridge.
    WrongAudience,
    /// A required claim is absent.
    MissingClaim(String),
    /// `tenant_id` is absent or not a UUID.
    BadTenant,
    /// A confirmation token (its `purpose` claim) presented as a bearer token.
    ConfirmationAsBearer,
}

impl TokenRejection {
    /// The precise reason, for logs (never contains token bytes).
    pub fn reason(&self) -> String {
        match self {
            TokenRejection::Missing => "no token".into(),
            TokenRejection::Oversized => "token too long".into(),
            TokenRejection::Malformed => "malformed token".into(),
            TokenRejection::UnknownKey => "unknown signing key".into(),
            TokenRejection::AlgorithmNotAllowed => "algorithm not allowed for the key".into(),
            TokenRejection::BadSignature => "bad signature".into(),
            TokenRejection::Expired => "token expired".into(),
            TokenRejection::NotYetValid => "token not yet valid (nbf)".into(),
            TokenRejection::WrongIssuer => "issuer not accepted".into(),
            TokenRejection::WrongAudience => "audience mismatch".into(),
            TokenRejection::MissingClaim(c) => format!("missing claim {c}"),
            TokenRejection::BadTenant => {
                "tenant_id missing or not a lowercase hyphenated UUID".into()
            }
            TokenRejection::ConfirmationAsBearer => {
                "a confirmation token presented as a bearer token".into()
            }
        }
    }

    /// The user-safe error.
    pub fn into_error(self) -> DomainError {
        match self {
            TokenRejection::Missing => DomainError::denied(
                "authentication required",
                "Present a token: set --token-file or CYBEROS_TOKEN for stdio, send Authorization: Bearer over HTTP, or start the bridge with --dev for local use.",
            ),
            TokenRejection::Expired => DomainError::denied(
                "token expired",
                "Your token has expired; re-authenticate to get a new one.",
            ),
            TokenRejection::NotYetValid => DomainError::denied(
                "token not yet valid",
                "The token's validity starts in the future; check the clock, or re-authenticate.",
            ),
            _ => DomainError::denied(
                "invalid token",
                "The token was rejected; re-authenticate to get a new one.",
            ),
        }
    }
}

/// What every upstream call carries: the tenant, the actor and the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCtx {
    /// The caller's tenant.
    pub tenant: TenantId,
    /// The caller (`sub`).
    pub actor: Arc<str>,
    /// The request's trace id.
    pub trace_id: TraceId,
    /// The span id of the caller's span, for `traceparent`.
    pub span_id: [u8; 8],
    /// Whether the trace is sampled (the caller's decision travels on).
    pub sampled: bool,
    /// The caller's W3C `tracestate`, validated, passed on unchanged.
    pub tracestate: Option<Arc<str>>,
}

impl CallCtx {
    /// The W3C `traceparent` header value for this call.
    pub fn traceparent(&self) -> String {
        let span = crate::domain::ids::hex_lower(&self.span_id);
        let flags = if self.sampled { "01" } else { "00" };
        format!("00-{}-{span}-{flags}", self.trace_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_step_up_asks_for_what_is_granted_and_what_is_needed() {
        let tenant = TenantId::parse("11111111-1111-4111-8111-111111111111").unwrap();
        let mut p = Principal::new(tenant, "a", &[Scope::MemoryRead]);
        p.granted = granted_words("openid cyberos:memory:read".split(' '));
        assert_eq!(
            p.step_up(Scope::MemoryWrite),
            ["openid", "cyberos:memory:read", "cyberos:memory:write"]
        );
        assert_eq!(
            p.step_up(Scope::MemoryRead),
            ["openid", "cyberos:memory:read"]
        );
    }

    #[test]
    fn granted_words_are_scope_tokens_each_once_and_bounded() {
        let words = granted_words(["a", "", "b\"c", "d\\e", "f\u{7f}", "é", "a", "g"]);
        assert_eq!(&*words, "a g");
        let many: Vec<String> = (0..500).map(|i| format!("scope-{i}")).collect();
        let words = granted_words(many.iter().map(String::as_str));
        assert!(words.len() <= MAX_GRANTED, "{}", words.len());
        assert!(words.ends_with(char::is_numeric));
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            (0..Scope::ALL.len()).prop_map(|i| Scope::ALL[i].as_str().to_owned()),
            "[a-z:]{0,24}",
            (0..Scope::ALL.len(), "[A-Za-z:]{1,3}")
                .prop_map(|(i, junk)| format!("{}{junk}", Scope::ALL[i].as_str())),
        ]
    }

    proptest! {
        /// Exactly the known words, in order, whatever separates them.
        #[test]
        fn a_scope_string_yields_its_known_words(
            words in proptest::collection::vec(word(), 0..12),
            gaps in proptest::collection::vec(" {1,3}", 12),
        ) {
            let text: String = words
                .iter()
                .zip(&gaps)
                .map(|(w, g)| format!("{g}{w}"))
                .collect();
            let expected: Vec<Scope> = words.iter().filter_map(|w| Scope::parse(w)).collect();
            prop_assert_eq!(Scope::parse_list(&text), expected);
        }

        /// Whitespace other than the ASCII space joins words, so it never grants.
        #[test]
        fn other_whitespace_separates_nothing(
            a in 0..Scope::ALL.len(),
            b in 0..Scope::ALL.len(),
            sep in prop_oneof![Just('\t'), Just('\n'), Just('\u{a0}'), Just('\u{2003}'), Just('\u{3000}')],
        ) {
            let text = format!("{}{sep}{}", Scope::ALL[a].as_str(), Scope::ALL[b].as_str());
            prop_assert!(Scope::parse_list(&text).is_empty());
        }

        #[test]
        fn any_text_parses_without_panicking(text in "\\PC*") {
            for scope in Scope::parse_list(&text) {
                prop_assert!(text.contains(scope.as_str()));
            }
        }
    }
}
