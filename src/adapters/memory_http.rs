//! `MemoryClient` over the memory service's REST API (CONTRACT §8,
//! `docs/memory-openapi.yaml`).
//!
//! The bridge authenticates with its own bearer credential, never the client's token.
//! 1 s to connect, 5 s per request; bodies are read up to a bound; anything refused, slow,
//! 5xx, oversized or not JSON is `upstream_unavailable`. Appends carry an
//! `Idempotency-Key`, so the one retry on a transient failure never writes twice. At most
//! `--memory-max-inflight` requests are out at once; past that a call is refused at once
//! with `Retry-After`, instead of queueing behind a service that is already saturated.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::memory::{AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry};
use crate::domain::{CallCtx, DomainError, JsonText, Timestamp, TraceId, Upstream};
use crate::ports::MemoryClient;
use crate::support::memory_service;

/// Largest response body read.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// A retry is only worth it while this much of the budget is left.
const RETRY_WITHIN: Duration = Duration::from_secs(2);
/// What a call refused at the cap is told to wait.
const FULL_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The memory service over HTTP.
pub struct HttpMemoryClient {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
    inflight: tokio::sync::Semaphore,
}

impl std::fmt::Debug for HttpMemoryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential never reaches a log.
        f.debug_struct("HttpMemoryClient")
            .field("base", &self.base.as_str())
            .field("token", &"<redacted>")
            .finish()
    }
}

/// The client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildMemoryClientError(String);

impl HttpMemoryClient {
    /// A client for `base` (e.g. `https://memory.internal`), authenticating with `token`.
    ///
    /// # Errors
    /// When the URL is not http(s) or the TLS stack cannot start.
    pub fn new(
        base: &str,
        token: Option<String>,
    ) -> Result<HttpMemoryClient, BuildMemoryClientError> {
        let base = memory_service::base_url(base).map_err(BuildMemoryClientError)?;
        let http = memory_service::client().map_err(BuildMemoryClientError)?;
        Ok(HttpMemoryClient {
            base,
            token,
            http,
            inflight: tokio::sync::Semaphore::new(memory_service::DEFAULT_MAX_INFLIGHT),
        })
    }

    /// At most `n` (at least one) requests in flight at once.
    #[must_use]
    pub fn with_max_inflight(mut self, n: usize) -> HttpMemoryClient {
        self.inflight =
            tokio::sync::Semaphore::new(n.clamp(1, tokio::sync::Semaphore::MAX_PERMITS));
        self
    }

    fn url(&self, tenant: &str, tail: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments
                .pop_if_empty()
                .extend(["v1", "tenants", tenant, "audit"])
                .extend(tail);
        }
        url
    }

    /// Sends a request (once more on a transient failure) and returns status and JSON body.
    async fn send(
        &self,
        ctx: Option<&CallCtx>,
        method: Method,
        url: Url,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<(StatusCode, Value), DomainError> {
        let Ok(_permit) = self.inflight.try_acquire() else {
            return Err(DomainError::unavailable(
                Upstream::Memory,
                Some("at --memory-max-inflight".into()),
            )
            .with_hint(
                "The memory service is busy; retry after the number of seconds in Retry-After.",
            )
            .with_retry_after(FULL_RETRY_AFTER));
        };
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self
                .http
                .request(method.clone(), url.clone())
                .header("accept", "application/json");
            if let Some(token) = &self.token {
                req = req.bearer_auth(token);
            }
            if let Some(ctx) = ctx {
                req = req.header("traceparent", ctx.traceparent());
                // Validated printable ASCII, so it is always a valid header value.
                if let Some(state) = &ctx.tracestate {
                    req = req.header("tracestate", &**state);
                }
            }
            if let Some(key) = idempotency_key {
                req = req.header("idempotency-key", key);
            }
            if let Some(body) = body {
                req = req
                    .header("content-type", "application/json")
                    .body(body.to_string());
            }
            let transient = match req.send().await {
                Ok(resp) if resp.status().is_server_error() => {
                    format!("answered {}", resp.status())
                }
                Ok(resp) => return read_json(resp).await,
                Err(e) if e.is_timeout() => return Err(unavailable(format!("timed out: {e}"))),
                Err(e) => format!("request failed: {e}"),
            };
            if attempt >= 2 || started.elapsed() > RETRY_WITHIN {
                return Err(unavailable(transient));
            }
            tracing::debug!(%transient, "memory service: retrying once");
        }
    }
}

fn unavailable(why: String) -> DomainError {
    DomainError::unavailable(Upstream::Memory, Some(why.into()))
}

