//! What a tool returns: its structured content as JSON text, beside the same JSON escaped
//! for the text a host shows (clients that read only `content` see the same data). Both
//! are written once, piece by piece, with no tree built or walked again; the edge puts
//! them in MCP's result shape. Also the conversions between the ports' opaque JSON text
//! and values.

use serde::Serialize;
use serde_json::Value;

use crate::domain::{DomainError, JsonText};

/// A tool's successful output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    json: String,
    escaped: String,
}

impl ToolOutput {
    /// The structured content, one JSON value.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The structured content escaped as the inside of a JSON string (no quotes around).
    pub fn escaped(&self) -> &str {
        &self.escaped
    }
}

/// The output whose structured content is `value`.
///
/// # Errors
/// `Internal` when `value` does not serialize (a handler built a value JSON cannot hold).
pub fn structured<T: Serialize + ?Sized>(value: &T) -> Result<ToolOutput, DomainError> {
    let json = serde_json::to_string(value).map_err(unserializable)?;
    structured_json(json)
}

/// [`structured`] for a value already serialized: `json` must be one JSON value.
///
/// # Errors
/// `Internal` when the text cannot be escaped (it can: this never fails in practice).
pub fn structured_json(json: String) -> Result<ToolOutput, DomainError> {
    let escaped = escaped(&json).map_err(unserializable)?;
    Ok(ToolOutput { json, escaped })
}

fn unserializable(e: serde_json::Error) -> DomainError {
    DomainError::internal("a tool result does not serialize", Some(e.into()))
}

/// `text` escaped as the inside of a JSON string (without the quotes around it).
///
/// # Errors
/// Never in practice: serde_json refuses nothing a `&str` can hold.
pub fn escaped(text: &str) -> Result<String, serde_json::Error> {
    // The quotes trimmed in place, which spares a second string.
    let mut quoted = serde_json::to_string(text)?;
    quoted.pop();
    quoted.remove(0);
    Ok(quoted)
}

/// An output written piece by piece, each piece with its escaped form beside it, so a
/// piece escaped once (a skill's listing entry) is copied, never escaped again.
pub struct OutputBuilder(ToolOutput);

impl OutputBuilder {
    /// Room for structured content of about `len` bytes.
    pub fn with_capacity(len: usize) -> OutputBuilder {
        OutputBuilder(ToolOutput {
            json: String::with_capacity(len),
            escaped: String::with_capacity(len + len / 8 + 16),
        })
    }

    /// Appends `json`, whose escaped form (as by [`escaped`]) is `escaped`.
    pub fn push(&mut self, json: &str, escaped: &str) {
        self.0.json.push_str(json);
        self.0.escaped.push_str(escaped);
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

    /// The output.
    pub fn finish(self) -> ToolOutput {
        self.0
    }
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
    // A `Value` always serializes: its keys are strings.
    JsonText::from_serialized(serde_json::to_string(value).unwrap_or_default())
}
