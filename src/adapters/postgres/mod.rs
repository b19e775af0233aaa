//! `TaskStore`, `ConfirmationLedger`, `ClientAnswers` (`answers`) and `Approvals`
//! (`approvals`) on Postgres (`plugin_host` schema, CONTRACT §6).
//!
//! Every transaction starts with `SET LOCAL ROLE plugin_host_app` and, for tenant
//! operations, `set_config('auth.tenant_id', <tenant>, true)` before its queries: row-level
//! security then holds even when the bridge logs in as a superuser or the table owner,
//! and a pooled connection never carries a role or a tenant past its transaction. The
//! tenant is in every `WHERE` as well. The non-tenant operations (leases, stop polling,
//! the sweep) call `SECURITY DEFINER` functions created by `migrate`.

mod answers;
mod approvals;
mod guard;
mod migrate;
mod nul_bytes;
mod progress;
mod tasks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions, Postgres};
use tokio_util::sync::CancellationToken;

use crate::domain::{DomainError, TaskId, TenantId, Timestamp, Upstream, confirm};
use crate::ports::{Clock, ConfirmationLedger, StopSink};

pub use migrate::migrate;

/// The channel the `tasks_notify_stopped` trigger notifies, payload = task id.
const STOP_CHANNEL: &str = "plugin_host_task_stopped";
/// How long a caller waits for a pooled connection before the store counts as down.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound of one operation (acquire, statements, commit), so a database that
/// stopped answering cannot hang a request.
const OP_TIMEOUT: Duration = Duration::from_secs(10);

/// The task store and confirmation ledger on Postgres.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    options: PgConnectOptions,
    /// Cancelled when the last clone is dropped: ends the listeners.
    watch: Arc<DropCancel>,
    /// This process's waiters for clients' answers, woken by one shared listener.
    waiters: Arc<crate::adapters::waiters::Waiters>,
    /// What times the used ids and the questions.
    clock: Arc<dyn Clock>,
    /// The most live ledger keys per tenant.
    ledger_cap: u32,
}

struct DropCancel(CancellationToken);

impl Drop for DropCancel {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl PgStore {
    /// A store for `url`, telling the time by `clock`. Connects lazily: a database that
    /// is down does not delay startup; task operations answer `upstream_unavailable`
    /// until it is back.
    ///
    /// # Errors
    /// A user-safe description when the URL is malformed (the URL is not repeated, it
    /// may hold a password).
    pub async fn connect(url: &str, clock: Arc<dyn Clock>) -> anyhow::Result<PgStore> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|_| anyhow::anyhow!("the Postgres URL (--database-url) is malformed"))?
            .application_name("cyberos-mcp-bridge");
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .idle_timeout(Duration::from_secs(300))
            .after_connect(|conn, _| Box::pin(guard::refuse_open_rls(conn)))
            .connect_lazy_with(options.clone());
        Ok(PgStore {
            pool,
            options,
            watch: Arc::new(DropCancel(CancellationToken::new())),
            waiters: Arc::default(),
            clock,
            ledger_cap: confirm::LEDGER_KEYS_PER_TENANT,
        })
    }

    /// The store with at most `keys` live ledger keys per tenant instead of
    /// [`confirm::LEDGER_KEYS_PER_TENANT`].
    pub fn with_ledger_cap(mut self, keys: u32) -> PgStore {
        self.ledger_cap = keys;
        self
    }

    /// The clock's time, in the stored form.
    fn now_ms(&self) -> i64 {
        self.clock.now().unix_millis()
    }

    /// At startup: `Err` with the reason when the database is reachable and row-level
    /// security would not hold for `plugin_host_app`. An unreachable database is not a
    /// reason to refuse (the store connects lazily; each new connection is checked).
    ///
    /// # Errors
    /// The operator's message, naming the roles and tables at fault.
    pub async fn refuse_open_rls(&self) -> anyhow::Result<()> {
        let Ok(Ok(mut conn)) =
            tokio::time::timeout(ACQUIRE_TIMEOUT, PgConnection::connect_with(&self.options)).await
        else {
            return Ok(());
        };
        let openings = guard::rls_openings(&mut conn).await.unwrap_or_default();
        let _ = conn.close().await;
        if openings.is_empty() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(guard::refusal(&openings)))
        }
    }

    /// Begins a transaction working as `plugin_host_app` for `tenant`. Without a tenant
    /// any read of a table fails (the policies read the setting strictly); such a
    /// transaction serves the `SECURITY DEFINER` functions only.
    async fn begin(
        &self,
        tenant: Option<&TenantId>,
    ) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::raw_sql("SET LOCAL ROLE plugin_host_app")
            .execute(&mut *tx)
            .await?;
        if let Some(tenant) = tenant {
            sqlx::query("SELECT set_config('auth.tenant_id', $1, true)")
                .bind(tenant.to_string())
                .execute(&mut *tx)
                .await?;
        }
        Ok(tx)
    }

    /// Starts the background listener behind [`crate::ports::TaskStore::watch_stops`].
    fn spawn_stop_listener(&self, sink: Arc<dyn StopSink>) {
        let options = self.options.clone();
        let stop = self.watch.0.child_token();
        tokio::spawn(listen(options, STOP_CHANNEL, stops_to(sink), stop));
    }
}

/// Store failures: `upstream_unavailable`, the cause kept for the log only.
fn down(e: sqlx::Error) -> DomainError {
    DomainError::unavailable(Upstream::TaskStore, Some(e.into()))
}

