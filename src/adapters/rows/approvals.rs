//! How both stores read an approval and a page secret back from their columns, and what a
//! consumed verdict means. Imported by both, importing neither.

use crate::domain::approval::{
    Approval, ApprovalId, CallBinding, PageSecret, SecretKind, Settled, Verdict,
};
use crate::domain::{DomainError, TenantId, Timestamp, Tool, Upstream};

/// An approval's columns: id, tenant, subject, tool, args digest, arguments, verdict,
/// created and expiry (Unix milliseconds).
pub(crate) type ApprovalColumns = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
);

/// A page secret's columns: approval id, tenant, subject, payload, expiry (Unix ms).
pub(crate) type SecretColumns = (String, String, Option<String>, String, i64);

fn corrupt(what: &str) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, None)
        .with_hint(format!("the stored approval has an unreadable {what}"))
}

/// The approval of a row.
pub(crate) fn approval(c: ApprovalColumns) -> Result<Approval, DomainError> {
    let (id, tenant, subject, tool, args_sha256, arguments, verdict, created, expires) = c;
    Ok(Approval {
        id: ApprovalId::parse(&id).ok_or_else(|| corrupt("id"))?,
        binding: CallBinding {
            tenant: TenantId::parse(&tenant).map_err(|_| corrupt("tenant"))?,
            subject,
            tool: Tool::from_name(&tool).ok_or_else(|| corrupt("tool"))?,
            args_sha256,
        },
        arguments,
        verdict: Verdict::parse(&verdict).ok_or_else(|| corrupt("verdict"))?,
        created_at: Timestamp::from_unix_millis(created),
        expires_at: Timestamp::from_unix_millis(expires),
    })
}

/// The secret of `kind` and `digest` of a row.
pub(crate) fn secret(
    kind: SecretKind,
    digest: &str,
    c: SecretColumns,
) -> Result<PageSecret, DomainError> {
    let (approval, tenant, subject, payload, expires) = c;
    Ok(PageSecret {
        kind,
        digest: digest.to_owned(),
        approval: ApprovalId::parse(&approval).ok_or_else(|| corrupt("id"))?,
        tenant: TenantId::parse(&tenant).map_err(|_| corrupt("tenant"))?,
        subject,
        payload,
        expires_at: Timestamp::from_unix_millis(expires),
    })
}

/// What a consumed verdict means for the retry; `None` when nothing was consumed.
pub(crate) fn settled(verdict: Option<&str>) -> Option<Settled> {
    match verdict.and_then(Verdict::parse) {
        Some(Verdict::Approved) => Some(Settled::Approved),
        Some(Verdict::Denied) => Some(Settled::Denied),
        Some(Verdict::Pending) | None => None,
    }
}
