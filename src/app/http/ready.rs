//! `/readyz`: ready to serve when the task store answers and a CUO child answers (one is
//! spawned if none runs), and the bridge is not stopping. The body names each part, so a
//! failing probe says which: `{"status":"unavailable","failed":["cuo"],"checks":{...}}`.
//!
//! Unauthenticated, so it must cost little: the answer is kept for [`READY_FOR`], and
//! while one check runs, concurrent probes wait for it (the lock is held across the check
//! on purpose) instead of each opening a store transaction or a CUO round trip.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;
use tokio::time::Instant;

use super::reply;
use super::shared::Shared;
use crate::domain::DomainError;

/// How long a `/readyz` answer is reused.
const READY_FOR: Duration = Duration::from_secs(1);
/// How long each part may take to answer.
const CHECK_WITHIN: Duration = Duration::from_secs(2);

/// The parts' answers: `None` when fine, else a user-safe reason.
#[derive(Debug, Clone, Default)]
pub(super) struct Readiness {
    store: Option<String>,
    cuo: Option<String>,
}

/// The last answer and when it was found.
pub(super) type ReadyCache = tokio::sync::Mutex<Option<(Instant, Arc<Readiness>)>>;

pub(super) async fn readyz(State(s): State<Arc<Shared>>, method: Method) -> Response {
    if !(method == Method::GET || method == Method::HEAD) {
        return reply::method_not_allowed("GET, HEAD", "Use GET on this path.");
    }
    if s.shutdown.is_cancelled() {
        return reply::json(StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"stopping"}"#);
    }
    let ready = {
        let mut last = s.ready.lock().await;
        match &*last {
            Some((at, ready)) if at.elapsed() < READY_FOR => Arc::clone(ready),
            _ => {
                let ports = s.app.ports();
                let (store, cuo) = tokio::join!(part(ports.tasks.check()), part(ports.cuo.check()));
                let ready = Arc::new(Readiness { store, cuo });
                *last = Some((Instant::now(), Arc::clone(&ready)));
                ready
            }
        }
    };
    let parts = [("store", &ready.store), ("cuo", &ready.cuo)];
    let failed: Vec<&str> = parts
        .iter()
        .filter(|(_, why)| why.is_some())
        .map(|(name, _)| *name)
        .collect();
    let checks: serde_json::Map<String, serde_json::Value> = parts
        .iter()
        .map(|(name, why)| ((*name).to_owned(), json!(why.as_deref().unwrap_or("ok"))))
        .collect();
    if failed.is_empty() {
        let body = json!({"status": "ok", "checks": checks});
        reply::json(StatusCode::OK, body.to_string())
    } else {
        let body = json!({"status": "unavailable", "failed": failed, "checks": checks});
        reply::json(StatusCode::SERVICE_UNAVAILABLE, body.to_string())
    }
}

/// One part's answer within [`CHECK_WITHIN`]: the error's own text, which names the
/// upstream and never its cause (paths, addresses, SQL stay in the logs).
async fn part(check: impl Future<Output = Result<(), DomainError>>) -> Option<String> {
    match tokio::time::timeout(CHECK_WITHIN, check).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => {
            tracing::warn!("readiness: {e}: {:?}", std::error::Error::source(&e));
            Some(e.to_string())
        }
        Err(_) => Some(format!("no answer within {} s", CHECK_WITHIN.as_secs())),
    }
}
