//! Validation of every emitted message against the official MCP 2025-11-25 schema (a
//! structure-only copy made by `scripts/strip-schema.py`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde_json::Value;

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../fixtures/mcp-2025-11-25.schema.json")).unwrap()
});

static VALIDATORS: LazyLock<Mutex<HashMap<String, &'static jsonschema::Validator>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn validator(def: &str) -> &'static jsonschema::Validator {
    let mut cache = VALIDATORS.lock().unwrap();
    cache.entry(def.to_owned()).or_insert_with(|| {
        assert!(
            SCHEMA["$defs"].get(def).is_some(),
            "no $defs/{def} in the schema"
        );
        let mut root = SCHEMA.clone();
        root["$ref"] = Value::String(format!("#/$defs/{def}"));
        Box::leak(Box::new(jsonschema::validator_for(&root).unwrap()))
    })
}

/// Panics with every violation when `value` is not a valid `def`.
pub fn assert_valid(def: &str, value: &Value) {
    let errors: Vec<String> = validator(def)
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path().as_str()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid {def}: {errors:#?}\n{value:#}"
    );
}

/// Validates a frame the bridge sent: any JSON-RPC message, and for responses to known
/// methods, the specific result type.
pub fn check_frame(frame: &Value, method: Option<&str>, task_augmented: bool) {
    assert_valid("JSONRPCMessage", frame);
    if let Some(error) = frame.get("error") {
        assert_valid("JSONRPCErrorResponse", frame);
        assert_self_sufficient(&error["message"], &error["data"]);
        return;
    }
    if frame["result"]["isError"] == true {
        let result = &frame["result"];
        assert_self_sufficient(&result["content"][0]["text"], &result["structuredContent"]);
    }
    if let Some(result) = frame.get("result") {
        assert_valid("JSONRPCResultResponse", frame);
        let def = match method {
            Some("initialize") => "InitializeResult",
            Some("tools/list") => "ListToolsResult",
            Some("tools/call") if task_augmented => "CreateTaskResult",
            Some("tools/call") => "CallToolResult",
            Some("tasks/get") => "GetTaskResult",
            Some("tasks/cancel") => "CancelTaskResult",
            Some("tasks/list") => "ListTasksResult",
            Some("ping" | "logging/setLevel") => "EmptyResult",
            _ => "Result",
        };
        assert_valid(def, result);
    } else if let Some(m) = frame.get("method").and_then(Value::as_str) {
        if frame.get("id").is_some() {
            assert_valid("ServerRequest", frame);
        } else {
            assert_valid("ServerNotification", frame);
            assert!(m.starts_with("notifications/"), "{m}");
        }
    }
}

/// The text a host shows (the error's `message`, or an error result's text) says what went
/// wrong, what to do, and the class and trace id, as its structured parts do (#15).
#[track_caller]
fn assert_self_sufficient(text: &Value, data: &Value) {
    let part = |k: &str| {
        data[k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k} in {data}"))
    };
    let hint = part("hint");
    let mut want = part("message").to_owned();
    if !hint.is_empty() {
        want = format!("{want} — {hint}");
    }
    want = format!("{want} [{}, trace {}]", part("class"), part("trace_id"));
    assert_eq!(text.as_str(), Some(want.as_str()), "{data}");
}

#[test]
fn the_schema_copy_rejects_what_the_spec_forbids() {
    // A null id is not allowed in an error response: the reason ids are omitted instead.
    let bad = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}});
    assert!(!validator("JSONRPCMessage").is_valid(&bad));
    let good = serde_json::json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "x"}});
    assert_valid("JSONRPCMessage", &good);
    let no_content = serde_json::json!({"structuredContent": {}});
    assert!(!validator("CallToolResult").is_valid(&no_content));
}
