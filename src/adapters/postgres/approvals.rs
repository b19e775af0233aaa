//! `Approvals` on Postgres: tenant-scoped like every table, but for the three reads that
//! come before the tenant is known (an approval by its id, a secret by its digest) and
//! the sweep, which are `SECURITY DEFINER` functions of the maintainer (0006).

use super::{PgStore, down, timed, ts};
use crate::adapters::rows::approvals::{self as rows, ApprovalColumns, SecretColumns};
use crate::domain::approval::{
    Approval, ApprovalId, CallBinding, LIFETIME_MS, MAX_PENDING_PER_SUBJECT, PageSecret,
    SecretKind, Settled, Verdict,
};
use crate::domain::{DomainError, TenantId};
use crate::ports::Approvals;

/// The columns of an approval, in the order [`ApprovalColumns`] reads them.
const APPROVAL_COLUMNS: &str = "id, tenant_id::text, subject, tool, args_sha256, arguments, verdict, \
     (extract(epoch FROM created_at) * 1000)::int8, (extract(epoch FROM expires_at) * 1000)::int8";

#[async_trait::async_trait]
impl Approvals for PgStore {
    async fn settle(&self, binding: &CallBinding) -> Result<Option<Settled>, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(&binding.tenant)).await.map_err(down)?;
            // SKIP LOCKED: of two concurrent retries, the second finds nothing to use and
            // is asked again.
            let verdict: Option<String> = sqlx::query_scalar(concat!(
                "DELETE FROM plugin_host.approvals WHERE id = (
                     SELECT id FROM plugin_host.approvals
                      WHERE tenant_id = $1::uuid AND subject = $2 AND tool = $3
                        AND args_sha256 = $4 AND verdict <> 'pending' AND expires_at > ",
                ts!(5),
                "
                      ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
                 RETURNING verdict"
            ))
            .bind(binding.tenant.to_string())
            .bind(&binding.subject)
            .bind(binding.tool.name())
            .bind(&binding.args_sha256)
            .bind(self.now_ms())
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(rows::settled(verdict.as_deref()))
        })
        .await
    }

    async fn request(
        &self,
        binding: &CallBinding,
        id: ApprovalId,
        arguments: &str,
    ) -> Result<Option<ApprovalId>, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(&binding.tenant)).await.map_err(down)?;
            // One subject's requests queue here, so the cap and "one pending row per
            // call" hold across instances.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))")
                .bind(binding.tenant.to_string())
                .bind(&binding.subject)
                .execute(&mut *tx)
                .await
                .map_err(down)?;
            let pending: Option<String> = sqlx::query_scalar(concat!(
                "SELECT id FROM plugin_host.approvals
                  WHERE tenant_id = $1::uuid AND subject = $2 AND tool = $3 AND args_sha256 = $4
                    AND verdict = 'pending' AND expires_at > ",
                ts!(5),
                " ORDER BY created_at LIMIT 1"
            ))
            .bind(binding.tenant.to_string())
            .bind(&binding.subject)
            .bind(binding.tool.name())
            .bind(&binding.args_sha256)
            .bind(self.now_ms())
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            if let Some(pending) = pending {
                tx.commit().await.map_err(down)?;
                return Ok(ApprovalId::parse(&pending));
            }
            let now = self.now_ms();
            let inserted = sqlx::query(concat!(
                "INSERT INTO plugin_host.approvals
                     (id, tenant_id, subject, tool, args_sha256, arguments, created_at, expires_at)
                 SELECT $1, $2::uuid, $3, $4, $5, $6, ",
                ts!(7),
                ", ",
                ts!(8),
                " WHERE (SELECT count(*) FROM plugin_host.approvals
                          WHERE tenant_id = $2::uuid AND subject = $3 AND verdict = 'pending'
                            AND expires_at > ",
                ts!(7),
                ") < $9"
            ))
            .bind(id.to_string())
            .bind(binding.tenant.to_string())
            .bind(&binding.subject)
            .bind(binding.tool.name())
            .bind(&binding.args_sha256)
            .bind(arguments)
            .bind(now)
            .bind(now.saturating_add(LIFETIME_MS))
            .bind(i64::from(MAX_PENDING_PER_SUBJECT))
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok((inserted.rows_affected() == 1).then_some(id))
        })
        .await
    }

    async fn find(&self, id: &ApprovalId) -> Result<Option<Approval>, DomainError> {
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM plugin_host.find_approval($1, {})",
                ts!(2)
            );
            let row: Option<ApprovalColumns> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .bind(self.now_ms())
                .fetch_optional(&mut *tx)
                .await
                .map_err(down)?;
            tx.commit().await.map_err(down)?;
            row.map(rows::approval).transpose()
        })
        .await
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
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let updated = sqlx::query(concat!(
                "UPDATE plugin_host.approvals SET verdict = $1
                  WHERE id = $2 AND tenant_id = $3::uuid AND subject = $4
                    AND verdict = 'pending' AND expires_at > ",
                ts!(5)
            ))
            .bind(verdict.as_str())
            .bind(id.to_string())
            .bind(tenant.to_string())
            .bind(subject)
            .bind(self.now_ms())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(updated.rows_affected() == 1)
        })
        .await
    }

    async fn keep_secret(&self, secret: &PageSecret) -> Result<(), DomainError> {
        timed(async {
            let mut tx = self.begin(Some(&secret.tenant)).await.map_err(down)?;
            sqlx::query(concat!(
                "INSERT INTO plugin_host.approval_secrets
                     (digest, kind, approval_id, tenant_id, subject, payload, expires_at)
                 VALUES ($1, $2, $3, $4::uuid, $5, $6, ",
                ts!(7),
                ")"
            ))
            .bind(&secret.digest)
            .bind(secret.kind.as_str())
            .bind(secret.approval.to_string())
            .bind(secret.tenant.to_string())
            .bind(secret.subject.as_deref())
            .bind(&secret.payload)
            .bind(secret.expires_at.unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(())
        })
        .await
    }

    async fn take_secret(
        &self,
        kind: SecretKind,
        digest: &str,
    ) -> Result<Option<PageSecret>, DomainError> {
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            let row: Option<SecretColumns> = sqlx::query_as(concat!(
                "SELECT approval_id, tenant_id::text, subject, payload,
                        (extract(epoch FROM expires_at) * 1000)::int8
                   FROM plugin_host.take_approval_secret($1, $2, ",
                ts!(3),
                ")"
            ))
            .bind(kind.as_str())
            .bind(digest)
            .bind(self.now_ms())
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            row.map(|c| rows::secret(kind, digest, c)).transpose()
        })
        .await
    }

    async fn sweep(&self) -> Result<u64, DomainError> {
        timed(async {
            let mut tx = self.begin(None).await.map_err(down)?;
            let swept: i64 =
                sqlx::query_scalar(concat!("SELECT plugin_host.sweep_approvals(", ts!(1), ")"))
                    .bind(self.now_ms())
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(u64::try_from(swept).unwrap_or(0))
        })
        .await
    }
}
