//! The shapes of `docs/memory-openapi.yaml` (receipts, entries, pages, error bodies) and
//! the judgements over several answers: order, isolation, what no body may carry.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::http::Exchange;
use crate::app::conformance::report::Check;

/// An `AuditReceipt`.
#[derive(Debug, Clone)]
pub(super) struct Receipt {
    pub(super) audit_id: String,
    pub(super) recorded_at: DateTime<Utc>,
}

fn time(v: &Value, what: &str) -> Result<DateTime<Utc>, String> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| format!("{what} to be an RFC 3339 date-time"))
}

fn audit_id(v: &Value) -> Result<String, String> {
    v.as_str()
        .filter(|s| !s.is_empty() && s.len() <= 128)
        .map(str::to_owned)
        .ok_or_else(|| "audit_id to be a string of 1 to 128 characters".into())
}

/// `{audit_id, recorded_at}`.
pub(super) fn receipt(v: &Value) -> Result<Receipt, String> {
    Ok(Receipt {
        audit_id: audit_id(&v["audit_id"])?,
        recorded_at: time(&v["recorded_at"], "recorded_at")?,
    })
}

fn is_kind(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 128
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
}

/// An `AuditEntry`: the required members with their types and patterns.
fn entry(v: &Value) -> Result<(), String> {
    audit_id(&v["audit_id"])?;
    if !v["kind"].as_str().is_some_and(is_kind) {
        return Err("kind to match ^[a-z][a-z0-9_.]*$".into());
    }
    if !v["actor_id"].is_string() {
        return Err("actor_id to be a string".into());
    }
    if v.get("subject").is_some_and(|s| !s.is_string()) {
        return Err("subject, when present, to be a string".into());
    }
    if !v["body"].is_object() {
        return Err("body to be an object".into());
    }
    time(&v["recorded_at"], "recorded_at")?;
    let trace = v["trace_id"].as_str().unwrap_or_default();
    if trace.len() != 32
        || !trace
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        || trace.bytes().all(|b| b == b'0')
    {
        return Err("trace_id to be 32 lowercase hex digits, not all zero".into());
    }
    Ok(())
}

/// The entry `v` is `appended` as its receipt said.
pub(super) fn same_entry(v: &Value, appended: &Value, receipt: &Receipt) -> Result<(), String> {
    entry(v)?;
    if v["audit_id"] != receipt.audit_id.as_str() {
        return Err(format!("the entry {}", receipt.audit_id));
    }
    for key in ["kind", "actor_id", "body", "trace_id", "subject"] {
        if v.get(key) != appended.get(key) {
            return Err(format!(
                "{key} exactly as appended: {}",
                appended.get(key).unwrap_or(&Value::Null)
            ));
        }
    }
    if time(&v["recorded_at"], "recorded_at")? != receipt.recorded_at {
        return Err("recorded_at as the receipt said".into());
    }
    Ok(())
}

/// A 200 `AuditPage` of at most `limit` entries: the entries and `next_cursor`.
pub(super) fn page(x: &Exchange, limit: usize) -> Result<(Vec<Value>, Option<String>), String> {
    if !x.is(200) {
        return Err("200 with a page".into());
    }
    let page = x.json.as_ref().ok_or("a JSON body")?;
    let entries = page["entries"].as_array().ok_or("entries to be an array")?;
    if entries.len() > limit {
        return Err(format!("at most {limit} entries, not {}", entries.len()));
    }
    for e in entries {
        entry(e).map_err(|want| format!("each entry with {want}"))?;
    }
    let next = match page.get("next_cursor") {
        None => None,
        Some(Value::String(c)) if !c.is_empty() && c.len() <= 512 => Some(c.clone()),
        Some(_) => {
            return Err("next_cursor, when present, to be a string of 1 to 512 characters".into());
        }
    };
    Ok((entries.clone(), next))
}

/// The entries' ids are `ids`, in order.
pub(super) fn ids_are(entries: &[Value], ids: &[String], what: &str) -> Result<(), String> {
    let got: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["audit_id"].as_str())
        .collect();
    if got == ids {
        Ok(())
    } else {
        Err(format!("{what}: {}", ids.join(", ")))
    }
}

