//! Row-level security must hold for `plugin_host_app`: the bridge refuses to work on a
//! database where that role could read past it. Checked on every new pooled connection
//! (so it holds whenever the database comes up) and once at startup, where a definite
//! "no" stops the bridge instead of serving.

use sqlx::postgres::PgConnection;

/// What makes RLS void for `plugin_host_app`, one row per reason (none when it holds).
/// Tables that do not exist yet (an unmigrated database) are not judged here.
/// The catalog is read by name: the login role may not have USAGE on the schema.
const OPENINGS: &str = "
    WITH t AS (
        SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, r.rolname AS owner
          FROM pg_catalog.pg_class AS c
          JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
          JOIN pg_catalog.pg_roles AS r ON r.oid = c.relowner
         WHERE n.nspname = 'plugin_host' AND c.relname IN ('tasks', 'used_confirmations', 'task_progress', 'client_answers')
    )
    SELECT 'the role plugin_host_app is a superuser or has BYPASSRLS'
      FROM pg_catalog.pg_roles
     WHERE rolname = 'plugin_host_app' AND (rolsuper OR rolbypassrls)
    UNION ALL
    SELECT format('row-level security is off or not forced on plugin_host.%s', relname)
      FROM t WHERE NOT (relrowsecurity AND relforcerowsecurity)
    UNION ALL
    SELECT format('plugin_host_app owns plugin_host.%s', relname)
      FROM t WHERE owner = 'plugin_host_app'";

/// Why row-level security would not hold for `plugin_host_app`, if it would not.
pub(super) async fn rls_openings(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(OPENINGS).fetch_all(conn).await
}

/// The `after_connect` hook: a connection to a database where RLS would not hold is
/// refused (the operation fails as `upstream_unavailable`, the reason goes to the log).
pub(super) async fn refuse_open_rls(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let openings = rls_openings(conn).await?;
    if openings.is_empty() {
        return Ok(());
    }
    let why = refusal(&openings);
    tracing::error!("{why}");
    Err(sqlx::Error::Configuration(why.into()))
}

/// The operator's message for `openings` (names of roles and tables only).
pub(super) fn refusal(openings: &[String]) -> String {
    format!(
        "refusing to use the Postgres task store: {}; tenants would not be isolated \
         (run `cyberos-mcp-bridge migrate` and check the roles, see migrations/postgres)",
        openings.join("; ")
    )
}
