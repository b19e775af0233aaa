//! `Approvals` on Postgres: tenant-scoped like every table, but for the three reads that
//! come before the tenant is known (an approval by its id, a secret by its digest) and
//! the sweep, which are `SECURITY DEFINER` functions of the maintainer (0006).

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{PgStore, down, timed, ts};
use crate::domain::approval::{
    Approval, ApprovalId, CallBinding, LIFETIME_MS, MAX_PENDING_PER_SUBJECT, PageSecret,
    SecretKind, Settled, Verdict,
};
use crate::domain::{DomainError, TenantId, Timestamp, Tool, Upstream};
use crate::ports::Approvals;

fn corrupt(what: &str) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, None)
        .with_hint(format!("the stored approval has an unreadable {what}"))
}

/// The columns of an approval, in the order [`approval`] reads them.
const APPROVAL_COLUMNS: &str = "id, tenant_id::text, subject, tool, args_sha256, arguments, verdict, \
     (extract(epoch FROM created_at) * 1000)::int8, (extract(epoch FROM expires_at) * 1000)::int8";

fn approval(row: &PgRow) -> Result<Approval, DomainError> {
    let text = |i: usize| row.try_get::<String, _>(i).map_err(down);
    let millis = |i: usize| row.try_get::<i64, _>(i).map_err(down);
    Ok(Approval {
        id: ApprovalId::parse(&text(0)?).ok_or_else(|| corrupt("id"))?,
        binding: CallBinding {
            tenant: TenantId::parse(&text(1)?).map_err(|_| corrupt("tenant"))?,
            subject: text(2)?,
            tool: Tool::from_name(&text(3)?).ok_or_else(|| corrupt("tool"))?,
            args_sha256: text(4)?,
        },
        arguments: text(5)?,
        verdict: Verdict::parse(&text(6)?).ok_or_else(|| corrupt("verdict"))?,
        created_at: Timestamp::from_unix_millis(millis(7)?),
        expires_at: Timestamp::from_unix_millis(millis(8)?),
    })
}

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
            Ok(match verdict.as_deref().and_then(Verdict::parse) {
                Some(Verdict::Approved) => Some(Settled::Approved),
                Some(Verdict::Denied) => Some(Settled::Denied),
                Some(Verdict::Pending) | None => None,
            })
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
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .bind(self.now_ms())
                .fetch_optional(&mut *tx)
                .await
                .map_err(down)?;
            tx.commit().await.map_err(down)?;
            row.as_ref().map(approval).transpose()
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
            let row = sqlx::query(concat!(
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
            let Some(row) = row else {
                return Ok(None);
            };
            let text = |i: usize| row.try_get::<String, _>(i).map_err(down);
            Ok(Some(PageSecret {
                kind,
                digest: digest.to_owned(),
                approval: ApprovalId::parse(&text(0)?).ok_or_else(|| corrupt("id"))?,
                tenant: TenantId::parse(&text(1)?).map_err(|_| corrupt("tenant"))?,
                subject: row.try_get(2).map_err(down)?,
                payload: text(3)?,
                expires_at: Timestamp::from_unix_millis(row.try_get(4).map_err(down)?),
            }))
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
