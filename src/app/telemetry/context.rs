//! The W3C trace context a request arrives with: `traceparent` and `tracestate`, parsed
//! strictly enough that nothing which could break a header reaches an upstream.

use std::sync::Arc;

use crate::domain::TraceId;

/// The W3C trace context a request arrived with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The caller's trace.
    pub trace_id: TraceId,
    /// The caller's span.
    pub span_id: [u8; 8],
    /// The caller's sampling decision.
    pub sampled: bool,
    /// The caller's `tracestate`, passed on unchanged (the bridge adds no entry of its own).
    pub state: Option<Arc<str>>,
}

impl Parent {
    /// The context of `traceparent` with its `tracestate`; `None` without a valid
    /// `traceparent` (a `tracestate` alone means nothing).
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Parent> {
        let mut parent = parse_traceparent(traceparent?)?;
        parent.state = tracestate.and_then(parse_tracestate);
        Some(parent)
    }
}

/// Parses a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase). Malformed
/// values, other versions and all-zero ids are ignored, as the W3C spec asks.
pub fn parse_traceparent(value: &str) -> Option<Parent> {
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
        || !hex(trace, 32)
        || !hex(parent, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let span_id = u64::from_str_radix(parent, 16).ok()?.to_be_bytes();
    if span_id == [0; 8] {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(Parent {
        trace_id: TraceId::parse(trace)?,
        span_id,
        sampled: flags & 1 == 1,
        state: None,
    })
}

/// The longest `tracestate` passed on; a member that would take it past this is dropped
/// (W3C: propagate at least 512 characters, truncate by whole members).
const TRACESTATE_MAX: usize = 512;

/// Parses a W3C `tracestate` (`key=value` list members, comma separated, at most 32) into
/// its normal form. A malformed list (bad key or value, duplicate key) is dropped whole,
/// so nothing that could break a header reaches an upstream.
pub fn parse_tracestate(value: &str) -> Option<Arc<str>> {
    let mut out = String::new();
    let mut keys: Vec<&str> = Vec::new();
    for member in value.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, val) = member.split_once('=')?;
        if !tracestate_key(key) || !tracestate_value(val) || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        if keys.len() > 32 {
            return None;
        }
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + member.len() <= TRACESTATE_MAX {
            if sep == 1 {
                out.push(',');
            }
            out.push_str(member);
        }
    }
    (!out.is_empty()).then(|| Arc::from(out))
}

/// `simple-key` or `tenant@system`: lowercase letters, digits and `_-*/`, starting with a
/// letter or digit (as lenient as the OTel SDK: a list is dropped whole, so strictness
/// beyond what keeps headers safe costs the caller its trace state).
fn tracestate_key(key: &str) -> bool {
    let part = |s: &str, max: usize| {
        let first = s.as_bytes().first().copied().unwrap_or(b'_');
        s.len() <= max
            && (first.is_ascii_lowercase() || first.is_ascii_digit())
            && s.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'*' | b'/')
            })
    };
    match key.split_once('@') {
        None => part(key, 256),
        Some((tenant, system)) => part(tenant, 241) && part(system, 14),
    }
}

