//! JSON-RPC 2.0 wire types for MCP: parsing incoming frames, building responses, and the
//! one mapping from `DomainError` to the contract's error envelope (CONTRACT §7).
//!
//! Liberal in, strict out: unknown members are ignored on input; every frame we build
//! follows the 2025-11-25 schema (an error's `id` is omitted, never null, when the
//! request's id could not be read).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::domain::{DomainError, ErrorClass, TraceId};

/// JSON-RPC parse error.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC method not found.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i32 = -32602;

/// A request id: a string or an integer, never null.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
}

/// A request from the peer.
#[derive(Debug)]
pub struct Request {
    /// Its id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// `params`, or `Null` when absent.
    pub params: Value,
}

/// A notification from the peer.
#[derive(Debug)]
pub struct Notification {
    /// The method.
    pub method: String,
    /// `params`, or `Null` when absent.
    pub params: Value,
}

/// A response from the peer to a request we sent.
#[derive(Debug)]
pub struct PeerResponse {
    /// The id of our request.
    pub id: RequestId,
    /// `Ok(result)` or `Err(error object)`.
    pub outcome: Result<Value, Value>,
}

/// One incoming JSON-RPC message.
#[derive(Debug)]
pub enum Incoming {
    /// Expects a response.
    Request(Request),
    /// Expects nothing.
    Notification(Notification),
    /// Answers one of ours.
    Response(PeerResponse),
}

/// Why an incoming frame could not be read as a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// -32700 or -32600.
    pub code: i32,
    /// What was wrong.
    pub message: &'static str,
    /// The request id, when it could be read.
    pub id: Option<RequestId>,
}

/// Reads one frame. Only the JSON-RPC envelope is checked here; params are the
/// dispatcher's business.
pub fn parse_frame(bytes: &[u8]) -> Result<Incoming, FrameError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| FrameError {
        code: PARSE_ERROR,
        message: "parse error: the message is not valid JSON",
        id: None,
    })?;
    let Value::Object(mut obj) = value else {
        let message = if value.is_array() {
            "invalid request: batches are not supported in MCP 2025-11-25; send one message per line"
        } else {
            "invalid request: a message must be a JSON object"
        };
        return Err(FrameError {
            code: INVALID_REQUEST,
            message,
            id: None,
        });
    };
    let id = match obj.get("id") {
        None => None,
        Some(v) => Some(RequestId::from_value(v).ok_or(FrameError {
            code: INVALID_REQUEST,
            message: "invalid request: id must be a string or an integer",
            id: None,
        })?),
    };
    let invalid = |message, id: &Option<RequestId>| FrameError {
        code: INVALID_REQUEST,
        message,
        id: id.clone(),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("invalid request: jsonrpc must be \"2.0\"", &id));
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    match obj.remove("method") {
        Some(Value::String(method)) => Ok(match id {
            Some(id) => Incoming::Request(Request { id, method, params }),
            None => Incoming::Notification(Notification { method, params }),
        }),
        Some(_) => Err(invalid("invalid request: method must be a string", &id)),
        None => {
            let Some(id) = id else {
                return Err(invalid(
                    "invalid request: a message needs a method, or an id and a result",
                    &None,
                ));
            };
            let outcome = match (obj.remove("result"), obj.remove("error")) {
                (Some(r), None) => Ok(r),
                (None, Some(e)) => Err(e),
                _ => {
                    return Err(invalid(
                        "invalid request: a response needs exactly one of result and error",
                        &Some(id),
                    ));
                }
            };
            Ok(Incoming::Response(PeerResponse { id, outcome }))
        }
    }
}

/// A JSON-RPC error object ready to send.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// Error code.
    pub code: i32,
    /// One user-safe sentence.
    pub message: String,
    /// The envelope: `class`, `trace_id`, `hint`, extras.
    pub data: Map<String, Value>,
}

impl RpcError {
    /// A protocol-level error (bad frame, unknown method, bad params): class
    /// `input_validation`, since the client can fix it.
    pub fn protocol(code: i32, message: impl Into<String>, hint: &str, trace: TraceId) -> RpcError {
        let mut data = Map::new();
        data.insert("class".into(), ErrorClass::InputValidation.as_str().into());
        data.insert("trace_id".into(), trace.to_string().into());
        data.insert("hint".into(), hint.into());
        RpcError {
            code,
            message: message.into(),
            data,
        }
    }

    /// The contract envelope of a domain error. The match has no wildcard arm, so a new
    /// variant fails to compile until it is mapped here.
    pub fn from_domain(err: &DomainError, trace: TraceId) -> RpcError {
        let class = err.class();
        let mut data = Map::new();
        data.insert("class".into(), class.as_str().into());
        data.insert("trace_id".into(), trace.to_string().into());
        data.insert("hint".into(), err.hint().into());
        match err {
            DomainError::InputValidation { pointer, .. } => {
                if let Some(p) = pointer {
                    data.insert("pointer".into(), p.clone().into());
                }
            }
            DomainError::AuthzDenied { missing_scopes, .. } => {
                if !missing_scopes.is_empty() {
                    data.insert("missing_scopes".into(), json!(missing_scopes));
                }
            }
            DomainError::UpstreamUnavailable { .. } | DomainError::Internal { .. } => {}
        }
        RpcError {
            code: class.code(),
            message: err.to_string(),
            data,
        }
    }

