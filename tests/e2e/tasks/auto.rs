//! `--long-running auto` (the default): a plain call of a long tool waits for the result
//! when the client is a host known not to poll tasks, and answers with a task handle for
//! any other client (seed criterion 4); the instructions say which. On stdio the client is
//! `clientInfo.name`; on stateless HTTP it is the `User-Agent` product.

use serde_json::{Value, json};

use super::ADR;
use crate::support::binary::{Bridge, paced};
use crate::support::http_server::{Server, rpc};
use crate::support::schema::check_frame;

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

/// Over HTTP the hosts name themselves in `User-Agent` as they do in `clientInfo`
/// (tests/hosts saw `claude-code/2.1.332 (sdk-cli)` and `codex-mcp-client/0.171.0`).
#[tokio::test]
async fn over_http_the_user_agent_names_the_host() {
    // A run (3 steps of 300 ms) outlasts the per-request timeout: a wait is bounded by
    // the tool's own timeout instead.
    let s = Server::start(&[
        "--cuo-command",
        &paced(300),
        "--http-request-timeout-ms",
        "500",
    ]);
    let token = s.token(crate::identity::TENANT_A, None);
    let as_agent = async |agent: &str, method: &str, params: Value| {
        let reply = s
            .post_with(
                Some(&token),
                rpc(1, method, params).to_string(),
                &[("user-agent", agent)],
            )
            .await;
        let frame = reply.frame();
        check_frame(&frame, Some(method), false);
        frame
    };
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "claude-code", "version": "1"}});
    let call = json!({"name": "cyberos.cuo.execute_workflow", "arguments": ADR()});
    for agent in ["claude-code/2.1.332 (sdk-cli)", "codex-mcp-client/0.171.0"] {
        let told = as_agent(agent, "initialize", init.clone()).await;
        let instructions = told["result"]["instructions"].as_str().unwrap();
        assert!(
            instructions.contains("their result when the run ends"),
            "{agent}: {instructions}"
        );
        let out = as_agent(agent, "tools/call", call.clone()).await;
        assert_eq!(
            out["result"]["structuredContent"]["steps_executed"], 3,
            "{agent}: {out}"
        );
    }
    // clientInfo alone does not count over HTTP: the calls after initialize carry none.
    let told = as_agent("node", "initialize", init).await;
    let instructions = told["result"]["instructions"].as_str().unwrap();
    assert!(instructions.contains("poll tasks/get"), "{instructions}");
    let out = as_agent("node", "tools/call", call).await;
    assert_eq!(
        out["result"]["structuredContent"]["status"], "running",
        "{out}"
    );
}

/// The long tools' descriptions in `b`'s `tools/list`, checked against the schema.
fn long_descriptions(b: &mut Bridge) -> Vec<String> {
    let list = b.request("tools/list", json!({}));
    check_frame(&list, Some("tools/list"), false);
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["execution"]["taskSupport"] == "optional")
        .map(|t| t["description"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_listing_says_only_how_plain_calls_end_on_its_own_connection() {
    // A host whose plain calls wait is never told of task handles it cannot poll.
    for (client, extra) in [
        ("claude-code", &[][..]),
        ("anyone", &["--long-running", "wait"][..]),
    ] {
        let (mut b, instructions) = as_client(client, extra);
        let descriptions = long_descriptions(&mut b);
        assert_eq!(descriptions.len(), 2);
        for d in descriptions.iter().chain([&instructions]) {
            assert!(
                !d.contains("tasks/get") && !d.contains("task_id"),
                "{client}: {d}"
            );
            assert!(d.contains("when the run ends"), "{client}: {d}");
        }
    }
    // One that gets handles is told how to poll them.
    let (mut b, instructions) = as_client("anyone", &[]);
    for d in long_descriptions(&mut b).iter().chain([&instructions]) {
        assert!(d.contains("tasks/get") && d.contains("tasks/result"), "{d}");
    }
}
