//! `MemoryClient` on the embedded SQLite file: the append-only, tenant-scoped audit log
//! served when no `--memory-url` is given. Appends are idempotent per key.

use sqlx::Row;

use super::SqliteStore;
use crate::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry};
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp, TraceId, Upstream};
use crate::ports::MemoryClient;

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::Memory, Some(e.into()))
}

fn not_found() -> DomainError {
    DomainError::invalid("audit entry not found")
        .with_hint("Check the audit_id, or list entries with cyberos.memory.read_audit.")
}

fn bad_cursor() -> DomainError {
    DomainError::invalid_at("invalid cursor", "/cursor")
        .with_hint("Pass next_cursor from the previous page unchanged.")
}

/// Cursors are opaque to clients: `c1.` and the last sequence number in hex.
fn encode_cursor(seq: i64) -> String {
    format!("c1.{seq:x}")
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let hex = cursor.strip_prefix("c1.")?;
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    i64::from_str_radix(hex, 16).ok().filter(|v| *v > 0)
}

fn new_audit_id() -> String {
    let bytes = crate::support::random::random_bytes::<16>();
    format!("aud_{}", crate::domain::ids::hex_lower(&bytes))
}

fn entry_of(row: &sqlx::sqlite::SqliteRow) -> Result<AuditEntry, DomainError> {
    let trace: String = row.try_get("trace_id").map_err(down)?;
    Ok(AuditEntry {
        audit_id: row.try_get("audit_id").map_err(down)?,
        kind: row.try_get("kind").map_err(down)?,
        actor_id: row.try_get("actor_id").map_err(down)?,
        subject: row.try_get("subject").map_err(down)?,
        body: JsonText::from_serialized(row.try_get("body").map_err(down)?),
        recorded_at: Timestamp::from_unix_millis(row.try_get("recorded_at").map_err(down)?),
        trace_id: TraceId::parse(&trace)
            .ok_or_else(|| DomainError::internal("a stored trace id is malformed", None))?,
    })
}

macro_rules! columns {
    () => {
        "seq, audit_id, kind, actor_id, subject, body, recorded_at, trace_id"
    };
}

#[async_trait::async_trait]
impl MemoryClient for SqliteStore {
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
        let tenant = ctx.tenant.to_string();
        let now = self.now_ms();
        sqlx::query(
            "INSERT INTO audit_entries (audit_id, tenant_id, kind, actor_id, subject, body, recorded_at, trace_id, idempotency_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        )
        .bind(new_audit_id())
        .bind(&tenant)
        .bind(&entry.kind)
        .bind(&ctx.actor)
        .bind(&entry.subject)
        .bind(entry.body.as_str())
        .bind(now)
        .bind(ctx.trace_id.to_string())
        .bind(key)
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        // The stored row answers both a first append and a retry with the same key.
        let row = sqlx::query("SELECT audit_id, recorded_at FROM audit_entries WHERE tenant_id = ? AND idempotency_key = ?")
            .bind(&tenant)
            .bind(key)
            .fetch_one(&self.reader)
            .await
            .map_err(down)?;
        Ok(AuditReceipt {
            audit_id: row.try_get("audit_id").map_err(down)?,
            recorded_at: Timestamp::from_unix_millis(row.try_get("recorded_at").map_err(down)?),
        })
    }

    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_entries WHERE tenant_id = ? AND audit_id = ?"
        ))
        .bind(ctx.tenant.to_string())
        .bind(audit_id)
        .fetch_optional(&self.reader)
        .await
        .map_err(down)?;
        entry_of(&row.ok_or_else(not_found)?)
    }

    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
        let before = match &q.cursor {
            Some(c) => decode_cursor(c).ok_or_else(bad_cursor)?,
            None => i64::MAX,
        };
        let limit = i64::from(q.limit.clamp(1, 200));
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_entries
             WHERE tenant_id = ? AND seq < ? AND (? IS NULL OR kind = ?) AND (? IS NULL OR recorded_at >= ?)
             ORDER BY seq DESC LIMIT ?"
        ))
        .bind(ctx.tenant.to_string())
        .bind(before)
        .bind(&q.kind)
        .bind(&q.kind)
        .bind(q.since.map(Timestamp::unix_millis))
        .bind(q.since.map(Timestamp::unix_millis))
        .bind(limit + 1)
        .fetch_all(&self.reader)
        .await
        .map_err(down)?;
        let more = rows.len() as i64 > limit;
        let rows = &rows[..rows.len().min(limit as usize)];
        let next_cursor = match (more, rows.last()) {
            (true, Some(last)) => Some(encode_cursor(last.try_get("seq").map_err(down)?)),
            _ => None,
        };
        Ok(AuditPage {
            entries: rows.iter().map(entry_of).collect::<Result<_, _>>()?,
            next_cursor,
        })
    }

    async fn check(&self) -> Result<(), DomainError> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map(|_| ())
            .map_err(down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        for bad in [
            "",
            "c1.",
            "c1.zz",
            "c2.1",
            "42",
            "c1.0",
            "c1.-1",
            "c1.ffffffffffffffffff",
        ] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn audit_cursors_round_trip(seq in 1i64..=i64::MAX) {
            prop_assert_eq!(decode_cursor(&encode_cursor(seq)), Some(seq));
        }

        #[test]
        fn any_cursor_text_decodes_or_is_refused(text in "(c1\\.)?[0-9a-fA-F]{0,18}|\\PC{0,30}") {
            if let Some(seq) = decode_cursor(&text) {
                // Only positions the store could have issued, and they read back the same.
                prop_assert!(seq > 0);
                prop_assert_eq!(decode_cursor(&encode_cursor(seq)), Some(seq));
            }
        }
    }
}
