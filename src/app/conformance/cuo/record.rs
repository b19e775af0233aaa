//! What one child was sent and wrote, as the rules judge it: its messages, the lines that
//! were no JSON object, and how each request was answered.

use std::time::Duration;

use serde_json::{Map, Value};

/// A message the child wrote: a JSON object, on `lines` lines (1 when well framed).
#[derive(Debug, Clone)]
pub(super) struct Message {
    pub(super) value: Map<String, Value>,
    pub(super) lines: usize,
    /// The request last sent before it arrived.
    pub(super) after: Option<String>,
}

/// A line (or run of lines) that was no JSON object.
#[derive(Debug, Clone)]
pub(super) struct Garbage {
    pub(super) why: &'static str,
    pub(super) excerpt: String,
    pub(super) after: Option<String>,
}

/// Everything one child was sent and wrote.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) label: &'static str,
    /// Request ids and methods, in sending order.
    pub(super) sent: Vec<(u64, String)>,
    pub(super) messages: Vec<Message>,
    pub(super) garbage: Vec<Garbage>,
    /// Helpers that left the child's process group and outlived its kill.
    pub(super) escaped: Vec<String>,
}

/// How a request was answered.
#[derive(Debug, Clone)]
pub(super) enum Reply {
    Result(Value),
    Error {
        code: Option<i64>,
        message: String,
    },
    /// A response with both `result` and `error`, or neither.
    Malformed(Value),
    /// Nothing within the wait; `exited` when the child closed its stdout first.
    Silent {
        waited: Duration,
        exited: bool,
    },
}

impl Reply {
    /// What was seen, for a report line.
    pub(super) fn describe(&self) -> String {
        match self {
            Reply::Result(v) => format!("result {v}"),
            Reply::Error { code, message } => match code {
                Some(code) => format!("error {code} {message:?}"),
                None => format!("an error without a code: {message:?}"),
            },
            Reply::Malformed(v) => {
                format!("a response with both or neither of result and error: {v}")
            }
            Reply::Silent { exited: true, .. } => "no answer: the program closed its stdout".into(),
            Reply::Silent { waited, .. } => {
                format!("no answer within {} s", waited.as_secs_f64().ceil())
            }
        }
    }
}

/// A request's answer and the notifications that came before it.
#[derive(Debug, Clone)]
pub(super) struct Answer {
    pub(super) reply: Reply,
    pub(super) notifications: Vec<Value>,
}

/// An id as the checker matches it: an integer, or an integer written as a string (the
/// id rule reports the string).
pub(super) fn id_number(id: &Value) -> Option<u64> {
    match id {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The reply a response message carries.
pub(super) fn reply_of(message: &Map<String, Value>) -> Reply {
    match (message.get("result"), message.get("error")) {
        (Some(result), None) => Reply::Result(result.clone()),
        (None, Some(error)) => Reply::Error {
            code: error.get("code").and_then(Value::as_i64),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        _ => Reply::Malformed(Value::Object(message.clone())),
    }
}
