//! SIGTERM on stdio (on SQLite and Postgres): a call waiting for its run gets the run's outcome within the grace
//! (5 s): the result of a run that ends in time, the failure of one that does not, which
//! is killed. The bridge then exits 0 at once, however long the run would have taken. A
//! second SIGTERM exits at once (1).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{ADR, args, stores};
use crate::support::binary::{Bridge, paced};
use crate::support::wait_until;

/// Sends a plain `tools/call` of the workflow (answered when its run ends, under
/// `--long-running wait`) and returns its id once a new task of the tenant exists (other
/// tests share the tenant on Postgres).
fn waiting_call(b: &mut Bridge) -> Value {
    let ids = |b: &mut Bridge| -> Vec<Value> {
        let listed = b.request("tasks/list", json!({}));
        let tasks = listed["result"]["tasks"].as_array().unwrap();
        tasks.iter().map(|t| t["taskId"].clone()).collect()
    };
    let before = ids(b);
    let id = b.send_request(
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR()}),
    );
    wait_until(
        Duration::from_secs(10),
        "the call's task never appeared",
        || !ids(b).iter().all(|t| before.contains(t)),
    );
    id
}

fn sigterm(b: &Bridge) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// The response to `id`, then the exit status (within `within` of the signal).
fn answer_then_exit(b: &mut Bridge, id: &Value, within: Duration) -> Value {
    let answer = loop {
        let frame = b.recv();
        if frame.get("id") == Some(id) {
            break frame;
        }
    };
    let status = b.wait_exit(within).expect("the bridge exits");
    assert_eq!(status.code(), Some(0));
    answer
}

#[test]
fn sigterm_lets_a_waiting_call_end_with_its_runs_result() {
    // Three steps of a second: within the grace.
    let paced = paced(1000);
    for store in stores() {
        let flags = args(&store, &["--cuo-command", &paced, "--long-running", "wait"]);
        let mut b = Bridge::initialized(&flags);
        let id = waiting_call(&mut b);
        sigterm(&b);
        let answer = answer_then_exit(&mut b, &id, Duration::from_secs(10));
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(answer["result"]["structuredContent"]["steps_executed"], 3);
    }
}

#[test]
fn sigterm_fails_a_waiting_call_whose_run_outlasts_the_grace_and_exits() {
    // Three steps of 20 s: a minute, far past the grace.
    let paced = paced(20_000);
    for store in stores() {
        let flags = args(&store, &["--cuo-command", &paced, "--long-running", "wait"]);
        let mut b = Bridge::initialized(&flags);
        let id = waiting_call(&mut b);
        sigterm(&b);
        let answer = answer_then_exit(&mut b, &id, Duration::from_secs(10));
        let text = answer.to_string();
        assert!(
            text.contains("the bridge running the task stopped"),
            "{text}"
        );
    }
}

#[test]
fn a_second_sigterm_exits_at_once() {
    let paced = paced(20_000);
    let (log, lines) = std::sync::mpsc::channel();
    let mut b = Bridge::spawn_logging(
        tempfile::tempdir().unwrap(),
        &["--dev", "--cuo-command", &paced, "--long-running", "wait"],
        &[],
        Some(log),
    );
    b.initialize();
    waiting_call(&mut b);
    sigterm(&b);
    // The second signal is a second one once the bridge has taken the first.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lines
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("the bridge logs that it is shutting down")
        .contains("shutting down")
    {}
    sigterm(&b);
    // Well inside the 5 s grace the first signal started.
    let status = b.wait_exit(Duration::from_secs(3)).expect("exited at once");
    assert_eq!(status.code(), Some(1));
}

/// Once the shutdown has begun, a run is refused (retryably) and nothing is stored: a
/// run started then would outlive the grace that stops the others.
#[tokio::test]
async fn a_run_is_refused_once_the_shutdown_began() {
    use std::sync::Arc;

    use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
    use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
    use cyberos_mcp_bridge::app::service::tasks::TaskRunner;
    use cyberos_mcp_bridge::domain::{DomainError, ErrorClass, TenantId};
    use cyberos_mcp_bridge::ports::{Ports, TaskStore};

    use super::LOCAL;
    use super::ending::{ctx, workflow_run};
    use crate::support::fakes::{
        Behaviour, InMemoryAudit, InMemoryLedger, PanickingWorkflows, StaticSkills,
    };

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    let ports = Ports {
        tasks: Arc::new(store.clone()),
        answers: Arc::new(store.clone()),
        approvals: Arc::new(store.clone()),
        cuo: Arc::new(PanickingWorkflows),
        memory: Arc::new(InMemoryAudit::default()),
        skills: Arc::new(StaticSkills::new(Behaviour::Answer)),
        clock: Arc::new(SystemClock),
        ledger: Arc::new(InMemoryLedger::default()),
    };
    let tenant = TenantId::parse(LOCAL).unwrap();
    let runner = TaskRunner::new(ports.clone(), 4, 4);
    runner.shutdown(Duration::ZERO).await;
    let refused = runner
        .start(ctx(tenant), workflow_run(ports.clock.as_ref()))
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.class(), ErrorClass::UpstreamUnavailable);
    assert_eq!(
        refused.to_string(),
        "the bridge is shutting down",
        "{refused:?}"
    );
    assert!(
        matches!(
            refused,
            DomainError::UpstreamUnavailable {
                retry_after: Some(_),
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(
        store
            .list(&tenant, None, 10)
            .await
            .unwrap()
            .tasks
            .is_empty()
    );
}