/// Reads at most [`MAX_BODY`] bytes and parses them as JSON.
async fn read_json(mut resp: reqwest::Response) -> Result<(StatusCode, Value), DomainError> {
    let status = resp.status();
    if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(unavailable(format!(
            "answered a body over {MAX_BODY} bytes"
        )));
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(unavailable(format!(
                        "answered a body over {MAX_BODY} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Err(unavailable(format!("body read failed: {e}"))),
        }
    }
    if status == StatusCode::NOT_FOUND || status == StatusCode::NO_CONTENT {
        return Ok((status, Value::Null));
    }
    let value = serde_json::from_slice(&body)
        .map_err(|_| unavailable(format!("answered {status} with a body that is not JSON")))?;
    Ok((status, value))
}

/// Maps a status outside the happy path.
fn status_error(status: StatusCode, body: &Value) -> DomainError {
    match status {
        StatusCode::NOT_FOUND => not_found(),
        StatusCode::BAD_REQUEST if body.get("error").and_then(Value::as_str) == Some("invalid_cursor") => {
            DomainError::invalid_at("invalid cursor", "/cursor").with_hint("Pass next_cursor from the previous page unchanged.")
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => DomainError::unavailable(
            Upstream::Memory,
            Some(format!("refused the bridge's credential ({status})").into()),
        )
        .with_hint("The memory service refused the bridge's credential; ask an operator to check --memory-token-file."),
        StatusCode::TOO_MANY_REQUESTS => unavailable("rate limited the bridge".into()),
        // Any other 4xx means we sent something the service does not accept: our bug.
        s => DomainError::internal("the memory service rejected the bridge's request", Some(format!("answered {s}").into())),
    }
}

/// An id that is one path segment as written: no dot segment, nothing to encode.
fn is_plain_segment(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn not_found() -> DomainError {
    DomainError::invalid("audit entry not found")
        .with_hint("Check the audit_id, or list entries with cyberos.memory.read_audit.")
}

#[derive(Deserialize)]
struct ReceiptDto {
    audit_id: String,
    recorded_at: String,
}

#[derive(Deserialize)]
struct EntryDto {
    audit_id: String,
    kind: String,
    actor_id: String,
    #[serde(default)]
    subject: Option<String>,
    body: serde_json::Map<String, Value>,
    recorded_at: String,
    trace_id: String,
}

#[derive(Deserialize)]
struct PageDto {
    entries: Vec<EntryDto>,
    #[serde(default)]
    next_cursor: Option<String>,
}

fn malformed(e: impl std::fmt::Display) -> DomainError {
    unavailable(format!("answered a malformed body: {e}"))
}

fn time(s: &str) -> Result<Timestamp, DomainError> {
    Timestamp::parse_rfc3339(s).ok_or_else(|| malformed("a time is not RFC 3339"))
}

fn entry(dto: EntryDto) -> Result<AuditEntry, DomainError> {
    Ok(AuditEntry {
        audit_id: dto.audit_id,
        kind: dto.kind,
        actor_id: dto.actor_id,
        subject: dto.subject,
        body: JsonText::from_serialized(Value::Object(dto.body).to_string()),
        recorded_at: time(&dto.recorded_at)?,
        trace_id: TraceId::parse(&dto.trace_id)
            .ok_or_else(|| malformed("trace_id is not 32 hex digits"))?,
    })
}

#[async_trait::async_trait]
impl MemoryClient for HttpMemoryClient {
    async fn append(
        &self,
        ctx: &CallCtx,
        new: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
        let body: Value = serde_json::from_str(new.body.as_str())
            .map_err(|e| DomainError::internal("audit body is not JSON", Some(e.into())))?;
        let mut payload = json!({
            "kind": new.kind, "body": body, "actor_id": &*ctx.actor, "trace_id": ctx.trace_id.to_string()
        });
        if let Some(subject) = &new.subject {
            payload["subject"] = subject.clone().into();
        }
        let url = self.url(&ctx.tenant.to_string(), &[]);
        let (status, body) = self
            .send(Some(ctx), Method::POST, url, Some(&payload), Some(key))
            .await?;
        if !status.is_success() {
            return Err(status_error(status, &body));
        }
        let dto: ReceiptDto = serde_json::from_value(body).map_err(malformed)?;
        Ok(AuditReceipt {
            audit_id: dto.audit_id,
            recorded_at: time(&dto.recorded_at)?,
        })
    }

    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError> {
        // The tool's schema allows only [A-Za-z0-9_-]; this keeps any other caller from
        // reaching another path: `url` percent-encodes a segment but drops `.` and `..`.
        if !is_plain_segment(audit_id) {
            return Err(not_found());
        }
        let url = self.url(&ctx.tenant.to_string(), &[audit_id]);
        let (status, body) = self.send(Some(ctx), Method::GET, url, None, None).await?;
        if !status.is_success() {
            return Err(status_error(status, &body));
        }
        entry(serde_json::from_value(body).map_err(malformed)?)
    }

    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
        let mut url = self.url(&ctx.tenant.to_string(), &[]);
        {
            let mut pairs = url.query_pairs_mut();
            if let Some(kind) = &q.kind {
                pairs.append_pair("kind", kind);
            }
            if let Some(since) = q.since {
                pairs.append_pair("since", &since.to_rfc3339());
            }
            pairs.append_pair("limit", &q.limit.to_string());
            if let Some(cursor) = &q.cursor {
                pairs.append_pair("cursor", cursor);
            }
        }
        let (status, body) = self.send(Some(ctx), Method::GET, url, None, None).await?;
        if !status.is_success() {
            return Err(status_error(status, &body));
        }
        let dto: PageDto = serde_json::from_value(body).map_err(malformed)?;
        Ok(AuditPage {
            entries: dto
                .entries
                .into_iter()
                .map(entry)
                .collect::<Result<_, _>>()?,
            next_cursor: dto.next_cursor,
        })
    }

    async fn check(&self) -> Result<(), DomainError> {
        let mut url = self.base.clone();
        url.set_path(&format!("{}v1/health", self.base.path()));
        let (status, body) = self.send(None, Method::GET, url, None, None).await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(status_error(status, &body))
        }
    }
}
