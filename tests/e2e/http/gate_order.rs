//! The order of the checks on `POST /mcp` (src/app/http/mcp.rs), in-process through
//! `ServiceExt::oneshot`: Origin/Host (403) → `MCP-Protocol-Version` (400) → `Content-Type`
//! (415) and `Accept` (406) → bearer token (401) → in-flight slots (503) → body size
//! (413), byte budget (503) and shape (400) → per-tenant rate (429) → the method (403 for
//! a missing scope). The token comes before the slots and the body (#14 item 5): an
//! unauthenticated request must hold no slot and buffer no body.
//!
//! Every check has a spoiler that makes an otherwise good request fail it. Each spoiler
//! is sent alone (so a pair proves that both checks really fire), then together with a
//! spoiler of a later step: the earlier step's status, code, class and message win.
//! Checks of the same step (Origin and Host; Content-Type and Accept; size, budget and
//! shape) are not ordered against each other. Every refusal is a JSON-RPC error frame with the
//! contract's envelope, checked against the MCP schema.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use cyberos_mcp_bridge::app::edge::http::Routes;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use cyberos_mcp_bridge::adapters::unavailable::Unavailable;
use cyberos_mcp_bridge::app::edge::http::{HttpSettings, Limits, OriginPolicy, Rate, router};
use cyberos_mcp_bridge::app::service::identity::{Identity, StdioToken};
use cyberos_mcp_bridge::app::{App, Settings};
use cyberos_mcp_bridge::domain::{Timestamp, Upstream};
use cyberos_mcp_bridge::ports::Ports;

use crate::support::assert_envelope;
use crate::support::fakes::{
    Behaviour, FixedClock, InMemoryAudit, InMemoryLedger, ScriptedCuo, StaticSkills, StaticTokens,
};
use crate::support::schema::check_frame;

/// The transport's body limit (`mcp::MAX_BODY`, CONTRACT §10).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A POST to `/mcp`, good unless spoiled: a `tools/call` of a read tool with every
/// header right and the `full` token.
#[derive(Debug, Clone)]
struct Post {
    origin: Option<&'static str>,
    host: Option<&'static str>,
    version: &'static str,
    content_type: &'static str,
    accept: &'static str,
    token: Option<&'static str>,
    /// Call `append_audit` (scope `memory:write`) instead of `list_personas`.
    write_tool: bool,
    /// Pad the body past the limit with trailing whitespace (still valid JSON).
    oversized: bool,
    /// Send the message inside a batch array.
    batch: bool,
    /// The tenant's `tools/call` bucket is empty.
    exhausted: bool,
    /// The router has no in-flight slots.
    no_slots: bool,
    /// The router has no body budget.
    no_budget: bool,
}

impl Post {
    fn good() -> Post {
        Post {
            origin: None,
            host: None,
            version: "2025-11-25",
            content_type: "application/json",
            accept: "application/json, text/event-stream",
            token: Some("full"),
            write_tool: false,
            oversized: false,
            batch: false,
            exhausted: false,
            no_slots: false,
            no_budget: false,
        }
    }

    fn body(&self) -> String {
        let params = if self.write_tool {
            json!({"name": "cyberos.memory.append_audit",
                   "arguments": {"kind": "decision", "body": {}}})
        } else {
            json!({"name": "cyberos.cuo.list_personas", "arguments": {}})
        };
        let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let mut body = if self.batch {
            format!("[{msg}]")
        } else {
            msg.to_string()
        };
        if self.oversized {
            body.push_str(&" ".repeat(MAX_BODY));
        }
        body
    }

    fn request(&self) -> Request<Body> {
        let body = self.body();
        let mut req = Request::post("/mcp")
            .header("content-type", self.content_type)
            .header("accept", self.accept)
            .header("mcp-protocol-version", self.version)
            .header("content-length", body.len());
        if let Some(origin) = self.origin {
            req = req.header("origin", origin);
        }
        if let Some(host) = self.host {
            req = req.header("host", host);
        }
        if let Some(token) = self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        req.body(Body::from(body)).unwrap()
    }
}

/// One check: its step in the documented order, how to fail it, and the refusal.
struct Check {
    name: &'static str,
    step: u8,
    spoil: fn(&mut Post),
    status: u16,
    code: i64,
    class: &'static str,
    message: &'static str,
}

