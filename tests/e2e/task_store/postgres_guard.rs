//! The bridge refuses a database where row-level security would not hold for
//! `plugin_host_app`: at startup (it exits instead of serving), and on every new pooled
//! connection of a store that is already running.

use std::process::{Command, Stdio};

use sqlx::{AssertSqlSafe, Executor};

use cyberos_mcp_bridge::domain::ErrorClass;
use cyberos_mcp_bridge::ports::TaskStore;

use super::tenant;
use crate::support::binary::binary;
use crate::support::pg::TestDb;

/// Each breach, what undoes it, and the reason the bridge must name.
const BREACHES: [(&str, &str, &str); 4] = [
    (
        "ALTER TABLE plugin_host.tasks NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE plugin_host.tasks FORCE ROW LEVEL SECURITY",
        "row-level security is off or not forced on plugin_host.tasks",
    ),
    (
        "ALTER TABLE plugin_host.used_confirmations DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE plugin_host.used_confirmations ENABLE ROW LEVEL SECURITY",
        "row-level security is off or not forced on plugin_host.used_confirmations",
    ),
    (
        "ALTER TABLE plugin_host.client_answers NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE plugin_host.client_answers FORCE ROW LEVEL SECURITY",
        "row-level security is off or not forced on plugin_host.client_answers",
    ),
    (
        "ALTER TABLE plugin_host.tasks OWNER TO plugin_host_app",
        // The app role's grant merged into its ownership; give it back.
        "ALTER TABLE plugin_host.tasks OWNER TO CURRENT_USER;
         GRANT SELECT, INSERT, UPDATE, DELETE ON plugin_host.tasks TO plugin_host_app",
        "plugin_host_app owns plugin_host.tasks",
    ),
];

/// Starts the bridge on `url` with stdin closed: it exits 0 once it has served (EOF),
/// or refuses to start.
fn start(url: &str) -> (Option<i32>, String) {
    let out = Command::new(binary())
        .args(["--dev", "--database-url", url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_bridge_refuses_a_database_where_rls_would_not_hold() {
    let Some(db) = TestDb::migrated().await else {
        return;
    };
    let mut admin = db.connection().await;
    let url = db.app_url().to_owned();
    let (code, stderr) = start(&url);
    assert_eq!(code, Some(0), "a sound database is served: {stderr}");
    for (breach, undo, reason) in BREACHES {
        admin.execute(AssertSqlSafe(breach)).await.unwrap();
        let (code, stderr) = start(&url);
        assert_eq!(code, Some(2), "{breach}: {stderr}");
        assert!(stderr.contains(reason), "{breach}: {stderr}");
        assert!(stderr.contains("refusing"), "{stderr}");
        // A running store checks each new connection the same way (this one connects
        // lazily, after the breach).
        let store = db.store().await;
        let e = store.get(&tenant(), super::task_id()).await.unwrap_err();
        assert_eq!(
            e.class(),
            ErrorClass::UpstreamUnavailable,
            "{breach}: {e:?}"
        );
        sqlx::raw_sql(AssertSqlSafe(undo))
            .execute(&mut admin)
            .await
            .unwrap();
        let e = store.get(&tenant(), super::task_id()).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::InputValidation, "undone: {e:?}");
    }
    let (code, stderr) = start(&url);
    assert_eq!(code, Some(0), "sound again: {stderr}");
}
