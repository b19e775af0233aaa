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

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), so a call continues
/// its caller's trace. Malformed values and the all-zero ids are ignored.
pub fn trace_of_traceparent(value: &str) -> Option<TraceId> {
    let mut parts = value.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    if parts.next().is_some()
        || version != "00"
        || !hex(parent, 16)
        || !hex(flags, 2)
        || parent == "0000000000000000"
    {
        return None;
    }
    if !hex(trace, 32) {
        return None;
    }
    TraceId::parse(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_gives_its_trace_id() {
        let t = trace_of_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap();
        assert_eq!(t.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert_eq!(trace_of_traceparent(bad), None, "{bad}");
        }
    }
}
