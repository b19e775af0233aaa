//! One probe's request and its judgement: the `ctx` every request carries, how a request
//! is shown in the report, and the checks of a result or of a refusal.

use serde_json::{Value, json};

use super::record::{Answer, Reply};
use crate::app::conformance::report::{self, Check};

/// The `ctx` of every request, as the bridge's `check` sends it.
pub(super) fn ctx() -> Value {
    json!({
        "tenant_id": "00000000-0000-4000-8000-000000000000",
        "actor_id": "cyberos-mcp-bridge check-cuo",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    })
}

/// `params` with `ctx` added.
pub(super) fn with_ctx(mut params: Value) -> Value {
    params["ctx"] = ctx();
    params
}

/// A request for a report line: the method and its params without `ctx`, a run's
/// `deadline` (a line that matters says how far off it was) or a skill's description.
pub(super) fn describe(method: &str, params: &Value) -> String {
    let mut shown = params.clone();
    if let Some(obj) = shown.as_object_mut() {
        obj.remove("ctx");
        obj.remove("deadline");
        if let Some(skill) = obj.get_mut("skill").and_then(Value::as_object_mut) {
            skill.remove("description");
        }
        if obj.is_empty() {
            return method.to_owned();
        }
    }
    report::clip(&format!("{method} {shown}"))
}

/// A probe that must answer a result: `judge` says what it held or what it lacked.
pub(super) fn result_check<T>(
    name: &'static str,
    sent: String,
    answer: &Answer,
    judge: impl FnOnce(&Value) -> Result<(T, String), String>,
) -> (Check, Option<T>) {
    match &answer.reply {
        Reply::Result(result) => match judge(result) {
            Ok((value, seen)) => (Check::pass(name, sent, seen), Some(value)),
            Err(want) => (Check::fail(name, sent, answer.reply.describe(), want), None),
        },
        other => (Check::fail(name, sent, other.describe(), "a result"), None),
    }
}

/// A probe that must be refused with `code` and a message that passes `message_ok`.
pub(super) fn error_check(
    name: &'static str,
    sent: String,
    answer: &Answer,
    code: i64,
    message_ok: impl FnOnce(&str) -> Option<String>,
) -> Check {
    let seen = answer.reply.describe();
    match &answer.reply {
        Reply::Error {
            code: Some(c),
            message,
        } if *c == code => {
            if message.trim().is_empty() {
                return Check::fail(name, sent, seen, format!("error {code} with a message"));
            }
            Check::verdict(name, sent, seen, message_ok(message))
        }
        _ => Check::fail(name, sent, seen, format!("error {code}")),
    }
}
