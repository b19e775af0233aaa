//! Trace and span ids, drawn on every request from a thread-local CSPRNG the OS seeds
//! (`rand::rng`, ChaCha12) rather than by a system call each; and the trace id of the
//! HTTP request being answered, for the replies the transport makes itself.

use rand::RngCore;

use crate::domain::TraceId;

/// `N` random bytes from this thread's generator, for ids that must be unique and
/// unpredictable but are not secrets (W3C trace context).
fn id_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    rand::rng().fill_bytes(&mut buf);
    buf
}

/// A new trace id.
pub fn new_trace_id() -> TraceId {
    TraceId::from_bytes(id_bytes())
}

/// A new, non-zero span id.
pub fn new_span_id() -> [u8; 8] {
    let mut id = id_bytes::<8>();
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

tokio::task_local! {
    /// The trace id of the HTTP request being answered, from its `traceparent` header.
    static REQUEST_TRACE: Option<TraceId>;
}

/// Runs `work` with `trace` as the trace id of the replies the transport makes itself
/// (refusals, limits, timeouts), so they carry the caller's trace too.
///
/// Not an `async fn`: one would hold `work` as its argument and again inside the scope,
/// a future twice the size of the request's, which every layer above moves.
pub fn with_request_trace<F: Future>(
    trace: Option<TraceId>,
    work: F,
) -> impl Future<Output = F::Output> {
    REQUEST_TRACE.scope(trace, work)
}

/// The caller's trace id for a reply the transport makes itself, else a new one.
pub fn request_trace() -> TraceId {
    REQUEST_TRACE
        .try_with(|t| *t)
        .ok()
        .flatten()
        .unwrap_or_else(new_trace_id)
}