const ORIGIN: usize = 0;
const HOST: usize = 1;
const VERSION: usize = 2;
const CONTENT_TYPE: usize = 3;
const ACCEPT: usize = 4;
const TOKEN: usize = 5;
const SLOTS: usize = 6;
const SIZE: usize = 7;
const BUDGET: usize = 8;
const SHAPE: usize = 9;
const RATE: usize = 10;
const SCOPE: usize = 11;

#[rustfmt::skip]
const CHECKS: [Check; 12] = [
    Check { name: "origin", step: 0, spoil: |p| p.origin = Some("https://evil.example"),
            status: 403, code: -32600, class: "input_validation", message: "origin not allowed" },
    Check { name: "host", step: 0, spoil: |p| p.host = Some("attacker.example:3000"),
            status: 403, code: -32600, class: "input_validation", message: "host not allowed" },
    Check { name: "protocol version", step: 1, spoil: |p| p.version = "2024-11-05",
            status: 400, code: -32600, class: "input_validation", message: "MCP-Protocol-Version" },
    Check { name: "content type", step: 2, spoil: |p| p.content_type = "text/plain",
            status: 415, code: -32600, class: "input_validation", message: "media type" },
    Check { name: "accept", step: 2, spoil: |p| p.accept = "text/html",
            status: 406, code: -32600, class: "input_validation", message: "not acceptable" },
    Check { name: "token", step: 3, spoil: |p| p.token = None,
            status: 401, code: -32000, class: "authz_denied", message: "authentication required" },
    Check { name: "in-flight slots", step: 4, spoil: |p| p.no_slots = true,
            status: 503, code: -32050, class: "upstream_unavailable", message: "the bridge is overloaded" },
    Check { name: "body size", step: 5, spoil: |p| p.oversized = true,
            status: 413, code: -32600, class: "input_validation", message: "4 MiB" },
    Check { name: "body budget", step: 5, spoil: |p| p.no_budget = true,
            status: 503, code: -32050, class: "upstream_unavailable", message: "request bodies" },
    Check { name: "body shape", step: 5, spoil: |p| p.batch = true,
            status: 400, code: -32600, class: "input_validation", message: "batches" },
    Check { name: "rate", step: 6, spoil: |p| p.exhausted = true,
            status: 429, code: -32050, class: "upstream_unavailable", message: "rate limited" },
    Check { name: "scope", step: 7, spoil: |p| { p.token = Some("read-only"); p.write_tool = true },
            status: 403, code: -32000, class: "authz_denied", message: "memory:write" },
];

/// The router over fakes, on a loopback bind, with the limits `post` asks for: a bucket
/// that starts with half a call (so is empty) and refills one in 1000 s, no in-flight
/// slots, no body budget.
fn app(post: &Post) -> Routes {
    let ports = Ports {
        tasks: Arc::new(Unavailable::new(Upstream::TaskStore, "no task store here")),
        cuo: Arc::new(ScriptedCuo),
        memory: Arc::new(InMemoryAudit::default()),
        skills: Arc::new(StaticSkills::new(Behaviour::Answer)),
        clock: Arc::new(FixedClock(Timestamp::from_unix_millis(0))),
        ledger: Arc::new(InMemoryLedger::default()),
        answers: Arc::new(Unavailable::new(Upstream::TaskStore, "no task store here")),
        approvals: Arc::new(Unavailable::new(Upstream::TaskStore, "no task store here")),
    };
    let identity = Identity::new(Arc::new(StaticTokens), StdioToken::None);
    let app = App::new(ports, Settings::default(), identity);
    let settings = HttpSettings {
        public_url: "http://127.0.0.1:3000/mcp".into(),
        policy: OriginPolicy {
            loopback: true,
            public_origin: "http://127.0.0.1:3000".into(),
            cors: vec![],
        },
        authorization_servers: vec![],
        limits: Limits {
            max_connections: 64,
            max_inflight: if post.no_slots { 0 } else { 64 },
            body_budget: if post.no_budget { 0 } else { 64 * 1024 * 1024 },
            max_waits: 64,
            max_waits_per_tenant: 64,
            call_rate: Some(Rate {
                per_second: 0.001,
                burst: if post.exhausted { 0.5 } else { 1.0 },
            }),
            request_timeout: Duration::from_secs(30),
        },
        sessions: cyberos_mcp_bridge::app::edge::http::SessionKey::new(&[7; 32]),
        approval_trust: cyberos_mcp_bridge::app::edge::http::PageTrust::None,
    };
    router(app, settings, CancellationToken::new())
}

