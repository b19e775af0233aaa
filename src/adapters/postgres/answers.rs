//! `ClientAnswers` on Postgres: the instance that receives an answer records it and
//! `NOTIFY`s `plugin_host_client_answer` with our request id; one listener per process
//! wakes the waiter of that id, which then reads its row in its own tenant's
//! transaction. A notification therefore only says "look now": it carries no answer and
//! no tenant, and a waiter also looks once a second, so a notification lost while the
//! listener reconnects costs at most that second.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Heard, PgStore, down, listen, timed, ts};
use crate::adapters::rows::answers;
use crate::adapters::waiters::Registered;
use crate::domain::session::{
    ClientAnswer, MAX_OPEN_QUESTIONS, MAX_OPEN_QUESTIONS_PER_TENANT, QuestionKey,
};
use crate::domain::{DomainError, TenantId, Timestamp};
use crate::ports::ClientAnswers;

const ANSWER_CHANNEL: &str = "plugin_host_client_answer";
/// How often a waiter looks without being woken.
const FALLBACK_POLL: Duration = Duration::from_secs(1);

impl PgStore {
    /// Registers a waiter for `request`, starting the process's listener on first use.
    fn register<'a>(&'a self, request: &'a str) -> Registered<'a> {
        self.waiters.start_once(|| {
            let waiters = Arc::downgrade(&self.waiters);
            let heard = move |heard: Heard<'_>| {
                let Some(waiters) = waiters.upgrade() else {
                    return;
                };
                match heard {
                    Heard::Payload(request) => waiters.wake(request),
                    Heard::Reconnected => waiters.wake_all(),
                }
            };
            let stop = self.watch.0.child_token();
            tokio::spawn(listen(self.options.clone(), ANSWER_CHANNEL, heard, stop));
        });
        self.waiters.register(request)
    }

    async fn answered(&self, tenant: &TenantId, key: &QuestionKey) -> Result<bool, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let found: Option<i32> = sqlx::query_scalar(
                "SELECT 1 FROM plugin_host.client_answers
                  WHERE tenant_id = $1::uuid AND session = $2 AND request_id = $3
                    AND answer IS NOT NULL",
            )
            .bind(tenant.to_string())
            .bind(&key.session)
            .bind(&key.request)
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(found.is_some())
        })
        .await
    }

    /// Deletes the question and returns its answer, if it had one.
    async fn close(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
    ) -> Result<Option<ClientAnswer>, DomainError> {
        timed(async {
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let row: Option<(Option<String>, bool)> = sqlx::query_as(
                "DELETE FROM plugin_host.client_answers
                  WHERE tenant_id = $1::uuid AND session = $2 AND request_id = $3
                 RETURNING answer, is_error",
            )
            .bind(tenant.to_string())
            .bind(&key.session)
            .bind(&key.request)
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(row.and_then(|(answer, is_error)| answers::from_columns(answer, is_error)))
        })
        .await
    }
}

#[async_trait::async_trait]
impl ClientAnswers for PgStore {
    async fn open(
        &self,
        tenant: &TenantId,
        subject: &str,
        key: &QuestionKey,
        open_for: Duration,
    ) -> Result<bool, DomainError> {
        timed(async {
            let now = self.now_ms();
            let until = now.saturating_add(i64::try_from(open_for.as_millis()).unwrap_or(i64::MAX));
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            // Questions of one tenant take turns, so the count and the insert are one step.
            sqlx::query(
                "SELECT pg_advisory_xact_lock(hashtextextended('plugin_host.client_answers/' || $1, 0))",
            )
            .bind(tenant.to_string())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            // The tenant's rows whose waiter died with its instance go once they expire.
            sqlx::query(concat!(
                "DELETE FROM plugin_host.client_answers WHERE tenant_id = $1::uuid AND expires_at < ",
                ts!(2)
            ))
            .bind(tenant.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            let (tenant_open, subject_open): (i64, i64) = sqlx::query_as(
                "SELECT count(*), count(*) FILTER (WHERE subject = $2)
                   FROM plugin_host.client_answers WHERE tenant_id = $1::uuid",
            )
            .bind(tenant.to_string())
            .bind(subject)
            .fetch_one(&mut *tx)
            .await
            .map_err(down)?;
            if subject_open >= i64::from(MAX_OPEN_QUESTIONS)
                || tenant_open >= i64::from(MAX_OPEN_QUESTIONS_PER_TENANT)
            {
                return Ok(false);
            }
            let inserted = sqlx::query(concat!(
                "INSERT INTO plugin_host.client_answers (tenant_id, session, request_id, expires_at, subject)
                 VALUES ($1::uuid, $2, $3, ",
                ts!(4),
                ", $5) ON CONFLICT DO NOTHING"
            ))
            .bind(tenant.to_string())
            .bind(&key.session)
            .bind(&key.request)
            .bind(until)
            .bind(subject)
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(inserted.rows_affected() == 1)
        })
        .await
    }

    async fn deliver(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        answer: &ClientAnswer,
    ) -> Result<bool, DomainError> {
        let (text, is_error) = answers::columns(answer);
        timed(async {
            let now = self.now_ms();
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let updated = sqlx::query(concat!(
                "UPDATE plugin_host.client_answers SET answer = $4, is_error = $5
                  WHERE tenant_id = $1::uuid AND session = $2 AND request_id = $3
                    AND answer IS NULL AND expires_at >= ",
                ts!(6)
            ))
            .bind(tenant.to_string())
            .bind(&key.session)
            .bind(&key.request)
            .bind(text)
            .bind(is_error)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            if updated.rows_affected() != 1 {
                tx.rollback().await.map_err(down)?;
                return Ok(false);
            }
            // Sent on commit, so the waiter reads the committed answer.
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(ANSWER_CHANNEL)
                .bind(&key.request)
                .execute(&mut *tx)
                .await
                .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(true)
        })
        .await
    }

    async fn wait(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        within: Duration,
    ) -> Result<Option<ClientAnswer>, DomainError> {
        let deadline = Instant::now() + within;
        let registered = self.register(&key.request);
        loop {
            if self.answered(tenant, key).await? || Instant::now() >= deadline {
                return self.close(tenant, key).await;
            }
            registered
                .woken_or(deadline.min(Instant::now() + FALLBACK_POLL))
                .await;
        }
    }

    async fn sweep(&self, now: Timestamp) -> Result<u64, DomainError> {
        timed(async {
            // Every tenant's rows: a SECURITY DEFINER function of the maintainer (0005).
            let mut tx = self.begin(None).await.map_err(down)?;
            let swept: i64 = sqlx::query_scalar(concat!(
                "SELECT plugin_host.sweep_client_answers(",
                ts!(1),
                ")"
            ))
            .bind(now.unix_millis())
            .fetch_one(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(u64::try_from(swept).unwrap_or(0))
        })
        .await
    }
}
