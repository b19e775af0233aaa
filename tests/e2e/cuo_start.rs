//! Run children start a few at a time (`CuoSettings::starting`): the next one waits until
//! one that is starting writes its first line, or for `starting_for` when it says nothing
//! sooner. Hundreds of children starting at once would hold the bridge's own threads off
//! the CPUs. The holds here are wide so that a loaded machine cannot blur the outcome.

use std::sync::Arc;
use std::time::Duration;

use cyberos_mcp_bridge::adapters::cuo_process::{CuoSettings, ProcessCuoRunner};
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::cuo::Progress;
use cyberos_mcp_bridge::domain::{JsonText, Timestamp};
use cyberos_mcp_bridge::ports::{CuoRunner, ProgressSink, WorkflowRun};

use crate::support::call_ctx;

const TENANT: &str = "00000000-0000-4000-8000-000000000001";

struct Ignored;

impl ProgressSink for Ignored {
    fn report(&self, _: Progress) {}
}

/// A progress line, as a child that has started would write it.
const PROGRESS: &str =
    r#"{"jsonrpc":"2.0","method":"progress","params":{"step":1,"total":2,"message":"up"}}"#;

/// Starts `runs` workflow runs at once on a CUO that notes when each child started, runs
/// `then` and says nothing more until the runs' deadline, `runs_for` away; a silent child
/// counts as starting for `hold`. Returns the start instants (ns), in order.
async fn start_times(
    starting: usize,
    hold: Duration,
    runs: usize,
    runs_for: Duration,
    then: &str,
) -> Vec<u128> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("starts");
    let cuo = Arc::new(ProcessCuoRunner::new(
        CuoSettings {
            command: vec![
                "sh".into(),
                "-c".into(),
                format!("date +%s%N >> '{}'; {then} exec sleep 5", log.display()),
            ],
            pass_env: Vec::new(),
            call_timeout: Duration::from_secs(5),
            starting,
            starting_for: hold,
        },
        Arc::new(SystemClock),
    ));
    let deadline = Timestamp::from_unix_millis(
        chrono::Utc::now().timestamp_millis() + runs_for.as_millis() as i64,
    );
    let calls = (0..runs).map(|_| {
        let cuo = Arc::clone(&cuo);
        tokio::spawn(async move {
            let run = WorkflowRun {
                persona: "p".into(),
                workflow: "w".into(),
                inputs: JsonText::from_serialized("{}".into()),
                deadline,
            };
            // The child never answers: the run ends at its deadline.
            let _ = cuo
                .execute_workflow(&call_ctx(TENANT), &run, &Ignored)
                .await;
        })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap();
    }
    let mut times: Vec<u128> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    times.sort_unstable();
    assert_eq!(times.len(), runs, "every run started a child");
    times
}

#[tokio::test]
async fn a_silent_starting_child_holds_the_next_one_back() {
    let hold = Duration::from_millis(250);
    let times = start_times(1, hold, 4, Duration::from_secs(5), "").await;
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]) / 1_000_000)
        .collect();
    // 250 ms apart at the spawns; a shell's own start-up may shift a note a little.
    assert!(gaps.iter().all(|g| *g >= 150), "gaps in ms: {gaps:?}");
}

#[tokio::test]
async fn as_many_children_as_the_gate_allows_start_together() {
    // Held back, the fourth would start at the runs' deadline, 3 s on.
    let times = start_times(4, Duration::from_secs(10), 4, Duration::from_secs(3), "").await;
    let spread = (times[3] - times[0]) / 1_000_000;
    assert!(spread < 1500, "the four started over {spread} ms");
}

#[tokio::test]
async fn a_child_that_writes_its_first_line_lets_the_next_one_start() {
    // Held back, the second would start at the runs' deadline, 3 s on.
    let line = format!("echo '{PROGRESS}';");
    let times = start_times(1, Duration::from_secs(10), 8, Duration::from_secs(3), &line).await;
    let spread = (times[7] - times[0]) / 1_000_000;
    assert!(spread < 1500, "the eight started over {spread} ms");
}
