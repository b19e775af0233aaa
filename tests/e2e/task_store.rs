//! The `TaskStore` and `ConfirmationLedger` contracts, run against the embedded SQLite
//! store always and against Postgres when `DATABASE_URL` names an admin connection
//! (with `CI=true` its absence fails the Postgres tests instead of skipping them). Each
//! Postgres test works in a fresh database `cyberos_test_<random>`, migrated with
//! `migrate` and dropped at the end. The Postgres-only tests show row-level security on
//! the app role itself, the migration's idempotence and concurrency, stop notifications,
//! and the store failing fast when the database is down.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::postgres::{PgConnection, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, Executor, Row};

use cyberos_mcp_bridge::adapters::postgres::{self, PgStore};
use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::domain::task::{Task, TaskFailure, TaskStatus, orphaned};
use cyberos_mcp_bridge::domain::{
    DomainError, ErrorClass, JsonText, TaskId, TenantId, Timestamp, Tool, TraceId,
};
use cyberos_mcp_bridge::ports::{
    ConfirmationLedger, NewTask, StopSink, SweepReport, TaskOutcome, TaskStore,
};

// --- helpers ---------------------------------------------------------------------

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).unwrap();
    bytes
}

fn tenant() -> TenantId {
    TenantId::parse(&uuid::Uuid::from_bytes(random()).hyphenated().to_string()).unwrap()
}

fn task_id() -> TaskId {
    TaskId::from_random(random())
}

/// A fixed origin, so every time in the contract is explicit.
const T0: i64 = 1_700_000_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

fn at(offset_ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0 + offset_ms)
}

/// A running task of `tenant` created at `T0 + created`, run by `owner` with a 30 s lease,
/// kept for a day.
fn running(tenant: TenantId, created: i64, owner: &str) -> NewTask {
    NewTask {
        task: Task {
            id: task_id(),
            tenant,
            tool: Tool::from_name("cyberos.cuo.execute_workflow").unwrap(),
            status: TaskStatus::Running,
            output: None,
            failure: None,
            status_message: None,
            trace_id: TraceId::from_bytes(random()),
            created_at: at(created),
            updated_at: at(created),
            timeout_at: at(created + 10 * MINUTE),
            expires_at: at(created + DAY),
        },
        input: JsonText::from_serialized(
            json!({"persona": "cto", "workflow": "adr", "inputs": {"n": 1}}).to_string(),
        ),
        owner: owner.to_owned(),
        lease_until: at(created + 30_000),
    }
}

fn outcome(status: TaskStatus, output: Option<Value>, failure: Option<TaskFailure>) -> TaskOutcome {
    TaskOutcome {
        status,
        output: output.map(|v| JsonText::from_serialized(v.to_string())),
        failure,
    }
}

fn json_of(text: &JsonText) -> Value {
    serde_json::from_str(text.as_str()).unwrap()
}

#[track_caller]
fn assert_not_found(e: &DomainError) {
    assert_eq!(e.class(), ErrorClass::InputValidation, "{e:?}");
    assert_eq!(e.to_string(), "task not found");
}

/// What a caller can observe of an outcome: the error's class, message and hint.
fn seen<T>(r: &Result<T, DomainError>) -> Option<(ErrorClass, String, String)> {
    r.as_ref()
        .err()
        .map(|e| (e.class(), e.to_string(), e.hint().to_owned()))
}

// --- the contracts -----------------------------------------------------------------

