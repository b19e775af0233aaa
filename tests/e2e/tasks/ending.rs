//! Tasks always end: a run whose outcome meets an unavailable store (the SQLite file
//! locked, the Postgres connection cut by a proxy) keeps its outcome and writes it once
//! the store is back; a forged stop notification kills nothing; a run that panics ends
//! as `internal_error` and gives its slot back.
//!
//! The outages last [`OUTAGE`]: longer than the outcome write used to keep trying (five
//! tries, each waiting for the store's own bound, 5 s, plus 0.2 to 1 s: about 28 s) after
//! which the result was dropped and the task stayed `running` for good; shorter than the
//! 40 s of the report, to keep the tests' wall time down.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sqlx::{Connection, Executor};

use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::app::service::tasks::runner::NewRun;
use cyberos_mcp_bridge::app::service::tasks::{TaskRunner, Work};
use cyberos_mcp_bridge::domain::task::{TaskStatus, panicked};
use cyberos_mcp_bridge::domain::{CallCtx, JsonText, TenantId, Tool, TraceId};
use cyberos_mcp_bridge::ports::{Clock, Ports, WorkflowRun};

use super::{ADR, LOCAL, get_seed, start, wait_status};
use crate::support::binary::{Bridge, paced};
use crate::support::fakes::{
    Behaviour, InMemoryAudit, InMemoryLedger, PanickingWorkflows, StaticSkills,
};
use crate::support::tcp_proxy::Proxy;
use crate::support::{script_skill, wait_for_async, wait_until};

/// How long the store stays unavailable while a run's outcome waits for it.
const OUTAGE: Duration = Duration::from_secs(35);
/// How long a task may take to end once the store is back.
const ENDS_WITHIN: Duration = Duration::from_secs(25);

/// A skill whose entrypoint sleeps `secs` and prints a line: a run that ends by itself a
/// moment after it starts, writing nothing to the store meanwhile.
fn sleeper_skill(dir: &Path, secs: u32) -> PathBuf {
    let skills = dir.join("skills");
    let script = format!("#!/bin/sh\nsleep {secs}\necho slept\n");
    script_skill(&skills, "sleeper", "Sleeps, then answers.", &script);
    skills
}

/// Starts the sleeper skill; returns the task id.
fn invoke_sleeper(b: &mut Bridge) -> String {
    let resp = b.call(
        "cyberos.skill.invoke_skill",
        json!({"skill": "sleeper", "inputs": {}}),
    );
    resp["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {resp}"))
        .to_owned()
}

