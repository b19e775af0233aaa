//! The routes of the HTTP transport and the edge layer around them: CORS, preflights,
//! and a panicking handler turned into a JSON-RPC 500.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ALLOW, ORIGIN, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, get};
use futures::FutureExt;
use reqwest::Url;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::approve::{self, PageTrust};
use super::limits::{Gauges, Limits};
use super::origin::{Origin, OriginPattern, OriginPolicy};
use super::session_id::SessionKey;
use super::shared::Shared;
use super::{gate, mcp, ready, reply};
use crate::app::App;
use crate::app::config::{Config, ConfigError};
use crate::app::edge::rpc::INVALID_REQUEST;
use crate::app::service::identity::{LOCAL_SUBJECT, LOCAL_TENANT};
use crate::domain::Scope;

/// The root RFC 9728 document path.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What the transport needs besides the application.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// The canonical resource URI (`--public-url`, default `http://<bound address>/mcp`).
    pub public_url: String,
    /// Origin, Host and CORS rules.
    pub policy: OriginPolicy,
    /// `authorization_servers` of the RFC 9728 document.
    pub authorization_servers: Vec<String>,
    /// Load limits.
    pub limits: Limits,
    /// The key of `MCP-Session-Id` values.
    pub sessions: SessionKey,
    /// How the approval page learns who is there.
    pub approval_trust: PageTrust,
}

impl HttpSettings {
    /// Settings for `config` on the address actually bound.
    ///
    /// # Errors
    /// A bad `--public-url`, `--cors-origin` or `CYBEROS_HTTP_*` value.
    pub fn from_config(
        config: &Config,
        bound: SocketAddr,
        sessions: SessionKey,
    ) -> Result<HttpSettings, ConfigError> {
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}/mcp"));
        let url = Url::parse(&public_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .filter(|u| u.fragment().is_none())
            .ok_or_else(|| {
                ConfigError(format!(
                    "--public-url {public_url:?} must be an http(s) URL like https://bridge.example.com/mcp"
                ))
            })?;
        let cors = config
            .cors_origins
            .iter()
            .map(|p| OriginPattern::parse(p.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        let authorization_servers = config
            .authorization_server
            .clone()
            .or_else(|| config.identity.jwt_issuer.clone())
            .into_iter()
            .collect();
        let approval_trust = approval_trust(config, bound, &public_url)?;
        Ok(HttpSettings {
            approval_trust,
            public_url,
            policy: OriginPolicy {
                loopback: bound.ip().is_loopback(),
                public_origin: url.origin().ascii_serialization(),
                cors,
            },
            authorization_servers,
            limits: Limits::from_options(&config.http_limits)?,
            sessions,
        })
    }
}

/// Where the approval page is served: the public URL without its `/mcp`, then `/approve/`.
fn approval_base(public_url: &str) -> String {
    let base = public_url.trim_end_matches('/');
    let base = base.strip_suffix("/mcp").unwrap_or(base);
    format!("{base}{}", approve::PREFIX)
}

/// `--approval-client-id` signs in at the trusted issuer; else `--dev` on loopback trusts
/// the local dev user; else nobody is trusted (the terminal command decides).
fn approval_trust(
    config: &Config,
    bound: SocketAddr,
    public_url: &str,
) -> Result<PageTrust, ConfigError> {
    if let (Some((id, secret_file)), Some(issuer)) =
        (&config.approval_client, &config.identity.jwt_issuer)
    {
        let secret = match secret_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        ConfigError(format!(
                            "cannot read --approval-client-secret-file {}: {e}",
                            path.display()
                        ))
                    })?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        let redirect = format!("{}callback", approval_base(public_url));
        let login = approve::OidcLogin::new(issuer, id.clone(), secret, redirect)?;
        return Ok(PageTrust::Oidc(Arc::new(login)));
    }
    if config.identity.dev && bound.ip().is_loopback() {
        return Ok(PageTrust::Dev {
            tenant: crate::domain::TenantId::parse(LOCAL_TENANT)
                .map_err(|_| ConfigError("the local tenant id is malformed".into()))?,
            subject: LOCAL_SUBJECT.to_owned(),
        });
    }
    Ok(PageTrust::None)
}

