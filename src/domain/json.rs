//! Opaque JSON documents that pass through the core unread (workflow inputs, audit
//! bodies, schemas), so port signatures never carry a JSON library's value type.

/// A JSON text produced by a serializer at the edge. The domain never parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// Wraps text that the caller has just serialized or parsed as JSON.
    pub fn from_serialized(text: String) -> JsonText {
        JsonText(text)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The JSON text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}
