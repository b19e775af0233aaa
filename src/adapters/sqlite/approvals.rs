//! `Approvals` on the embedded file. Each decision is one statement, so processes
//! sharing the file cannot both use one approval.

use super::SqliteStore;
use crate::adapters::rows::approvals::{self as rows, ApprovalColumns, SecretColumns};
use crate::domain::approval::{
    Approval, ApprovalId, CallBinding, LIFETIME_MS, MAX_PENDING_PER_SUBJECT, PageSecret,
    SecretKind, Settled, Verdict,
};
use crate::domain::{DomainError, TenantId, Upstream};
use crate::ports::Approvals;

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

#[async_trait::async_trait]
impl Approvals for SqliteStore {
    async fn settle(&self, binding: &CallBinding) -> Result<Option<Settled>, DomainError> {
        let verdict: Option<String> = sqlx::query_scalar(
            "DELETE FROM approvals WHERE id = (
                 SELECT id FROM approvals
                  WHERE tenant_id = ?1 AND subject = ?2 AND tool = ?3 AND args_sha256 = ?4
                    AND verdict <> 'pending' AND expires_at > ?5
                  ORDER BY created_at LIMIT 1)
             RETURNING verdict",
        )
        .bind(binding.tenant.to_string())
        .bind(&binding.subject)
        .bind(binding.tool.name())
        .bind(&binding.args_sha256)
        .bind(self.now_ms())
        .fetch_optional(self.writer.now())
        .await
        .map_err(down)?;
        Ok(rows::settled(verdict.as_deref()))
    }

    async fn request(
        &self,
        binding: &CallBinding,
        id: ApprovalId,
        arguments: &str,
    ) -> Result<Option<ApprovalId>, DomainError> {
        let now = self.now_ms();
        // One statement: no second pending row for the call, and the cap holds against
        // concurrent requests.
        sqlx::query(
            "INSERT INTO approvals
                 (id, tenant_id, subject, tool, args_sha256, arguments, created_at, expires_at)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
              WHERE NOT EXISTS (SELECT 1 FROM approvals
                                 WHERE tenant_id = ?2 AND subject = ?3 AND tool = ?4
                                   AND args_sha256 = ?5 AND verdict = 'pending' AND expires_at > ?7)
                AND (SELECT count(*) FROM approvals
                      WHERE tenant_id = ?2 AND subject = ?3 AND verdict = 'pending'
                        AND expires_at > ?7) < ?9",
        )
        .bind(id.to_string())
        .bind(binding.tenant.to_string())
        .bind(&binding.subject)
        .bind(binding.tool.name())
        .bind(&binding.args_sha256)
        .bind(arguments)
        .bind(now)
        .bind(now.saturating_add(LIFETIME_MS))
        .bind(i64::from(MAX_PENDING_PER_SUBJECT))
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        let pending: Option<String> = sqlx::query_scalar(
            "SELECT id FROM approvals
              WHERE tenant_id = ? AND subject = ? AND tool = ? AND args_sha256 = ?
                AND verdict = 'pending' AND expires_at > ?
              ORDER BY created_at LIMIT 1",
        )
        .bind(binding.tenant.to_string())
        .bind(&binding.subject)
        .bind(binding.tool.name())
        .bind(&binding.args_sha256)
        .bind(now)
        .fetch_optional(self.writer.now())
        .await
        .map_err(down)?;
        Ok(pending.as_deref().and_then(ApprovalId::parse))
    }

    async fn find(&self, id: &ApprovalId) -> Result<Option<Approval>, DomainError> {
        let row: Option<ApprovalColumns> = sqlx::query_as(
            "SELECT id, tenant_id, subject, tool, args_sha256, arguments, verdict, created_at, expires_at
               FROM approvals WHERE id = ? AND expires_at > ?",
        )
        .bind(id.to_string())
        .bind(self.now_ms())
        .fetch_optional(&self.reader)
        .await
        .map_err(down)?;
        row.map(rows::approval).transpose()
    }

    async fn decide(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        subject: &str,
        approve: bool,
    ) -> Result<bool, DomainError> {
        let verdict = if approve {
            Verdict::Approved
        } else {
            Verdict::Denied
        };
        let updated = sqlx::query(
            "UPDATE approvals SET verdict = ?
              WHERE id = ? AND tenant_id = ? AND subject = ? AND verdict = 'pending'
                AND expires_at > ?",
        )
        .bind(verdict.as_str())
        .bind(id.to_string())
        .bind(tenant.to_string())
        .bind(subject)
        .bind(self.now_ms())
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        Ok(updated.rows_affected() == 1)
    }

    async fn keep_secret(&self, secret: &PageSecret) -> Result<(), DomainError> {
        sqlx::query(
            "INSERT INTO approval_secrets
                 (digest, kind, approval_id, tenant_id, subject, payload, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&secret.digest)
        .bind(secret.kind.as_str())
        .bind(secret.approval.to_string())
        .bind(secret.tenant.to_string())
        .bind(secret.subject.as_deref())
        .bind(&secret.payload)
        .bind(secret.expires_at.unix_millis())
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        Ok(())
    }

    async fn take_secret(
        &self,
        kind: SecretKind,
        digest: &str,
    ) -> Result<Option<PageSecret>, DomainError> {
        let row: Option<SecretColumns> = sqlx::query_as(
            "DELETE FROM approval_secrets WHERE digest = ? AND kind = ? AND expires_at > ?
             RETURNING approval_id, tenant_id, subject, payload, expires_at",
        )
        .bind(digest)
        .bind(kind.as_str())
        .bind(self.now_ms())
        .fetch_optional(self.writer.now())
        .await
        .map_err(down)?;
        row.map(|c| rows::secret(kind, digest, c)).transpose()
    }

    async fn sweep(&self) -> Result<u64, DomainError> {
        let now = self.now_ms();
        let mut gone = 0;
        for table in ["approvals", "approval_secrets"] {
            // Both names are ours.
            let sql = format!("DELETE FROM {table} WHERE expires_at <= ?");
            gone += sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(now)
                .execute(self.writer.now())
                .await
                .map_err(down)?
                .rows_affected();
        }
        Ok(gone)
    }
}