/// 1–256 printable ASCII characters other than `,` and `=` (the member was trimmed, so it
/// does not end in a space).
fn tracestate_value(value: &str) -> bool {
    (1..=256).contains(&value.len())
        && value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::telemetry::CallSpan;
    use proptest::prelude::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_gives_its_ids_and_flag() {
        let p =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(p.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(p.sampled);
        let p =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!p.sampled);
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
            "00-4bf92f3577b34da6a3ce929d0e0e4736-+0f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_valid_tracestate_is_kept_in_normal_form() {
        let state = |s| parse_tracestate(s).map(|s| s.to_string());
        assert_eq!(
            state("congo=t61rcWkgMzE").as_deref(),
            Some("congo=t61rcWkgMzE")
        );
        assert_eq!(
            state(" rojo=00f067aa0ba902b7 ,, 1t@vendor=a b\t,congo=x").as_deref(),
            Some("rojo=00f067aa0ba902b7,1t@vendor=a b,congo=x")
        );
        assert_eq!(state(" , "), None);
        let p = Parent::from_headers(Some(TP), Some("rojo=1")).unwrap();
        assert_eq!(p.state.as_deref(), Some("rojo=1"));
        let call = CallSpan::start(Some(&p), || "1".into(), "pipe", None);
        assert_eq!(call.tracestate().as_deref(), Some("rojo=1"));
    }

    #[test]
    fn a_malformed_tracestate_is_dropped_whole() {
        let long = format!("k={}", "v".repeat(257));
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        for bad in [
            "novalue",
            "Upper=1",
            "k=a,k=b",
            "k=a\r\nx-injected: 1",
            "k=é",
            "k=in\tside",
            "k=",
            "=v",
            "_k=v",
            "k@=v",
            "k@toolongvendorname=v",
            "k@_v=v",
            "k=a=b",
            long.as_str(),
            many.as_str(),
        ] {
            assert_eq!(parse_tracestate(bad), None, "{bad:?}");
        }
        // Without a valid traceparent there is no context, its tracestate included.
        assert_eq!(Parent::from_headers(None, Some("rojo=1")), None);
        assert_eq!(Parent::from_headers(Some("00-x"), Some("rojo=1")), None);
        let p = Parent::from_headers(Some(TP), Some("Bad=1")).unwrap();
        assert_eq!(p.state, None);
    }

    #[test]
    fn a_tracestate_over_512_characters_loses_members_from_the_end() {
        let members: Vec<String> = (0..10)
            .map(|i| format!("k{i}={}", "v".repeat(60)))
            .collect();
        let state = parse_tracestate(&members.join(",")).unwrap();
        assert!(state.len() <= 512, "{}", state.len());
        assert_eq!(&*state, members[..8].join(",").as_str());
    }

    proptest! {
        #[test]
        fn a_well_formed_traceparent_gives_back_its_parts(
            trace in any::<[u8; 16]>().prop_filter("non-zero", |b| *b != [0; 16]),
            span in any::<[u8; 8]>().prop_filter("non-zero", |b| *b != [0; 8]),
            flags in any::<u8>(),
        ) {
            let header = format!(
                "00-{}-{}-{flags:02x}",
                crate::domain::ids::hex_lower(&trace),
                crate::domain::ids::hex_lower(&span)
            );
            let p = parse_traceparent(&header).unwrap();
            prop_assert_eq!(p.trace_id.bytes(), trace);
            prop_assert_eq!(p.span_id, span);
            prop_assert_eq!(p.sampled, flags & 1 == 1);
        }

        #[test]
        fn any_traceparent_text_parses_or_is_ignored(text in "(00-)?[0-9a-fA-F-]{0,60}|\\PC{0,60}") {
            if let Some(p) = parse_traceparent(&text) {
                prop_assert_eq!(text.len(), 55);
                prop_assert_ne!(p.span_id, [0; 8]);
            }
        }

        /// The normal form is a fixed point, at most 512 characters, with nothing that
        /// could split or break a header.
        #[test]
        fn a_kept_tracestate_is_its_own_normal_form(
            text in "([a-z0-9@_*/-]{1,6}=[ -~]{0,8}[ \t,]{0,3}){0,6}|\\PC{0,80}"
        ) {
            if let Some(state) = parse_tracestate(&text) {
                prop_assert!(state.len() <= 512);
                let again = parse_tracestate(&state);
                prop_assert_eq!(again.as_deref(), Some(&*state));
                prop_assert!(state.bytes().all(|b| (0x20..=0x7e).contains(&b)));
                prop_assert!(!state.starts_with(' ') && !state.ends_with(' '));
            }
        }
    }
}
