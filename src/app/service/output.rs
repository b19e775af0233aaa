//! JSON shapes shared by the tool handlers and the task methods.

use serde::Serialize;
use serde_json::{Value, json};

use crate::app::edge::rpc::{Reply, text_of};
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
    let escaped = escaped(&json)
        .map_err(|e| DomainError::internal("a tool result does not serialize", Some(e.into())))?;
    let mut result = StructuredText::with_capacity(json.len());
    result.push(&json, &escaped);
    Ok(result.into_reply())
}

/// `text` escaped as the inside of a JSON string (without the quotes around it).
///
/// # Errors
/// Never in practice: serde_json refuses nothing a `&str` can hold.
pub fn escaped(text: &str) -> Result<String, serde_json::Error> {
    // The quotes trimmed in place: every tool result but `list_skills` comes through
    // here, and a second string would cost an allocation besides the copy (trimming the
    // front shifts the text by a byte, within the string).
    let mut quoted = serde_json::to_string(text)?;
    quoted.pop();
    quoted.remove(0);
    Ok(quoted)
}

/// A successful `CallToolResult` whose JSON is written piece by piece, each piece with its
/// escaped form beside it (for the `content` text), so pieces escaped once (a skill's
/// listing entry) are copied, never escaped again.
pub struct StructuredText {
    json: String,
    text: String,
}

impl StructuredText {
    const TEXT_OPEN: &str = r#"{"content":[{"type":"text","text":""#;
    const JSON_OPEN: &str = r#""}],"structuredContent":"#;
    const CLOSE: &str = r#","isError":false}"#;

    /// Room for a JSON text of about `len` bytes.
    pub fn with_capacity(len: usize) -> StructuredText {
        let mut text = String::with_capacity(Self::TEXT_OPEN.len() + 2 * len + 2 * 96);
        text.push_str(Self::TEXT_OPEN);
        StructuredText {
            json: String::with_capacity(len + Self::CLOSE.len()),
            text,
        }
    }

    /// Appends `json`, whose escaped form (as by [`escaped`]) is `escaped`.
    pub fn push(&mut self, json: &str, escaped: &str) {
        self.json.push_str(json);
        self.text.push_str(escaped);
    }

    /// Appends JSON punctuation and names that need no escaping (no `"`, `\` or control
    /// character).
    pub fn push_plain(&mut self, plain: &str) {
        debug_assert!(
            !plain.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20),
            "not plain: {plain}"
        );
        self.push(plain, plain);
    }

    /// The result: `{"content":[{"type":"text","text":<escaped>}],"structuredContent":<json>,"isError":false}`.
    pub fn into_reply(self) -> Reply {
        let StructuredText { json, mut text } = self;
        text.reserve(Self::JSON_OPEN.len() + json.len() + Self::CLOSE.len());
        text.push_str(Self::JSON_OPEN);
        text.push_str(&json);
        text.push_str(Self::CLOSE);
        Reply::Text(text)
    }
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