/// The last page has no `next_cursor`.
pub(super) fn no_cursor(next: Option<&str>) -> Result<(), String> {
    match next {
        None => Ok(()),
        Some(_) => Err("no next_cursor on the last page".into()),
    }
}

/// `recorded_at` never increases down the page.
pub(super) fn newest_first(entries: &[Value]) -> Result<(), String> {
    let times: Vec<DateTime<Utc>> = entries
        .iter()
        .map(|e| time(&e["recorded_at"], "recorded_at"))
        .collect::<Result<_, _>>()?;
    if times.windows(2).all(|w| w[0] >= w[1]) {
        Ok(())
    } else {
        Err("entries in descending recorded_at".into())
    }
}

/// The answer's status and body with `id` written as `<id>`: what must be the same for a
/// foreign id as for a missing one.
fn as_missing(x: &Exchange, id: &str) -> (Result<u16, String>, String) {
    (x.status.clone(), x.body.replace(id, "<id>"))
}

/// Isolation over `probes` (A's list, A's GET of B's id, B's list, B's GET of A's id),
/// against `unknown` (A's GET of the `ids.0` that exists nowhere): the first probe that
/// breaks it, with what was wanted.
pub(super) fn isolated(
    probes: &[Exchange; 4],
    unknown: &Exchange,
    ids: (&str, &str, &str),
    markers: (&str, &str),
) -> Option<(usize, String)> {
    let (missing, theirs, mine) = ids;
    let (marker_a, marker_b) = markers;
    let lists_only = |x: &Exchange, id: &str, marker: &str| {
        x.is(200) && !x.body.contains(marker) && !x.body.contains(&format!("\"{id}\""))
    };
    if !lists_only(&probes[0], theirs, marker_b) {
        return Some((
            0,
            "a list of the first tenant without the second tenant's entry".into(),
        ));
    }
    let like_missing = as_missing(unknown, missing);
    let foreign = |x: &Exchange, id: &str| {
        !x.status.as_ref().is_ok_and(|s| (200..300).contains(s))
            && as_missing(x, id) == like_missing
    };
    let want_missing = format!("the answer to a missing id ({})", unknown.seen());
    if !foreign(&probes[1], theirs) {
        return Some((1, want_missing));
    }
    let only_theirs = probes[2].is(200)
        && !probes[2].body.contains(marker_a)
        && probes[2]
            .json
            .as_ref()
            .and_then(|p| p["entries"].as_array())
            .is_some_and(|e| e.len() == 1 && e[0]["audit_id"] == theirs);
    if !only_theirs {
        return Some((
            2,
            "a list of the second tenant holding its one entry only".into(),
        ));
    }
    if !foreign(&probes[3], mine) {
        return Some((3, want_missing));
    }
    None
}

/// The strings of a JSON body (its text as the service's reader would see it), or the
/// body itself when it is no JSON.
fn texts(body: &str) -> String {
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push(k.clone());
                collect(v, out);
            }),
            _ => {}
        }
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let mut out = Vec::new();
            collect(&v, &mut out);
            out.join("\n")
        }
        Err(_) => body.to_owned(),
    }
}

