//! Whether the Postgres tests run ([`admin_url`], the one place that decides), what a
//! skipped run reports, and cleaning up after runs: the run database at exit, and what
//! runs that were killed left behind.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use sqlx::{AssertSqlSafe, Executor};

use super::{admin_cleanup, drop_statements, run_as_admin};
use crate::support::{alive, in_ci};

/// The admin URL when the Postgres tests run; `None` (after a `SKIPPED` line) when they
/// do not. Panics when `CI` is true and `DATABASE_URL` is missing.
pub fn admin_url() -> Option<String> {
    at_exit_once();
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            static STALE: Once = Once::new();
            STALE.call_once(|| drop_stale(url.clone()));
            Some(url)
        }
        _ if in_ci() => panic!(
            "CI is set but DATABASE_URL is not: the Postgres tests cannot run. Point \
             DATABASE_URL at an admin connection (scripts/test.sh starts a throwaway cluster)."
        ),
        _ => {
            SKIPPED.fetch_add(1, Ordering::SeqCst);
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a Postgres test");
            // Straight to the terminal: the test harness captures eprintln!.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: DATABASE_URL is not set, its Postgres part did not run"
            );
            None
        }
    }
}

/// How many tests skipped their Postgres part (reported at exit).
static SKIPPED: AtomicUsize = AtomicUsize::new(0);
/// The run database and its role, dropped at exit: (admin URL, database name).
static RUN_DB: Mutex<Option<(String, String)>> = Mutex::new(None);

/// Registers [`at_exit`] with the C library once. The test harness ends with `exit` (or
/// a return from `main`, which calls it), which runs these handlers after every test.
#[allow(unsafe_code)]
fn at_exit_once() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        unsafe extern "C" {
            fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
        }
        // SAFETY: atexit(3) only records the function pointer; `at_exit` is a plain
        // `extern "C"` function that catches every panic.
        unsafe {
            atexit(at_exit);
        }
    });
}

/// Drops the run database and reports skipped tests, once the tests are done.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some((admin, name)) = RUN_DB.lock().ok().and_then(|mut g| g.take()) {
            admin_cleanup(admin, drop_statements(&name, true));
        }
        let skipped = SKIPPED.load(Ordering::SeqCst);
        if skipped > 0 {
            let _ = writeln!(
                std::io::stderr(),
                "\nWARNING: {skipped} test(s) did not run their Postgres part: DATABASE_URL is \
                 not set (scripts/test.sh starts a throwaway PostgreSQL; with CI=true this fails)."
            );
        }
    });
}

/// Drops the run database `name` (and its role) when the test binary exits.
pub(super) fn drop_at_exit(admin: String, name: String) {
    *RUN_DB.lock().unwrap() = Some((admin, name));
}

/// Drops the databases and roles of earlier runs whose process is gone. Plain `DROP`s:
/// what something still uses stays (for a later run to try again).
fn drop_stale(admin: String) {
    run_as_admin(admin, |mut conn| async move {
        let me = std::process::id();
        let stale = |name: &String| {
            let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
            pid.is_some_and(|p| p != me && !i32::try_from(p).is_ok_and(alive))
        };
        const LIKE: &str = "'^cyberos_(test|e2e)_[0-9]+_'";
        let dbs: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT datname::text FROM pg_database WHERE datname ~ {LIKE}"
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        for db in dbs.iter().filter(|d| stale(d)) {
            let _ = conn
                .execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{db}\"")))
                .await;
        }
        let roles: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT rolname::text FROM pg_roles WHERE rolname ~ {LIKE}"
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        for role in roles.iter().filter(|r| stale(r)) {
            let _ = conn
                .execute(AssertSqlSafe(format!("DROP ROLE IF EXISTS \"{role}\"")))
                .await;
        }
        conn
    });
}