/// Runs one store operation with [`OP_TIMEOUT`].
async fn timed<T>(op: impl Future<Output = Result<T, DomainError>>) -> Result<T, DomainError> {
    tokio::time::timeout(OP_TIMEOUT, op)
        .await
        .unwrap_or_else(|_| {
            Err(DomainError::unavailable(
                Upstream::TaskStore,
                Some("the task store did not answer in time".into()),
            ))
        })
}

/// SQL for a timestamp parameter given in Unix milliseconds (exact to the millisecond:
/// the value is rounded to microseconds).
macro_rules! ts {
    ($n:literal) => {
        concat!("to_timestamp($", $n, "::float8 / 1000)")
    };
}
use ts;

/// What a listener hears: a notification's payload, or that it (re)connected, so
/// notifications sent meanwhile may have been lost.
enum Heard<'a> {
    Payload(&'a str),
    Reconnected,
}

/// Tells `sink` about the task stops notified on `plugin_host_task_stopped`.
fn stops_to(sink: Arc<dyn StopSink>) -> impl Fn(Heard<'_>) + Send + 'static {
    move |heard| match heard {
        Heard::Payload(payload) => match TaskId::parse(payload) {
            Some(id) => sink.stopped(id),
            None => tracing::debug!("ignoring a malformed task stop notification"),
        },
        Heard::Reconnected => {
            tracing::debug!("task stop listener reconnected; stops in between are found by polling")
        }
    }
}

/// Listens on `channel` on its own connection and tells `heard`, reconnecting with
/// backoff until `stop`. Notifications sent while disconnected are lost: every user of a
/// listener also polls.
async fn listen(
    options: PgConnectOptions,
    channel: &'static str,
    heard: impl Fn(Heard<'_>) + Send + 'static,
    stop: CancellationToken,
) {
    // A pool of one only to let PgListener reconnect by itself.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with(options);
    let mut backoff = Duration::from_secs(1);
    loop {
        let mut listening = false;
        let run = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(channel).await?;
            listening = true;
            tracing::debug!(channel, "listening");
            heard(Heard::Reconnected);
            loop {
                match listener.try_recv().await? {
                    Some(n) => heard(Heard::Payload(n.payload())),
                    None => heard(Heard::Reconnected),
                }
            }
        };
        let result: Result<(), sqlx::Error> = tokio::select! {
            () = stop.cancelled() => return,
            r = run => r,
        };
        if listening {
            backoff = Duration::from_secs(1);
        }
        if let Err(e) = result {
            tracing::warn!(
                error = %e,
                channel,
                retry_in_s = backoff.as_secs(),
                "listener failed; polling covers it meanwhile"
            );
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

#[async_trait::async_trait]
impl ConfirmationLedger for PgStore {
    async fn claim(
        &self,
        tenant: &TenantId,
        jti: &str,
        expires_at: Timestamp,
    ) -> Result<bool, DomainError> {
        timed(async {
            let now = self.now_ms();
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            // Expired ids can no longer be replayed (their tokens fail verification), so
            // they go; the sweep removes other tenants' too.
            sqlx::query(concat!(
                "DELETE FROM plugin_host.used_confirmations WHERE tenant_id = $1::uuid AND expires_at < ",
                ts!(2)
            ))
            .bind(tenant.to_string())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            // Counting stops at the cap: a full tenant costs no more than a cap's worth
            // of index entries.
            let held: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM (SELECT 1 FROM plugin_host.used_confirmations WHERE tenant_id = $1::uuid LIMIT $2) AS held",
            )
            .bind(tenant.to_string())
            .bind(i64::from(self.ledger_cap))
            .fetch_one(&mut *tx)
            .await
            .map_err(down)?;
            if held >= i64::from(self.ledger_cap) {
                let found: Option<i32> = sqlx::query_scalar(
                    "SELECT 1 FROM plugin_host.used_confirmations WHERE tenant_id = $1::uuid AND jti = $2",
                )
                .bind(tenant.to_string())
                .bind(jti)
                .fetch_optional(&mut *tx)
                .await
                .map_err(down)?;
                tx.commit().await.map_err(down)?;
                return match found {
                    Some(_) => Ok(false),
                    None => Err(confirm::ledger_full()),
                };
            }
            let inserted = sqlx::query(concat!(
                "INSERT INTO plugin_host.used_confirmations (tenant_id, jti, expires_at) VALUES ($1::uuid, $2, ",
                ts!(3),
                ") ON CONFLICT DO NOTHING"
            ))
            .bind(tenant.to_string())
            .bind(jti)
            .bind(expires_at.unix_millis())
            .execute(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(inserted.rows_affected() == 1)
        })
        .await
    }

    async fn used(&self, tenant: &TenantId, jti: &str) -> Result<bool, DomainError> {
        timed(async {
            let now = self.now_ms();
            let mut tx = self.begin(Some(tenant)).await.map_err(down)?;
            let found: Option<i32> = sqlx::query_scalar(concat!(
                "SELECT 1 FROM plugin_host.used_confirmations WHERE tenant_id = $1::uuid AND jti = $2 AND expires_at >= ",
                ts!(3)
            ))
            .bind(tenant.to_string())
            .bind(jti)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await
            .map_err(down)?;
            tx.commit().await.map_err(down)?;
            Ok(found.is_some())
        })
        .await
    }
}
