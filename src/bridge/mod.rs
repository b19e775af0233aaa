//! The bridge as a library: [`Bridge::builder`] starts from the embedded defaults (or
//! [`Bridge::from_args`] from the command line), takes any port supplied in code, and
//! serves MCP on stdio or Streamable HTTP. The binary builds and serves through it too;
//! every port left unset comes from `app::wiring`, as the binary's do.

mod builder;
mod process;
mod serve;

pub use builder::BridgeBuilder;
pub use serve::{Bridge, ServeError};
