//! The driving side and the composition root: configuration, wiring, JSON-RPC dispatch,
//! the tool registry and handlers, tasks, and the transports. The only layer that knows
//! MCP and JSON-RPC.

pub mod cli;
pub mod config;
pub mod doctor;
pub mod http;
pub mod identity;
pub mod json;
pub mod rpc;
pub mod server;
pub mod session;
pub mod settings;
pub mod state;
pub mod stdio;
pub mod tasks;
pub mod telemetry;
pub mod tools;
pub mod trace;
pub mod wiring;

pub use settings::{LongRunning, Settings, ToolErrors, ToolNames};
pub use state::App;
