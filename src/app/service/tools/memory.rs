//! Handlers of the two `cyberos.memory.*` tools.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::app::service::output::{ToolOutput, json_text, json_value, structured};
use crate::domain::memory::{AuditEntry, AuditQuery, NewAuditEntry};
use crate::domain::{CallCtx, DomainError, Timestamp};
use crate::support::random::random_bytes;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct AppendAuditArgs {
    kind: String,
    body: Map<String, Value>,
    subject: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct ReadAuditArgs {
    audit_id: Option<String>,
    kind: Option<String>,
    since: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

pub(in crate::app::service) async fn append_audit(
    app: &App,
    ctx: &CallCtx,
    args: AppendAuditArgs,
) -> Result<ToolOutput, DomainError> {
    let entry = NewAuditEntry {
        kind: args.kind,
        subject: args.subject,
        body: json_text(&Value::Object(args.body)),
    };
    // One key per tool call: the adapter's own retries reuse it, so they never write twice.
    let key = crate::domain::ids::hex_lower(&random_bytes::<16>());
    let receipt = app.ports().memory.append(ctx, &entry, &key).await?;
    structured(
        &json!({ "audit_id": receipt.audit_id, "recorded_at": receipt.recorded_at.to_rfc3339() }),
    )
}

pub(in crate::app::service) async fn read_audit(
    app: &App,
    ctx: &CallCtx,
    args: ReadAuditArgs,
) -> Result<ToolOutput, DomainError> {
    let memory = &app.ports().memory;
    if let Some(id) = args.audit_id {
        let entry = memory.get(ctx, &id).await?;
        return structured(&json!({ "entries": [entry_json(entry)?] }));
    }
    let since =
        match args.since {
            None => None,
            Some(s) => Some(Timestamp::parse_rfc3339(&s).ok_or_else(|| {
                DomainError::invalid_at("since is not an RFC 3339 time", "/since")
            })?),
        };
    let query = AuditQuery {
        kind: args.kind,
        since,
        limit: args.limit.unwrap_or(50),
        cursor: args.cursor,
    };
    let page = memory.list(ctx, &query).await?;
    let entries = page
        .entries
        .into_iter()
        .map(entry_json)
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = json!({ "entries": entries });
    if let Some(next) = page.next_cursor {
        out["next_cursor"] = next.into();
    }
    structured(&out)
}

fn entry_json(e: AuditEntry) -> Result<Value, DomainError> {
    let mut v = json!({
        "audit_id": e.audit_id, "kind": e.kind, "actor_id": e.actor_id, "body": json_value(&e.body)?,
        "recorded_at": e.recorded_at.to_rfc3339(), "trace_id": e.trace_id.to_string()
    });
    if let Some(subject) = e.subject {
        v["subject"] = subject.into();
    }
    Ok(v)
}