/// The task completed, and `tasks/result` answers its result.
fn assert_completed_with_a_result(b: &mut Bridge, id: &str) {
    wait_status(b, id, "completed", ENDS_WITHIN);
    let result = b.request("tasks/result", json!({"taskId": id}));
    assert!(
        result["result"]["structuredContent"].is_object(),
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_run_that_ends_while_the_sqlite_file_is_locked_is_recorded_once_it_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let skills = sleeper_skill(dir.path(), 2);
    let data = dir.path().join("data");
    let mut b = Bridge::spawn_at(
        &data,
        &["--dev", "--skills-dir", skills.to_str().unwrap()],
        &[],
    );
    b.initialize();
    let id = invoke_sleeper(&mut b);
    // Another process takes the write lock and keeps it: every write of the bridge waits
    // for its busy timeout and fails, reads go on (WAL).
    let rt = runtime();
    let mut lock = rt.block_on(async {
        let options =
            sqlx::sqlite::SqliteConnectOptions::new().filename(data.join("bridge.sqlite3"));
        let mut conn = sqlx::SqliteConnection::connect_with(&options)
            .await
            .unwrap();
        conn.execute("BEGIN EXCLUSIVE").await.unwrap();
        conn
    });
    // The outage is the scenario: the lock is held for that long, whatever the bridge does.
    std::thread::sleep(OUTAGE);
    // The run ended long ago; its outcome is not stored yet.
    assert_eq!(get_seed(&mut b, &id)["result"]["status"], "running");
    rt.block_on(async {
        lock.execute("ROLLBACK").await.unwrap();
        lock.close().await.unwrap();
    });
    assert_completed_with_a_result(&mut b, &id);
}

/// The server a Postgres URL names.
fn server_of(url: &str) -> SocketAddr {
    let url = reqwest::Url::parse(url).unwrap();
    (url.host_str().unwrap(), url.port().unwrap_or(5432))
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap()
}

/// `url` with its host and port replaced by `addr`.
fn through(url: &str, addr: SocketAddr) -> String {
    let mut url = reqwest::Url::parse(url).unwrap();
    url.set_ip_host(addr.ip()).unwrap();
    url.set_port(Some(addr.port())).unwrap();
    url.to_string()
}

#[test]
fn a_run_that_ends_while_postgres_is_cut_off_is_recorded_once_it_is_back() {
    let Some(url) = crate::support::pg::database_url() else {
        return;
    };
    let proxy = Proxy::start(server_of(&url));
    let proxied = through(&url, proxy.addr());
    let dir = tempfile::tempdir().unwrap();
    let skills = sleeper_skill(dir.path(), 2);
    let mut b = Bridge::spawn_at(
        dir.path(),
        &[
            "--dev",
            "--database-url",
            &proxied,
            "--skills-dir",
            skills.to_str().unwrap(),
        ],
        &[],
    );
    b.initialize();
    let id = invoke_sleeper(&mut b);
    // The database goes away for everyone on this bridge: live connections drop, new
    // ones are refused.
    proxy.cut();
    // The outage is the scenario: the database stays away for that long.
    std::thread::sleep(OUTAGE);
    proxy.restore();
    assert_completed_with_a_result(&mut b, &id);
}

#[test]
fn a_forged_stop_notification_kills_no_run() {
    let Some(url) = crate::support::pg::database_url() else {
        return;
    };
    let cuo = paced(1500);
    let mut b = Bridge::initialized(&["--database-url", &url, "--cuo-command", &cuo]);
    let id = start(&mut b, ADR());
    // Any session of the database may NOTIFY the channel the bridge listens on.
    wait_until(Duration::from_secs(20), "no first step", || {
        get_seed(&mut b, &id)["result"]["status_message"] != "started"
    });
    runtime().block_on(async {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("SELECT pg_notify('plugin_host_task_stopped', $1)")
            .bind(&id)
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    });
    let done = wait_status(&mut b, &id, "completed", Duration::from_secs(20));
    assert_eq!(done["output"]["steps_executed"], 3, "{done}");
}

pub(super) fn ctx(tenant: TenantId) -> CallCtx {
    CallCtx {
        tenant,
        actor: "tester".into(),
        trace_id: TraceId::from_bytes([7; 16]),
        span_id: [7; 8],
        sampled: false,
        tracestate: None,
    }
}

pub(super) fn workflow_run(clock: &dyn Clock) -> NewRun {
    let now = clock.now();
    let timeout_at = now.plus_millis(60_000);
    NewRun {
        tool: Tool::ExecuteWorkflow,
        input: JsonText::from_serialized("{}".into()),
        work: Work::Workflow(WorkflowRun {
            persona: "chief-technology-officer".into(),
            workflow: "architect-new-system".into(),
            inputs: JsonText::from_serialized("{}".into()),
            deadline: timeout_at,
        }),
        created_at: now,
        timeout_at,
        expires_at: now.plus_millis(3_600_000),
        progress: None,
        max_stored: 1000,
    }
}

#[tokio::test]
async fn a_run_that_panics_ends_as_internal_error_and_gives_its_slot_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    let ports = Ports {
        tasks: Arc::new(store.clone()),
        answers: Arc::new(store.clone()),
        approvals: Arc::new(store),
        cuo: Arc::new(PanickingWorkflows),
        memory: Arc::new(InMemoryAudit::default()),
        skills: Arc::new(StaticSkills::new(Behaviour::Answer)),
        clock: Arc::new(SystemClock),
        ledger: Arc::new(InMemoryLedger::default()),
    };
    let tenant = TenantId::parse(LOCAL).unwrap();
    // One slot: the second run starts only once the first gave its slot back.
    let runner = TaskRunner::new(ports.clone(), 1, 1);
    for _ in 0..2 {
        let task = wait_for_async(Duration::from_secs(5), async || {
            runner
                .start(ctx(tenant), workflow_run(ports.clock.as_ref()))
                .await
                // Dropping the `Begin` lets the run start.
                .map(|(task, _begin)| task)
                .map_err(|e| format!("the slot was never given back: {e}"))
        })
        .await;
        let done = tokio::time::timeout(
            Duration::from_secs(10),
            runner.wait_terminal(&tenant, task.id),
        )
        .await
        .expect("the task ends")
        .unwrap();
        assert_eq!(done.status, TaskStatus::Failed);
        assert_eq!(done.failure, Some(panicked()));
    }
}