/// What every `TaskStore` must do (the port's doc comments).
pub(crate) async fn task_store_contract(store: &dyn TaskStore) {
    let (a, b) = (tenant(), tenant());

    // create / get, duplicate ids.
    let t1 = running(a, 0, "inst-1");
    assert!(store.create(&t1).await.unwrap());
    assert_eq!(store.get(&a, t1.task.id).await.unwrap(), t1.task);
    assert!(!store.create(&t1).await.unwrap(), "a taken id is refused");
    let mut same_id = running(b, 5, "inst-9");
    same_id.task.id = t1.task.id;
    assert!(
        !store.create(&same_id).await.unwrap(),
        "a taken id is refused for another tenant too"
    );
    assert_eq!(store.get(&a, t1.task.id).await.unwrap(), t1.task);

    // Another tenant's task is answered exactly like a missing one.
    let missing = task_id();
    let foreign = store.get(&b, t1.task.id).await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(seen(&foreign), seen(&store.get(&b, missing).await));
    let done = outcome(TaskStatus::Completed, Some(json!({"x": 1})), None);
    let foreign = store.finish(&b, t1.task.id, &done, at(1000)).await;
    assert_not_found(foreign.as_ref().unwrap_err());
    assert_eq!(
        seen(&foreign),
        seen(&store.finish(&b, missing, &done, at(1000)).await)
    );
    let foreign = store
        .record_progress(&b, t1.task.id, "hijacked", at(1000))
        .await;
    // The port asks for "task not found" here; the SQLite store answers Ok(()) for both
    // cases, which is still no oracle. What must hold everywhere: identical answers,
    // and nothing written.
    assert_eq!(
        seen(&foreign),
        seen(&store.record_progress(&b, missing, "x", at(1000)).await)
    );
    if let Err(e) = &foreign {
        assert_not_found(e);
    }
    assert_eq!(
        store.get(&a, t1.task.id).await.unwrap(),
        t1.task,
        "nothing of another tenant's task changed"
    );

    // Progress.
    store
        .record_progress(&a, t1.task.id, "step 1 of 3", at(1000))
        .await
        .unwrap();
    let got = store.get(&a, t1.task.id).await.unwrap();
    assert_eq!(got.status_message.as_deref(), Some("step 1 of 3"));
    assert_eq!(got.updated_at, at(1000));
    assert_eq!(got.status, TaskStatus::Running);

    // list: newest first (ties by id), paged, the tenant's tasks only.
    let t2 = running(a, 10, "inst-1");
    let t3 = running(a, 20, "inst-1");
    let t4 = running(a, 30, "inst-2");
    let t5 = running(a, 30, "inst-2");
    let tb = running(b, 40, "inst-2");
    for t in [&t2, &t3, &t4, &t5, &tb] {
        assert!(store.create(t).await.unwrap());
    }
    let mut expected: Vec<(Timestamp, String)> = [&t1, &t2, &t3, &t4, &t5]
        .iter()
        .map(|t| (t.task.created_at, t.task.id.to_string()))
        .collect();
    expected.sort_by(|x, y| y.cmp(x));
    let mut listed = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list(&a, cursor.as_deref(), 2).await.unwrap();
        sizes.push(page.tasks.len());
        listed.extend(page.tasks.iter().map(|t| (t.created_at, t.id.to_string())));
        assert!(page.tasks.iter().all(|t| t.tenant == a));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(listed, expected);
    assert_eq!(sizes, [2, 2, 1]);
    let theirs = store.list(&b, None, 50).await.unwrap();
    assert_eq!(
        theirs.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        [tb.task.id]
    );
    assert_eq!(theirs.next_cursor, None);
    for bad in ["garbage", "c1.", "c1.zz.t-x", ""] {
        let e = store.list(&a, Some(bad), 10).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::InputValidation, "{bad:?}");
        assert_eq!(e.to_string(), "invalid cursor");
    }

    // finish is conditional: a terminal status is never overwritten.
    let cancelled = store
        .finish(
            &a,
            t2.task.id,
            &outcome(TaskStatus::Cancelled, None, None),
            at(2000),
        )
        .await
        .unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let late = store
        .finish(
            &a,
            t2.task.id,
            &outcome(TaskStatus::Completed, Some(json!({"late": true})), None),
            at(3000),
        )
        .await
        .unwrap();
    assert_eq!(late.status, TaskStatus::Cancelled, "the winner's status");
    assert_eq!(late.output, None);
    assert_eq!(late.updated_at, at(2000));
    assert_eq!(store.get(&a, t2.task.id).await.unwrap(), cancelled);

    let result = json!({"steps_executed": 3, "final_artifacts": [{"path": "adr.md"}], "a": null});
    let completed = store
        .finish(
            &a,
            t3.task.id,
            &outcome(TaskStatus::Completed, Some(result.clone()), None),
            at(4000),
        )
        .await
        .unwrap();
    assert_eq!(completed.status, TaskStatus::Completed);
    assert_eq!(json_of(completed.output.as_ref().unwrap()), result);
    assert_eq!(completed.updated_at, at(4000));
    assert_eq!(completed.failure, None);

    let why = TaskFailure {
        class: ErrorClass::UpstreamUnavailable,
        message: "the CUO orchestrator is unavailable".into(),
        hint: "Try again in a moment.".into(),
    };
    let failed = store
        .finish(
            &a,
            t4.task.id,
            &outcome(TaskStatus::Failed, None, Some(why.clone())),
            at(5000),
        )
        .await
        .unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.failure.as_ref(), Some(&why));
    assert_eq!(failed.status_message.as_deref(), Some(why.hint.as_str()));
    assert_eq!(store.get(&a, t4.task.id).await.unwrap(), failed);

    // Progress on a finished task changes nothing.
    let _ = store
        .record_progress(&a, t3.task.id, "too late", at(6000))
        .await;
    assert_eq!(store.get(&a, t3.task.id).await.unwrap(), completed);

    // Leases and stops. Owners: t1, t2, t3 inst-1; t4, t5, tb inst-2.
    let stopped: HashSet<TaskId> = store
        .stopped_among(
            "inst-1",
            &[t1.task.id, t2.task.id, t3.task.id, t5.task.id, missing],
        )
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(stopped, HashSet::from([t2.task.id, t3.task.id]));
    assert_eq!(
        store
            .stopped_among("inst-2", &[t4.task.id, t5.task.id, tb.task.id])
            .await
            .unwrap(),
        [t4.task.id]
    );
    assert!(store.stopped_among("inst-1", &[]).await.unwrap().is_empty());

    // t6 finishes and passes its retention; t7 is running past its retention (kept).
    let mut t6 = running(a, 50, "inst-1");
    t6.task.expires_at = at(10 * MINUTE);
    let mut t7 = running(b, 60, "inst-1");
    t7.task.expires_at = at(10 * MINUTE);
    assert!(store.create(&t6).await.unwrap());
    assert!(store.create(&t7).await.unwrap());
    store
        .finish(
            &a,
            t6.task.id,
            &outcome(TaskStatus::Completed, None, None),
            at(7000),
        )
        .await
        .unwrap();

    // inst-1 is alive: its running tasks (t1, t7) are renewed; inst-2's (t5, tb) lapse.
    store.renew_leases("inst-1", at(10 * HOUR)).await.unwrap();
    let report = store.sweep(at(HOUR)).await.unwrap();
    assert_eq!(
        report,
        SweepReport {
            orphaned: 2,
            expired: 1
        }
    );
    for (tenant, id) in [(a, t5.task.id), (b, tb.task.id)] {
        let lost = store.get(&tenant, id).await.unwrap();
        assert_eq!(lost.status, TaskStatus::Failed);
        assert_eq!(lost.failure, Some(orphaned()));
        assert_eq!(lost.failure.as_ref().unwrap().class, ErrorClass::Internal);
        assert_eq!(lost.status_message, Some(orphaned().hint));
        assert_eq!(lost.updated_at, at(HOUR));
    }
    assert_not_found(&store.get(&a, t6.task.id).await.unwrap_err());
    assert_eq!(
        store.get(&b, t7.task.id).await.unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        store.get(&a, t1.task.id).await.unwrap().status,
        TaskStatus::Running
    );
    assert_eq!(
        store.stopped_among("inst-2", &[t5.task.id]).await.unwrap(),
        [t5.task.id],
        "a swept task counts as stopped for its owner"
    );
    assert_eq!(
        store.sweep(at(HOUR)).await.unwrap(),
        SweepReport::default(),
        "a second sweep finds nothing"
    );
    // The owner finishing after the sweep does not revive the task.
    let after = store
        .finish(&a, t5.task.id, &done, at(HOUR + 1000))
        .await
        .unwrap();
    assert_eq!(after.status, TaskStatus::Failed);

    store.check().await.unwrap();
}

