//! Confirmation of calls with destructive or external effects (CONTRACT §5), as pure rules.

use crate::domain::{DomainError, ToolSpec};

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
