//! The handshake and the catalogue: criteria 1, 2, 3, 20, 23 and 24.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::harness::{Adapters, Stack, Store};
use crate::sockets::{describe, inet_sockets};
use crate::support::{assert_envelope, sep_986};

/// Criterion 1: Initialize handshake succeeds: the bridge answers protocolVersion
/// 2025-11-25.
pub async fn c01_initialize_returns_2025_11_25(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().uninitialized().stdio().await;
    let resp = b
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0.1.0"}}),
        )
        .await;
    assert_eq!(resp["result"]["protocolVersion"], "2025-11-25", "{resp}");
    assert_eq!(resp["result"]["serverInfo"]["name"], "cyberos-mcp-bridge");
}

/// Criterion 2: tools/list returns exactly 8 tools, all with SEP-986 names.
pub async fn c02_tools_list_returns_exactly_8_tools(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().stdio().await;
    let tools = b.list_tools().await;
    assert_eq!(tools.len(), 8, "{tools:#?}");
    let names = tool_names(&tools);
    for name in &names {
        assert!(sep_986(name), "{name} violates the naming pattern");
    }
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), 8, "{names:?}");
    assert!(names.iter().any(|n| n == "cyberos.cuo.execute_workflow"));
}

/// Criterion 3: The tool-name pattern is enforced at compile time: each name the bridge
/// lists builds as a registry name, and each renamed to a non-SEP-986 string fails to
/// compile (E0080, the `const fn`'s check) — compiled by rustc against the library the
/// suite links.
pub async fn c03_a_non_sep_986_tool_name_fails_to_compile(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().stdio().await;
    let names = tool_names(&b.list_tools().await);
    let registry = |names: &[String]| -> String {
        let consts: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    "const _: ToolName = ToolName::from_static({n:?}, {:?});",
                    n.replace('.', "_")
                )
            })
            .collect();
        format!(
            "use cyberos_mcp_bridge::domain::ToolName;\n{}\n",
            consts.join("\n")
        )
    };
    let served = crate::compile::check(&registry(&names));
    assert!(
        served.success,
        "the listed names do not build:\n{}",
        served.stderr
    );
    let renamed: Vec<String> = names
        .iter()
        .flat_map(|n| {
            let (area, verb) = n["cyberos.".len()..].split_once('.').unwrap();
            [
                format!("cyberos.{}.{verb}", area.to_uppercase()),
                format!("cyberos.{area}.{verb}-v2"),
                format!("{area}.{verb}"),
                format!("cyberos.{area}.{verb}.x"),
                format!("cyberos.{area}.2{verb}"),
            ]
        })
        .collect();
    assert!(renamed.iter().all(|n| !sep_986(n)));
    let refused = crate::compile::check(&registry(&renamed));
    assert!(!refused.success, "a non-SEP-986 name built");
    assert_eq!(
        refused.stderr.matches("error[E0080]").count(),
        renamed.len(),
        "each renamed tool fails the const check:\n{}",
        refused.stderr
    );
}

/// Criterion 20: The stdio transport answers on stdout what came on stdin, and binds no
/// port.
pub async fn c20_stdio_answers_on_stdout_and_binds_no_port(store: Store) {
    let stack = Stack::new(Adapters::Real(store)).up();
    let mut b = stack.bridge().uninitialized().stdio().await;
    let init = b.initialize().await;
    assert_eq!(init["serverInfo"]["name"], "cyberos-mcp-bridge");
    // A call that reaches an upstream, so everything the bridge opens lazily is open.
    let personas = b.call_tool("cyberos.cuo.list_personas", json!({})).await;
    assert!(personas["result"].is_object(), "{personas}");
    // No listener and no UDP port; TCP connections out (to Postgres) bind no port.
    let sockets = inet_sockets(b.process_id());
    assert!(
        !sockets
            .iter()
            .any(|s| s.listening || s.table.starts_with("udp")),
        "the stdio bridge has bound a port: {}",
        describe(&sockets)
    );
    // The same look at an HTTP bridge finds its listener, so it can fail.
    let http = stack.bridge().http().await;
    let sockets = inet_sockets(http.process_id());
    assert!(
        sockets.iter().any(|s| s.listening),
        "no listener found on an HTTP bridge: {}",
        describe(&sockets)
    );
}

/// Criterion 23: Initialize negotiates capabilities: the client offers sampling and
/// elicitation; the bridge's own capabilities claim neither.
pub async fn c23_initialize_answers_without_the_clients_capabilities(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().uninitialized().stdio().await;
    let resp = b
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"sampling": {}, "elicitation": {}},
                   "clientInfo": {"name": "test", "version": "0.1.0"}}),
        )
        .await;
    let caps = &resp["result"]["capabilities"];
    assert_eq!(caps["tools"], json!({"listChanged": false}), "{resp}");
    for client_side in ["sampling", "elicitation", "roots"] {
        assert!(caps.get(client_side).is_none(), "{client_side} in {caps}");
    }
}

/// Criterion 24: A protocol version mismatch is rejected: `2024-01-01` gets -32602 with a
/// hint.
pub async fn c24_an_unknown_protocol_version_gets_32602_with_a_hint(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().uninitialized().stdio().await;
    let resp = b
        .request(
            "initialize",
            json!({"protocolVersion": "2024-01-01", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0.1.0"}}),
        )
        .await;
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert_eq!(data["supported"], json!(["2025-11-25"]));
    assert_eq!(data["requested"], "2024-01-01");
    assert!(
        data["hint"].as_str().unwrap().contains("2025-11-25"),
        "{data}"
    );
    // The client can upgrade on the same connection.
    b.initialize().await;
}

fn tool_names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().expect("a tool name").to_owned())
        .collect()
}
