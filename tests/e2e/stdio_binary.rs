//! The built binary over real stdin/stdout: handshake, catalogue, protocol errors,
//! validation, and the error envelope. Every frame is checked against the MCP schema.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::binary::Bridge;
use crate::support::{assert_envelope, init_params, sep_986};

#[test]
fn initialize_answers_2025_11_25_with_server_info_and_capabilities() {
    let mut b = Bridge::spawn(&[]);
    let result = b.initialize();
    assert_eq!(result["serverInfo"]["name"], "cyberos-mcp-bridge");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    let caps = &result["capabilities"];
    assert_eq!(caps["tools"], json!({"listChanged": false}));
    assert_eq!(caps["logging"], json!({}));
    assert_eq!(
        caps["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    // Criterion 23: the client offered sampling; the server does not claim it.
    assert!(caps.get("sampling").is_none());
    assert!(result["instructions"].as_str().unwrap().contains("task"));
}

#[test]
fn known_and_newer_versions_negotiate_to_2025_11_25() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2026-07-28"] {
        let mut b = Bridge::spawn(&[]);
        let resp = b.request("initialize", init_params(version));
        assert_eq!(
            resp["result"]["protocolVersion"], "2025-11-25",
            "{version}: {resp}"
        );
    }
}

#[test]
fn unknown_or_malformed_versions_are_refused_with_a_hint() {
    for (version, requested) in [
        (json!("2024-01-01"), json!("2024-01-01")),
        (json!("1.0.0"), json!("1.0.0")),
        (json!(42), Value::Null),
    ] {
        let mut b = Bridge::spawn(&[]);
        let resp = b.request("initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}));
        let data = assert_envelope(&resp, -32602, "input_validation");
        assert_eq!(data["supported"], json!(["2025-11-25"]));
        assert_eq!(data["requested"], requested);
        assert!(data["hint"].as_str().unwrap().contains("2025-11-25"));
        // The session stays usable: a correct initialize still works.
        b.initialize();
    }
    let mut b = Bridge::spawn(&[]);
    let resp = b.request(
        "initialize",
        json!({"capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_envelope(&resp, -32602, "input_validation");
}

#[test]
fn a_server_discover_probe_gets_method_not_found_and_initialize_still_works() {
    let mut b = Bridge::spawn(&[]);
    let resp = b.request(
        "server/discover",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    assert_envelope(&resp, -32601, "input_validation");
    b.initialize();
    assert_eq!(b.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn tools_list_has_the_eight_tools_with_sep_986_names() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.request("tools/list", json!({}));
    let tools = resp["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 8);
    assert!(resp["result"].get("nextCursor").is_none());
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in &names {
        assert!(sep_986(name), "{name} violates the naming pattern");
    }
    for expected in [
        "cyberos.cuo.list_personas",
        "cyberos.cuo.list_workflows",
        "cyberos.cuo.route",
        "cyberos.cuo.execute_workflow",
        "cyberos.memory.append_audit",
        "cyberos.memory.read_audit",
        "cyberos.skill.list_skills",
        "cyberos.skill.invoke_skill",
    ] {
        assert!(names.contains(&expected), "{expected} missing");
    }
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}");
        let long = matches!(
            name,
            "cyberos.cuo.execute_workflow" | "cyberos.skill.invoke_skill"
        );
        assert_eq!(tool.get("outputSchema").is_none(), long, "{name}");
        assert_eq!(
            tool["execution"]["taskSupport"],
            if long { "optional" } else { "forbidden" },
            "{name}"
        );
        let a = &tool["annotations"];
        for key in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
            "destructive",
            "write",
            "external_effect",
        ] {
            assert!(a[key].is_boolean(), "{name} lacks {key}");
        }
        assert_eq!(a["readOnlyHint"], !a["write"].as_bool().unwrap());
    }
    let append = tools
        .iter()
        .find(|t| t["name"] == "cyberos.memory.append_audit")
        .unwrap();
    assert_eq!(append["annotations"]["external_effect"], true);
    assert_eq!(append["annotations"]["readOnlyHint"], false);
}

#[test]
fn a_cursor_for_tools_list_is_invalid() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.request("tools/list", json!({"cursor": "x"}));
    assert_envelope(&resp, -32602, "input_validation");
}

#[test]
fn malformed_frames_get_errors_without_an_id() {
    let mut b = Bridge::initialized(&[]);
    b.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":");
    let parse = b.recv();
    assert_envelope(&parse, -32700, "input_validation");
    assert!(parse.get("id").is_none(), "{parse}");
    for line in [
        &b"[]"[..],
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
        b"42",
        b"\"ping\"",
    ] {
        b.send_raw(line);
        let resp = b.recv();
        assert_envelope(&resp, -32600, "input_validation");
        assert!(resp.get("id").is_none(), "{resp}");
    }
    b.send_raw(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert!(b.recv().get("id").is_none());
    b.send_raw(br#"{"jsonrpc":"1.0","id":"v","method":"ping"}"#);
    let resp = b.recv();
    assert_envelope(&resp, -32600, "input_validation");
    assert_eq!(resp["id"], "v");
    // Still serving.
    assert_eq!(b.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn unknown_methods_are_method_not_found() {
    let mut b = Bridge::initialized(&[]);
    for method in ["resources/list", "prompts/list", "tools/destroy", ""] {
        let resp = b.request(method, json!({}));
        assert_envelope(&resp, -32601, "input_validation");
    }
}

#[test]
fn requests_before_initialize_are_invalid_but_ping_works() {
    let mut b = Bridge::spawn(&[]);
    assert_eq!(b.request("ping", json!({}))["result"], json!({}));
    for method in ["tools/list", "tools/call", "tasks/list", "logging/setLevel"] {
        let resp = b.request(method, json!({}));
        assert_envelope(&resp, -32600, "input_validation");
    }
    b.initialize();
    assert_eq!(
        b.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let again = b.request("initialize", init_params("2025-11-25"));
    assert_envelope(&again, -32600, "input_validation");
}

#[test]
fn notifications_get_no_reply() {
    let mut b = Bridge::initialized(&[]);
    b.notify("notifications/initialized", json!({}));
    b.notify("notifications/unknown", json!({"x": 1}));
    b.notify("notifications/cancelled", json!({"requestId": 999}));
    b.send_raw(br#"{"jsonrpc":"2.0","method":"ping"}"#);
    let resp = b.request("ping", json!({}));
    assert_eq!(resp["result"], json!({}));
    assert!(b.recv_within(Duration::from_millis(300)).is_none());
}

#[test]
fn an_over_long_line_is_refused_and_reading_goes_on() {
    let mut b = Bridge::initialized(&[]);
    let mut huge = br#"{"jsonrpc":"2.0","id":77,"method":"ping","params":{"pad":""#.to_vec();
    huge.resize(huge.len() + 5 * 1024 * 1024, b'a');
    huge.extend_from_slice(br#""}}"#);
    b.send_raw(&huge);
    let resp = b.recv();
    assert_envelope(&resp, -32600, "input_validation");
    assert!(resp.get("id").is_none());
    assert!(
        resp["error"]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("4 MiB")
    );
    assert_eq!(b.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn logging_set_level_accepts_rfc_5424_levels_only() {
    let mut b = Bridge::initialized(&[]);
    assert_eq!(
        b.request("logging/setLevel", json!({"level": "warning"}))["result"],
        json!({})
    );
    let resp = b.request("logging/setLevel", json!({"level": "loud"}));
    assert_envelope(&resp, -32602, "input_validation");
}

#[test]
fn arguments_are_validated_before_any_upstream_is_touched() {
    // The CUO command cannot even start: only validation can answer these.
    let mut b = Bridge::initialized(&["--cuo-command", "/nonexistent/cuo"]);
    let resp = b.call(
        "cyberos.cuo.execute_workflow",
        json!({"workflow": "adr-quick-capture", "inputs": {}}),
    );
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert_eq!(data["pointer"], "/persona");
    let resp = b.call("cyberos.cuo.route", json!({"query": "x", "limit": 11}));
    assert_eq!(
        assert_envelope(&resp, -32602, "input_validation")["pointer"],
        "/limit"
    );
    let resp = b.call("cyberos.cuo.route", json!({"query": "x", "colour": "red"}));
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert_eq!(data["pointer"], "/colour");
    let resp = b.call("cyberos.cuo.route", json!({"query": 5}));
    assert_eq!(
        assert_envelope(&resp, -32602, "input_validation")["pointer"],
        "/query"
    );
    let resp = b.call(
        "cyberos.memory.read_audit",
        json!({"audit_id": "a", "kind": "x"}),
    );
    assert_envelope(&resp, -32602, "input_validation");
    let resp = b.call("cyberos.memory.read_audit", json!({"since": "yesterday"}));
    assert_eq!(
        assert_envelope(&resp, -32602, "input_validation")["pointer"],
        "/since"
    );
}

#[test]
fn bad_call_params_and_unknown_tools_are_invalid_params() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.request("tools/call", json!({"arguments": {}}));
    assert_envelope(&resp, -32602, "input_validation");
    let resp = b.request(
        "tools/call",
        json!({"name": "cyberos.skill.list_skills", "arguments": [1]}),
    );
    assert_envelope(&resp, -32602, "input_validation");
    let resp = b.call("cyberos.cuo.nope", json!({}));
    assert_envelope(&resp, -32602, "input_validation");
    assert!(
        resp["error"]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("cyberos.cuo.nope")
    );
}

#[test]
fn unconfirmed_audit_appends_are_denied() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.call(
        "cyberos.memory.append_audit",
        json!({"kind": "decision", "body": {}}),
    );
    let data = assert_envelope(&resp, -32000, "authz_denied");
    // The hint is an action a user can take through a host: no `_meta` a model cannot set.
    // This client cannot be asked (no `elicitation`): the user approves at a terminal.
    let hint = data["hint"].as_str().unwrap();
    assert!(hint.contains("run `cyberos-mcp-bridge approve "), "{hint}");
    assert!(
        hint.contains("call the tool again with exactly the same arguments"),
        "{hint}"
    );
    assert!(!hint.contains("_meta"), "{hint}");
}

#[test]
fn list_skills_reads_the_skills_folders() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.call("cyberos.skill.list_skills", json!({}));
    let result = &resp["result"];
    let skills = result["structuredContent"]["skills"].as_array().unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["quarterly-report", "release-notes"],
        "broken and escaping skills are skipped"
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, result["structuredContent"],
        "text carries the same JSON"
    );
    assert_eq!(skills[0]["input_schema"]["required"], json!(["quarter"]));
    let filtered = b.call(
        "cyberos.skill.list_skills",
        json!({"query": "RELEASE notes", "limit": 5}),
    );
    assert_eq!(
        filtered["result"]["structuredContent"]["skills"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn eof_on_stdin_exits_cleanly() {
    let mut b = Bridge::initialized(&[]);
    assert_eq!(b.request("ping", json!({}))["result"], json!({}));
    let status = b.close();
    assert_eq!(status.code(), Some(0));
}
