//! Plumbing the bridge, its adapters and the bundled runner share, knowing nothing of MCP
//! or of the bridge's rules: bounded NDJSON framing, children that die with their parent,
//! files kept private, random bytes, and how a memory service is reached.

pub mod children;
pub mod memory_service;
pub mod ndjson;
pub mod private_file;
pub mod random;