/// What every `ConfirmationLedger` must do: each id works once per tenant.
pub(crate) async fn ledger_contract(ledger: &dyn ConfirmationLedger) {
    let (a, b) = (tenant(), tenant());
    let now = chrono::Utc::now().timestamp_millis();
    let soon = Timestamp::from_unix_millis(now + 5 * MINUTE);
    assert!(ledger.claim(&a, "jti-1", soon).await.unwrap());
    assert!(!ledger.claim(&a, "jti-1", soon).await.unwrap(), "used once");
    assert!(ledger.claim(&b, "jti-1", soon).await.unwrap(), "per tenant");
    assert!(ledger.claim(&a, "jti-2", soon).await.unwrap());
    // Ids whose token has expired are forgotten (the token no longer verifies anyway).
    let past = Timestamp::from_unix_millis(now - MINUTE);
    assert!(ledger.claim(&a, "jti-old", past).await.unwrap());
    assert!(ledger.claim(&a, "jti-old", past).await.unwrap());
}

// --- SQLite --------------------------------------------------------------------------

#[tokio::test]
async fn the_sqlite_store_meets_the_task_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    task_store_contract(&store).await;
}

#[tokio::test]
async fn the_sqlite_store_meets_the_ledger_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"))
        .await
        .unwrap();
    ledger_contract(&store).await;
}

