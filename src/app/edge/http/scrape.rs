//! The Prometheus scrape (`--metrics-listen`): `GET /metrics` on a listener of its own, so
//! it works beside either transport and shares neither the MCP endpoint's limits nor its
//! token rules (bind it where only the scraper reaches it). On a loopback bind it answers
//! only a Host naming this machine, as the MCP endpoint does, so a DNS-rebound page
//! cannot read it.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::origin::OriginPolicy;
use super::serve::accept;
use crate::app::telemetry::install::Render;

/// The media type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `addr`, logs `serving metrics at http://ADDR/metrics` with the bound address, and
/// serves the scrape on a task of its own for the rest of the process.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve_metrics(addr: SocketAddr, render: Render) -> anyhow::Result<()> {
    let refused =
        |e: std::io::Error| anyhow::anyhow!("--metrics-listen: cannot listen on {addr}: {e}");
    let listener = TcpListener::bind(addr).await.map_err(refused)?;
    let bound = listener.local_addr().map_err(refused)?;
    let policy = OriginPolicy {
        loopback: bound.ip().is_loopback(),
        public_origin: String::new(),
        cors: Vec::new(),
    };
    let routes = Router::new()
        .route("/metrics", get(metrics))
        .with_state((render, policy));
    tracing::info!("serving metrics at http://{bound}/metrics");
    if !bound.ip().is_loopback() {
        tracing::warn!(
            "the metrics at {bound} need no token: anyone who reaches that address can read them"
        );
    }
    tokio::spawn(accept(
        listener,
        routes,
        super::serve::SCRAPE_CONNECTIONS,
        CancellationToken::new(),
    ));
    Ok(())
}

async fn metrics(
    State((render, policy)): State<(Render, OriginPolicy)>,
    headers: HeaderMap,
) -> Response {
    let (status, body) = if !policy.host_allowed(&headers) {
        (
            StatusCode::FORBIDDEN,
            "# host not allowed: the metrics listen on a loopback address\n".to_owned(),
        )
    } else {
        match render() {
            Ok(text) => (StatusCode::OK, text),
            Err(e) => {
                tracing::warn!("cannot render the metrics: {e}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "# the metrics could not be rendered\n".to_owned(),
                )
            }
        }
    };
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    resp
}
