//! SSE event ids any instance can resume from: a stream that waits for a task (a waiting
//! `tools/call`, a `tasks/result`) names the task, the last progress step the client has,
//! and what is needed to rebuild the rest of the stream, the request's id, which method
//! it answers and its progress token:
//!
//! `<task id>.<seq>.<c|r>.<base64url of the JSON array [request id, progress token]>`
//!
//! `c` answers a `tools/call` (a `CallToolResult`), `r` a `tasks/result`; `seq` 0 is the
//! priming event (no progress yet). Nothing here is secret or trusted: the task must
//! still be the caller's tenant's, and a client that edits the request id or the token
//! only changes what its own stream is labelled with.

use data_encoding::BASE64URL_NOPAD;
use serde_json::{Value, json};

use crate::app::edge::rpc::RequestId;
use crate::domain::TaskId;

/// Longest encoded request id and token: a stream whose request id and progress token
/// are longer gets ids that do not resume (a `Last-Event-ID` header stays small).
const MAX_ORIGIN_CHARS: usize = 512;

/// Which request a resumable stream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Door {
    /// A `tools/call` that waits for its task: ends with the `CallToolResult`.
    Call,
    /// A `tasks/result`: ends with its answer.
    Result,
}

/// What a resumed stream needs besides the task: the request it answers.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Origin {
    pub door: Door,
    pub request: RequestId,
    /// The progress token; without one a stream carries no progress.
    pub token: Option<Value>,
}

/// The id of one event of a resumable stream.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EventId {
    pub task: TaskId,
    /// The last progress step sent (0: none).
    pub seq: u64,
    pub origin: Origin,
}

impl Origin {
    /// The id prefix after `<task id>.<seq>.`: `None` when too long to resume.
    pub(super) fn encode(&self) -> Option<String> {
        let door = match self.door {
            Door::Call => 'c',
            Door::Result => 'r',
        };
        let pair = json!([self.request.to_value(), self.token]).to_string();
        let text = format!("{door}.{}", BASE64URL_NOPAD.encode(pair.as_bytes()));
        (text.len() <= MAX_ORIGIN_CHARS).then_some(text)
    }
}

/// `<task>.<seq>.<origin>` with `origin` from [`Origin::encode`].
pub(super) fn event_id(task: TaskId, seq: u64, origin: &str) -> String {
    format!("{task}.{seq}.{origin}")
}

/// Reads a `Last-Event-ID`; `None` for anything this server did not issue as resumable.
pub(super) fn parse(text: &str) -> Option<EventId> {
    if text.len() > MAX_ORIGIN_CHARS + 64 {
        return None;
    }
    let mut parts = text.split('.');
    let (task, seq, door, pair) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let task = TaskId::parse(task)?;
    // Digits only: `u64::from_str` would also take a leading `+`.
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seq = seq.parse().ok()?;
    let door = match door {
        "c" => Door::Call,
        "r" => Door::Result,
        _ => return None,
    };
    let pair: Value =
        serde_json::from_slice(&BASE64URL_NOPAD.decode(pair.as_bytes()).ok()?).ok()?;
    let [request, token] = pair.as_array()?.as_slice() else {
        return None;
    };
    let token = match token {
        Value::Null => None,
        Value::String(_) | Value::Number(_) => Some(token.clone()),
        _ => return None,
    };
    let origin = Origin {
        door,
        request: RequestId::from_value(request)?,
        token,
    };
    // Only what this server could have issued (an origin it would encode).
    origin.encode()?;
    Some(EventId { task, seq, origin })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> TaskId {
        TaskId::from_random([7; 16])
    }

    #[test]
    fn ids_round_trip_and_name_their_task_and_step() {
        for (door, request, token) in [
            (Door::Call, json!(5), Some(json!("p-1"))),
            (Door::Result, json!("req.with.dots"), Some(json!(42))),
            (Door::Result, json!(-3), None),
        ] {
            let origin = Origin {
                door,
                request: RequestId::from_value(&request).unwrap(),
                token,
            };
            let id = event_id(task(), 3, &origin.encode().unwrap());
            assert!(id.starts_with(&format!("{}.3.", task())), "{id}");
            assert_eq!(
                parse(&id),
                Some(EventId {
                    task: task(),
                    seq: 3,
                    origin
                })
            );
        }
    }

    #[test]
    fn anything_else_is_refused() {
        let origin = Origin {
            door: Door::Call,
            request: RequestId::Int(1),
            token: None,
        }
        .encode()
        .unwrap();
        let good = event_id(task(), 1, &origin);
        assert!(parse(&good).is_some());
        let pair = |v: Value| BASE64URL_NOPAD.encode(v.to_string().as_bytes());
        for bad in [
            String::new(),
            "garbage".into(),
            "0123abcd-1".into(),
            format!("{good}.x"),
            good.replacen(".1.", ".+1.", 1),
            good.replacen(".1.", "..", 1),
            good.replacen(".c.", ".x.", 1),
            format!("t-nope.1.{origin}"),
            format!("{}.1.c.!!", task()),
            format!("{}.1.c.{}", task(), pair(json!([1]))),
            format!("{}.1.c.{}", task(), pair(json!([null, "p"]))),
            format!("{}.1.c.{}", task(), pair(json!([1, {"a": 1}]))),
            format!("{}.99999999999999999999.{origin}", task()),
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn an_origin_too_long_to_resume_is_not_encoded() {
        let origin = Origin {
            door: Door::Call,
            request: RequestId::Str("x".repeat(600)),
            token: None,
        };
        assert_eq!(origin.encode(), None);
        let long = BASE64URL_NOPAD.encode(json!(["x".repeat(400), null]).to_string().as_bytes());
        assert_eq!(parse(&format!("{}.1.c.{long}", task())), None);
    }
}