// --- Postgres: a fresh database per test -------------------------------------------

/// The admin URL, or `None` (after a note) when the Postgres tests are skipped.
fn admin_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false")) => {
            panic!(
                "CI=true but DATABASE_URL is not set: the Postgres task-store tests cannot run. \
             Point DATABASE_URL at an admin connection (scripts/test.sh starts a throwaway cluster)."
            )
        }
        _ => {
            eprintln!("note: DATABASE_URL is not set; skipping a Postgres task-store test");
            None
        }
    }
}

/// `url` with its database replaced by `name` (query parameters kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let root = match base[authority..].find('/') {
        Some(i) => &base[..authority + i],
        None => base,
    };
    format!("{root}/{name}{query}")
}

/// A database created for one test and dropped (forcibly) when the value goes, also on
/// a failed assertion.
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

impl TestDb {
    /// A fresh, empty database, or `None` when Postgres tests are skipped.
    async fn empty() -> Option<TestDb> {
        let admin = admin_url()?;
        let name = format!(
            "cyberos_test_{}",
            data_encoding::HEXLOWER.encode(&random::<8>())
        );
        let mut conn = PgConnection::connect(&admin)
            .await
            .expect("DATABASE_URL accepts connections");
        conn.execute(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .await
            .expect("DATABASE_URL may create databases");
        conn.close().await.unwrap();
        let url = with_database(&admin, &name);
        Some(TestDb { admin, name, url })
    }

    /// A fresh database with the migrations applied.
    async fn migrated() -> Option<TestDb> {
        let db = TestDb::empty().await?;
        postgres::migrate(&db.url).await.expect("migrate");
        Some(db)
    }

    async fn store(&self) -> PgStore {
        PgStore::connect(&self.url).await.unwrap()
    }

    /// A plain connection (the admin role) to this database.
    async fn connection(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        admin_cleanup(admin, sql);
    }
}

async fn count(conn: &mut PgConnection, sql: &'static str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar::<_, i64>(sql).fetch_one(conn).await
}

/// `sql` (a count) in one transaction that sets `tenant` the way the store does.
async fn count_as(
    conn: &mut PgConnection,
    tenant: Option<&TenantId>,
    sql: &'static str,
) -> Result<i64, sqlx::Error> {
    let mut tx = conn.begin().await?;
    if let Some(t) = tenant {
        sqlx::query("SELECT set_config('auth.tenant_id', $1, true)")
            .bind(t.to_string())
            .execute(&mut *tx)
            .await?;
    }
    let n = count(&mut tx, sql).await?;
    tx.commit().await?;
    Ok(n)
}

fn sqlstate(e: &sqlx::Error) -> String {
    e.as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_postgres_store_meets_the_task_store_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    task_store_contract(&store).await;
    // Where the port asks for "task not found" on progress for an unknown or foreign
    // task, Postgres answers it.
    let e = store
        .record_progress(&tenant(), task_id(), "x", at(0))
        .await
        .unwrap_err();
    assert_not_found(&e);
}

#[tokio::test]
async fn the_postgres_store_meets_the_ledger_contract() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    ledger_contract(&store).await;
    // The sweep removes expired ids of every tenant.
    let mut admin = db.connection().await;
    sqlx::query(
        "INSERT INTO plugin_host.used_confirmations VALUES (gen_random_uuid(), 'old', now() - interval '1 hour')",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    const ALL: &str = "SELECT count(*) FROM plugin_host.used_confirmations";
    const EXPIRED: &str =
        "SELECT count(*) FROM plugin_host.used_confirmations WHERE expires_at < now()";
    let before = count(&mut admin, ALL).await.unwrap();
    let expired = count(&mut admin, EXPIRED).await.unwrap();
    assert!(expired >= 1);
    store
        .sweep(Timestamp::from_unix_millis(
            chrono::Utc::now().timestamp_millis(),
        ))
        .await
        .unwrap();
    assert_eq!(count(&mut admin, EXPIRED).await.unwrap(), 0);
    assert_eq!(
        count(&mut admin, ALL).await.unwrap(),
        before - expired,
        "only expired ids went"
    );
}

#[tokio::test]
async fn rls_confines_the_app_role_to_the_tenant_of_the_transaction() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    let (a, b) = (tenant(), tenant());
    for i in 0..3 {
        assert!(store.create(&running(a, i, "inst-1")).await.unwrap());
    }
    for i in 0..2 {
        assert!(store.create(&running(b, i, "inst-1")).await.unwrap());
    }
    assert!(store.claim(&a, "jti", at(DAY * 365 * 100)).await.unwrap());
    const ALL: &str = "SELECT count(*) FROM plugin_host.tasks";

