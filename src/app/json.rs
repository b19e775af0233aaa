//! JSON shapes shared by the tool handlers and the task methods.

use serde_json::{Value, json};

use crate::domain::{DomainError, JsonText};

/// A successful `CallToolResult` whose `structuredContent` is `value`, with the same JSON
/// as text for clients that read only `content`.
pub fn structured(value: Value) -> Value {
    let text = value.to_string();
    json!({ "content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false })
}

/// A JSON document produced by an adapter, back as a value.
///
/// # Errors
/// `Internal` when the text is not JSON (an adapter broke its contract).
pub fn json_value(text: &JsonText) -> Result<Value, DomainError> {
    serde_json::from_str(text.as_str())
        .map_err(|e| DomainError::internal("an upstream document is not JSON", Some(e.into())))
}

/// A value as opaque JSON text for a port.
pub fn json_text(value: &Value) -> JsonText {
    JsonText::from_serialized(value.to_string())
}
