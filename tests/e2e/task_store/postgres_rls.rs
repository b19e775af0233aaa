//! Row-level security on the app role itself: confined to the tenant of the transaction,
//! and unable to bypass RLS or change the schema.

use cyberos_mcp_bridge::domain::Tool;
use cyberos_mcp_bridge::domain::approval::{ApprovalId, CallBinding, PageSecret, SecretKind};
use cyberos_mcp_bridge::ports::Approvals;
use std::collections::HashSet;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor, Row};

use cyberos_mcp_bridge::ports::{ConfirmationLedger, TaskStore};

use super::{DAY, at, running, step, tenant};
use crate::support::pg::{TestDb, count, count_as, sqlstate};

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
        let t = running(b, i, "inst-1");
        assert!(store.create(&t).await.unwrap());
        // b's progress log: nothing of it is a's.
        store
            .record_progress(&b, t.task.id, &step(1, "b's step"), at(i))
            .await
            .unwrap();
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
    // No tenant is an error, not an empty answer: a path that forgets the tenant fails.
    let e = count(&mut conn, ALL).await.unwrap_err();
    assert_eq!(sqlstate(&e), "42704", "no auth.tenant_id at all: {e}");
    assert_eq!(count_as(&mut conn, Some(&a), ALL).await.unwrap(), 3);
    assert_eq!(count_as(&mut conn, Some(&b), ALL).await.unwrap(), 2);
    // The setting ended with its transaction; what is left ('') is no uuid.
    let e = count(&mut conn, ALL).await.unwrap_err();
    assert_eq!(sqlstate(&e), "22P02", "a setting left empty: {e}");
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
    const LOG: &str = "SELECT count(*) FROM plugin_host.task_progress";
    assert_eq!(count_as(&mut conn, Some(&a), LOG).await.unwrap(), 0);
    assert_eq!(count_as(&mut conn, Some(&b), LOG).await.unwrap(), 2);
    // a's approval and its page secret: nothing of them is b's.
    let binding = CallBinding {
        tenant: a,
        subject: "alice".into(),
        tool: Tool::AppendAudit,
        args_sha256: "0".repeat(64),
    };
    let id = store
        .request(&binding, ApprovalId::from_random([9; 16]), "{}")
        .await
        .unwrap()
        .unwrap();
    store
        .keep_secret(&PageSecret {
            kind: SecretKind::Form,
            digest: "f".repeat(64),
            approval: id,
            tenant: a,
            subject: Some("alice".into()),
            payload: String::new(),
            expires_at: at(DAY * 365 * 100),
        })
        .await
        .unwrap();
    for sql in [
        "SELECT count(*) FROM plugin_host.approvals",
        "SELECT count(*) FROM plugin_host.approval_secrets",
    ] {
        assert_eq!(
            count_as(&mut conn, Some(&a), sql).await.unwrap(),
            1,
            "{sql}"
        );
        assert_eq!(
            count_as(&mut conn, Some(&b), sql).await.unwrap(),
            0,
            "{sql}"
        );
    }

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
    for (tenant, expected) in [(Some(&a), 3), (Some(&b), 2), (None, -1), (Some(&a), 3)] {
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
        if tenant.is_none() {
            let e = count(&mut tx, ALL).await.unwrap_err();
            assert_eq!(sqlstate(&e), "22P02", "no tenant on a used connection: {e}");
            tx.rollback().await.unwrap();
            continue;
        }
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
            AND relname IN ('tasks', 'used_confirmations', 'task_progress', 'client_answers',
                            'approvals', 'approval_secrets') ORDER BY relname",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(tables.len(), 6);
    for (name, rls, forced, owner) in &tables {
        assert!(*rls && *forced, "{name}: RLS enabled and forced");
        assert_ne!(owner, "plugin_host_app", "{name} is not the app role's");
    }
    // The SECURITY DEFINER functions: pinned search path, owned by the maintainer role
    // (not the owner of the tables), no EXECUTE for PUBLIC.
    let definers: Vec<(String, bool, String)> = sqlx::query_as(
        "SELECT proname::text, coalesce(array_to_string(proconfig, ',') LIKE '%search_path=plugin_host, pg_temp%', false),
                pg_get_userbyid(proowner)::text
           FROM pg_proc WHERE pronamespace = 'plugin_host'::regnamespace AND prosecdef ORDER BY proname",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let maintainer = "plugin_host_maintainer".to_owned();
    assert_eq!(
        definers,
        [
            ("find_approval".to_owned(), true, maintainer.clone()),
            ("renew_leases".to_owned(), true, maintainer.clone()),
            ("stopped_among".to_owned(), true, maintainer.clone()),
            ("sweep".to_owned(), true, maintainer.clone()),
            ("sweep_approvals".to_owned(), true, maintainer.clone()),
            ("sweep_client_answers".to_owned(), true, maintainer.clone()),
            ("take_approval_secret".to_owned(), true, maintainer)
        ]
    );
    let (sup, bypass, login): (bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = 'plugin_host_maintainer'",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(!sup && !bypass && !login);
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
        "DROP POLICY tasks_tenant ON plugin_host.tasks",
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
async fn the_store_login_role_sees_nothing_without_the_app_role_and_a_tenant() {
    // The role every store in these tests logs in as (TestDb::store): NOINHERIT, a member
    // of plugin_host_app only, so each privilege it has comes from SET ROLE, and RLS
    // applies to it (the admin, a superuser, would bypass RLS).
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let store = db.store().await;
    let a = tenant();
    let t = running(a, 0, "inst-1");
    assert!(store.create(&t).await.unwrap());
    assert!(store.claim(&a, "jti", at(DAY * 365 * 100)).await.unwrap());
    const TASKS: &str = "SELECT count(*) FROM plugin_host.tasks";
    const CONFIRMATIONS: &str = "SELECT count(*) FROM plugin_host.used_confirmations";

    let mut conn = db.app_connection().await;
    let (sup, bypass, inherit, member): (bool, bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolinherit, pg_has_role(current_user, 'plugin_host_app', 'MEMBER')
           FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(!sup && !bypass && !inherit && member);

    // The maintainer role, which reads every tenant, is out of its reach.
    let e = conn
        .execute("SET ROLE plugin_host_maintainer")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42501", "{e}");

    // Without SET ROLE: no privilege at all.
    for sql in [TASKS, CONFIRMATIONS] {
        let e = count(&mut conn, sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{sql}: {e}");
    }

    // As plugin_host_app with auth.tenant_id unset: every read and write fails (42704,
    // the setting does not exist), none answers with zero rows.
    let by_id = format!(
        "SELECT count(*) FROM plugin_host.tasks WHERE task_id = '{}'",
        t.task.id
    );
    let insert =
        format!("INSERT INTO plugin_host.used_confirmations VALUES ('{a}'::uuid, 'j', now())");
    for sql in [
        TASKS,
        CONFIRMATIONS,
        by_id.as_str(),
        "UPDATE plugin_host.tasks SET status_message = 'x'",
        insert.as_str(),
    ] {
        let mut tx = conn.begin().await.unwrap();
        tx.execute("SET LOCAL ROLE plugin_host_app").await.unwrap();
        let setting: Option<String> =
            sqlx::query_scalar("SELECT current_setting('auth.tenant_id', true)")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(setting, None, "auth.tenant_id is unset");
        let e = tx.execute(sqlx::AssertSqlSafe(sql)).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42704", "{sql}: {e}");
        tx.rollback().await.unwrap();
    }

    // Without SET ROLE, a tenant changes nothing.
    for sql in [TASKS, CONFIRMATIONS] {
        let e = count_as(&mut conn, Some(&a), sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), "42501", "{sql}: {e}");
    }

    // The same role with the tenant set sees the tenant's rows, unchanged.
    assert_eq!(store.get(&a, t.task.id).await.unwrap(), t.task);
    let mut tx = conn.begin().await.unwrap();
    tx.execute("SET LOCAL ROLE plugin_host_app").await.unwrap();
    sqlx::query("SELECT set_config('auth.tenant_id', $1, true)")
        .bind(a.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(count(&mut tx, TASKS).await.unwrap(), 1);
    assert_eq!(count(&mut tx, CONFIRMATIONS).await.unwrap(), 1);
    tx.commit().await.unwrap();
}
