//! `ClientAnswers` on the embedded file. SQLite has no notifications between the
//! processes that share the file, so one poller per process reads which questions have
//! an answer and wakes their waiters here, which then read their own row; an answer
//! recorded by this process wakes its waiter at once.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::SqlitePool;

use super::SqliteStore;
use crate::adapters::rows::answers;
use crate::adapters::waiters::{Registered, Waiters};
use crate::domain::session::{
    ClientAnswer, MAX_OPEN_QUESTIONS, MAX_OPEN_QUESTIONS_PER_TENANT, QuestionKey,
};
use crate::domain::{DomainError, TenantId, Timestamp, Upstream};
use crate::ports::ClientAnswers;

/// How often the poller looks for answers recorded by other processes: a person answers
/// in seconds, so this is below what they notice. It reads only while someone waits.
const POLL: Duration = Duration::from_millis(100);

fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[async_trait::async_trait]
impl ClientAnswers for SqliteStore {
    async fn open(
        &self,
        tenant: &TenantId,
        subject: &str,
        key: &QuestionKey,
        open_for: Duration,
    ) -> Result<bool, DomainError> {
        let now = self.now_ms();
        // Rows whose waiter died with its process go once they expire.
        sqlx::query("DELETE FROM client_answers WHERE expires_at < ?")
            .bind(now)
            .execute(self.writer.now())
            .await
            .map_err(down)?;
        // The counts and the insert are one statement, so concurrent opens cannot pass the
        // caps.
        let inserted = sqlx::query(
            "INSERT INTO client_answers (tenant_id, session, request_id, expires_at, subject)
             SELECT ?1, ?2, ?3, ?4, ?7
              WHERE (SELECT count(*) FROM client_answers
                      WHERE tenant_id = ?1 AND subject = ?7 AND expires_at >= ?5) < ?6
                AND (SELECT count(*) FROM client_answers WHERE tenant_id = ?1 AND expires_at >= ?5) < ?8
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant.to_string())
        .bind(&key.session)
        .bind(&key.request)
        .bind(now.saturating_add(millis(open_for)))
        .bind(now)
        .bind(i64::from(MAX_OPEN_QUESTIONS))
        .bind(subject)
        .bind(i64::from(MAX_OPEN_QUESTIONS_PER_TENANT))
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn deliver(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        answer: &ClientAnswer,
    ) -> Result<bool, DomainError> {
        let (text, is_error) = answers::columns(answer);
        let updated = sqlx::query(
            "UPDATE client_answers SET answer = ?, is_error = ?
              WHERE tenant_id = ? AND session = ? AND request_id = ?
                AND answer IS NULL AND expires_at >= ?",
        )
        .bind(text)
        .bind(is_error)
        .bind(tenant.to_string())
        .bind(&key.session)
        .bind(&key.request)
        .bind(self.now_ms())
        .execute(self.writer.now())
        .await
        .map_err(down)?;
        let recorded = updated.rows_affected() == 1;
        if recorded {
            self.waiters.wake(&key.request);
        }
        Ok(recorded)
    }

    async fn wait(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
        within: Duration,
    ) -> Result<Option<ClientAnswer>, DomainError> {
        let deadline = tokio::time::Instant::now() + within;
        let registered = self.register(&key.request);
        loop {
            // A read until there is something to take, so waiters do not contend for the
            // file's write lock.
            let answered: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM client_answers
                  WHERE tenant_id = ? AND session = ? AND request_id = ? AND answer IS NOT NULL",
            )
            .bind(tenant.to_string())
            .bind(&key.session)
            .bind(&key.request)
            .fetch_optional(&self.reader)
            .await
            .map_err(down)?;
            if answered.is_some() || tokio::time::Instant::now() >= deadline {
                return self.close(tenant, key).await;
            }
            registered.woken_or(deadline).await;
        }
    }

    async fn sweep(&self, now: Timestamp) -> Result<u64, DomainError> {
        let turn = self.writer.later().await;
        let swept = sqlx::query("DELETE FROM client_answers WHERE expires_at < ?")
            .bind(now.unix_millis())
            .execute(turn.pool)
            .await
            .map_err(down)?;
        Ok(swept.rows_affected())
    }
}

impl SqliteStore {
    /// Registers a waiter for `request`, starting the process's poller on first use.
    fn register<'a>(&'a self, request: &'a str) -> Registered<'a> {
        self.waiters.start_once(|| {
            let waiters = Arc::downgrade(&self.waiters);
            tokio::spawn(poll_answers(self.reader.clone(), waiters));
        });
        self.waiters.register(request)
    }

    /// Deletes the question and returns its answer, if it had one.
    async fn close(
        &self,
        tenant: &TenantId,
        key: &QuestionKey,
    ) -> Result<Option<ClientAnswer>, DomainError> {
        let row: Option<(Option<String>, bool)> = sqlx::query_as(
            "DELETE FROM client_answers WHERE tenant_id = ? AND session = ? AND request_id = ?
             RETURNING answer, is_error",
        )
        .bind(tenant.to_string())
        .bind(&key.session)
        .bind(&key.request)
        .fetch_optional(self.writer.now())
        .await
        .map_err(down)?;
        Ok(row.and_then(|(answer, is_error)| answers::from_columns(answer, is_error)))
    }
}

/// Every [`POLL`] while someone waits, wakes the waiters whose question has an answer;
/// ends with the store. A read that fails wakes them all, so each finds the failure in
/// its own read.
async fn poll_answers(reader: SqlitePool, waiters: Weak<Waiters>) {
    let mut every = tokio::time::interval(POLL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(waiters) = waiters.upgrade() else {
            return;
        };
        if waiters.is_empty() {
            continue;
        }
        // Request ids only: the rows of every tenant, but each waiter reads its own row in
        // its own tenant before it takes anything.
        let answered: Result<Vec<String>, _> =
            sqlx::query_scalar("SELECT request_id FROM client_answers WHERE answer IS NOT NULL")
                .fetch_all(&reader)
                .await;
        match answered {
            Ok(requests) => requests.iter().for_each(|r| waiters.wake(r)),
            Err(e) => {
                tracing::debug!("cannot read which questions have an answer: {e}");
                waiters.wake_all();
            }
        }
    }
}
