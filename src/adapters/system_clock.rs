//! `Clock` over the system's real-time clock.

use crate::domain::Timestamp;
use crate::ports::Clock;

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(chrono::Utc::now().timestamp_millis())
    }
}
