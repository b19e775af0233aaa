//! The Postgres test databases, made from `DATABASE_URL` (an admin connection).
//!
//! [`admin_url`] is the one place that decides whether a Postgres test runs: with
//! `DATABASE_URL` it does; without it the test says so on the terminal (one `SKIPPED`
//! line per test, not captured, and a count when the test binary exits) and skips
//! itself; with `CI` set to a true value (`true`, `1`, ...) a missing `DATABASE_URL`
//! fails the test instead.
//!
//! The store never works as the admin: each database gets a login role `<db>_app`,
//! `NOINHERIT` and granted only `plugin_host_app`, so it can do nothing until the store
//! runs `SET LOCAL ROLE plugin_host_app`, and row-level security applies to it (the
//! admin, a superuser, would bypass it). Migrations still run as the admin. Two shapes:
//!
//! - [`TestDb`]: a fresh database `cyberos_test_<pid>_<random>` for one library test,
//!   dropped (forcibly) with its role when the value goes, also on a failed assertion;
//! - [`database_url`]: one database `cyberos_e2e_<pid>_<millis>` for the whole run,
//!   migrated by the built binary's `migrate` subcommand, for the binary tests; dropped
//!   (forcibly: bridges may still be connected) when the test binary exits.
//!
//! Every name carries the creating process's id: at first use, databases and roles
//! `cyberos_test_*` / `cyberos_e2e_*` whose process is gone (a run that was killed) are
//! dropped, unless something is still connected to them.
//!
//! And the helpers of the Postgres-only tests: counts, SQLSTATEs, login roles. The
//! decision, the report of skipped tests and the cleanups at exit and of killed runs are
//! in `gate`.

mod gate;
mod url;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection, Executor};

use cyberos_mcp_bridge::adapters::postgres::{self, PgStore};
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::TenantId;
use cyberos_mcp_bridge::ports::Clock;

use crate::support::binary::binary;

pub use gate::admin_url;
pub use url::{migrate_with, with_database, with_user};

/// The URL of the run's migrated database, as its app login role, or `None` when the
/// Postgres tests are skipped. Created on first use, from a runtime of its own (for the
/// synchronous binary tests).
pub fn database_url() -> Option<String> {
    static URL: OnceLock<String> = OnceLock::new();
    let admin = admin_url()?;
    Some(
        URL.get_or_init(|| {
            let name = format!(
                "cyberos_e2e_{}_{}",
                std::process::id(),
                chrono::Utc::now().timestamp_millis()
            );
            gate::drop_at_exit(admin.clone(), name.clone());
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(create_database(&admin, &name));
            let url = with_database(&admin, &name);
            migrate_with(binary(), &url);
            rt.block_on(create_app_role(&url, &name))
        })
        .clone(),
    )
}

/// A fresh name `cyberos_<kind>_<pid>_<random>` for a test database or role.
pub fn test_name(kind: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    format!(
        "cyberos_{kind}_{}_{}",
        std::process::id(),
        data_encoding::HEXLOWER.encode(&bytes)
    )
}

/// The app login role of database `db`.
fn app_role(db: &str) -> String {
    format!("{db}_app")
}

/// Drops database `name` and its app role (`force`: even with sessions connected).
fn drop_statements(name: &str, force: bool) -> Vec<String> {
    let force = if force { " WITH (FORCE)" } else { "" };
    vec![
        format!("DROP DATABASE IF EXISTS \"{name}\"{force}"),
        format!("DROP ROLE IF EXISTS \"{}\"", app_role(name)),
    ]
}

