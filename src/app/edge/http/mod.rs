//! The Streamable HTTP transport (MCP 2025-11-25), stateless: every POST to `/mcp` is
//! one JSON-RPC message with its own bearer token; nothing about a client is kept between
//! requests on the server. Optional sessions carry their state to the client
//! (`sessions.rs`, `session_id.rs`; CONTRACT §5, §10); in one, a tool call may ask the
//! user, and the answer finds the waiting instance through the store (`elicitation.rs`).
//!
//! Routes (`router.rs`): `POST /mcp` (`mcp.rs`, `sse.rs`); `DELETE /mcp` ends a session;
//! `GET /mcp` with `Last-Event-ID` resumes a stream that waited for a task (`resume.rs`, `event_id.rs`), without it → 405; `GET /healthz`;
//! `GET /readyz` (the task store and a CUO child answer; `ready.rs`); the RFC 9728 protected-resource documents.
//! An edge layer answers CORS preflights, adds CORS headers for `--cors-origin`
//! origins, and turns a panicking handler into a JSON-RPC 500. `serve` runs the accept
//! loop with the connection-level limits axum's own server cannot set. `scrape` serves
//! `GET /metrics` on the `--metrics-listen` address through the same loop.

mod answer;
mod approve;
mod body;
mod elicitation;
mod event_id;
mod gate;
mod keepalive;
mod limits;
mod mcp;
mod origin;
mod overflow;
mod ready;
mod reply;
mod resumable;
mod resume;
mod router;
mod scrape;
mod serve;
mod session_id;
mod sessions;
mod shared;
mod sse;
mod unauthorized;
mod waits;

pub use approve::{OidcLogin, PageTrust};
pub use limits::{Limits, Rate};
pub use origin::{OriginPattern, OriginPolicy};
pub use router::{HttpSettings, Routes, router};
pub use scrape::serve_metrics;
pub use serve::{ServeError, serve, serve_on};
pub use session_id::SessionKey;
