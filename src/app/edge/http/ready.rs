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

pub(super) async fn readyz(State(s): State<Arc<Shared>>, method: Method) -> Response {
    if !(method == Method::GET || method == Method::HEAD) {
        return reply::method_not_allowed("GET, HEAD", "Use GET on this path.");
    }
    if s.shutdown.is_cancelled() {
        return reply::json(StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"stopping"}"#);
    }
    let (ready, body) = {
        let mut last = s.ready.lock().await;
        match &*last {
            Some((at, ready, body)) if at.elapsed() < READY_FOR => (*ready, body.clone()),
            _ => {
                let ports = s.app.ports();
                let (store, cuo) = tokio::join!(part(ports.tasks.check()), part(ports.cuo.check()));
                let (ready, body) = describe(&[("store", store), ("cuo", cuo)]);
                *last = Some((Instant::now(), ready, body.clone()));
                (ready, body)
            }
        }
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    reply::json(status, body)
}

/// Whether every part is fine, and the body naming each part's answer (`None` = fine).
fn describe(parts: &[(&str, Option<String>)]) -> (bool, String) {
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
        (true, json!({"status": "ok", "checks": checks}).to_string())
    } else {
        let body = json!({"status": "unavailable", "failed": failed, "checks": checks});
        (false, body.to_string())
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
