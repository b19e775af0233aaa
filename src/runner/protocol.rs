//! The CUO wire protocol: JSON-RPC 2.0, one compact JSON message per line (framing is
//! `crate::support::ndjson`). This file classifies incoming messages, writes frames, and holds the
//! error codes and the small param-reading helpers every method shares.

use serde_json::{Map, Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Longest accepted line, newline excluded.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC internal error: a bug in the runner.
pub const INTERNAL_ERROR: i64 = -32603;
/// A skill entrypoint failed.
pub const ENTRYPOINT_FAILED: i64 = -32000;
/// The request's deadline passed.
pub const DEADLINE_EXCEEDED: i64 = -32001;

/// Longest piece of client input echoed in an error message.
pub const ECHO_MAX: usize = 64;

/// An error reply: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code.
    pub code: i64,
    /// Short, lowercase, no trailing period.
    pub message: String,
    /// Machine-readable details, e.g. `{"pointer": "/x"}`.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// A -32602 error.
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    /// The -32001 error.
    pub fn deadline() -> RpcError {
        RpcError::new(DEADLINE_EXCEEDED, "deadline exceeded")
    }

    /// A -32603 error: the runner itself is at fault.
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(obj)) = (&self.data, error.as_object_mut()) {
            obj.insert("data".into(), data.clone());
        }
        error
    }
}

/// An incoming message, classified.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// Needs a reply with this id.
    Request {
        /// The id, echoed in the reply.
        id: Value,
        /// The method.
        method: String,
        /// `params`, `Null` when absent.
        params: Value,
    },
    /// A notification or a stray response: nothing to answer.
    Ignored(String),
}

/// Classifies one line. `Err` is the error reply to send, without an id when none could
/// be read.
pub fn parse(line: &[u8]) -> Result<Incoming, (Option<Value>, RpcError)> {
    let value: Value = serde_json::from_slice(line).map_err(|_| {
        (
            None,
            RpcError::new(PARSE_ERROR, "parse error: the line is not valid json"),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err((
            None,
            RpcError::new(
                INVALID_REQUEST,
                "invalid request: a message must be a json object",
            ),
        ));
    };
    let id = match obj.remove("id") {
        None => None,
        Some(id @ Value::String(_)) => Some(id),
        Some(id @ Value::Number(_)) if id.is_i64() || id.is_u64() => Some(id),
        Some(_) => {
            let message = "invalid request: id must be an integer or a string";
            return Err((None, RpcError::new(INVALID_REQUEST, message)));
        }
    };
    let invalid = |id: Option<Value>, message: &str| (id, RpcError::new(INVALID_REQUEST, message));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "invalid request: jsonrpc must be \"2.0\""));
    }
    let params = obj.remove("params").unwrap_or(Value::Null);
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Ignored(format!(
            "notification {}",
            clip(&method, ECHO_MAX)
        ))),
        (Some(_), id) => Err(invalid(id, "invalid request: method must be a string")),
        (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => Ok(
            Incoming::Ignored("response to a request the runner never sent".into()),
        ),
        (None, id) => Err(invalid(id, "invalid request: method is missing")),
    }
}

/// Writes frames to the peer, one line each, flushed at once.
pub struct Out<W> {
    writer: W,
}

impl<W: AsyncWrite + Unpin> Out<W> {
    /// Wraps the peer's stdout.
    pub fn new(writer: W) -> Out<W> {
        Out { writer }
    }

    /// A success reply.
    ///
    /// # Errors
    /// When the peer is gone.
    pub async fn result(&mut self, id: &Value, result: Value) -> std::io::Result<()> {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }))
            .await
    }

    /// An error reply; without an id when the request's could not be read.
    ///
    /// # Errors
    /// When the peer is gone.
    pub async fn error(&mut self, id: Option<&Value>, error: &RpcError) -> std::io::Result<()> {
        let mut frame = json!({ "jsonrpc": "2.0", "error": error.to_json() });
        if let (Some(id), Some(obj)) = (id, frame.as_object_mut()) {
            obj.insert("id".into(), id.clone());
        }
        self.send(&frame).await
    }

    /// A `progress` notification.
    ///
    /// # Errors
    /// When the peer is gone.
    pub async fn progress(
        &mut self,
        step: usize,
        total: usize,
        message: &str,
    ) -> std::io::Result<()> {
        let params = json!({ "step": step, "total": total, "message": message });
        self.send(&json!({ "jsonrpc": "2.0", "method": "progress", "params": params }))
            .await
    }

    async fn send(&mut self, frame: &Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(frame)?;
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await?;
        self.writer.flush().await
    }
}

