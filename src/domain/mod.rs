//! The pure core: tool catalogue, error classes, identifiers, scopes, task states and
//! confirmation rules.
//!
//! Invariant: nothing here does IO, awaits, reads a clock or draws randomness, and nothing
//! here imports `tokio`, `serde_json`, `sqlx`, `reqwest` or `axum` (checked by the tidy
//! test). Time and random bytes come in as arguments.

pub mod approval;
pub mod catalog;
pub mod confirm;
pub mod cuo;
pub mod error;
pub mod ids;
pub mod json;
pub mod memory;
pub mod principal;
pub mod session;
pub mod skill;
pub mod task;
pub mod text;
pub mod tool;

/// The MCP revision the bridge implements, the only one it speaks: what its catalogue,
/// tasks and errors are shaped for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

pub use error::{DomainError, ErrorClass, Upstream};
pub use ids::{TaskId, TenantId, Timestamp, TraceId};
pub use json::JsonText;
pub use principal::{CallCtx, Principal, Scope, TokenRejection, granted_words};
pub use tool::{Effects, TaskSupport, Tool, ToolName, ToolNaming, ToolSpec, respell};