/// The routes, for `serve` and for in-process tests (`ServiceExt::oneshot`).
/// `shutdown` ends streams and waits that would otherwise hold a graceful stop.
pub fn router(app: App, settings: HttpSettings, shutdown: CancellationToken) -> Routes {
    let url = Url::parse(&settings.public_url).ok();
    let path = url
        .as_ref()
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let resource_metadata = format!(
        "{}{WELL_KNOWN}{path}",
        settings.policy.public_origin.trim_end_matches('/')
    );
    let scopes: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    app.serve_approvals_at(approval_base(&settings.public_url));
    let shared = Arc::new(Shared {
        approval_trust: settings.approval_trust,
        challenge: format!(
            "Bearer resource_metadata=\"{resource_metadata}\", scope=\"{}\"",
            scopes.join(" ")
        ),
        document: json!({
            "resource": settings.public_url,
            "authorization_servers": settings.authorization_servers,
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "CyberOS MCP Bridge"
        })
        .to_string(),
        resource_metadata,
        app,
        policy: settings.policy,
        gauges: Gauges::new(&settings.limits),
        limits: settings.limits,
        sessions: settings.sessions,
        shutdown,
        ready: tokio::sync::Mutex::new(None),
    });
    let mut routes = Router::new()
        .route("/mcp", any(mcp::endpoint))
        .route("/healthz", any(healthz))
        .route("/readyz", any(ready::readyz))
        .route("/approve/callback", get(approve::callback))
        .route("/approve/{id}", get(approve::show).post(approve::decide))
        .route(WELL_KNOWN, any(metadata))
        .route(&format!("{WELL_KNOWN}/mcp"), any(metadata));
    // Behind a proxy the public path may differ; serve its path-inserted document too.
    let simple = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b));
    if !path.is_empty() && path != "/mcp" && simple && !path.contains("//") {
        routes = routes.route(&format!("{WELL_KNOWN}{path}"), any(metadata));
    }
    Routes {
        router: routes.fallback(not_found).with_state(Arc::clone(&shared)),
        shared,
    }
}

/// The routes behind their edge: CORS, preflights, and a panicking handler turned into a
/// JSON-RPC 500, around every route.
///
/// A service around the router rather than an axum middleware: `from_fn` clones the
/// service inside it and boxes another future on every request.
#[derive(Clone)]
pub struct Routes {
    router: Router,
    shared: Arc<Shared>,
}

impl<B> tower_service::Service<axum::http::Request<B>> for Routes
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let s = Arc::clone(&self.shared);
        let router = self.router.clone();
        Box::pin(async move { Ok(edge(&s, req.map(Body::new), router).await) })
    }
}

/// CORS and panics, around every route.
async fn edge(s: &Shared, mut req: Request, mut router: Router) -> Response {
    let origin = s.policy.origin(req.headers());
    let cors_origin = match origin {
        Origin::Allowed { cors: true } => req.headers().get(ORIGIN).cloned(),
        _ => None,
    };
    let mut resp = if req.method() == Method::OPTIONS {
        preflight(s, origin, req.headers())
    } else {
        req.extensions_mut().insert(origin);
        // axum's router is always ready.
        let routed = tower_service::Service::call(&mut router, req);
        match AssertUnwindSafe(routed).catch_unwind().await {
            Ok(Ok(resp)) => resp,
            Ok(Err(never)) => match never {},
            Err(_) => reply::json(StatusCode::INTERNAL_SERVER_ERROR, reply::panic_frame(None)),
        }
    };
    let h = resp.headers_mut();
    if s.policy.cors_enabled() {
        h.append(VARY, HeaderValue::from_static("Origin"));
    }
    if let Some(origin) = cors_origin {
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("WWW-Authenticate, MCP-Session-Id"),
        );
    }
    resp
}

/// OPTIONS: a CORS preflight is granted only to `--cors-origin` origins.
fn preflight(s: &Shared, origin: Origin, headers: &HeaderMap) -> Response {
    if let Some(refused) = gate::admit(&s.policy, origin, headers) {
        return refused;
    }
    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    let h = resp.headers_mut();
    match origin {
        Origin::Allowed { cors: true } => {
            h.insert(
                ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("POST, GET, DELETE, OPTIONS"),
            );
            h.insert(
                ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(
                    "Authorization, Content-Type, MCP-Protocol-Version, Last-Event-ID, MCP-Session-Id",
                ),
            );
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
            resp
        }
        // Not a preflight: no Origin, so no browser asking.
        Origin::Absent => {
            h.insert(ALLOW, HeaderValue::from_static("POST, OPTIONS"));
            resp
        }
        // Same-origin or loopback pages need no preflight; a cross-origin one needs
        // --cors-origin. (Denied origins were refused by `admit`.)
        Origin::Allowed { cors: false } | Origin::Denied => reply::forbidden(
            "cross-origin requests are not enabled for this origin",
            "Start the bridge with --cors-origin <origin> to let a web page on that origin call it.",
        ),
    }
}

fn read_only(method: &Method) -> bool {
    *method == Method::GET || *method == Method::HEAD
}

async fn healthz(method: Method) -> Response {
    if !read_only(&method) {
        return get_only();
    }
    reply::json(StatusCode::OK, r#"{"status":"ok"}"#)
}

/// The RFC 9728 protected-resource metadata.
async fn metadata(State(s): State<Arc<Shared>>, method: Method) -> Response {
    if !read_only(&method) {
        return get_only();
    }
    reply::json(StatusCode::OK, s.document.clone())
}

fn get_only() -> Response {
    reply::method_not_allowed("GET, HEAD", "Use GET on this path.")
}

async fn not_found() -> Response {
    reply::protocol(
        StatusCode::NOT_FOUND,
        INVALID_REQUEST,
        "not found",
        "The MCP endpoint is POST /mcp.",
    )
}
