//! A child's stdout lines turned into messages and garbage, as the checker judges them: a
//! line that is a JSON object is a message; lines that are not are held and joined until
//! they parse as one object (a message written over several lines, which the framing
//! rule then reports), or else reported as garbage. So one badly framed message fails
//! the framing rule alone, and the other rules still see what it said.

use serde_json::{Map, Value};

/// Most bytes of consecutive unparsable lines held while trying to reassemble a message.
const MAX_PENDING: usize = 1024 * 1024;
/// Longest excerpt of a garbage line kept.
const EXCERPT: usize = 80;

/// What one or more lines were.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Frame {
    /// A JSON object written on this many lines (1 when well framed).
    Message(Map<String, Value>, usize),
    /// No JSON object: why, and the (first) line's start.
    Garbage(&'static str, String),
}

const NOT_AN_OBJECT: &str = "a line that is not a JSON object";

/// The reassembler, fed one line at a time.
#[derive(Debug, Default)]
pub(super) struct Frames {
    pending: Vec<String>,
    pending_bytes: usize,
}

fn excerpt(line: &str) -> String {
    crate::domain::text::clip(line, EXCERPT).into_owned()
}

impl Frames {
    /// What the held lines were, when they come to nothing.
    fn flush(&mut self) -> Option<Frame> {
        let first = self.pending.first().map(|l| excerpt(l))?;
        self.pending.clear();
        self.pending_bytes = 0;
        Some(Frame::Garbage(NOT_AN_OBJECT, first))
    }

    /// One line (without its terminator): the frames it completes, in order.
    pub(super) fn line(&mut self, bytes: Vec<u8>) -> Vec<Frame> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let mut out: Vec<Frame> = self.flush().into_iter().collect();
                let shown = excerpt(&String::from_utf8_lossy(e.as_bytes()));
                out.push(Frame::Garbage("a line that is not UTF-8", shown));
                return out;
            }
        };
        if let Ok(Value::Object(m)) = serde_json::from_str(&text) {
            let mut out: Vec<Frame> = self.flush().into_iter().collect();
            out.push(Frame::Message(m, 1));
            return out;
        }
        if self.pending.is_empty() && !text.trim_start().starts_with('{') {
            return vec![Frame::Garbage(NOT_AN_OBJECT, excerpt(&text))];
        }
        self.pending_bytes += text.len();
        self.pending.push(text);
        if let Ok(Value::Object(m)) = serde_json::from_str(&self.pending.join("\n")) {
            let n = self.pending.len();
            self.pending.clear();
            self.pending_bytes = 0;
            return vec![Frame::Message(m, n)];
        }
        if self.pending_bytes > MAX_PENDING {
            return self.flush().into_iter().collect();
        }
        Vec::new()
    }

    /// A line longer than the protocol allows.
    pub(super) fn too_long(&mut self) -> Vec<Frame> {
        let mut out: Vec<Frame> = self.flush().into_iter().collect();
        out.push(Frame::Garbage("a line over 8 MiB", String::new()));
        out
    }

    /// End of output: held lines are garbage.
    pub(super) fn end(&mut self) -> Option<Frame> {
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn feed(lines: &[&str]) -> Vec<Frame> {
        let mut frames = Frames::default();
        let mut out: Vec<Frame> = lines
            .iter()
            .flat_map(|l| frames.line(l.as_bytes().to_vec()))
            .collect();
        out.extend(frames.end());
        out
    }

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_pretty_message_is_reassembled_and_junk_is_garbage() {
        let pretty =
            serde_json::to_string_pretty(&json!({"id": 1, "result": {"a": [1, 2]}})).unwrap();
        let mut lines: Vec<&str> = vec!["log line"];
        lines.extend(pretty.lines());
        lines.push(r#"{"id":2,"result":{}}"#);
        lines.push("{ broken");
        let got = feed(&lines);
        assert_eq!(got[0], Frame::Garbage(NOT_AN_OBJECT, "log line".into()));
        assert_eq!(
            got[1],
            Frame::Message(
                object(json!({"id": 1, "result": {"a": [1, 2]}})),
                pretty.lines().count()
            )
        );
        assert_eq!(
            got[2],
            Frame::Message(object(json!({"id": 2, "result": {}})), 1)
        );
        assert_eq!(got[3], Frame::Garbage(NOT_AN_OBJECT, "{ broken".into()));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn a_line_that_is_json_but_no_object_is_garbage() {
        assert_eq!(feed(&["42"]), [Frame::Garbage(NOT_AN_OBJECT, "42".into())]);
        let mut frames = Frames::default();
        assert!(
            matches!(&frames.line(vec![0xff, b'{'])[..], [Frame::Garbage(why, _)] if why.contains("UTF-8"))
        );
    }

    fn message() -> impl Strategy<Value = Value> {
        (
            any::<u32>(),
            "[a-z ]{0,12}",
            proptest::collection::vec(any::<i16>(), 0..4),
        )
            .prop_map(|(id, text, list)| json!({"id": id, "result": {"text": text, "list": list}}))
    }

    proptest! {
        /// Messages come back whole and in order, however each was written (compact or
        /// pretty), with junk lines between them reported and never swallowing one.
        #[test]
        fn messages_survive_any_framing(
            items in proptest::collection::vec((message(), any::<bool>(), any::<bool>()), 0..8)
        ) {
            let mut lines = Vec::new();
            let mut want = Vec::new();
            for (msg, pretty, junk) in &items {
                if *junk {
                    lines.push("not json at all".to_owned());
                    want.push(Frame::Garbage(NOT_AN_OBJECT, "not json at all".into()));
                }
                let text = if *pretty { serde_json::to_string_pretty(msg).unwrap() } else { msg.to_string() };
                let n = text.lines().count();
                lines.extend(text.lines().map(str::to_owned));
                want.push(Frame::Message(object(msg.clone()), n));
            }
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            prop_assert_eq!(feed(&refs), want);
        }
    }
}
