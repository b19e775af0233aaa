//! Fresh trace and span ids from the operating system's CSPRNG.

use crate::domain::TraceId;

/// `N` random bytes. The OS generator only fails when the platform has none, which the
/// bridge cannot run without.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)
        .expect("the operating system's random number generator is unavailable");
    buf
}

/// A new trace id.
pub fn new_trace_id() -> TraceId {
    TraceId::from_bytes(random_bytes())
}

/// A new, non-zero span id.
pub fn new_span_id() -> [u8; 8] {
    let mut id = random_bytes::<8>();
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}
