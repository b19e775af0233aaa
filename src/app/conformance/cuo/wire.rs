//! The rules judged over everything the children wrote: one compact JSON object per line,
//! each request answered once by its id, integer ids and no requests from the child.

use serde_json::Value;

use super::record::{Record, id_number};
use crate::app::conformance::report::Check;

/// `single-line JSON`: every stdout line is one JSON object.
pub(super) fn framing(records: &[Record]) -> Check {
    const NAME: &str = "single-line JSON";
    let mut faults = Vec::new();
    let mut lines = 0;
    for r in records {
        lines += r.garbage.len();
        for g in &r.garbage {
            faults.push(format!(
                "{} wrote {}{}: {}",
                r.label,
                g.why,
                after(g.after.as_deref()),
                g.excerpt
            ));
        }
        for m in &r.messages {
            lines += m.lines;
            if m.lines > 1 {
                faults.push(format!(
                    "{} wrote a message over {} lines{}: {}",
                    r.label,
                    m.lines,
                    after(m.after.as_deref()),
                    Value::Object(m.value.clone())
                ));
            }
        }
    }
    let sent = format!(
        "{} requests",
        records.iter().map(|r| r.sent.len()).sum::<usize>()
    );
    match faults.first() {
        None => Check::pass(
            NAME,
            sent,
            format!("{lines} stdout lines, each one JSON object"),
        ),
        Some(first) => Check::fail(
            NAME,
            sent,
            with_count(first, faults.len()),
            "one compact JSON object per line on stdout, nothing else",
        ),
    }
}

/// `integer ids, no requests`: responses carry integer ids; the child sends no requests
/// and nothing that is neither a response nor a notification.
pub(super) fn ids(records: &[Record]) -> Check {
    const NAME: &str = "integer ids, no requests";
    let mut faults = Vec::new();
    let mut responses = 0;
    for r in records {
        for m in &r.messages {
            let v = &m.value;
            match (v.get("method"), v.get("id")) {
                (Some(_), Some(_)) => faults.push(format!(
                    "{} sent a request{}: {}",
                    r.label,
                    after(m.after.as_deref()),
                    Value::Object(v.clone())
                )),
                (Some(_), None) => {}
                (None, Some(id)) => {
                    responses += 1;
                    if !id.is_u64() {
                        faults.push(format!(
                            "{} answered{} with id {id}",
                            r.label,
                            after(m.after.as_deref())
                        ));
                    }
                }
                (None, None) => faults.push(format!(
                    "{} wrote a message that is neither a response nor a notification: {}",
                    r.label,
                    Value::Object(v.clone())
                )),
            }
        }
    }
    match faults.first() {
        None => Check::pass(
            NAME,
            "integer ids from 1",
            format!("{responses} responses, every id an integer; no requests"),
        ),
        Some(first) => Check::fail(
            NAME,
            "integer ids from 1",
            with_count(first, faults.len()),
            "responses with the request's integer id, never a string or null; no requests",
        ),
    }
}

/// `answers by id`: each request gets exactly one response with its id, carrying
/// exactly one of `result` and `error`.
pub(super) fn answers(records: &[Record]) -> Check {
    const NAME: &str = "answers by id";
    let mut faults = Vec::new();
    let mut requests = 0;
    for r in records {
        let mut counts = vec![0usize; r.sent.len()];
        for m in r
            .messages
            .iter()
            .filter(|m| !m.value.contains_key("method"))
        {
            let v = &m.value;
            if v.contains_key("result") == v.contains_key("error") {
                faults.push(format!(
                    "{} wrote a response with both or neither of result and error: {}",
                    r.label,
                    Value::Object(v.clone())
                ));
            }
            let id = v.get("id").and_then(id_number);
            match id.and_then(|id| r.sent.iter().position(|(sent, _)| *sent == id)) {
                Some(i) => counts[i] += 1,
                None => faults.push(format!(
                    "{} answered a request it was never sent (id {})",
                    r.label,
                    v.get("id").map_or("missing".into(), Value::to_string)
                )),
            }
        }
        for ((id, method), n) in r.sent.iter().zip(counts) {
            requests += 1;
            match n {
                1 => {}
                0 => faults.push(format!("{} never answered {method} (id {id})", r.label)),
                n => faults.push(format!("{} answered {method} (id {id}) {n} times", r.label)),
            }
        }
    }
    let sent = format!("{requests} requests to {} children", records.len());
    match faults.first() {
        None => Check::pass(
            NAME,
            sent,
            "exactly one response per request, matched by id",
        ),
        Some(first) => Check::fail(
            NAME,
            sent,
            with_count(first, faults.len()),
            "exactly one response per request, with its id and one of result or error",
        ),
    }
}

fn after(request: Option<&str>) -> String {
    request.map_or_else(String::new, |m| format!(" after {m}"))
}

fn with_count(first: &str, n: usize) -> String {
    if n > 1 {
        format!("{n} faults, the first: {first}")
    } else {
        first.to_owned()
    }
}
