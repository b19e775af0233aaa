//! Concurrent calls on one task, through the binary over HTTP (parallel requests):
//! of many cancels of one running task exactly one wins.

use serde_json::{Value, json};

use super::{ADR, LOCAL, args, stores};
use crate::support::assert_envelope;
use crate::support::binary::paced;
use crate::support::http_server::Server;

/// Parallel cancels of the one task.
const CANCELS: i64 = 24;

/// Starts `execute_workflow` as a spec task and returns its id.
async fn start_task(s: &Server, token: &str) -> String {
    let created = s
        .rpc(
            token,
            1,
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR(), "task": {}}),
        )
        .await;
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned()
}

/// Runs `f` on a runtime of its own: `stores()` may block on one, so it is called first.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn of_many_concurrent_cancels_of_one_task_exactly_one_is_told_cancelled() {
    for store in stores() {
        block_on(cancel_race(&store));
    }
}

async fn cancel_race(store: &[String]) {
    let cuo = paced(5000);
    let s = Server::start_env(
        &args(store, &["--cuo-command", &cuo]),
        &[("CYBEROS_HTTP_CALL_RATE", "off")],
    );
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let cancels = (0..CANCELS).map(|i| s.rpc(&t, 10 + i, "tasks/cancel", json!({"taskId": id})));
    let answers: Vec<Value> = futures::future::join_all(cancels).await;
    let won: Vec<&Value> = answers
        .iter()
        .filter(|a| a["result"]["status"] == "cancelled")
        .collect();
    assert_eq!(won.len(), 1, "{answers:#?}");
    // Every loser gets exactly what a cancel of the finished task gets.
    let late = s.rpc(&t, 99, "tasks/cancel", json!({"taskId": id})).await;
    assert_envelope(&late, -32602, "input_validation");
    assert_eq!(
        late["error"]["data"]["message"],
        "cannot cancel the task: it is already cancelled"
    );
    for lost in answers.iter().filter(|a| a.get("result").is_none()) {
        assert_envelope(lost, -32602, "input_validation");
        assert_eq!(
            lost["error"]["data"]["message"], late["error"]["data"]["message"],
            "{lost}"
        );
        assert_eq!(
            lost["error"]["data"]["hint"], late["error"]["data"]["hint"],
            "{lost}"
        );
    }
    let got = s.rpc(&t, 100, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
}
