//! The run caps under concurrency, through the binary: calls pipelined on stdio and sent
//! in parallel over HTTP never start more runs than a tenant's cap
//! (`--max-tasks-per-tenant`, default 32) or than the instance's cap on CUO children
//! across tenants (`--max-cuo-children`, also as `CYBEROS_MAX_CUO_CHILDREN` and the TOML
//! key `max-cuo-children`). The runs are paced so that none ends during a test.

use serde_json::{Value, json};

use super::{ADR, LOCAL, dev_token};
use crate::support::assert_envelope;
use crate::support::binary::{Bridge, paced};
use crate::support::http_server::Server;

/// Each step of every run; three steps outlast each test.
const PACE_MS: u64 = 10_000;
const OTHER: &str = "bbbbbbbb-0000-4000-8000-00000000000b";

/// Sends `n` `execute_workflow` calls before reading any answer; returns the answers.
fn pipelined_calls(b: &mut Bridge, n: usize) -> Vec<Value> {
    let ids: Vec<Value> = (0..n)
        .map(|_| {
            b.send_request(
                "tools/call",
                json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR()}),
            )
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    while answers.len() < n {
        let frame = b.recv();
        if frame.get("id").is_some_and(|id| ids.contains(id)) {
            answers.push(frame);
        }
    }
    answers
}

/// The answers that started a task, after checking every other one is `refusal`.
fn started(answers: &[Value], refusal: &str) -> usize {
    let mut started = 0;
    for a in answers {
        if a["result"]["structuredContent"]["status"] == "running" {
            started += 1;
        } else {
            assert_envelope(a, -32050, "upstream_unavailable");
            assert_eq!(a["error"]["data"]["message"], refusal, "{a}");
        }
    }
    started
}

#[test]
fn forty_pipelined_calls_start_exactly_the_tenants_cap_of_four() {
    let cuo = paced(PACE_MS);
    let mut b = Bridge::initialized(&["--cuo-command", &cuo, "--max-tasks-per-tenant", "4"]);
    let answers = pipelined_calls(&mut b, 40);
    assert_eq!(started(&answers, "too many running tasks"), 4);
    let listed = b.request("tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 4);
}

#[test]
fn pipelined_calls_at_the_default_cap_start_thirty_two() {
    let cuo = paced(PACE_MS);
    let mut b = Bridge::initialized(&["--cuo-command", &cuo]);
    let answers = pipelined_calls(&mut b, 48);
    assert_eq!(started(&answers, "too many running tasks"), 32);
}

/// Sends `n` `execute_workflow` calls of `token` in parallel; returns (status, frame, the
/// `Retry-After` header) of each.
async fn parallel_calls(s: &Server, token: &str, n: i64) -> Vec<Answer> {
    let calls = (0..n).map(|i| async move {
        let body = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "cyberos.cuo.execute_workflow", "arguments": ADR()}});
        let reply = s.post(Some(token), &body).await;
        let retry = reply.header("retry-after").map(str::to_owned);
        (reply.status, reply.json(), retry)
    });
    futures::future::join_all(calls).await
}

type Answer = (u16, Value, Option<String>);

fn accepted(answers: &[Answer]) -> usize {
    answers.iter().filter(|(status, ..)| *status == 200).count()
}

/// The HTTP statuses, for failure messages.
fn statuses(answers: &[Answer]) -> Vec<u16> {
    answers.iter().map(|(status, ..)| *status).collect()
}

#[tokio::test]
async fn forty_parallel_http_calls_start_exactly_the_tenants_cap_of_four() {
    let cuo = paced(PACE_MS);
    let s = Server::start_env(
        &["--cuo-command", &cuo, "--max-tasks-per-tenant", "4"],
        &[("CYBEROS_HTTP_CALL_RATE", "off")],
    );
    let t = s.token(LOCAL, None);
    let answers = parallel_calls(&s, &t, 40).await;
    assert_eq!(accepted(&answers), 4, "{:?}", statuses(&answers));
    for (status, frame, retry) in answers.iter().filter(|(status, ..)| *status != 200) {
        assert_eq!(*status, 429, "{frame}");
        assert_envelope(frame, -32050, "upstream_unavailable");
        assert_eq!(frame["error"]["data"]["message"], "too many running tasks");
        assert!(retry.is_some(), "{frame}");
    }
}

#[tokio::test]
async fn the_cap_on_cuo_children_holds_across_tenants_and_frees_a_slot_per_ended_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bridge.toml");
    std::fs::write(&config, "max-cuo-children = 3\n").unwrap();
    let cuo = paced(PACE_MS);
    let s = Server::start_env(
        &["--cuo-command", &cuo, "--config", config.to_str().unwrap()],
        &[("CYBEROS_HTTP_CALL_RATE", "off")],
    );
    let (a, b) = (s.token(LOCAL, None), s.token(OTHER, None));
    let (from_a, from_b) = tokio::join!(parallel_calls(&s, &a, 8), parallel_calls(&s, &b, 8));
    let answers: Vec<_> = (from_a.iter().map(|r| (&a, r)))
        .chain(from_b.iter().map(|r| (&b, r)))
        .collect();
    let ok: Vec<(&String, &Value)> = answers
        .iter()
        .filter(|(_, (status, ..))| *status == 200)
        .map(|(token, (_, frame, _))| (*token, frame))
        .collect();
    let all: Vec<_> = from_a.iter().chain(&from_b).cloned().collect();
    assert_eq!(ok.len(), 3, "{:?}", statuses(&all));
    for (_, (status, frame, retry)) in answers.iter().filter(|(_, (status, ..))| *status != 200) {
        assert_eq!(*status, 429, "{frame}");
        let data = assert_envelope(frame, -32050, "upstream_unavailable");
        assert_eq!(
            frame["error"]["data"]["message"],
            "too many running CUO children"
        );
        assert!(
            data["hint"].as_str().unwrap().contains("at most 3"),
            "{data}"
        );
        assert_eq!(retry.as_deref(), Some("5"), "{frame}");
    }
    // A run that ends gives its slot back: cancel one, and one more call starts.
    let (owner, frame) = ok[0];
    let id = frame["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a handle: {frame}"));
    let cancelled = s
        .rpc(owner, 50, "tasks/cancel", json!({"taskId": id}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let more = parallel_calls(&s, &b, 2).await;
    assert_eq!(accepted(&more), 1, "{:?}", statuses(&more));
}

#[test]
fn the_cap_on_cuo_children_is_also_an_environment_variable() {
    let dir = tempfile::tempdir().unwrap();
    let other = dev_token(dir.path(), OTHER);
    let cuo = paced(PACE_MS);
    let env = [("CYBEROS_MAX_CUO_CHILDREN", "2")];
    let mut a = Bridge::spawn_at(dir.path(), &["--dev", "--cuo-command", &cuo], &env);
    a.initialize();
    let answers = pipelined_calls(&mut a, 3);
    assert_eq!(started(&answers, "too many running CUO children"), 2);
    // The cap is this instance's: another bridge on the same store has its own.
    let mut b = Bridge::spawn_at(
        dir.path(),
        &["--dev", "--cuo-command", &cuo],
        &[env[0], ("CYBEROS_TOKEN", other.as_str())],
    );
    b.initialize();
    let answers = pipelined_calls(&mut b, 3);
    assert_eq!(started(&answers, "too many running CUO children"), 2);
}

#[test]
fn a_cap_of_zero_is_a_usage_error() {
    for flag in ["--max-cuo-children", "--max-tasks-per-tenant"] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(crate::support::binary::binary())
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--dev", flag, "0", "check"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag), "{stderr}");
    }
}
