//! The common frame read in place: one JSON object with each member at most once. Its
//! members are borrowed from the frame as raw JSON and only the ones a method uses become
//! values, so a `ping` builds nothing and a `tools/call` builds only its arguments,
//! where a tree of the whole frame would build every member of every request.
//! `read_in_place` in `frame.rs` turns these members into a message with the tree
//! reader's checks in its order (that half needs the message types, which live there).
//!
//! What it does not take (`None`): bytes that are not UTF-8 or not JSON, a frame that is
//! not an object, a member given twice, `tools/call` params that are not one object with
//! each member once. The tree reader answers for those.
//!
//! One difference, in the liberal direction: members the bridge ignores are skipped, not
//! parsed, so nesting deeper than 128 or a number beyond `f64` in them is not refused, as
//! the tree reader refuses it. Every member the bridge reads is parsed as the tree reader
//! parses it, and one it cannot parse hands the frame back.
//!
//! `frame/tests.rs` holds the two halves to the tree reader: on any frame they take,
//! their answer is the tree reader's (`the_in_place_reader_agrees_with_the_tree_reader`).

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::super::method::CallMembers;

/// The members of an envelope, as sent; `Some` for a member present, even as `null`.
#[derive(Deserialize)]
pub(super) struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) error: Option<&'a RawValue>,
}

/// The members of `tools/call` params the bridge reads.
#[derive(Deserialize)]
struct CallWire {
    #[serde(default, deserialize_with = "present_value")]
    name: Option<Value>,
    #[serde(default, deserialize_with = "present_value")]
    arguments: Option<Value>,
    #[serde(default, deserialize_with = "present_value")]
    task: Option<Value>,
    #[serde(rename = "_meta", default, deserialize_with = "present_value")]
    meta: Option<Value>,
    #[serde(
        rename = "mcp/sampling/elicit_confirm",
        default,
        deserialize_with = "present_value"
    )]
    seed_confirm: Option<Value>,
}

/// A member that is present, `null` included (a plain `Option` reads `null` as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The envelope of `bytes`, or `None` for the tree reader to answer.
pub(super) fn read(bytes: &[u8]) -> Option<Envelope<'_>> {
    let text = std::str::from_utf8(bytes).ok()?;
    // A derived struct would take an array too.
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// `tools/call` params read member by member, with their `_meta` (empty unless an
/// object); `None` when they are not one object with each member once.
pub(super) fn call_members(raw: &RawValue) -> Option<(CallMembers, Map<String, Value>)> {
    if !raw.get().starts_with('{') {
        return None;
    }
    let wire: CallWire = serde_json::from_str(raw.get()).ok()?;
    let meta = match wire.meta {
        Some(Value::Object(meta)) => meta,
        _ => Map::new(),
    };
    let members = CallMembers {
        name: wire.name,
        arguments: wire.arguments,
        task: wire.task,
        seed_confirm: wire.seed_confirm,
    };
    Some((members, meta))
}

/// A member that should be a string: `Some(None)` when it is another value, `None` when
/// it does not parse (the tree reader answers). Borrowed unless it has escapes.
pub(super) fn string(raw: &RawValue) -> Option<Option<Cow<'_, str>>> {
    if let Ok(s) = serde_json::from_str::<&str>(raw.get()) {
        return Some(Some(Cow::Borrowed(s)));
    }
    Some(match value(raw)? {
        Value::String(s) => Some(Cow::Owned(s)),
        _ => None,
    })
}

/// A member as a value; `None` when it does not parse (past the depth limit, a number
/// beyond `f64`): the tree reader answers.
pub(super) fn value(raw: &RawValue) -> Option<Value> {
    serde_json::from_str(raw.get()).ok()
}

pub(super) fn value_or_null(raw: Option<&RawValue>) -> Option<Value> {
    raw.map_or(Some(Value::Null), value)
}
