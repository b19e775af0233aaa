//! Confirmation of calls with destructive or external effects (CONTRACT §5), as pure rules.

use crate::domain::{
    DomainError, Principal, TenantId, Timestamp, TokenRejection, ToolSpec, Upstream,
};

/// Longest lifetime a confirmation token may have (CONTRACT §5).
pub const MAX_TOKEN_LIFETIME_MS: i64 = 5 * 60 * 1000;
/// Clock skew tolerated when checking that lifetime.
const SKEW_MS: i64 = 30 * 1000;
/// The most live keys one tenant's ledger holds (used confirmation ids and ended
/// sessions, each until it expires): a client ending sessions in a loop must not grow the
/// store without bound.
pub const LEDGER_KEYS_PER_TENANT: u32 = 10_000;

/// The refusal when a tenant's ledger holds [`LEDGER_KEYS_PER_TENANT`] live keys.
pub fn ledger_full() -> DomainError {
    DomainError::UpstreamUnavailable {
        upstream: Upstream::TaskStore,
        message: "too many ended sessions and used confirmations are remembered for this tenant"
            .into(),
        hint: format!(
            "The bridge remembers at most {LEDGER_KEYS_PER_TENANT} per tenant until each expires; retry later, and let idle sessions expire instead of ending each one."
        ),
        retry_after: Some(std::time::Duration::from_secs(60)),
        source: None,
    }
}

/// The `purpose` claim's value that makes a JWT a confirmation token. It keeps the two
/// kinds apart: a bearer token is never a confirmation, and a token with this purpose is
/// never accepted as a bearer token.
pub const PURPOSE: &str = "com.cyberos/confirmation";

const MINT_HINT: &str = "Mint a new confirmation token for exactly this tool and these arguments \
     (aud: this bridge, sub: you, purpose: \"com.cyberos/confirmation\", exp at most 5 minutes ahead), then retry.";

/// The verified claims of a confirmation token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationClaims {
    /// The tenant it was minted for.
    pub tenant: TenantId,
    /// The user it was minted for (`sub`).
    pub subject: String,
    /// The `purpose` claim, when present.
    pub purpose: Option<String>,
    /// The tool it confirms.
    pub tool: String,
    /// Hex SHA-256 of the RFC 8785 canonical JSON of the arguments.
    pub args_sha256: String,
    /// Single-use id.
    pub jti: String,
    /// Expiry.
    pub expires_at: Timestamp,
    /// Issue time, when present.
    pub issued_at: Option<Timestamp>,
}

/// Checks a verified confirmation token against the call it is presented with and the
/// clock. The caller then claims the `jti` once.
pub fn check_token(
    claims: &ConfirmationClaims,
    principal: &Principal,
    tool: &str,
    args_sha256: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    let refuse = |why: &str| {
        Err(DomainError::denied(
            format!("the confirmation token {why}"),
            MINT_HINT,
        ))
    };
    if claims.purpose.as_deref() != Some(PURPOSE) {
        return refuse("lacks the purpose \"com.cyberos/confirmation\"");
    }
    if claims.tenant != principal.tenant {
        return refuse("was issued for another tenant");
    }
    if *claims.subject != *principal.actor {
        return refuse("was issued to another user");
    }
    if claims.tool != tool {
        return refuse("confirms another tool");
    }
    if !claims.args_sha256.eq_ignore_ascii_case(args_sha256) {
        return refuse("confirms other arguments");
    }
    let (now_ms, exp_ms) = (now.unix_millis(), claims.expires_at.unix_millis());
    if exp_ms <= now_ms {
        return refuse("has expired");
    }
    // The bound is against the clock: `iat` is the minter's word and may lie.
    if exp_ms - now_ms > MAX_TOKEN_LIFETIME_MS + SKEW_MS {
        return refuse("lives longer than 5 minutes");
    }
    if let Some(iat) = claims.issued_at.map(Timestamp::unix_millis) {
        if iat > now_ms + SKEW_MS {
            return refuse("is dated in the future (iat)");
        }
        if exp_ms - iat > MAX_TOKEN_LIFETIME_MS + SKEW_MS {
            return refuse("lives longer than 5 minutes");
        }
    }
    Ok(())
}

/// The user-safe error for a confirmation token the verifier refused (the log line has
/// the precise reason).
pub fn token_rejected(rejection: TokenRejection) -> DomainError {
    let message = match rejection {
        TokenRejection::Expired => "the confirmation token has expired".to_owned(),
        TokenRejection::NotYetValid => "the confirmation token is not valid yet".to_owned(),
        TokenRejection::WrongAudience => {
            "the confirmation token was not issued for this bridge (aud)".to_owned()
        }
        // Only names from the verifier's fixed list of required claims reach here.
        TokenRejection::MissingClaim(claim) => {
            format!("the confirmation token lacks the {claim} claim")
        }
        TokenRejection::BadTenant => "the confirmation token has no valid tenant_id".to_owned(),
        _ => "the confirmation token is not valid".to_owned(),
    };
    DomainError::denied(message, MINT_HINT)
}

/// How a call was confirmed, recorded in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// `_meta["com.cyberos/confirmed"]: true` from the host.
    HostMeta,
    /// The seed's `"mcp/sampling/elicit_confirm": true`.
    SeedFlag,
    /// A single-use confirmation token.
    Token,
    /// The user accepted a form elicitation.
    Elicited,
    /// The user approved the call on the approval page or at a terminal.
    Approval,
}

impl Confirmation {
    /// Log name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Confirmation::HostMeta => "host_meta",
            Confirmation::SeedFlag => "seed_flag",
            Confirmation::Token => "confirmation_token",
            Confirmation::Elicited => "elicitation",
            Confirmation::Approval => "approval",
        }
    }
}

/// Decides whether a call may proceed: `Ok(None)` when the tool needs no confirmation,
/// `Ok(Some(how))` when it was confirmed, `AuthzDenied` otherwise.
pub fn decide(
    spec: &ToolSpec,
    evidence: Option<Confirmation>,
) -> Result<Option<Confirmation>, DomainError> {
    if !spec.effects.needs_confirmation() {
        return Ok(None);
    }
    match evidence {
        Some(how) => Ok(Some(how)),
        None => Err(DomainError::denied(
            format!(
                "tool '{}' changes durable state and needs the user's confirmation",
                spec.name.as_str()
            ),
            "The bridge could not ask the user here; ask the user to approve this call, then \
             retry it with a confirmation token (the bridge's README says how to get one), or \
             let the user run it themselves (`cyberos-mcp-bridge call <tool> '<arguments>' \
             --confirm`) or from a host that shows the bridge's confirmation prompt.",
        )),
    }
}

#[cfg(test)]
mod tests;
