//! The application: the use cases (`service`), the wire that speaks MCP over stdio and
//! HTTP (`edge`), telemetry, the composition root (`cli`, `config`, `wiring`, `doctor`,
//! `keys`) that builds them from the operator's configuration, and the conformance checks
//! of alternate upstreams (`conformance`).

pub mod cli;
pub mod config;
pub mod conformance;
pub mod doctor;
pub mod edge;
pub mod keys;
pub mod service;
pub mod telemetry;
pub mod wiring;

pub use service::{App, LongRunning, Settings, ToolErrors, ToolNames};
