//! A real HTTP memory service for tests, speaking `docs/memory-openapi.yaml` (with a
//! bearer token when started with one, `check-memory` passes it), with switchable faults
//! and contract breaks. It runs on its own thread and runtime, bound to 127.0.0.1:0.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// Bytes the service puts in its error bodies, as a real one might (internal ids, paths,
/// credentials): none may reach a client of the bridge (criterion 22).
pub const ERROR_BODY_SECRETS: [&str; 4] = [
    "SECRET-ERROR-BYTES",
    "/srv/memory/audit.db",
    "password=hunter2",
    "m-secret-7",
];

fn secret_detail(what: &str) -> String {
    format!(
        "{what}: {} (row m-secret-7 in /srv/memory/audit.db, dsn postgres://memory:password=hunter2@db)",
        ERROR_BODY_SECRETS[0]
    )
}

/// How the server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    ServerError,
    /// Fail the next request only with 503.
    FailOnce,
    Slow(Duration),
    Huge,
    NotJson,
}

/// Rules of the contract the server can break, each on its own (`check-memory`'s tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// Lists show every tenant's entries.
    LeakOtherTenants,
    /// A missing entry is a 500, not a 404.
    MissingIs500,
    /// A refused credential is quoted back in the 401's body.
    EchoCredential,
    /// Any credential, or none, is accepted.
    AnyCredential,
    /// Lists ignore `limit` and `cursor`: every entry on one page.
    IgnoreLimit,
    /// A 404's body shows internals (`ERROR_BODY_SECRETS`), which the bridge must not
    /// pass on.
    InternalsInErrors,
}

#[derive(Default)]
struct Inner {
    entries: Vec<(String, String, Value)>,
    fault: Option<Fault>,
    headers: Vec<HeaderMap>,
    token: Option<String>,
    breaks: Vec<Break>,
}

impl Inner {
    fn breaks(&self, rule: Break) -> bool {
        self.breaks.contains(&rule)
    }
}

/// A running memory service.
pub struct MemoryServer {
    pub url: String,
    state: Arc<Mutex<Inner>>,
}

impl MemoryServer {
    pub fn start() -> MemoryServer {
        MemoryServer::serve(None)
    }

    /// A service that answers tenant requests only with `Authorization: Bearer <token>`.
    pub fn with_token(token: &str) -> MemoryServer {
        MemoryServer::serve(Some(token.to_owned()))
    }

    fn serve(token: Option<String>) -> MemoryServer {
        let state = Arc::new(Mutex::new(Inner {
            token,
            ..Inner::default()
        }));
        let app = Router::new()
            .route(
                "/v1/health",
                get(|| async { axum::Json(json!({"status": "ok"})) }),
            )
            .route("/v1/tenants/{tenant}/audit", get(list).post(append))
            .route("/v1/tenants/{tenant}/audit/{id}", get(one))
            .with_state(Arc::clone(&state));
        let addr = crate::support::serve_http(app);
        MemoryServer {
            url: format!("http://{addr}"),
            state,
        }
    }

    pub fn set_fault(&self, fault: Fault) {
        self.state.lock().unwrap().fault = Some(fault);
    }

    /// From now on the server breaks `rule`.
    pub fn break_rule(&self, rule: Break) {
        self.state.lock().unwrap().breaks.push(rule);
    }

    /// Appends an entry directly (as another client of the service would).
    pub fn seed(&self, tenant: &str, entry: Value) {
        self.state.lock().unwrap().entries.push((
            tenant.to_owned(),
            format!("seed-{}", entry["audit_id"]),
            entry,
        ));
    }

    /// The entries of `tenant`, oldest first.
    pub fn entries(&self, tenant: &str) -> Vec<Value> {
        let inner = self.state.lock().unwrap();
        inner
            .entries
            .iter()
            .filter(|(t, _, _)| t == tenant)
            .map(|(_, _, e)| e.clone())
            .collect()
    }

    pub fn count(&self) -> usize {
        self.state.lock().unwrap().entries.len()
    }

    /// Headers of every request received.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.state.lock().unwrap().headers.clone()
    }
}

/// A loopback URL where nothing listens.
pub fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

type Shared = State<Arc<Mutex<Inner>>>;

/// Applies the configured fault; `Some` answers instead of the handler.
async fn fault(state: &Arc<Mutex<Inner>>, headers: &HeaderMap) -> Option<Response> {
    let f = {
        let mut inner = state.lock().unwrap();
        inner.headers.push(headers.clone());
        let f = inner.fault.unwrap_or(Fault::None);
        if f == Fault::FailOnce {
            inner.fault = None;
        }
        f
    };
    match f {
        Fault::None => None,
        Fault::ServerError => Some(
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": "internal", "detail": secret_detail("boom")})),
            )
                .into_response(),
        ),
        Fault::FailOnce => Some((StatusCode::SERVICE_UNAVAILABLE, "try again").into_response()),
        Fault::Slow(d) => {
            // The delay is the scenario: a memory service that takes `d` to answer.
            tokio::time::sleep(d).await;
            None
        }
        Fault::Huge => Some((StatusCode::OK, "x".repeat(5 * 1024 * 1024)).into_response()),
        Fault::NotJson => Some((StatusCode::OK, "<html>not json</html>").into_response()),
    }
}

