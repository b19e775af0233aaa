//! Confirmation of calls with destructive or external effects (CONTRACT §5), as pure rules.

use crate::domain::{DomainError, Principal, TenantId, Timestamp, ToolSpec};

/// Longest lifetime a confirmation token may have (CONTRACT §5).
pub const MAX_TOKEN_LIFETIME_MS: i64 = 5 * 60 * 1000;
/// Clock skew tolerated when checking that lifetime.
const SKEW_MS: i64 = 30 * 1000;

/// The verified claims of a confirmation token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationClaims {
    /// The tenant it was minted for.
    pub tenant: TenantId,
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

/// Checks a verified confirmation token against the call it is presented with. The
/// caller then claims the `jti` once.
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
            "Mint a new confirmation token for exactly this tool and these arguments, then retry.",
        ))
    };
    if claims.tenant != principal.tenant {
        return refuse("was issued for another tenant");
    }
    if claims.tool != tool {
        return refuse("confirms another tool");
    }
    if !claims.args_sha256.eq_ignore_ascii_case(args_sha256) {
        return refuse("confirms other arguments");
    }
    if claims.expires_at <= now {
        return refuse("has expired");
    }
    let lifetime = match claims.issued_at {
        Some(iat) => claims.expires_at.unix_millis() - iat.unix_millis(),
        None => claims.expires_at.unix_millis() - now.unix_millis(),
    };
    if lifetime > MAX_TOKEN_LIFETIME_MS + SKEW_MS {
        return refuse("lives longer than 5 minutes");
    }
    Ok(())
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
}

impl Confirmation {
    /// Log name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Confirmation::HostMeta => "host_meta",
            Confirmation::SeedFlag => "seed_flag",
            Confirmation::Token => "confirmation_token",
            Confirmation::Elicited => "elicitation",
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
            "Ask the user to approve this call, then retry with _meta {\"com.cyberos/confirmed\": true} \
             or a confirmation token.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ErrorClass, Tool};

    #[test]
    fn read_only_tools_never_need_confirmation() {
        assert_eq!(decide(Tool::ListSkills.spec(), None).unwrap(), None);
        assert_eq!(
            decide(Tool::ReadAudit.spec(), Some(Confirmation::HostMeta)).unwrap(),
            None
        );
    }

    #[test]
    fn an_unconfirmed_audit_append_is_denied() {
        let err = decide(Tool::AppendAudit.spec(), None).unwrap_err();
        assert_eq!(err.class(), ErrorClass::AuthzDenied);
    }

    fn principal() -> Principal {
        Principal {
            tenant: TenantId::parse(TENANT).unwrap(),
            actor: "a".into(),
            scopes: vec![],
        }
    }

    const TENANT: &str = "11111111-1111-4111-8111-111111111111";
    const NOW: Timestamp = Timestamp::from_unix_millis(1_000_000_000);

    fn claims() -> ConfirmationClaims {
        ConfirmationClaims {
            tenant: TenantId::parse(TENANT).unwrap(),
            tool: "cyberos.memory.append_audit".into(),
            args_sha256: "ab".repeat(32),
            jti: "j1".into(),
            expires_at: NOW.plus_millis(60_000),
            issued_at: Some(NOW),
        }
    }

    fn check(c: &ConfirmationClaims) -> Result<(), DomainError> {
        check_token(
            c,
            &principal(),
            "cyberos.memory.append_audit",
            &"AB".repeat(32),
            NOW,
        )
    }

    #[test]
    fn a_matching_token_confirms() {
        assert!(check(&claims()).is_ok());
    }

    #[test]
    fn a_token_for_anything_else_is_refused() {
        let other_tenant = ConfirmationClaims {
            tenant: TenantId::parse("22222222-2222-4222-8222-222222222222").unwrap(),
            ..claims()
        };
        let other_tool = ConfirmationClaims {
            tool: "cyberos.cuo.route".into(),
            ..claims()
        };
        let other_args = ConfirmationClaims {
            args_sha256: "cd".repeat(32),
            ..claims()
        };
        let expired = ConfirmationClaims {
            expires_at: NOW,
            ..claims()
        };
        let long_lived = ConfirmationClaims {
            expires_at: NOW.plus_millis(10 * 60_000),
            ..claims()
        };
        let long_lived_no_iat = ConfirmationClaims {
            issued_at: None,
            ..long_lived.clone()
        };
        for c in [
            other_tenant,
            other_tool,
            other_args,
            expired,
            long_lived,
            long_lived_no_iat,
        ] {
            assert_eq!(
                check(&c).unwrap_err().class(),
                ErrorClass::AuthzDenied,
                "{c:?}"
            );
        }
    }

    #[test]
    fn any_evidence_confirms_and_is_reported() {
        for how in [
            Confirmation::HostMeta,
            Confirmation::SeedFlag,
            Confirmation::Token,
            Confirmation::Elicited,
        ] {
            assert_eq!(
                decide(Tool::AppendAudit.spec(), Some(how)).unwrap(),
                Some(how)
            );
        }
    }
}