/// What an error body shows of the service's insides, if anything: the kinds of text a
/// service keeps to its logs (a password, a credential in a URL, a file path, a stack
/// trace, SQL). Deliberately narrow, so that a plain message is never taken for one.
pub(super) fn internals(body: &str) -> Option<&'static str> {
    const PASSWORDS: [&str; 3] = ["password=", "passwd=", "pwd="];
    const ROOTS: [&str; 8] = [
        "/srv/", "/var/", "/home/", "/etc/", "/usr/", "/opt/", "/root/", "/tmp/",
    ];
    const TRACES: [&str; 6] = [
        "traceback (most recent call last)",
        "panicked at ",
        "stack backtrace",
        "goroutine ",
        "\n\tat ",
        "exception in thread",
    ];
    const SQL: [&str; 4] = [
        "sqlstate",
        "syntax error at or near",
        "insert into ",
        "select * from",
    ];
    let text = texts(body).to_ascii_lowercase();
    let bytes = text.as_bytes();
    // Starts a word: at the start, or after a character that is no letter, digit or `/`.
    let word_at =
        |i: usize| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'/');
    if PASSWORDS.iter().any(|p| text.contains(p)) {
        return Some("a password");
    }
    let userinfo = text.match_indices("://").any(|(i, _)| {
        let rest = &text[i + 3..];
        let end = rest
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(rest.len());
        rest[..end]
            .split_once('@')
            .is_some_and(|(user, _)| user.contains(':'))
    });
    if userinfo {
        return Some("a credential in a URL");
    }
    let unix = ROOTS
        .iter()
        .any(|root| text.match_indices(root).any(|(i, _)| word_at(i)));
    let windows = text
        .match_indices(":\\")
        .any(|(i, _)| i >= 1 && bytes[i - 1].is_ascii_lowercase() && word_at(i - 1));
    if unix || windows {
        return Some("a file path");
    }
    if TRACES.iter().any(|t| text.contains(t)) {
        return Some("a stack trace");
    }
    if SQL.iter().any(|q| text.contains(q)) {
        return Some("SQL");
    }
    None
}

/// `error bodies`: every error answer is JSON `{error, message?}` (a 404's body may be
/// anything: the bridge does not read it) that shows nothing of the service's insides; no
/// answer carries one of `secrets` (the credentials the checker presented) or, for one
/// tenant, the other tenant's marker.
pub(super) fn error_bodies(
    exchanges: &[Exchange],
    secrets: &[String],
    a: (&str, &str),
    b: (&str, &str),
) -> Check {
    const NAME: &str = "error bodies";
    let mut errors = 0;
    let mut faults: Vec<(String, String, &'static str)> = Vec::new();
    let redacted = |x: &Exchange| {
        let mut seen = x.seen();
        for s in secrets.iter().filter(|s| !s.is_empty()) {
            seen = seen.replace(s.as_str(), "<a credential>");
        }
        seen
    };
    for x in exchanges {
        let status = x.status.as_ref().copied().unwrap_or(0);
        let text = format!("{}\n{}", x.headers, x.body);
        if secrets
            .iter()
            .any(|s| !s.is_empty() && text.contains(s.as_str()))
        {
            faults.push((
                x.request.clone(),
                redacted(x),
                "no answer that carries a credential the checker presented",
            ));
        }
        if status < 400 {
            continue;
        }
        errors += 1;
        let shaped = x.json.as_ref().is_some_and(|v| {
            v["error"].is_string() && v.get("message").is_none_or(Value::is_string)
        });
        let unread = status == 404 && x.json.is_none();
        if !(shaped || unread) {
            faults.push((
                x.request.clone(),
                redacted(x),
                "error bodies of the form {\"error\": code, \"message\"?: text}",
            ));
        }
        if let Some(what) = internals(&x.body) {
            faults.push((x.request.clone(), format!("{what} in {}", redacted(x)), "error bodies that keep the service's insides (paths, passwords, traces, SQL) to its logs"));
        }
        for (tenant, other_marker) in [a, b] {
            if x.tenant.as_deref() == Some(tenant) && x.body.contains(other_marker) {
                faults.push((
                    x.request.clone(),
                    redacted(x),
                    "no error body that shows another tenant's data",
                ));
            }
        }
    }
    let sent = format!("{} requests", exchanges.len());
    match faults.first() {
        None => Check::pass(
            NAME,
            sent,
            format!(
                "{errors} error answers, each {{error, message?}} showing no internals; no credential or other tenant's data in any answer"
            ),
        ),
        Some((request, seen, want)) => {
            let more = if faults.len() > 1 {
                format!("{} faults, the first: ", faults.len())
            } else {
                String::new()
            };
            Check::fail(NAME, sent, format!("{more}{request}: {seen}"), *want)
        }
    }
}

#[cfg(test)]
mod tests;