/// The 401 for a request without the service's token, when it has one.
fn refused(state: &Arc<Mutex<Inner>>, headers: &HeaderMap) -> Option<Response> {
    let inner = state.lock().unwrap();
    let token = inner.token.as_ref()?;
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if presented == format!("Bearer {token}") || inner.breaks(Break::AnyCredential) {
        return None;
    }
    let body = if inner.breaks(Break::EchoCredential) {
        json!({"error": "unauthorized", "message": format!("{presented:?} is not a valid credential")})
    } else {
        json!({"error": "unauthorized"})
    };
    Some((StatusCode::UNAUTHORIZED, axum::Json(body)).into_response())
}

fn invalid_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": "invalid_request", "message": message})),
    )
        .into_response()
}

fn is_kind(kind: &str) -> bool {
    let mut bytes = kind.bytes();
    kind.len() <= 128
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
}

async fn append(
    State(state): Shared,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(r) = fault(&state, &headers).await {
        return r;
    }
    if let Some(r) = refused(&state, &headers) {
        return r;
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return invalid_request("Idempotency-Key is required (1 to 255 visible ASCII characters)");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return invalid_request("the body must be a JSON object");
    };
    if !body["kind"].as_str().is_some_and(is_kind) {
        return invalid_request("kind must match ^[a-z][a-z0-9_.]*$");
    }
    if !body["body"].is_object() || !body["actor_id"].is_string() || !body["trace_id"].is_string() {
        return invalid_request("body must be an object; actor_id and trace_id strings");
    }
    let mut inner = state.lock().unwrap();
    if let Some((_, _, e)) = inner
        .entries
        .iter()
        .find(|(t, k, _)| *t == tenant && *k == key)
    {
        return (
            StatusCode::OK,
            axum::Json(json!({"audit_id": e["audit_id"], "recorded_at": e["recorded_at"]})),
        )
            .into_response();
    }
    let id = format!("m-{}", inner.entries.len() + 1);
    let recorded_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut entry = json!({
        "audit_id": id, "kind": body["kind"], "actor_id": body["actor_id"], "body": body["body"],
        "recorded_at": recorded_at, "trace_id": body["trace_id"]
    });
    if let Some(s) = body.get("subject") {
        entry["subject"] = s.clone();
    }
    inner.entries.push((tenant, key, entry));
    (
        StatusCode::CREATED,
        axum::Json(json!({"audit_id": id, "recorded_at": recorded_at})),
    )
        .into_response()
}

async fn one(
    State(state): Shared,
    Path((tenant, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = fault(&state, &headers).await {
        return r;
    }
    if let Some(r) = refused(&state, &headers) {
        return r;
    }
    let inner = state.lock().unwrap();
    match inner
        .entries
        .iter()
        .find(|(t, _, e)| *t == tenant && e["audit_id"] == id)
    {
        Some((_, _, e)) => axum::Json(e.clone()).into_response(),
        None if inner.breaks(Break::MissingIs500) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": "unavailable"})),
        )
            .into_response(),
        None if inner.breaks(Break::InternalsInErrors) => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "not_found", "detail": secret_detail("no such entry")})),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "not_found"})),
        )
            .into_response(),
    }
}

async fn list(
    State(state): Shared,
    Path(tenant): Path<String>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = fault(&state, &headers).await {
        return r;
    }
    if let Some(r) = refused(&state, &headers) {
        return r;
    }
    let inner = state.lock().unwrap();
    let limit: usize = match q.get("limit").map(|l| l.parse()) {
        None => 50,
        Some(Ok(n)) if (1..=200).contains(&n) => n,
        Some(_) => return invalid_request("limit must be between 1 and 200"),
    };
    let since = match q
        .get("since")
        .map(|s| chrono::DateTime::parse_from_rfc3339(s))
    {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(_)) => return invalid_request("since must be an RFC 3339 date-time"),
    };
    let recorded_since = |e: &Value| {
        since.is_none_or(|since| {
            e["recorded_at"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t >= since)
        })
    };
    let leak = inner.breaks(Break::LeakOtherTenants);
    let start: usize = match q.get("cursor") {
        None => 0,
        Some(c) => match c.strip_prefix("o").and_then(|n| n.parse().ok()) {
            Some(n) => n,
            None => {
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_cursor"})),
                )
                    .into_response();
            }
        },
    };
    let matching: Vec<&Value> = inner
        .entries
        .iter()
        .rev()
        .filter(|(t, _, e)| {
            (leak || *t == tenant)
                && q.get("kind").is_none_or(|k| e["kind"] == *k)
                && recorded_since(e)
        })
        .map(|(_, _, e)| e)
        .collect();
    if inner.breaks(Break::IgnoreLimit) {
        return axum::Json(json!({"entries": matching})).into_response();
    }
    let page: Vec<&Value> = matching.iter().skip(start).take(limit).copied().collect();
    let mut out = json!({"entries": page});
    if start + limit < matching.len() {
        out["next_cursor"] = format!("o{}", start + limit).into();
    }
    axum::Json(out).into_response()
}
