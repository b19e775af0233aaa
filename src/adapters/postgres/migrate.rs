//! The `migrate` subcommand: applies `migrations/postgres` (embedded) in order.
//!
//! Everything happens in one transaction that first takes a transaction-scoped advisory
//! lock, so concurrent runs against one database serialize: the first applies what is
//! pending, the others then find nothing to do. Applied versions are recorded with a
//! checksum in `plugin_host.schema_migrations`; a migration edited after it was applied
//! is refused rather than silently skipped.

use std::str::FromStr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Row};

struct Migration {
    version: i32,
    description: &'static str,
    sql: &'static str,
}

/// In order; versions never change once released.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "plugin_host tasks, confirmations, role, RLS, functions",
        sql: include_str!("../../../migrations/postgres/0001_plugin_host.sql"),
    },
    Migration {
        version: 2,
        description: "functions owned by plugin_host_maintainer, strict tenant policies",
        sql: include_str!("../../../migrations/postgres/0002_maintainer_role.sql"),
    },
    Migration {
        version: 3,
        description: "clients' answers to elicitations, routed between instances",
        sql: include_str!("../../../migrations/postgres/0003_client_answers.sql"),
    },
    Migration {
        version: 4,
        description: "task progress log",
        sql: include_str!("../../../migrations/postgres/0004_task_progress.sql"),
    },
    Migration {
        version: 5,
        description: "every tenant's expired client answers swept",
        sql: include_str!("../../../migrations/postgres/0005_sweep_client_answers.sql"),
    },
    Migration {
        version: 6,
        description: "approvals kept for users whose host cannot ask them",
        sql: include_str!("../../../migrations/postgres/0006_approvals.sql"),
    },
    Migration {
        version: 7,
        description: "open questions capped per subject",
        sql: include_str!("../../../migrations/postgres/0007_questions_per_subject.sql"),
    },
];

/// Key of the advisory lock that serializes migrations of one database ("cyberos-m").
const LOCK_KEY: i64 = 0x6379_6265_726f_736d;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Applies the migrations in `migrations/postgres` to `url`, which must be able to create
/// schemas, tables, functions and the `plugin_host_app` role (an owner/admin URL).
/// Idempotent; concurrent runs are safe.
///
/// # Errors
/// A user-safe description of what failed (the URL, which may hold a password, is not
/// repeated).
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|_| anyhow::anyhow!("the Postgres URL is malformed"))?
        .application_name("cyberos-mcp-bridge migrate");
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| anyhow::anyhow!("cannot connect to Postgres: no answer within 10 s"))?
        .map_err(|e| anyhow::anyhow!("cannot connect to Postgres: {}", describe(&e)))?;
    let result = apply(&mut conn).await;
    let _ = conn.close().await;
    result
}

async fn apply(conn: &mut PgConnection) -> anyhow::Result<()> {
    let failed = |what: &str| {
        let what = what.to_owned();
        move |e: sqlx::Error| anyhow::anyhow!("{what}: {}", describe(&e))
    };
    let mut tx = conn
        .begin()
        .await
        .map_err(failed("cannot start the migration"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .execute(&mut *tx)
        .await
        .map_err(failed("cannot take the migration lock"))?;
    sqlx::raw_sql(
        "SET LOCAL client_min_messages = warning;
         CREATE SCHEMA IF NOT EXISTS plugin_host;
         CREATE TABLE IF NOT EXISTS plugin_host.schema_migrations (
             version     integer PRIMARY KEY,
             description text NOT NULL,
             checksum    text NOT NULL,
             applied_at  timestamptz NOT NULL DEFAULT now()
         );",
    )
    .execute(&mut *tx)
    .await
    .map_err(failed("cannot prepare the migration table"))?;
    let applied = sqlx::query("SELECT version, checksum FROM plugin_host.schema_migrations")
        .fetch_all(&mut *tx)
        .await
        .map_err(failed("cannot read the applied migrations"))?;
    let applied: Vec<(i32, String)> = applied
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, sqlx::Error>>()
        .map_err(failed("cannot read the applied migrations"))?;
    for m in MIGRATIONS {
        let checksum = data_encoding::HEXLOWER.encode(&Sha256::digest(m.sql.as_bytes()));
        match applied.iter().find(|(v, _)| *v == m.version) {
            Some((_, sum)) if *sum == checksum => continue,
            Some(_) => {
                return Err(anyhow::anyhow!(
                    "migration {} was changed after it was applied; restore it and add a new migration instead",
                    m.version
                ));
            }
            None => {}
        }
        // The SQL is ours, embedded at build time.
        sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql))
            .execute(&mut *tx)
            .await
            .map_err(failed(&format!("migration {} failed", m.version)))?;
        sqlx::query(
            "INSERT INTO plugin_host.schema_migrations (version, description, checksum) VALUES ($1, $2, $3)",
        )
        .bind(m.version)
        .bind(m.description)
        .bind(&checksum)
        .execute(&mut *tx)
        .await
        .map_err(failed("cannot record the migration"))?;
        tracing::info!(version = m.version, "applied Postgres migration");
    }
    tx.commit()
        .await
        .map_err(failed("cannot commit the migration"))
}

/// The server's message and SQLSTATE, or the driver's error; neither holds the URL.
fn describe(e: &sqlx::Error) -> String {
    let Some(db) = e.as_database_error() else {
        return e.to_string();
    };
    let mut text = match db.code() {
        Some(code) => format!("{} (SQLSTATE {code})", db.message()),
        None => db.message().to_owned(),
    };
    // Our migrations put the operator's next step in the hint.
    if let Some(hint) = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .and_then(|pg| pg.hint())
    {
        text.push_str(". ");
        text.push_str(hint);
    }
    text
}
