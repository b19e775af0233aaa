//! The floor of `bench/http.sh`: the least an axum server must do per MCP POST — read the
//! body, parse the JSON-RPC message, answer a fixed result with its id — with no origin
//! checks, token, dispatcher or tools. The bridge's figures are read against it.
//!
//! usage: cargo run --release --example http_floor [ADDR]   (logs `listening on ADDR`)

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    axum::serve(listener, Router::new().route("/mcp", post(answer))).await
}

async fn answer(body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let frame = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
    ([(header::CONTENT_TYPE, "application/json")], frame).into_response()
}
