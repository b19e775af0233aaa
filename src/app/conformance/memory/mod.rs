//! `check-memory`: the contract of `docs/memory-openapi.yaml` checked against a memory
//! service. Under a fresh random tenant it appends a few entries and reads them back
//! (one, a list, pages, filters), provokes the documented 400, 404 and 401 answers, then
//! writes under a second fresh tenant and checks that neither sees the other. Every body
//! the service answered is kept, so the error-body rule can judge them all at the end.

mod http;
mod log;
mod refusals;
mod shapes;

use serde_json::{Value, json};

use crate::app::conformance::report::{Check, Report};
use http::{Exchange, Service};
use shapes::Receipt;

/// The contract's rules, in the order they are checked.
const RULES: [&str; 16] = [
    "health",
    "append",
    "idempotent repeat",
    "read one",
    "list newest first",
    "pagination",
    "kind filter",
    "since filter",
    "invalid cursor",
    "400 without Idempotency-Key",
    "400 for a bad kind",
    "400 for a bad limit",
    "404 unknown id",
    "401 bad credential",
    "tenant isolation",
    "error bodies",
];

/// What `check-memory` talks to.
#[derive(Debug, Clone)]
pub struct MemoryCheckOptions {
    /// `--memory-url`.
    pub url: String,
    /// The contents of `--memory-token-file`, trimmed, when given.
    pub token: Option<String>,
}

/// Runs the checklist.
pub async fn check_memory(options: &MemoryCheckOptions) -> Report {
    let svc = match Service::new(&options.url, options.token.clone()) {
        Ok(svc) => svc,
        Err(why) => {
            return Report {
                subject: "check-memory",
                checks: vec![Check::fail("start", "nothing", why, "an http(s) base URL")],
            };
        }
    };
    let mut c = Checklist {
        svc,
        checks: Vec::new(),
        a: random_tenant(),
        b: random_tenant(),
        marker_a: format!("cyberos-check-{}", hex::<8>()),
        marker_b: format!("cyberos-check-{}", hex::<8>()),
        wrong_token: format!("cyberos-check-wrong-{}", hex::<16>()),
    };
    c.run().await;
    let mut checks = Vec::new();
    for name in RULES {
        match c.checks.iter().position(|k| k.name == name) {
            Some(i) => checks.push(c.checks.swap_remove(i)),
            None => checks.push(Check::fail(
                name,
                "nothing",
                "nothing",
                "not checked: the entries the append check should have written",
            )),
        }
    }
    Report {
        subject: "check-memory",
        checks,
    }
}

fn hex<const N: usize>() -> String {
    crate::support::random::random_bytes::<N>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A random tenant UUID, lowercase and hyphenated.
fn random_tenant() -> String {
    uuid::Builder::from_random_bytes(crate::support::random::random_bytes::<16>())
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// An RFC 3339 instant as UTC milliseconds, the way the bridge sends `since`.
fn as_since(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

struct Checklist {
    svc: Service,
    checks: Vec<Check>,
    a: String,
    b: String,
    marker_a: String,
    marker_b: String,
    wrong_token: String,
}

/// What was appended and what the service answered.
struct Appended {
    entry: Value,
    receipt: Receipt,
    key: String,
}

impl Checklist {
    fn set(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// What came back, with the credential never shown.
    fn seen(&self, x: &Exchange) -> String {
        self.redact(&x.seen())
    }

    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        if let Some(token) = self.svc_token() {
            text = text.replace(&token, "<the --memory-token-file token>");
        }
        text
    }

    fn svc_token(&self) -> Option<String> {
        self.svc
            .token()
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    }

    fn entry(&self, kind: &str, subject: Option<&str>, n: u64, marker: &str) -> Value {
        let mut entry = json!({
            "kind": kind,
            "body": {"n": n, "marker": marker, "nested": {"list": [n, "x"]}},
            "actor_id": "cyberos-mcp-bridge check-memory",
            "trace_id": hex::<16>(),
        });
        if let Some(s) = subject {
            entry["subject"] = json!(s);
        }
        entry
    }

    async fn run(&mut self) {
        let health = self.svc.health().await;
        let ok = health.status.as_ref().is_ok_and(|s| (200..300).contains(s))
            && (health.is(204) || health.json.is_some());
        let check = Check::verdict(
            "health",
            "GET /v1/health",
            self.seen(&health),
            (!ok).then(|| "a 2xx with a JSON body, or 204".to_owned()),
        );
        self.set(check);

        let Some(appended) = self.append().await else {
            return;
        };
        self.repeat(&appended[0]).await;
        self.read_one(&appended).await;
        self.lists(&appended).await;
        self.refusals().await;
        self.credential().await;
        self.isolation(&appended).await;
        let check = shapes::error_bodies(
            &self.svc.exchanges,
            &[
                self.svc_token().unwrap_or_default(),
                self.wrong_token.clone(),
            ],
            (&self.a, &self.marker_b),
            (&self.b, &self.marker_a),
        );
        self.set(check);
    }
}