    // A plain connection working as the app role, queries without any tenant filter.
    let mut conn = db.connection().await;
    conn.execute("SET ROLE plugin_host_app").await.unwrap();
    let who: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(who, "plugin_host_app");
    assert_eq!(
        count(&mut conn, ALL).await.unwrap(),
        0,
        "no tenant: no rows"
    );
    assert_eq!(count_as(&mut conn, Some(&a), ALL).await.unwrap(), 3);
    assert_eq!(count_as(&mut conn, Some(&b), ALL).await.unwrap(), 2);
    // The setting ended with its transaction; what is left ('') reads as no tenant.
    assert_eq!(
        count(&mut conn, ALL).await.unwrap(),
        0,
        "no rows, and no error"
    );
    assert_eq!(
        count_as(
            &mut conn,
            Some(&b),
            "SELECT count(*) FROM plugin_host.used_confirmations"
        )
        .await
        .unwrap(),
        0
    );
    assert_eq!(
        count_as(
            &mut conn,
            Some(&a),
            "SELECT count(*) FROM plugin_host.used_confirmations"
        )
        .await
        .unwrap(),
        1
    );

    // Writes are confined too: no row for another tenant, updates and deletes touch
    // the tenant's rows only.
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT set_config('auth.tenant_id', $1, true)")
        .bind(a.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    let updated = sqlx::query("UPDATE plugin_host.tasks SET status_message = 'x'")
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(updated.rows_affected(), 3);
    let deleted = sqlx::query("DELETE FROM plugin_host.tasks")
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(deleted.rows_affected(), 3);
    let smuggled = sqlx::query(
        "INSERT INTO plugin_host.tasks (task_id, tenant_id, plugin_id, tool_name, status, input, timeout_at,
                                        trace_id, expires_at, owner, lease_expires_at)
         VALUES ('t-x', $1::uuid, 'cyberos', 'cyberos.cuo.execute_workflow', 'running', '{}', now(),
                 repeat('a', 32), now(), 'inst-1', now())",
    )
    .bind(b.to_string())
    .execute(&mut *tx)
    .await
    .unwrap_err();
    assert_eq!(sqlstate(&smuggled), "42501", "{smuggled}");
    tx.rollback().await.unwrap();

