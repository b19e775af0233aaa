//! The Postgres database the binary tests use: one fresh, migrated database per test run,
//! created from `DATABASE_URL` (an admin URL). With `CI=true`, a missing `DATABASE_URL`
//! fails the run instead of skipping Postgres.

use std::sync::OnceLock;

use crate::support::binary::binary;

/// The URL of the migrated test database, or `None` when Postgres is not configured
/// (outside CI).
pub fn database_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        let Ok(admin) = std::env::var("DATABASE_URL") else {
            assert!(
                std::env::var("CI").is_err(),
                "CI=true but DATABASE_URL is not set: the Postgres tests must run in CI (scripts/test.sh starts a server)"
            );
            eprintln!("DATABASE_URL is not set: skipping the Postgres variants");
            return None;
        };
        let name = format!("cyberos_e2e_{}_{}", std::process::id(), chrono::Utc::now().timestamp_millis());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("DATABASE_URL connects");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
        });
        let url = replace_database(&admin, &name);
        let out = std::process::Command::new(binary()).args(["migrate", "--database-url", &url]).output().unwrap();
        assert!(out.status.success(), "migrate failed: {}", String::from_utf8_lossy(&out.stderr));
        Some(url)
    })
    .clone()
}

fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let slash = base
        .rfind('/')
        .filter(|i| *i > "postgres://".len())
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
