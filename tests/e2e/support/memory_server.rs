//! A real HTTP memory service for tests, speaking `docs/memory-openapi.yaml`, with
//! switchable faults. It runs on its own thread and runtime, bound to 127.0.0.1:0.

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

#[derive(Default)]
struct Inner {
    entries: Vec<(String, String, Value)>,
    fault: Option<Fault>,
    headers: Vec<HeaderMap>,
}

/// A running memory service.
pub struct MemoryServer {
    pub url: String,
    state: Arc<Mutex<Inner>>,
}

impl MemoryServer {
    pub fn start() -> MemoryServer {
        let state = Arc::new(Mutex::new(Inner::default()));
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

async fn append(
    State(state): Shared,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if let Some(r) = fault(&state, &headers).await {
        return r;
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
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
    let inner = state.lock().unwrap();
    match inner
        .entries
        .iter()
        .find(|(t, _, e)| *t == tenant && e["audit_id"] == id)
    {
        Some((_, _, e)) => axum::Json(e.clone()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "not_found", "detail": secret_detail("no such entry")})),
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
    let inner = state.lock().unwrap();
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(50);
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
        .filter(|(t, _, e)| *t == tenant && q.get("kind").is_none_or(|k| e["kind"] == *k))
        .map(|(_, _, e)| e)
        .collect();
    let page: Vec<&Value> = matching.iter().skip(start).take(limit).copied().collect();
    let mut out = json!({"entries": page});
    if start + limit < matching.len() {
        out["next_cursor"] = format!("o{}", start + limit).into();
    }
    axum::Json(out).into_response()
}
