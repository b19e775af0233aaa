//! The `TaskStore` and `ConfirmationLedger` contracts (`contract`) and the `ClientAnswers`
//! one (`answers`), run against the
//! embedded SQLite store always (`sqlite`) and against Postgres when `DATABASE_URL` names
//! an admin connection (`support::pg::admin_url` decides: without it each Postgres test
//! prints a `SKIPPED` line, with `CI=true` its absence fails them). Each Postgres test
//! works in a fresh database from `support::pg::TestDb`, migrated with `migrate` as the
//! admin and dropped at the end; its store logs in as a `NOINHERIT` role granted only
//! `plugin_host_app`, so row-level security holds only through the store's own
//! `SET LOCAL ROLE`. The Postgres-only tests show the contracts' extras, stop
//! notifications, NUL characters and the store failing fast when the database is down
//! (`postgres`), row-level security on the app role and on the store's login role
//! (`postgres_rls`), and the migration's idempotence, concurrency and a plain owner role
//! (`postgres_migrate`).

mod answers;
mod approvals;
mod contract;
mod limits;
mod postgres;
mod postgres_guard;
mod postgres_migrate;
mod postgres_rls;
mod progress;
mod sqlite;

use serde_json::{Value, json};

use cyberos_mcp_bridge::domain::task::{Task, TaskFailure, TaskStatus};
use cyberos_mcp_bridge::domain::{
    DomainError, ErrorClass, JsonText, TaskId, TenantId, Timestamp, Tool, TraceId,
};
use cyberos_mcp_bridge::ports::{NewTask, ProgressEntry, TaskOutcome};

pub(crate) fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).unwrap();
    bytes
}

pub(crate) fn tenant() -> TenantId {
    TenantId::parse(&uuid::Uuid::from_bytes(random()).hyphenated().to_string()).unwrap()
}

pub(crate) fn task_id() -> TaskId {
    TaskId::from_random(random())
}

/// A fixed origin, so every time in the contract is explicit.
pub(crate) const T0: i64 = 1_700_000_000_000;
pub(crate) const MINUTE: i64 = 60_000;
pub(crate) const HOUR: i64 = 60 * MINUTE;
pub(crate) const DAY: i64 = 24 * HOUR;

pub(crate) fn at(offset_ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0 + offset_ms)
}

/// A running task of `tenant` created at `T0 + created`, run by `owner` with a 30 s lease,
/// a 2 h timeout, kept for a day.
pub(crate) fn running(tenant: TenantId, created: i64, owner: &str) -> NewTask {
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
            timeout_at: at(created + 2 * HOUR),
            expires_at: at(created + DAY),
        },
        input: JsonText::from_serialized(
            json!({"persona": "cto", "workflow": "adr", "inputs": {"n": 1}}).to_string(),
        ),
        owner: owner.to_owned(),
        lease_until: at(created + 30_000),
        max_stored: 1000,
    }
}

pub(crate) fn outcome(
    status: TaskStatus,
    output: Option<Value>,
    failure: Option<TaskFailure>,
) -> TaskOutcome {
    TaskOutcome {
        status,
        output: output.map(|v| JsonText::from_serialized(v.to_string())),
        failure,
    }
}

pub(crate) fn json_of(text: &JsonText) -> Value {
    serde_json::from_str(text.as_str()).unwrap()
}

#[track_caller]
pub(crate) fn assert_not_found(e: &DomainError) {
    assert_eq!(e.class(), ErrorClass::InputValidation, "{e:?}");
    assert_eq!(e.to_string(), "task not found");
}

/// What a caller can observe of an outcome: the error's class, message and hint.
pub(crate) fn seen<T>(r: &Result<T, DomainError>) -> Option<(ErrorClass, String, String)> {
    r.as_ref()
        .err()
        .map(|e| (e.class(), e.to_string(), e.hint().to_owned()))
}

/// A progress report at `seq` (of 9 steps).
pub(crate) fn step(seq: u64, message: &str) -> ProgressEntry {
    ProgressEntry {
        seq,
        total: Some(9),
        message: message.into(),
    }
}
