//! The wire: JSON-RPC as MCP uses it (`rpc`), the dispatch of one message (`dispatch`),
//! per-connection state (`session`), and the two transports (`stdio`, `http`). The only
//! code that builds JSON-RPC frames or reads HTTP headers.

pub mod dispatch;
pub mod http;
pub mod listing;
pub mod results;
pub mod rpc;
pub mod session;
pub mod stdio;
