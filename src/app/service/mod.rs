//! The use cases: the `tools/call` pipeline and its confirmation gate, the eight tools,
//! tasks (launch, run, methods, caps, upkeep), and who a request runs as. The service takes
//! and returns its own types and never names the wire (`tests/e2e/tidy.rs`).

pub mod call;
pub mod caller;
pub mod confirmation;
pub mod identity;
pub mod output;
pub mod request;
pub mod settings;
mod state;
pub mod tasks;
pub mod tools;

pub use settings::{LongRunning, Settings, ToolErrors, ToolNames};
pub use state::App;
