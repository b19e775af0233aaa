//! cyberos-mcp-bridge: CyberOS as eight MCP 2025-11-25 tools over stdio and Streamable
//! HTTP: the CUO orchestrator's personas and workflows, the memory audit log and SKILL
//! folders.
//!
//! The binary is one way to run it; this library is the other, for a program that brings
//! an adapter of its own. A [`Bridge`] is built from the embedded defaults (SQLite store
//! and audit log in a data dir, the bundled CUO runner, SKILL folders on disk) or from the
//! binary's command line ([`Bridge::from_args`]), with any port replaced in code: the
//! traits are [`CuoRunner`], [`MemoryClient`], [`SkillIndex`], [`TaskStore`] (with
//! [`ConfirmationLedger`], [`ClientAnswers`] and [`Approvals`], which a task store
//! serves too), [`Clock`] and [`TokenVerifier`]. Their contracts are in [`ports`], the
//! values they exchange in [`domain`].
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use cyberos_mcp_bridge::domain::skill::Skill;
//! use cyberos_mcp_bridge::{Bridge, DomainError, SkillIndex, async_trait};
//!
//! /// A bridge that serves no SKILL folders.
//! struct NoSkills;
//!
//! #[async_trait]
//! impl SkillIndex for NoSkills {
//!     async fn list(&self, _: Option<&str>, _: usize) -> Result<Vec<Arc<Skill>>, DomainError> {
//!         Ok(Vec::new())
//!     }
//!     async fn get(&self, _: &str) -> Result<Option<Skill>, DomainError> {
//!         Ok(None)
//!     }
//!     async fn check(&self) -> Result<(), DomainError> {
//!         Ok(())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let bridge = Bridge::builder()
//!         .data_dir("/var/lib/my-bridge")
//!         .dev()
//!         .skills(Arc::new(NoSkills))
//!         // The CUO runner bundled in an installed bridge binary.
//!         .cuo_command(["cyberos-mcp-bridge", "cuo-runner"])
//!         .build()
//!         .await?;
//!     // One MCP client on stdin/stdout, until EOF or SIGTERM.
//!     bridge.serve_stdio().await?;
//!     Ok(())
//! }
//! ```
//!
//! The bridge logs through `tracing` and never to stdout: a program that wants its logs
//! installs a subscriber writing to stderr. `examples/custom_memory.rs` is a complete
//! program; `ARCHITECTURE.md` is the map of the code.

mod bridge;
mod runner;
mod support;

// The binary's own modules and the integration tests' way in: not the library's API.
#[doc(hidden)]
pub mod adapters;
#[doc(hidden)]
pub mod app;

pub mod domain;
pub mod ports;

pub use app::config::ConfigError;
pub use bridge::{Bridge, BridgeBuilder, ServeError};
pub use domain::{CallCtx, DomainError, ErrorClass, Principal, TenantId, Timestamp, Upstream};
#[doc(inline)]
pub use ports::{
    Approvals, ClientAnswers, Clock, ConfirmationLedger, CuoRunner, MemoryClient, Ports,
    SkillIndex, TaskStore, TokenVerifier,
};

/// The attribute the port traits are written with: `#[async_trait]` on an `impl` of one.
#[doc(no_inline)]
pub use async_trait::async_trait;
/// What [`Bridge::serve_io`] and [`Bridge::serve_http_on`] stop on.
#[doc(no_inline)]
pub use tokio_util::sync::CancellationToken;
