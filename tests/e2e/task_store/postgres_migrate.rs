//! The migration: idempotent, safe to run concurrently, refusing an edited migration, and
//! enough for a plain owner role (no superuser anywhere) to run the bridge with one URL.

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection, Executor};

use cyberos_mcp_bridge::adapters::postgres::{self, PgStore};
use cyberos_mcp_bridge::ports::TaskStore;

use super::contract::{ledger_contract, task_store_contract};
use super::{at, random};
use crate::support::fakes::TestClock;
use crate::support::pg::{TestDb, TestRole, admin_url, count, test_name, with_user};

#[tokio::test]
async fn migrate_is_idempotent_and_concurrent_runs_all_succeed() {
    let Some(mut db) = TestDb::empty().await else {
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
                                             ('plugin_host.tasks'::regclass, 'plugin_host.used_confirmations'::regclass,
                                              'plugin_host.client_answers'::regclass))
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
        migration_files(),
        "each migration file is applied once"
    );
    postgres::migrate(&db.url).await.unwrap();
    postgres::migrate(&db.url).await.unwrap();
    let after: String = sqlx::query_scalar(SNAPSHOT)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(before, after, "a second migrate changes nothing");
    db.add_app_role().await;
    db.store().await.check().await.unwrap();

    // An applied migration edited afterwards is refused, not skipped.
    admin
        .execute("UPDATE plugin_host.schema_migrations SET checksum = 'edited'")
        .await
        .unwrap();
    let e = format!("{:#}", postgres::migrate(&db.url).await.unwrap_err());
    assert!(e.contains("migration 1 was changed"), "{e}");
}

/// How many migrations there are: every file of `migrations/postgres` is applied once.
fn migration_files() -> i64 {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
    let sql = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("sql".as_ref()))
        .count();
    i64::try_from(sql).unwrap()
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
        name: format!("{}_owner", test_name("test")),
    };
    let Some(db) = TestDb::empty().await else {
        return;
    };
    let password = data_encoding::HEXLOWER.encode(&random::<12>());
    let mut conn = PgConnection::connect(&admin).await.unwrap();
    // plugin_host_app and plugin_host_maintainer are cluster-wide and may exist already
    // (other tests migrate too); creating them needs CREATEROLE, which this owner does not
    // get: the operator's steps in migrations/postgres/0002. NOINHERIT: the owner acts as
    // either role only by SET ROLE, and no policy of theirs applies to it.
    for role in ["plugin_host_app", "plugin_host_maintainer"] {
        conn.execute(AssertSqlSafe(format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
                 CREATE ROLE {role} NOLOGIN NOBYPASSRLS;
               END IF;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
             END $$"
        )))
        .await
        .unwrap();
    }
    for sql in [
        format!(
            "CREATE ROLE \"{}\" LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT PASSWORD '{password}'",
            role.name
        ),
        format!(
            "GRANT CREATE ON DATABASE \"{}\" TO \"{}\"",
            db.name, role.name
        ),
        format!("GRANT plugin_host_app TO \"{}\"", role.name),
        format!("GRANT plugin_host_maintainer TO \"{}\"", role.name),
    ] {
        conn.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    conn.close().await.unwrap();
    let url = with_user(&db.url, &role.name, &password);

    postgres::migrate(&url).await.unwrap();
    postgres::migrate(&url).await.unwrap();
    let clock = TestClock::at(at(0));
    let store = PgStore::connect(&url, clock.port()).await.unwrap();
    task_store_contract(&store).await;
    ledger_contract(&store, &clock).await;

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
    // The switch that opened every tenant to the owner under 0001 opens nothing now.
    owner
        .execute("SET plugin_host.maintenance = 'on'")
        .await
        .unwrap();
    for table in ["tasks", "used_confirmations"] {
        let sql = format!("SELECT count(*) FROM plugin_host.{table}");
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_one(&mut owner)
            .await
            .unwrap();
        assert_eq!(n, 0, "the owner reads no {table} row, maintenance or not");
    }
    owner.close().await.unwrap();
    drop(db);
}
