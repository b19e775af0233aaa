use crate::domain::Timestamp;

/// Wall-clock time, injected so that time-dependent rules are testable.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}
