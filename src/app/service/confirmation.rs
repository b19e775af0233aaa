//! How a call with destructive or external effects gets confirmed (CONTRACT §5): a host
//! flag, the seed's flag, a single-use confirmation token, or, when the user can be asked
//! on this request (`Caller::can_ask`), a yes/no question; when they cannot, an approval
//! they give out of band (`domain::approval`), which the identical retry uses.

use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::caller::Caller;
use super::request::ToolCall;
use crate::app::App;
use crate::domain::approval::{self, ApprovalId, CallBinding, Settled};
use crate::domain::confirm::{self, Confirmation};
use crate::domain::{DomainError, Principal, Tool};

/// How long the user has to answer a confirmation question.
const ASK_WAIT: Duration = Duration::from_secs(300);

/// Hex SHA-256 of the RFC 8785 canonical JSON of `args`: what a confirmation token binds.
pub fn args_sha256(args: &Value) -> String {
    let canonical = serde_json_canonicalizer::to_string(args).unwrap_or_default();
    crate::domain::ids::hex_lower(&Sha256::digest(canonical.as_bytes()))
}

/// The confirmation of a call, or `AuthzDenied` when it needs one and has none.
pub(super) async fn confirm(
    app: &App,
    caller: &dyn Caller,
    principal: &Principal,
    tool: Tool,
    call: &ToolCall<'_>,
) -> Result<Option<Confirmation>, DomainError> {
    let spec = tool.spec();
    if !spec.effects.needs_confirmation() {
        return Ok(None);
    }
    let evidence = if let Some(how) = call.confirmed {
        Some(how)
    } else if let Some(token) = call.confirmation_token {
        check_confirmation_token(app, principal, tool, call.arguments, token).await?;
        Some(Confirmation::Token)
    } else if caller.can_ask() {
        Some(ask(caller, tool, call.arguments).await?)
    } else {
        approved(app, principal, tool, call.arguments).await?
    };
    confirm::decide(spec, evidence)
}

/// Uses the user's verdict on exactly this call, if they gave one; else records a pending
/// approval and refuses with what the user must do. Without a store to keep approvals,
/// `None`: the call is refused as unconfirmed.
async fn approved(
    app: &App,
    principal: &Principal,
    tool: Tool,
    args: &Value,
) -> Result<Option<Confirmation>, DomainError> {
    let binding = CallBinding {
        tenant: principal.tenant,
        subject: principal.actor.to_string(),
        tool,
        args_sha256: args_sha256(args),
    };
    let approvals = &app.ports().approvals;
    let settled = match approvals.settle(&binding).await {
        Ok(settled) => settled,
        Err(e) => {
            tracing::warn!(error = %e, "approvals cannot be kept: the call is refused as unconfirmed");
            return Ok(None);
        }
    };
    match settled {
        Some(Settled::Approved) => return Ok(Some(Confirmation::Approval)),
        Some(Settled::Denied) => return Err(approval::declined()),
        None => {}
    }
    let canonical = serde_json_canonicalizer::to_string(args).unwrap_or_default();
    let fresh = ApprovalId::from_random(crate::support::random::random_bytes());
    match approvals.request(&binding, fresh, &canonical).await? {
        Some(id) => {
            let link = app.approval_link(&id);
            Err(approval::asked(
                tool,
                &approval::how_to_approve(&id, link.as_deref()),
            ))
        }
        None => Err(approval::too_many_pending()),
    }
}

async fn check_confirmation_token(
    app: &App,
    principal: &Principal,
    tool: Tool,
    args: &Value,
    token: &str,
) -> Result<(), DomainError> {
    let claims = app.identity().verifier().verify_confirmation(token).await?;
    let now = app.ports().clock.now();
    confirm::check_token(&claims, principal, tool.name(), &args_sha256(args), now)?;
    if !app
        .ports()
        .ledger
        .claim(&principal.tenant, &claims.jti, claims.expires_at)
        .await?
    {
        return Err(DomainError::denied(
            "the confirmation token was already used",
            "Confirmation tokens work once; mint a new one for this call.",
        ));
    }
    Ok(())
}

/// Asks the user; only an explicit "yes" confirms.
async fn ask(caller: &dyn Caller, tool: Tool, args: &Value) -> Result<Confirmation, DomainError> {
    let summary = crate::domain::text::clip(&args.to_string(), 500).into_owned();
    let question = format!(
        "Allow {} to run with these arguments? {summary}",
        tool.spec().title
    );
    let answer = caller.confirm(&question, ASK_WAIT).await?;
    match answer.refusal() {
        None => Ok(Confirmation::Elicited),
        Some(why) => Err(DomainError::denied(
            format!("the user did not confirm the call ({why})"),
            "The call needs the user's approval; ask again if they want it to run.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hash_is_over_canonical_json() {
        let a = json!({"b": 1, "a": [1.0, "x"], "c": {"z": null, "y": true}});
        let b: Value =
            serde_json::from_str(r#"{"c":{"y":true,"z":null},"a":[1,"x"],"b":1}"#).unwrap();
        assert_eq!(args_sha256(&a), args_sha256(&b));
        assert_eq!(
            args_sha256(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_ne!(args_sha256(&json!({"a": 1})), args_sha256(&json!({"a": 2})));
    }
}
