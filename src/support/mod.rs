//! Plumbing the bridge, its adapters and the bundled runner share, knowing nothing of MCP
//! or of the bridge's rules: bounded NDJSON framing, children that die with their parent,
//! files kept private, and random bytes.

pub mod children;
pub mod ndjson;
pub mod private_file;
pub mod random;