    /// Adds a member to `data`.
    pub fn with_data(mut self, key: &str, value: Value) -> RpcError {
        self.data.insert(key.into(), value);
        self
    }

    /// The error object.
    pub fn to_value(&self) -> Value {
        json!({ "code": self.code, "message": self.message, "data": self.data })
    }
}

/// A method's result: a value, or JSON text serialized once and reused (`tools/list`).
#[derive(Debug, Clone)]
pub enum Reply {
    /// Serialized per response.
    Json(Value),
    /// Already serialized.
    Raw(Arc<str>),
}

impl From<Value> for Reply {
    fn from(v: Value) -> Reply {
        Reply::Json(v)
    }
}

/// A success response frame, serialized (one line, no trailing newline).
pub fn success(id: &RequestId, result: &Reply) -> String {
    let id = id.to_value().to_string();
    match result {
        Reply::Json(v) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{v}}}"#),
        Reply::Raw(text) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{text}}}"#),
    }
}

/// An error response frame, serialized; `id` is omitted when unknown.
pub fn failure(id: Option<&RequestId>, err: &RpcError) -> String {
    let mut frame = Map::with_capacity(3);
    frame.insert("jsonrpc".into(), "2.0".into());
    if let Some(id) = id {
        frame.insert("id".into(), id.to_value());
    }
    frame.insert("error".into(), err.to_value());
    Value::Object(frame).to_string()
}

/// A notification frame, serialized.
pub fn notification(method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_error(bytes: &str) -> FrameError {
        parse_frame(bytes.as_bytes()).unwrap_err()
    }

    #[test]
    fn malformed_json_is_a_parse_error_without_id() {
        let e = frame_error("{\"jsonrpc\":\"2.0\",");
        assert_eq!((e.code, e.id), (PARSE_ERROR, None));
    }

    #[test]
    fn arrays_and_scalars_are_invalid_requests_without_id() {
        for text in [
            "[]",
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            "1",
            "\"x\"",
            "null",
        ] {
            let e = frame_error(text);
            assert_eq!((e.code, e.id), (INVALID_REQUEST, None), "{text}");
        }
    }

    #[test]
    fn a_bad_id_is_not_echoed() {
        for id in ["null", "1.5", "true", "{}", "[]"] {
            let e = frame_error(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}"
            ));
            assert_eq!((e.code, e.id), (INVALID_REQUEST, None), "{id}");
        }
    }

    #[test]
    fn a_wrong_version_keeps_the_id() {
        let e = frame_error("{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}");
        assert_eq!((e.code, e.id), (INVALID_REQUEST, Some(RequestId::Int(7))));
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let r = parse_frame(br#"{"jsonrpc":"2.0","id":"a","method":"ping","extra":1}"#).unwrap();
        assert!(
            matches!(r, Incoming::Request(Request { id: RequestId::Str(ref s), .. }) if s == "a")
        );
        let n = parse_frame(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(n, Incoming::Notification(_)));
        let p = parse_frame(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).unwrap();
        assert!(matches!(
            p,
            Incoming::Response(PeerResponse { outcome: Ok(_), .. })
        ));
        let big =
            parse_frame(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#).unwrap();
        assert!(matches!(
            big,
            Incoming::Request(Request {
                id: RequestId::UInt(u64::MAX),
                ..
            })
        ));
    }

    #[test]
    fn error_frames_omit_an_unknown_id() {
        let err = RpcError::protocol(PARSE_ERROR, "x", "y", TraceId::from_bytes([1; 16]));
        let frame: Value = serde_json::from_str(&failure(None, &err)).unwrap();
        assert!(frame.get("id").is_none());
        assert_eq!(frame["error"]["data"]["trace_id"], "01".repeat(16));
    }

    #[test]
    fn the_envelope_carries_class_trace_hint_and_extras() {
        let trace = TraceId::from_bytes([2; 16]);
        let e = RpcError::from_domain(&DomainError::invalid_at("bad persona", "/persona"), trace);
        assert_eq!(e.code, -32602);
        assert_eq!(e.data["class"], "input_validation");
        assert_eq!(e.data["pointer"], "/persona");
        let denied = DomainError::AuthzDenied {
            message: "m".into(),
            hint: "h".into(),
            missing_scopes: vec!["s".into()],
        };
        let e = RpcError::from_domain(&denied, trace);
        assert_eq!(e.code, -32000);
        assert_eq!(e.data["missing_scopes"], json!(["s"]));
    }
}
