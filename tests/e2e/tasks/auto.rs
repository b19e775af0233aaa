//! `--long-running auto` (the default): a plain call of a long tool waits for the result
//! when the client is a host known not to poll tasks, and answers with a task handle for
//! any other client (seed criterion 4); the instructions say which.

use serde_json::{Value, json};

use super::ADR;
use crate::support::binary::{Bridge, paced};

/// A bridge initialized by a client calling itself `client`; returns it and the
/// instructions it was given.
fn as_client(client: &str, extra: &[&str]) -> (Bridge, String) {
    let mut b = Bridge::spawn(extra);
    let init = b.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": client, "version": "1"}}),
    );
    let instructions = init["result"]["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("{init}"))
        .to_owned();
    b.notify("notifications/initialized", json!({}));
    (b, instructions)
}

fn plain_call(b: &mut Bridge) -> Value {
    b.call("cyberos.cuo.execute_workflow", ADR())["result"]["structuredContent"].clone()
}

#[test]
fn hosts_that_never_poll_get_the_result_and_others_the_handle() {
    let pace = paced(100);
    for host in ["claude-code", "codex-mcp-client"] {
        let (mut b, instructions) = as_client(host, &["--cuo-command", &pace]);
        assert!(
            instructions.contains("their result when the run ends"),
            "{instructions}"
        );
        let out = plain_call(&mut b);
        assert_eq!(out["steps_executed"], 3, "{host}: {out}");
    }
    let (mut b, instructions) = as_client("some-sdk-client", &["--cuo-command", &pace]);
    assert!(instructions.contains("poll tasks/get"), "{instructions}");
    let out = plain_call(&mut b);
    assert_eq!(out["status"], "running", "{out}");
    assert!(out["task_id"].is_string());
}

#[test]
fn explicit_modes_and_added_clients_decide_alike() {
    let pace = paced(100);
    let (mut b, _) = as_client(
        "claude-code",
        &["--cuo-command", &pace, "--long-running", "handle"],
    );
    assert_eq!(plain_call(&mut b)["status"], "running");
    let (mut b, instructions) = as_client(
        "my-agent",
        &["--cuo-command", &pace, "--wait-client", "my-agent"],
    );
    assert!(!instructions.contains("poll tasks/get"), "{instructions}");
    assert_eq!(plain_call(&mut b)["steps_executed"], 3);
}
