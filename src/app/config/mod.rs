//! Configuration: command-line flags, each also a `CYBEROS_<FLAG>` environment variable,
//! and an optional TOML file (`--config`) with the same keys in kebab-case. Precedence:
//! flag, then environment, then file, then default.

mod commands;
mod error;
mod options;
mod otel;
mod resolve;
mod sources;

pub use error::ConfigError;
pub use options::{Cli, Command, LogFormat, Options, Transport};
pub use otel::{OtlpProtocol, OtlpTarget};
pub use resolve::{Config, HttpLimitOptions, IdentityConfig};
pub use sources::{Source, Sources};
