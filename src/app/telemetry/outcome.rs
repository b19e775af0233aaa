//! How a call or a task run ended: the span's `cyberos.outcome` and the metrics' labels.

use crate::domain::ErrorClass;

/// How a call or run ended, for `cyberos.outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Success,
    /// It failed with this class.
    Failed(ErrorClass),
    /// It was cancelled or stopped before it ended.
    Cancelled,
    /// Its handler panicked (the client got `internal_error`).
    Panic,
}

impl Outcome {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed(class) => class.as_str(),
            Outcome::Cancelled => "cancelled",
            Outcome::Panic => "panic",
        }
    }

    pub(super) fn failed(self) -> bool {
        matches!(self, Outcome::Failed(_) | Outcome::Panic)
    }
}