    // A pooled connection reused by another tenant sees nothing of the first.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .unwrap();
    let mut pids = HashSet::new();
    for (tenant, expected) in [(Some(&a), 3), (Some(&b), 2), (None, 0), (Some(&a), 3)] {
        let mut tx = pool.begin().await.unwrap();
        tx.execute("SET LOCAL ROLE plugin_host_app").await.unwrap();
        if let Some(t) = tenant {
            sqlx::query("SELECT set_config('auth.tenant_id', $1, true)")
                .bind(t.to_string())
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        pids.insert(pid);
        assert_eq!(count(&mut tx, ALL).await.unwrap(), expected, "{tenant:?}");
        if tenant == Some(&b) {
            assert_eq!(
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM plugin_host.tasks WHERE tenant_id = $1::uuid"
                )
                .bind(a.to_string())
                .fetch_one(&mut *tx)
                .await
                .unwrap(),
                0,
                "tenant b cannot ask for tenant a's rows"
            );
        }
        tx.commit().await.unwrap();
    }
    assert_eq!(pids.len(), 1, "one connection served every transaction");
    // Neither the role nor the tenant outlived their transactions.
    let row = sqlx::query(
        "SELECT current_user::text, coalesce(current_setting('auth.tenant_id', true), '')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_ne!(row.get::<String, _>(0), "plugin_host_app");
    assert_eq!(row.get::<String, _>(1), "");

    // The store itself, on the same database: tenant b cannot reach a's tasks.
    let page = store.list(&b, None, 50).await.unwrap();
    assert_eq!(page.tasks.len(), 2);
    assert!(page.tasks.iter().all(|t| t.tenant == b));
}

#[tokio::test]
async fn the_app_role_cannot_bypass_rls_or_change_the_schema() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let mut admin = db.connection().await;
    let (sup, bypass, login): (bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = 'plugin_host_app'",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(!sup && !bypass && !login);
    let tables: Vec<(String, bool, bool, String)> = sqlx::query_as(
        "SELECT relname::text, relrowsecurity, relforcerowsecurity, pg_get_userbyid(relowner)::text
           FROM pg_class WHERE relnamespace = 'plugin_host'::regnamespace AND relkind = 'r'
            AND relname IN ('tasks', 'used_confirmations') ORDER BY relname",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(tables.len(), 2);
    for (name, rls, forced, owner) in &tables {
        assert!(*rls && *forced, "{name}: RLS enabled and forced");
        assert_ne!(owner, "plugin_host_app", "{name} is not the app role's");
    }
    // The SECURITY DEFINER functions: pinned search path, no EXECUTE for PUBLIC.
    let definers: Vec<(String, bool)> = sqlx::query_as(
        "SELECT proname::text, coalesce(array_to_string(proconfig, ',') LIKE '%search_path=plugin_host, pg_temp%', false)
           FROM pg_proc WHERE pronamespace = 'plugin_host'::regnamespace AND prosecdef ORDER BY proname",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        definers,
        [
            ("renew_leases".to_owned(), true),
            ("stopped_among".to_owned(), true),
            ("sweep".to_owned(), true)
        ]
    );
    let public_exec = count(
        &mut admin,
        "SELECT count(*) FROM pg_proc p, aclexplode(p.proacl) a
          WHERE p.pronamespace = 'plugin_host'::regnamespace AND a.grantee = 0",
    )
    .await
    .unwrap();
    assert_eq!(public_exec, 0);
    let extra = count(
        &mut admin,
        "SELECT count(*) FROM unnest(ARRAY['TRUNCATE', 'REFERENCES', 'TRIGGER']) p
          WHERE has_table_privilege('plugin_host_app', 'plugin_host.tasks', p)",
    )
    .await
    .unwrap();
    assert_eq!(extra, 0, "only SELECT, INSERT, UPDATE, DELETE");

    let mut app = db.connection().await;
    app.execute("SET ROLE plugin_host_app").await.unwrap();
    for sql in [
        "ALTER TABLE plugin_host.tasks DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE plugin_host.tasks NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tasks_rls ON plugin_host.tasks",
        "CREATE POLICY everything ON plugin_host.tasks USING (true)",
        "ALTER TABLE plugin_host.tasks ADD COLUMN x int",
        "CREATE TABLE plugin_host.evil (x int)",
        "CREATE FUNCTION plugin_host.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "DROP TABLE plugin_host.used_confirmations",
        "TRUNCATE plugin_host.tasks",
        "SELECT * FROM plugin_host.schema_migrations",
        "ALTER ROLE plugin_host_app BYPASSRLS",
    ] {
        let e = app.execute(sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{sql}: {e}");
    }
    // Turning row security off makes queries fail instead of bypassing it.
    app.execute("SET row_security = off").await.unwrap();
    let e = count(&mut app, "SELECT count(*) FROM plugin_host.tasks")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");
}

#[tokio::test]
async fn migrate_is_idempotent_and_concurrent_runs_all_succeed() {
    let Some(db) = TestDb::empty().await else {
        return;
    };
    let (r1, r2, r3) = tokio::join!(
        postgres::migrate(&db.url),
        postgres::migrate(&db.url),
        postgres::migrate(&db.url)
    );
    r1.unwrap();
    r2.unwrap();
    r3.unwrap();
    let mut admin = db.connection().await;
    const SNAPSHOT: &str = "SELECT (SELECT string_agg(version || ':' || checksum || ':' || applied_at, ',')
                                       FROM plugin_host.schema_migrations)
                                 || '|' || (SELECT count(*) FROM pg_policy WHERE polrelid IN
                                             ('plugin_host.tasks'::regclass, 'plugin_host.used_confirmations'::regclass))
                                 || '|' || (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'plugin_host.tasks'::regclass)
                                 || '|' || (SELECT count(*) FROM pg_proc WHERE pronamespace = 'plugin_host'::regnamespace)
                                 || '|' || (SELECT count(*) FROM pg_indexes WHERE schemaname = 'plugin_host')";
    let before: String = sqlx::query_scalar(SNAPSHOT)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(before.starts_with("1:"), "{before}");
    assert_eq!(
        count(
            &mut admin,
            "SELECT count(*) FROM plugin_host.schema_migrations"
        )
        .await
        .unwrap(),
        1
    );
    postgres::migrate(&db.url).await.unwrap();
    postgres::migrate(&db.url).await.unwrap();
    let after: String = sqlx::query_scalar(SNAPSHOT)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(before, after, "a second migrate changes nothing");
    db.store().await.check().await.unwrap();

    // An applied migration edited afterwards is refused, not skipped.
    admin
        .execute("UPDATE plugin_host.schema_migrations SET checksum = 'edited'")
        .await
        .unwrap();
    let e = postgres::migrate(&db.url).await.unwrap_err();
    assert!(e.contains("migration 1 was changed"), "{e}");
}

/// `url` with `user:password` as its credentials.
fn with_user(url: &str, user: &str, password: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let host_end = url[authority..]
        .find(['/', '?'])
        .map_or(url.len(), |i| authority + i);
    let host = match url[authority..host_end].rfind('@') {
        Some(i) => &url[authority + i + 1..],
        None => &url[authority..],
    };
    format!("{}{user}:{password}@{host}", &url[..authority])
}

/// A login role created for one test, dropped after the test's database.
struct TestRole {
    admin: String,
    name: String,
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let sql = format!("DROP ROLE IF EXISTS \"{}\"", self.name);
        admin_cleanup(admin, sql);
    }
}

#[tokio::test]
async fn a_plain_owner_role_can_migrate_and_run_the_bridge_with_one_url() {
    // The usual production shape: no superuser anywhere. The role owns the schema,
    // FORCE subjects it to RLS, and the sweep still reaches every tenant through the
    // SECURITY DEFINER functions.
    let Some(admin) = admin_url() else {
        return;
    };
    let role = TestRole {
        admin: admin.clone(),
        name: format!(
            "cyberos_test_owner_{}",
            data_encoding::HEXLOWER.encode(&random::<6>())
        ),
    };
    let Some(db) = TestDb::empty().await else {
        return;
    };
    let password = data_encoding::HEXLOWER.encode(&random::<12>());
    let mut conn = PgConnection::connect(&admin).await.unwrap();
    // plugin_host_app is cluster-wide and may exist already (other tests migrate too);
    // creating it needs CREATEROLE, which this owner does not get.
    conn.execute(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'plugin_host_app') THEN
             CREATE ROLE plugin_host_app NOLOGIN NOBYPASSRLS;
           END IF;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
         END $$",
    )
    .await
    .unwrap();
    for sql in [
        format!(
            "CREATE ROLE \"{}\" LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '{password}'",
            role.name
        ),
        format!(
            "GRANT CREATE ON DATABASE \"{}\" TO \"{}\"",
            db.name, role.name
        ),
        format!("GRANT plugin_host_app TO \"{}\"", role.name),
    ] {
        conn.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    conn.close().await.unwrap();
    let url = with_user(&db.url, &role.name, &password);

    postgres::migrate(&url).await.unwrap();
    postgres::migrate(&url).await.unwrap();
    let store = PgStore::connect(&url).await.unwrap();
    task_store_contract(&store).await;
    ledger_contract(&store).await;

    // Logged in as the owner, without the app role and without a tenant: nothing.
    let mut owner = PgConnection::connect(&url).await.unwrap();
    let who: String = sqlx::query_scalar("SELECT tableowner::text FROM pg_tables WHERE schemaname = 'plugin_host' AND tablename = 'tasks'")
        .fetch_one(&mut owner)
        .await
        .unwrap();
    assert_eq!(who, role.name);
    assert_eq!(
        count(&mut owner, "SELECT count(*) FROM plugin_host.tasks")
            .await
            .unwrap(),
        0,
        "FORCE ROW LEVEL SECURITY holds for the owner"
    );
    owner.close().await.unwrap();
    drop(db);
}

struct Stops(Mutex<Vec<TaskId>>);

impl StopSink for Stops {
    fn stopped(&self, id: TaskId) {
        self.0.lock().unwrap().push(id);
    }
}

#[tokio::test]
async fn a_cancel_on_one_instance_reaches_the_others_at_once() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let owner = db.store().await;
    let other = db.store().await;
    let stops = Arc::new(Stops(Mutex::new(Vec::new())));
    owner.watch_stops(stops.clone()).await;
    // Wait until the listener is listening (its LISTEN is the connection's last query).
    let mut admin = db.connection().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while count(
        &mut admin,
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%plugin_host_task_stopped%'",
    )
    .await
    .unwrap()
        == 0
    {
        assert!(tokio::time::Instant::now() < deadline, "no listener");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = tenant();
    let t = running(a, 0, "inst-1");
    let untouched = running(a, 1, "inst-1");
    assert!(owner.create(&t).await.unwrap());
    assert!(owner.create(&untouched).await.unwrap());
    other
        .record_progress(&a, t.task.id, "half way", at(500))
        .await
        .unwrap();
    other
        .finish(
            &a,
            t.task.id,
            &outcome(TaskStatus::Cancelled, None, None),
            at(1000),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stops.0.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no stop arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        *stops.0.lock().unwrap(),
        [t.task.id],
        "one stop, for the cancelled task only"
    );
}

#[tokio::test]
async fn postgres_refuses_nul_characters_without_leaving_a_task_running() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    let a = tenant();
    let mut bad = running(a, 0, "inst-1");
    bad.input = JsonText::from_serialized(json!({"inputs": {"x": "a\u{0}b"}}).to_string());
    let e = store.create(&bad).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::InputValidation, "{e:?}");

    let t = running(a, 0, "inst-1");
    assert!(store.create(&t).await.unwrap());
    store
        .record_progress(&a, t.task.id, "nul\u{0}byte", at(100))
        .await
        .unwrap();
    let done = store
        .finish(
            &a,
            t.task.id,
            &outcome(TaskStatus::Completed, Some(json!({"out": "\u{0}"})), None),
            at(200),
        )
        .await
        .unwrap();
    assert_eq!(done.status, TaskStatus::Failed);
    let failure = done.failure.unwrap();
    assert_eq!(failure.class, ErrorClass::Internal);
    assert_eq!(failure.message, "the task's result could not be stored");
}

