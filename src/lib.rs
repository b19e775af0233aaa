//! cyberos-mcp-bridge: CyberOS as eight MCP 2025-11-25 tools over stdio and Streamable
//! HTTP. See `ARCHITECTURE.md` for the map.

pub mod adapters;
pub mod app;
pub mod domain;
pub mod ports;
pub mod runner;
pub mod support;
