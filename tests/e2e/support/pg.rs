//! The Postgres test databases, made from `DATABASE_URL` (an admin connection). Without
//! it the Postgres tests skip themselves after a note; with `CI=true` its absence fails
//! them instead. Two shapes:
//!
//! - [`TestDb`]: a fresh database `cyberos_test_<random>` for one library test, dropped
//!   (forcibly) when the value goes, also on a failed assertion;
//! - [`database_url`]: one database `cyberos_e2e_<pid>_<millis>` for the whole run,
//!   migrated by the built binary's `migrate` subcommand, for the binary tests (not
//!   dropped: other tests' bridges may still be using it when one test ends).
//!
//! And the helpers of the Postgres-only tests: counts, SQLSTATEs, login roles.

use std::process::Command;
use std::sync::OnceLock;

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection, Executor};

use cyberos_mcp_bridge::adapters::postgres::{self, PgStore};
use cyberos_mcp_bridge::domain::TenantId;

use crate::support::binary::binary;

/// The admin URL, or `None` (after a note) when the Postgres tests are skipped.
pub fn admin_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false")) => {
            panic!(
                "CI=true but DATABASE_URL is not set: the Postgres tests cannot run. \
             Point DATABASE_URL at an admin connection (scripts/test.sh starts a throwaway cluster)."
            )
        }
        _ => {
            eprintln!("note: DATABASE_URL is not set; skipping a Postgres test");
            None
        }
    }
}

/// The URL of the run's migrated database, or `None` when the Postgres tests are skipped.
/// Created on first use, from a runtime of its own (for the synchronous binary tests).
pub fn database_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        let admin = admin_url()?;
        let name = format!(
            "cyberos_e2e_{}_{}",
            std::process::id(),
            chrono::Utc::now().timestamp_millis()
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(create_database(&admin, &name));
        let url = with_database(&admin, &name);
        let out = Command::new(binary())
            .args(["migrate", "--database-url", &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "migrate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(url)
    })
    .clone()
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

/// `url` with its database replaced by `name` (query parameters kept).
pub fn with_database(url: &str, name: &str) -> String {
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

/// `url` with `user:password` as its credentials.
pub fn with_user(url: &str, user: &str, password: &str) -> String {
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

/// A database created for one test and dropped (forcibly) when the value goes, also on
/// a failed assertion.
pub struct TestDb {
    admin: String,
    pub name: String,
    pub url: String,
}

impl TestDb {
    /// A fresh, empty database, or `None` when Postgres tests are skipped.
    pub async fn empty() -> Option<TestDb> {
        let admin = admin_url()?;
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).unwrap();
        let name = format!("cyberos_test_{}", data_encoding::HEXLOWER.encode(&bytes));
        create_database(&admin, &name).await;
        let url = with_database(&admin, &name);
        Some(TestDb { admin, name, url })
    }

    /// A fresh database with the migrations applied.
    pub async fn migrated() -> Option<TestDb> {
        let db = TestDb::empty().await?;
        postgres::migrate(&db.url).await.expect("migrate");
        Some(db)
    }

    pub async fn store(&self) -> PgStore {
        PgStore::connect(&self.url).await.unwrap()
    }

    /// A plain connection (the admin role) to this database.
    pub async fn connection(&self) -> PgConnection {
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

/// A login role created for one test, dropped after the test's database.
pub struct TestRole {
    pub admin: String,
    pub name: String,
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let sql = format!("DROP ROLE IF EXISTS \"{}\"", self.name);
        admin_cleanup(admin, sql);
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
