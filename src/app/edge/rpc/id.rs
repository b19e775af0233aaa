//! JSON-RPC request ids.

use serde_json::Value;

/// A request id: a string or an integer, never null; serialized as it was sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(untagged)]
pub enum RequestId {
    /// A signed integer id.
    Int(i64),
    /// An unsigned integer id beyond `i64`.
    UInt(u64),
    /// A string id.
    Str(String),
}

impl RequestId {
    /// Reads a string or integer id.
    pub fn from_value(v: &Value) -> Option<RequestId> {
        match v {
            Value::String(s) => Some(RequestId::Str(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(RequestId::Int)
                .or_else(|| n.as_u64().map(RequestId::UInt)),
            _ => None,
        }
    }

    /// The id as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Int(i) => Value::from(*i),
            RequestId::UInt(u) => Value::from(*u),
            RequestId::Str(s) => Value::String(s.clone()),
        }
    }

    /// Appends the id as JSON.
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write;
        // Writing to a `String` cannot fail.
        let _ = match self {
            RequestId::Int(i) => write!(out, "{i}"),
            RequestId::UInt(u) => write!(out, "{u}"),
            // A string always serializes.
            RequestId::Str(s) => {
                out.push_str(&serde_json::to_string(s).unwrap_or_default());
                Ok(())
            }
        };
    }

    /// The id as plain text, for span attributes and logs (long strings shortened).
    pub fn to_text(&self) -> String {
        match self {
            RequestId::Int(i) => i.to_string(),
            RequestId::UInt(u) => u.to_string(),
            RequestId::Str(s) => crate::domain::text::clip(s, 128).into_owned(),
        }
    }
}