/// A closed port on loopback: connections are refused at once.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_down_database_fails_fast_as_upstream_unavailable() {
    // Needs no server: connecting is lazy, and every operation is bounded.
    let url = format!(
        "postgres://bridge:s3cret@127.0.0.1:{}/cyberos",
        closed_port()
    );
    let started = tokio::time::Instant::now();
    let store = PgStore::connect(&url).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "startup does not wait"
    );
    let someone = tenant();
    let (get, check, claim, sweep) = tokio::join!(
        store.get(&someone, task_id()),
        store.check(),
        store.claim(&someone, "jti", at(0)),
        store.sweep(at(0)),
    );
    let e = get.unwrap_err();
    assert_eq!(e.class(), ErrorClass::UpstreamUnavailable, "{e:?}");
    assert_eq!(e.to_string(), "the task store is unavailable");
    for e in [check.unwrap_err(), claim.unwrap_err(), sweep.unwrap_err()] {
        assert_eq!(e.class(), ErrorClass::UpstreamUnavailable, "{e:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "bounded by the acquire timeout"
    );

    let e = postgres::migrate(&url).await.unwrap_err();
    assert!(!e.contains("s3cret"), "{e}");
    assert!(e.starts_with("cannot connect to Postgres"), "{e}");
    let e = PgStore::connect("postgres://bridge:s3cret@[nope/x")
        .await
        .err()
        .unwrap();
    assert!(!e.contains("s3cret"), "{e}");
}

/// Runs one best-effort cleanup statement as the admin. `Drop` runs inside the test's
/// runtime, so the statement gets a thread and a runtime of its own.
fn admin_cleanup(admin: String, sql: String) {
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            if let Ok(mut conn) = PgConnection::connect(&admin).await {
                let _ = conn.execute(AssertSqlSafe(sql)).await;
                let _ = conn.close().await;
            }
        });
    })
    .join();
}
