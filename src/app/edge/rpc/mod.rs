//! JSON-RPC 2.0 as MCP uses it: request ids, the closed [`Method`] set parsed once per
//! frame, frames in and out, and the typed error value with the contract's envelope.

mod error;
mod frame;
mod id;
mod method;

pub use error::{
    INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError, class_code,
};
pub use frame::{
    FrameError, Incoming, PeerResponse, Reply, Request, TraceMeta, failure, notification,
    parse_frame, success, text_of,
};
pub use id::RequestId;
pub use method::{
    BadParams, CallParams, InitializeParams, LOG_LEVELS, Method, Notice, PROTOCOL_VERSION, TaskRef,
};
