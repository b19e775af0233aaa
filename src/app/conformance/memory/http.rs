//! The checker's own HTTP client for the memory service: the bridge's own timeouts and
//! redirect policy (`support::memory_service`) and its body bound ([`MAX_BODY`]), every
//! exchange kept whole so the rules can look at statuses, bodies and headers as the
//! service sent them.

use reqwest::{Method, Url};
use serde_json::Value;

use crate::support::memory_service;

/// Largest body read, as the bridge reads.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// Which credential a request presents.
#[derive(Debug, Clone, Copy)]
pub(super) enum Auth<'a> {
    /// The configured one (none when no token file was given).
    Configured,
    /// This one instead.
    Other(&'a str),
    /// No `Authorization` header.
    Without,
}

/// One request and what came back.
#[derive(Debug, Clone)]
pub(super) struct Exchange {
    /// `GET /v1/…?…`, for report lines.
    pub(super) request: String,
    /// The tenant the request was for, if any.
    pub(super) tenant: Option<String>,
    /// The status, or why there was none.
    pub(super) status: Result<u16, String>,
    /// The body as text (lossy), at most [`MAX_BODY`] bytes.
    pub(super) body: String,
    /// The body as JSON, when it is.
    pub(super) json: Option<Value>,
    /// Every header, as `name: value` lines.
    pub(super) headers: String,
}

impl Exchange {
    /// What came back, for a report line.
    pub(super) fn seen(&self) -> String {
        match &self.status {
            Ok(status) if self.body.is_empty() => format!("{status} with no body"),
            Ok(status) => format!("{status} {}", self.body),
            Err(why) => why.clone(),
        }
    }

    /// Whether the status is `status`.
    pub(super) fn is(&self, status: u16) -> bool {
        self.status.as_ref().is_ok_and(|s| *s == status)
    }
}

/// A request to send.
pub(super) struct Request<'a> {
    pub(super) method: Method,
    pub(super) tenant: Option<&'a str>,
    pub(super) tail: &'a [&'a str],
    pub(super) query: &'a [(&'a str, &'a str)],
    pub(super) body: Option<&'a Value>,
    pub(super) key: Option<&'a str>,
    pub(super) auth: Auth<'a>,
}

impl<'a> Request<'a> {
    /// `GET` of the tenant's audit path plus `tail`.
    pub(super) fn get(
        tenant: &'a str,
        tail: &'a [&'a str],
        query: &'a [(&'a str, &'a str)],
    ) -> Request<'a> {
        Request {
            method: Method::GET,
            tenant: Some(tenant),
            tail,
            query,
            body: None,
            key: None,
            auth: Auth::Configured,
        }
    }

    /// `POST` of `body` to the tenant's audit log, with `key` as `Idempotency-Key`.
    pub(super) fn post(tenant: &'a str, body: &'a Value, key: Option<&'a str>) -> Request<'a> {
        Request {
            method: Method::POST,
            tenant: Some(tenant),
            tail: &[],
            query: &[],
            body: Some(body),
            key,
            auth: Auth::Configured,
        }
    }
}

/// The service at one base URL.
pub(super) struct Service {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
    /// Every exchange so far.
    pub(super) exchanges: Vec<Exchange>,
}

impl Service {
    /// A client of `base`, presenting `token`.
    ///
    /// # Errors
    /// When the URL is no http(s) base or the client cannot be built.
    pub(super) fn new(base: &str, token: Option<String>) -> Result<Service, String> {
        let base = memory_service::base_url(base)?;
        let http = memory_service::client()?;
        Ok(Service {
            base,
            token,
            http,
            exchanges: Vec::new(),
        })
    }

    /// Whether a token was configured.
    pub(super) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The configured token.
    pub(super) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `GET /v1/health`.
    pub(super) async fn health(&mut self) -> Exchange {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(["v1", "health"]);
        }
        let req = self.http.get(url).header("accept", "application/json");
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        self.exchange("GET /v1/health".into(), None, req).await
    }

    /// Sends `r` and records the exchange.
    pub(super) async fn send(&mut self, r: &Request<'_>) -> Exchange {
        let tenant = r.tenant.unwrap_or_default();
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments
                .pop_if_empty()
                .extend(["v1", "tenants", tenant, "audit"])
                .extend(r.tail);
        }
        if !r.query.is_empty() {
            url.query_pairs_mut().extend_pairs(r.query);
        }
        let mut shown = format!("{} /v1/tenants/{tenant}/audit", r.method);
        for segment in r.tail {
            shown.push('/');
            shown.push_str(segment);
        }
        if let Some(q) = url.query() {
            shown.push('?');
            shown.push_str(q);
        }
        let mut req = self
            .http
            .request(r.method.clone(), url)
            .header("accept", "application/json")
            .header(
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            );
        req = match (r.auth, &self.token) {
            (Auth::Configured, Some(t)) => req.bearer_auth(t),
            (Auth::Other(t), _) => req.bearer_auth(t),
            (Auth::Configured, None) | (Auth::Without, _) => req,
        };
        if let Some(key) = r.key {
            req = req.header("idempotency-key", key);
        }
        if let Some(body) = r.body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        self.exchange(shown, r.tenant.map(str::to_owned), req).await
    }

    async fn exchange(
        &mut self,
        request: String,
        tenant: Option<String>,
        req: reqwest::RequestBuilder,
    ) -> Exchange {
        let mut exchange = Exchange {
            request,
            tenant,
            status: Err("no answer".into()),
            body: String::new(),
            json: None,
            headers: String::new(),
        };
        match req.send().await {
            Err(e) if e.is_timeout() => exchange.status = Err("no answer within 5 s".into()),
            Err(e) => exchange.status = Err(format!("the request failed: {}", without_url(&e))),
            Ok(mut resp) => {
                exchange.status = Ok(resp.status().as_u16());
                for (name, value) in resp.headers() {
                    exchange.headers.push_str(&format!(
                        "{name}: {}\n",
                        String::from_utf8_lossy(value.as_bytes())
                    ));
                }
                let mut body = Vec::new();
                loop {
                    match resp.chunk().await {
                        Ok(Some(chunk)) if body.len() + chunk.len() <= MAX_BODY => {
                            body.extend_from_slice(&chunk);
                        }
                        Ok(Some(_)) => {
                            exchange.status = Err(format!("a body over {MAX_BODY} bytes"));
                            break;
                        }
                        Ok(None) => break,
                        Err(e) => {
                            exchange.status =
                                Err(format!("the body broke off: {}", without_url(&e)));
                            break;
                        }
                    }
                }
                exchange.json = serde_json::from_slice(&body).ok();
                exchange.body = String::from_utf8_lossy(&body).into_owned();
            }
        }
        self.exchanges.push(exchange.clone());
        exchange
    }
}

/// A reqwest error without the URL it names, which may carry a password.
fn without_url(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut text = String::new();
    let mut source = e.source();
    while let Some(s) = source {
        text = s.to_string();
        source = s.source();
    }
    if text.is_empty() {
        "connection failed".into()
    } else {
        text
    }
}