/// Creates the empty database `name` as the admin.
async fn create_database(admin: &str, name: &str) {
    let mut conn = PgConnection::connect(admin)
        .await
        .expect("DATABASE_URL accepts connections");
    conn.execute(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .await
        .expect("DATABASE_URL may create databases");
    conn.close().await.unwrap();
}

/// Creates the app login role of database `db` (migrated; `url` is the admin's URL of
/// it): `NOINHERIT`, a member of `plugin_host_app` and nothing else. Returns its URL.
async fn create_app_role(url: &str, db: &str) -> String {
    let role = app_role(db);
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).unwrap();
    let password = data_encoding::HEXLOWER.encode(&bytes);
    let mut conn = PgConnection::connect(url).await.unwrap();
    for sql in [
        format!(
            "CREATE ROLE \"{role}\" LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE \
             NOBYPASSRLS PASSWORD '{password}'"
        ),
        format!("GRANT plugin_host_app TO \"{role}\""),
    ] {
        conn.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    conn.close().await.unwrap();
    with_user(url, &role, &password)
}

/// A database created for one test, with its app login role once migrated; both are
/// dropped (the database forcibly) when the value goes, also on a failed assertion.
pub struct TestDb {
    admin: String,
    pub name: String,
    /// This database as the admin: migrations and inspection.
    pub url: String,
    /// This database as the app login role, once there is one.
    app_url: Option<String>,
}

impl TestDb {
    /// A fresh, empty database, or `None` when Postgres tests are skipped.
    pub async fn empty() -> Option<TestDb> {
        let admin = admin_url()?;
        let name = test_name("test");
        create_database(&admin, &name).await;
        let url = with_database(&admin, &name);
        Some(TestDb {
            admin,
            name,
            url,
            app_url: None,
        })
    }

    /// A fresh database with the migrations applied (as the admin) and its app role.
    pub async fn migrated() -> Option<TestDb> {
        let mut db = TestDb::empty().await?;
        postgres::migrate(&db.url).await.expect("migrate");
        db.add_app_role().await;
        Some(db)
    }

    /// Creates the app login role; the database must be migrated (`plugin_host_app`).
    pub async fn add_app_role(&mut self) {
        self.app_url = Some(create_app_role(&self.url, &self.name).await);
    }

    /// This database as the app login role.
    pub fn app_url(&self) -> &str {
        self.app_url
            .as_deref()
            .expect("TestDb::migrated (or add_app_role) makes the app login role")
    }

    /// The store, logged in as the app login role: it can do nothing until its
    /// `SET LOCAL ROLE plugin_host_app`, and RLS applies to it.
    pub async fn store(&self) -> PgStore {
        self.store_on(Arc::new(SystemClock)).await
    }

    /// [`TestDb::store`], telling the time by `clock`.
    pub async fn store_on(&self, clock: Arc<dyn Clock>) -> PgStore {
        PgStore::connect(self.app_url(), clock).await.unwrap()
    }

    /// A plain connection (the admin role) to this database.
    pub async fn connection(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.unwrap()
    }

    /// A plain connection as the app login role.
    pub async fn app_connection(&self) -> PgConnection {
        PgConnection::connect(self.app_url()).await.unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        admin_cleanup(self.admin.clone(), drop_statements(&self.name, true));
    }
}

/// A login role created for one test, dropped after the test's database.
pub struct TestRole {
    pub admin: String,
    pub name: String,
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let sql = format!("DROP ROLE IF EXISTS \"{}\"", self.name);
        admin_cleanup(self.admin.clone(), vec![sql]);
    }
}

pub async fn count(conn: &mut PgConnection, sql: &'static str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar::<_, i64>(sql).fetch_one(conn).await
}

/// `sql` (a count) in one transaction that sets `tenant` the way the store does.
pub async fn count_as(
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

pub fn sqlstate(e: &sqlx::Error) -> String {
    e.as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned())
        .unwrap_or_default()
}

/// Runs best-effort cleanup statements as the admin, in order.
fn admin_cleanup(admin: String, statements: Vec<String>) {
    run_as_admin(admin, |mut conn| async move {
        for sql in statements {
            let _ = conn.execute(AssertSqlSafe(sql)).await;
        }
        conn
    });
}

/// Runs `work` on an admin connection, bounded to 30 s. `Drop` and the exit handler run
/// inside a runtime or none, so the work gets a thread and a runtime of its own.
fn run_as_admin<F, Fut>(admin: String, work: F)
where
    F: FnOnce(PgConnection) -> Fut + Send + 'static,
    Fut: Future<Output = PgConnection>,
{
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let run = async {
                if let Ok(conn) = PgConnection::connect(&admin).await {
                    let _ = work(conn).await.close().await;
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(30), run).await;
        });
    })
    .join();
}
