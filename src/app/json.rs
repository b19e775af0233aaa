//! JSON shapes shared by the tool handlers and the task methods.

use serde_json::{Value, json};

use crate::domain::{DomainError, JsonText};

/// A successful `CallToolResult` whose `structuredContent` is `value`, with the same JSON
/// as text for clients that read only `content`.
pub fn structured(value: Value) -> Value {
    let text = text_of(&value);
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
    JsonText::from_serialized(text_of(value))
}

/// A value serialized straight into a buffer: about a third of the instructions of its
/// `Display` (`to_string`), which goes through `fmt::Write` piece by piece.
pub fn text_of(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    // A `Value` always serializes (its keys are strings), to UTF-8.
    match serde_json::to_writer(&mut out, value).map(|()| String::from_utf8(out)) {
        Ok(Ok(text)) => text,
        _ => value.to_string(),
    }
}