/// Sends `post` to a fresh router with the limits it asks for; the status and the
/// parsed body.
async fn send(post: &Post) -> (u16, Value) {
    let resp = app(post).oneshot(post.request()).await.unwrap();
    let status = resp.status().as_u16();
    let json = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/json");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(json, "{status}: not a JSON body: {text}");
    (status, serde_json::from_str(&text).unwrap())
}

/// Asserts that `(status, frame)` is the refusal of `check`.
fn assert_refused_by(check: &Check, what: &str, status: u16, frame: &Value) {
    assert_eq!(
        status, check.status,
        "{what}: expected the {} check's {}, got {status}: {frame}",
        check.name, check.status
    );
    check_frame(frame, None, false);
    assert_envelope(frame, check.code, check.class);
    let message = frame["error"]["data"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(check.message),
        "{what}: expected the {} check's message ({:?}): {frame}",
        check.name,
        check.message
    );
}

async fn refusal_alone(i: usize) {
    let mut post = Post::good();
    (CHECKS[i].spoil)(&mut post);
    let (status, frame) = send(&post).await;
    assert_refused_by(&CHECKS[i], CHECKS[i].name, status, &frame);
}

/// A request failing checks `first` and `later` is refused by `first`.
async fn first_wins(first: usize, later: usize) {
    let (a, b) = (&CHECKS[first], &CHECKS[later]);
    assert!(a.step < b.step, "{} is not before {}", a.name, b.name);
    let mut post = Post::good();
    (b.spoil)(&mut post);
    (a.spoil)(&mut post);
    let (status, frame) = send(&post).await;
    assert_refused_by(a, &format!("{} + {}", a.name, b.name), status, &frame);
}

/// Both checks fire alone, and the earlier wins when both fail.
async fn ordered(first: usize, later: usize) {
    refusal_alone(first).await;
    refusal_alone(later).await;
    first_wins(first, later).await;
}

#[tokio::test]
async fn the_unspoiled_request_is_answered() {
    let (status, frame) = send(&Post::good()).await;
    assert_eq!(status, 200, "{frame}");
    check_frame(&frame, Some("tools/call"), false);
    assert!(frame["result"]["structuredContent"].is_object(), "{frame}");
}

#[tokio::test]
async fn origin_and_host_come_before_the_protocol_version() {
    ordered(ORIGIN, VERSION).await;
    ordered(HOST, VERSION).await;
}

#[tokio::test]
async fn the_protocol_version_comes_before_the_media_types() {
    ordered(VERSION, CONTENT_TYPE).await;
    ordered(VERSION, ACCEPT).await;
}

#[tokio::test]
async fn the_media_types_come_before_the_token() {
    ordered(CONTENT_TYPE, TOKEN).await;
    ordered(ACCEPT, TOKEN).await;
}

#[tokio::test]
async fn the_token_comes_before_the_slots_and_the_body() {
    ordered(TOKEN, SLOTS).await;
    ordered(TOKEN, SIZE).await;
    ordered(TOKEN, BUDGET).await;
    ordered(TOKEN, SHAPE).await;
}

#[tokio::test]
async fn the_slots_come_before_the_body() {
    ordered(SLOTS, SIZE).await;
    ordered(SLOTS, BUDGET).await;
    ordered(SLOTS, SHAPE).await;
}

#[tokio::test]
async fn the_body_comes_before_the_rate() {
    ordered(SIZE, RATE).await;
    ordered(BUDGET, RATE).await;
    ordered(SHAPE, RATE).await;
}

#[tokio::test]
async fn the_rate_comes_before_the_scope() {
    ordered(RATE, SCOPE).await;
}

#[tokio::test]
async fn every_earlier_check_wins_over_every_later_one() {
    for i in 0..CHECKS.len() {
        refusal_alone(i).await;
    }
    for (first, a) in CHECKS.iter().enumerate() {
        for (later, b) in CHECKS.iter().enumerate().skip(first + 1) {
            if a.step < b.step {
                first_wins(first, later).await;
            }
        }
    }
}
