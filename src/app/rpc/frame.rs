//! JSON-RPC 2.0 frames for MCP: reading one incoming frame (its method parsed into a
//! [`Method`] once, here) and writing response and notification frames.
//!
//! Liberal in, strict out: unknown members are ignored on input; every frame we build
//! follows the 2025-11-25 schema (an error's `id` is omitted, never null, when the
//! request's id could not be read).

use serde_json::{Map, Value, json};

use super::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use super::id::RequestId;
use super::method::{Method, Notice};

/// A request from the peer.
#[derive(Debug)]
pub struct Request {
    /// Its id.
    pub id: RequestId,
    /// The method with its params.
    pub method: Method,
    /// The caller's W3C trace context from `params._meta` (`traceparent`, `tracestate`).
    pub trace: TraceMeta,
}

/// The W3C trace context a request carries in `params._meta`, as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceMeta {
    /// `_meta.traceparent`.
    pub traceparent: Option<String>,
    /// `_meta.tracestate`.
    pub tracestate: Option<String>,
}

impl Request {
    /// A request built in-process (the `call` subcommand).
    pub fn new(id: RequestId, method: &str, params: &Value) -> Request {
        let (method, trace) = read_method(method, params);
        Request { id, method, trace }
    }
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
    Notification(Notice),
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
            Some(id) => Incoming::Request(Request::new(id, &method, &params)),
            None => Incoming::Notification(Notice::parse(&method, &params)),
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

/// The method of a request and its trace context. `_meta` is read once: it goes to
/// `tools/call` whole, and its trace members to every request.
fn read_method(name: &str, params: &Value) -> (Method, TraceMeta) {
    // Liberal in: a non-object `_meta` is ignored rather than refused.
    let meta: Map<String, Value> = params
        .get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
    let trace = TraceMeta {
        traceparent: text("traceparent"),
        tracestate: text("tracestate"),
    };
    (Method::parse(name, params, meta), trace)
}

/// A method's result: a value, or JSON text serialized once and reused (`tools/list`).
#[derive(Debug, Clone)]
pub enum Reply {
    /// Serialized per response.
    Json(Value),
    /// Already serialized.
    Raw(std::sync::Arc<str>),
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
    use crate::domain::TraceId;

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
    fn a_request_carries_its_parsed_method_and_trace_context() {
        let r = parse_frame(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"tp","tracestate":"a=1"}}}"#,
        )
        .unwrap();
        let Incoming::Request(r) = r else { panic!() };
        assert!(
            matches!(&r.method, Method::ToolsCall(Ok(c)) if c.name == "x" && c.meta.len() == 2)
        );
        assert_eq!(r.trace.traceparent.as_deref(), Some("tp"));
        assert_eq!(r.trace.tracestate.as_deref(), Some("a=1"));
    }

    #[test]
    fn error_frames_omit_an_unknown_id() {
        let err = RpcError::protocol(PARSE_ERROR, "x", "y", TraceId::from_bytes([1; 16]));
        let frame: Value = serde_json::from_str(&failure(None, &err)).unwrap();
        assert!(frame.get("id").is_none());
        assert_eq!(frame["error"]["data"]["trace_id"], "01".repeat(16));
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(
                    "[a-z_]{1,8}|jsonrpc|id|method|params|result|error",
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn id() -> impl Strategy<Value = RequestId> {
        prop_oneof![
            any::<i64>().prop_map(RequestId::Int),
            (i64::MAX as u64 + 1..=u64::MAX).prop_map(RequestId::UInt),
            "\\PC{0,12}".prop_map(RequestId::Str),
        ]
    }

    fn method() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("initialize".to_owned()),
            Just("ping".to_owned()),
            Just("tools/call".to_owned()),
            Just("tools/list".to_owned()),
            Just("tasks/get".to_owned()),
            Just("logging/setLevel".to_owned()),
            "[a-z/]{1,20}",
        ]
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_frame(&bytes);
        }

        /// An error is -32700 or -32600, and a refused frame's id is echoed only when the
        /// frame had a readable one.
        #[test]
        fn any_json_parses_or_fails_with_a_json_rpc_code(value in json()) {
            let text = value.to_string();
            if let Err(e) = parse_frame(text.as_bytes()) {
                prop_assert!(e.code == PARSE_ERROR || e.code == INVALID_REQUEST);
                if let Some(id) = &e.id {
                    prop_assert_eq!(Some(id.to_value()), value.get("id").cloned());
                }
            }
        }

        /// What the parser accepts it reads back faithfully: the id, the method, and
        /// whether it is a request, a notification or a response.
        #[test]
        fn requests_notifications_and_responses_round_trip(
            id in id(),
            method in method(),
            params in json(),
            kind in 0u8..3,
        ) {
            let mut frame = json!({"jsonrpc": "2.0"});
            match kind {
                0 => {
                    frame["id"] = id.to_value();
                    frame["method"] = method.clone().into();
                    frame["params"] = params;
                }
                1 => {
                    frame["method"] = method.clone().into();
                    frame["params"] = params;
                }
                _ => {
                    frame["id"] = id.to_value();
                    frame["result"] = params;
                }
            }
            let parsed = parse_frame(frame.to_string().as_bytes());
            match (kind, parsed) {
                (0, Ok(Incoming::Request(r))) => {
                    prop_assert_eq!(&r.id, &id);
                    let name = match &r.method {
                        Method::Unknown(n) => n.clone(),
                        known => known.name().to_owned(),
                    };
                    prop_assert_eq!(name, crate::lines::clip(&method, 64));
                }
                (1, Ok(Incoming::Notification(_))) => {}
                (2, Ok(Incoming::Response(r))) => {
                    prop_assert_eq!(r.id, id);
                    prop_assert!(r.outcome.is_ok());
                }
                (kind, other) => prop_assert!(false, "kind {kind}: {other:?}"),
            }
        }
    }
}
