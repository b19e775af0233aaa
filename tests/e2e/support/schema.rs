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

/// Whether `value` is a valid `def`.
pub fn is_valid(def: &str, value: &Value) -> bool {
    validator(def).is_valid(value)
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

/// The requests a client sent, by id, so that each response is checked against the
/// result type of its request: the method, whether it asked for a task, and the seed's
/// `{id}` door of `tasks/*`, which answers the seed's shape, a plain `Result` (CONTRACT §3).
#[derive(Default)]
pub struct Requests(HashMap<String, (String, bool)>);

impl Requests {
    /// Records `message` if it is a request.
    pub fn sent(&mut self, message: &Value) {
        let (Some(id), Some(method)) = (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) else {
            return;
        };
        let params = &message["params"];
        let task = params.get("task").is_some();
        let seed = params.get("id").is_some() && params.get("taskId").is_none();
        let method = if seed {
            format!("{method}#seed")
        } else {
            method.to_owned()
        };
        self.0.insert(id.to_string(), (method, task));
    }

    /// Checks `frame`, a message the bridge sent, against the schema ([`check_frame`]).
    pub fn check(&self, frame: &Value) {
        let sent = frame.get("id").and_then(|id| self.0.get(&id.to_string()));
        check_frame(
            frame,
            sent.map(|(m, _)| m.as_str()),
            sent.is_some_and(|(_, task)| *task),
        );
    }
}