/// The caller identity every request carries; logged, never interpreted.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Tenant id.
    pub tenant_id: String,
    /// Actor id.
    pub actor_id: String,
    /// W3C traceparent.
    pub traceparent: String,
}

/// Reads `params` as an object and its `ctx`.
///
/// # Errors
/// -32602 when `params` is not an object or `ctx` lacks one of its string members.
pub fn params_and_ctx(params: &Value) -> Result<(&Map<String, Value>, Ctx), RpcError> {
    let Some(params) = params.as_object() else {
        return Err(RpcError::invalid_params(
            "params must be an object with ctx",
        ));
    };
    let ctx = params.get("ctx").and_then(Value::as_object);
    let field = |name: &str| -> Option<String> {
        ctx.and_then(|c| c.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (field("tenant_id"), field("actor_id"), field("traceparent")) {
        (Some(tenant_id), Some(actor_id), Some(traceparent)) => Ok((
            params,
            Ctx {
                tenant_id,
                actor_id,
                traceparent,
            },
        )),
        _ => Err(RpcError::invalid_params(
            "params.ctx must be an object with string tenant_id, actor_id and traceparent",
        )),
    }
}

/// A required string param.
///
/// # Errors
/// -32602 naming the param.
pub fn required_str<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, RpcError> {
    params
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("params.{name} must be a string")))
}

/// A required object param.
///
/// # Errors
/// -32602 naming the param.
pub fn required_object<'a>(
    params: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a Map<String, Value>, RpcError> {
    params
        .get(name)
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid_params(format!("params.{name} must be an object")))
}

/// At most `max` bytes of `s`, cut on a character boundary, with control characters
/// replaced so echoed input cannot fake log lines.
pub fn clip(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end]
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Why a request produced no result.
#[derive(Debug)]
pub enum Failure {
    /// Answer with this error.
    Rpc(RpcError),
    /// Writing to the peer failed: it is gone.
    Io(std::io::Error),
    /// Stdin closed while the run was only pacing: drop it and exit.
    Abandoned,
}

impl From<RpcError> for Failure {
    fn from(e: RpcError) -> Failure {
        Failure::Rpc(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(line: &str) -> i64 {
        match parse(line.as_bytes()) {
            Ok(_) => 0,
            Err((_, e)) => e.code,
        }
    }

    #[test]
    fn malformed_and_odd_messages_get_the_right_codes() {
        assert_eq!(code_of("{"), PARSE_ERROR);
        assert_eq!(code_of("\u{0}"), PARSE_ERROR);
        assert_eq!(code_of("[]"), INVALID_REQUEST);
        assert_eq!(code_of("42"), INVALID_REQUEST);
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            INVALID_REQUEST
        );
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","method":"n"}"#), 0);
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#), 0);
    }

    #[test]
    fn a_request_keeps_its_id_and_params() {
        let parsed = parse(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a":1}}"#);
        assert_eq!(
            parsed,
            Ok(Incoming::Request {
                id: json!(7),
                method: "m".into(),
                params: json!({"a": 1})
            })
        );
    }

    #[test]
    fn ctx_needs_all_three_strings() {
        let ok = json!({"ctx": {"tenant_id": "t", "actor_id": "a", "traceparent": "p"}});
        assert!(params_and_ctx(&ok).is_ok());
        for bad in [
            json!(null),
            json!([]),
            json!({}),
            json!({"ctx": "x"}),
            json!({"ctx": {"tenant_id": "t", "actor_id": 1, "traceparent": "p"}}),
        ] {
            let err = params_and_ctx(&bad).err().map(|e| e.code);
            assert_eq!(err, Some(INVALID_PARAMS), "{bad}");
        }
    }

    #[test]
    fn clipping_respects_character_boundaries_and_hides_control_characters() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("a\nb", 10), "a?b");
        assert_eq!(clip("short", 64), "short");
    }

    #[tokio::test]
    async fn frames_are_compact_single_lines() {
        let mut buf = Vec::new();
        let mut out = Out::new(&mut buf);
        out.result(&json!(1), json!({"a": "x\ny"}))
            .await
            .expect("write");
        out.error(None, &RpcError::new(PARSE_ERROR, "p"))
            .await
            .expect("write");
        out.progress(1, 2, "s").await.expect("write");
        let text = String::from_utf8(buf).expect("utf-8");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is one json value"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert!(!text.contains(": ") && !text.contains(", "));
        assert_eq!(
            lines[0],
            json!({"jsonrpc": "2.0", "id": 1, "result": {"a": "x\ny"}})
        );
        assert!(lines[1].get("id").is_none());
        let progress = json!({"step": 1, "total": 2, "message": "s"});
        assert_eq!(
            lines[2],
            json!({"jsonrpc": "2.0", "method": "progress", "params": progress})
        );
    }
}
