//! JSON shapes shared by the tool handlers and the task methods.

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::rpc::{Reply, text_of};
use crate::domain::{DomainError, JsonText};

/// A successful `CallToolResult` whose `structuredContent` is `value`, with the same JSON
/// as text for clients that read only `content`: serialized once, then written twice (as
/// is, and escaped as the text), with no tree built or walked again.
///
/// # Errors
/// `Internal` when `value` does not serialize (a handler built a value JSON cannot hold).
pub fn structured<T: Serialize + ?Sized>(value: &T) -> Result<Reply, DomainError> {
    let json = serde_json::to_string(value)
        .map_err(|e| DomainError::internal("a tool result does not serialize", Some(e.into())))?;
    structured_json(json)
}

/// [`structured`] for a value already serialized: `json` must be one JSON value.
///
/// # Errors
/// `Internal` when the text cannot be escaped (it can: this never fails in practice).
pub fn structured_json(json: String) -> Result<Reply, DomainError> {
    let broken = |e: serde_json::Error| {
        DomainError::internal("a tool result does not serialize", Some(e.into()))
    };
    let mut out = Vec::with_capacity(2 * json.len() + 96);
    out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
    serde_json::to_writer(&mut out, json.as_str()).map_err(broken)?;
    out.extend_from_slice(br#"}],"structuredContent":"#);
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(br#","isError":false}"#);
    let text = String::from_utf8(out)
        .map_err(|e| DomainError::internal("a tool result is not UTF-8", Some(e.into())))?;
    Ok(Reply::Raw(text.into()))
}

/// The same result as a value, for the task paths that add to it (`tasks/result`'s
/// `_meta`).
pub fn structured_value(value: Value) -> Value {
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
