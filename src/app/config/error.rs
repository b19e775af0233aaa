//! The error of a bad option.

/// A configuration problem, reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl From<anyhow::Error> for ConfigError {
    /// The whole chain, outermost first: `what failed: why`.
    fn from(e: anyhow::Error) -> ConfigError {
        ConfigError(format!("{e:#}"))
    }
}
