//! JSON-RPC 2.0 frames for MCP: reading one incoming frame (its method parsed into a
//! [`Method`] once, here) and writing response and notification frames.
//!
//! Liberal in, strict out: unknown members are ignored on input; every frame we build
//! follows the 2025-11-25 schema (an error's `id` is omitted, never null, when the
//! request's id could not be read).

use serde_json::{Map, Value, json};

use super::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use super::id::RequestId;
use super::method::{CallParams, Method, Notice};
use crate::app::service::output::ToolOutput;

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
///
/// A frame is read in place first (`envelope`: its members borrowed, no tree built);
/// whatever that reader does not take (a frame that is not one object with each member
/// once, or not JSON at all) is read as a tree, which has the last word on odd frames.
pub fn parse_frame(bytes: &[u8]) -> Result<Incoming, FrameError> {
    read_in_place(bytes).unwrap_or_else(|| parse_tree(bytes))
}

/// Reads a frame from its borrowed envelope, with the tree reader's checks in its order
/// (id, version, method); `None` hands the frame to the tree reader.
fn read_in_place(bytes: &[u8]) -> Option<Result<Incoming, FrameError>> {
    let envelope = envelope::read(bytes)?;
    let invalid = |message, id: Option<RequestId>| {
        Some(Err(FrameError {
            code: INVALID_REQUEST,
            message,
            id,
        }))
    };
    let id = match envelope.id {
        None => None,
        Some(raw) => match RequestId::from_value(&envelope::value(raw)?) {
            Some(id) => Some(id),
            None => return invalid("invalid request: id must be a string or an integer", None),
        },
    };
    let version = match envelope.jsonrpc {
        Some(raw) => envelope::string(raw)?.is_some_and(|v| v == "2.0"),
        None => false,
    };
    if !version {
        return invalid("invalid request: jsonrpc must be \"2.0\"", id);
    }
    let Some(method) = envelope.method else {
        let Some(id) = id else {
            return invalid(
                "invalid request: a message needs a method, or an id and a result",
                None,
            );
        };
        let outcome = match (envelope.result, envelope.error) {
            (Some(r), None) => Ok(envelope::value(r)?),
            (None, Some(e)) => Err(envelope::value(e)?),
            _ => {
                return invalid(
                    "invalid request: a response needs exactly one of result and error",
                    Some(id),
                );
            }
        };
        return Some(Ok(Incoming::Response(PeerResponse { id, outcome })));
    };
    let Some(name) = envelope::string(method)? else {
        return invalid("invalid request: method must be a string", id);
    };
    Some(Ok(match (id, envelope.params) {
        (Some(id), Some(params)) if name == "tools/call" => {
            let (members, meta) = envelope::call_members(params)?;
            let trace = TraceMeta::of(&meta);
            let method = Method::ToolsCall(CallParams::from_members(members, meta));
            Incoming::Request(Request { id, method, trace })
        }
        (Some(id), params) => {
            Incoming::Request(Request::new(id, &name, &envelope::value_or_null(params)?))
        }
        (None, params) => {
            Incoming::Notification(Notice::parse(&name, &envelope::value_or_null(params)?))
        }
    }))
}

/// The refusal of a frame that is not JSON.
const NOT_JSON: FrameError = FrameError {
    code: PARSE_ERROR,
    message: "parse error: the message is not valid JSON",
    id: None,
};

/// Reads a frame as a `Value` tree: the general reader.
fn parse_tree(bytes: &[u8]) -> Result<Incoming, FrameError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| NOT_JSON)?;
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
    let trace = TraceMeta::of(&meta);
    (Method::parse(name, params, meta), trace)
}

impl TraceMeta {
    /// The trace members of a request's `_meta`.
    fn of(meta: &Map<String, Value>) -> TraceMeta {
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
        TraceMeta {
            traceparent: text("traceparent"),
            tracestate: text("tracestate"),
        }
    }
}

/// A method's result: a value, JSON text serialized once and shared (`tools/list`), or a
/// tool's output, written into the frame as its `CallToolResult`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Serialized per response.
    Json(Value),
    /// Already serialized, shared between responses.
    Raw(std::sync::Arc<str>),
    /// A tool's output.
    Tool(ToolOutput),
}

impl From<Value> for Reply {
    fn from(v: Value) -> Reply {
        Reply::Json(v)
    }
}

/// A success response frame, serialized (one line, no trailing newline).
pub fn success(id: &RequestId, result: &Reply) -> String {
    match result {
        // Serialized straight into the frame: `format!` with a `Value` goes through its
        // `Display`, piece by piece, at about three times the instructions.
        Reply::Json(result) => {
            let frame = Success {
                jsonrpc: "2.0",
                id,
                result,
            };
            serde_json::to_string(&frame).unwrap_or_else(|_| {
                let id = id.to_value();
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
            })
        }
        // A result serialized before: copied behind the envelope.
        Reply::Raw(text) => raw_success(id, text.len(), |frame| frame.push_str(text)),
        Reply::Tool(output) => raw_success(id, output.json().len() * 2, |frame| {
            call_tool_result(output, frame)
        }),
    }
}

/// Appends the `CallToolResult` of a successful output: the structured content, and the
/// same JSON as the text for clients that read only `content`.
fn call_tool_result(output: &ToolOutput, out: &mut String) {
    out.reserve(output.json().len() + output.escaped().len() + 96);
    out.push_str(r#"{"content":[{"type":"text","text":""#);
    out.push_str(output.escaped());
    out.push_str(r#""}],"structuredContent":"#);
    out.push_str(output.json());
    out.push_str(r#","isError":false}"#);
}

/// A success frame around a result written by `write` (about `len` bytes).
fn raw_success(id: &RequestId, len: usize, write: impl FnOnce(&mut String)) -> String {
    let mut frame = String::with_capacity(len + 160);
    frame.push_str(r#"{"jsonrpc":"2.0","id":"#);
    id.write_json(&mut frame);
    frame.push_str(r#","result":"#);
    write(&mut frame);
    frame.push('}');
    frame
}

/// A success frame, in the order MCP examples write it.
#[derive(serde::Serialize)]
struct Success<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a Value,
}

/// An error response frame, serialized; `id` is omitted when unknown.
pub fn failure(id: Option<&RequestId>, err: &RpcError) -> String {
    let mut frame = Map::with_capacity(3);
    frame.insert("jsonrpc".into(), "2.0".into());
    if let Some(id) = id {
        frame.insert("id".into(), id.to_value());
    }
    frame.insert("error".into(), err.to_value());
    text_of(&Value::Object(frame))
}

/// A notification frame, serialized.
pub fn notification(method: &str, params: Value) -> String {
    text_of(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))
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

mod envelope;
#[cfg(test)]
mod tests;
