//! Identifiers that cross the wire: trace ids, tenant ids, task ids, and timestamps.
//!
//! Each is parsed at the edge and kept in a private field, so a value of these types is
//! always well formed. Random bytes are drawn outside the domain and passed in.

use std::fmt;

use data_encoding::{HEXLOWER, HEXLOWER_PERMISSIVE};

/// A W3C / OpenTelemetry trace id: 16 bytes, written as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

impl TraceId {
    /// Builds a trace id from random bytes. The all-zero id is invalid in W3C trace
    /// context, so it is nudged to a valid value.
    pub fn from_bytes(mut bytes: [u8; 16]) -> TraceId {
        if bytes == [0; 16] {
            bytes[15] = 1;
        }
        TraceId(bytes)
    }

    /// Parses 32 hex digits (any case); rejects the all-zero id.
    pub fn parse(s: &str) -> Option<TraceId> {
        let bytes = parse_hex::<16>(s)?;
        (bytes != [0; 16]).then_some(TraceId(bytes))
    }

    /// The raw bytes.
    pub fn bytes(&self) -> [u8; 16] {
        self.0
    }
}

impl TraceId {
    /// The 32 lowercase hex digits, without going through `fmt` (this runs on every call).
    pub fn to_hex(&self) -> String {
        hex_lower(&self.0)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

/// Lowercase hex of `bytes`: the one hex encoding of the crate's ids, keys and digests.
pub fn hex_lower(bytes: &[u8]) -> String {
    HEXLOWER.encode(bytes)
}

/// Lowercase hex of `bytes` written to `f` without allocating: ids are formatted into
/// every log line of a call.
pub fn write_hex(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    for chunk in bytes.chunks(16) {
        let mut text = [0u8; 32];
        let text = &mut text[..HEXLOWER.encode_len(chunk.len())];
        f.write_str(HEXLOWER.encode_mut_str(chunk, text))?;
    }
    Ok(())
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

pub(crate) fn parse_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.as_bytes();
    if s.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    HEXLOWER_PERMISSIVE.decode_mut(s, &mut out).ok()?;
    Some(out)
}

/// A tenant: a UUID taken only from a verified identity, never from a header or config.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(uuid::Uuid);

/// The tenant id was not a UUID in its canonical spelling, or was the nil UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant id is not a lowercase hyphenated UUID")]
pub struct ParseTenantIdError;

impl TenantId {
    /// Parses the canonical spelling only (lowercase, hyphenated: RFC 9562 §4), so every
    /// tenant has one: an identity provider that compares tenant ids as strings must see
    /// the same tenants the bridge does. The nil UUID is nobody's tenant: an identity
    /// provider that fills the claim with zeros must not make a shared tenant of them.
    pub fn parse(s: &str) -> Result<TenantId, ParseTenantIdError> {
        uuid::Uuid::try_parse(s)
            .ok()
            .filter(|u| {
                !u.is_nil()
                    && *u
                        .hyphenated()
                        .encode_lower(&mut uuid::Uuid::encode_buffer())
                        == *s
            })
            .map(TenantId)
            .ok_or(ParseTenantIdError)
    }

    /// The UUID.
    pub fn uuid(&self) -> uuid::Uuid {
        self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TenantId({self})")
    }
}

/// A task id: `t-` followed by the unpadded lowercase RFC 4648 base32 of 128 random bits
/// (26 characters), so ids cannot be guessed (MCP 2025-11-25 tasks security).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskId([u8; 16]);

impl TaskId {
    const PREFIX: &'static str = "t-";
    const ALPHABET: &'static [u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

    /// Builds a task id from 16 bytes drawn from a CSPRNG.
    pub fn from_random(bytes: [u8; 16]) -> TaskId {
        TaskId(bytes)
    }

    /// Parses the canonical form only (lowercase, 26 digits, zero trailing bits), so every
    /// task has exactly one spelling.
    pub fn parse(s: &str) -> Option<TaskId> {
        let body = s.strip_prefix(Self::PREFIX)?.as_bytes();
        if body.len() != 26 {
            return None;
        }
        let mut acc: u128 = 0;
        let mut extra: u8 = 0;
        for (i, &c) in body.iter().enumerate() {
            let v = Self::ALPHABET.iter().position(|&a| a == c)? as u8;
            if i < 25 {
                acc = (acc << 5) | u128::from(v);
            } else {
                // 25 digits carry 125 bits; the last digit carries 3 bits and 2 zero bits.
                if v & 0b11 != 0 {
                    return None;
                }
                extra = v >> 2;
            }
        }
        Some(TaskId(((acc << 3) | u128::from(extra)).to_be_bytes()))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = u128::from_be_bytes(self.0);
        let mut out = [0u8; 26];
        for (i, slot) in out.iter_mut().enumerate() {
            // Bit groups from the top; the last group is padded with two zero bits.
            let v = if i < 25 {
                (n >> (128 - 5 * (i + 1))) & 0x1f
            } else {
                (n & 0b111) << 2
            };
            *slot = Self::ALPHABET[v as usize];
        }
        f.write_str(Self::PREFIX)?;
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({self})")
    }
}

/// Milliseconds since the Unix epoch, UTC. The domain compares and subtracts them; the
/// edges format them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// From Unix milliseconds.
    pub const fn from_unix_millis(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    /// Unix milliseconds.
    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// This instant plus `ms` milliseconds (saturating).
    pub const fn plus_millis(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, never negative.
    pub fn millis_since(self, earlier: Timestamp) -> u64 {
        u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0)
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-12-03T09:32:37.000Z`: the one form
    /// every edge writes (tool results, task objects, CUO deadlines, memory queries).
    pub fn to_rfc3339(self) -> String {
        chrono::DateTime::from_timestamp_millis(self.0)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// Reads an RFC 3339 date-time with any offset.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| Timestamp(t.timestamp_millis()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_nil_uuid_is_not_a_tenant() {
        assert!(TenantId::parse("00000000-0000-0000-0000-000000000000").is_err());
        assert!(TenantId::parse("00000000-0000-4000-8000-000000000001").is_ok());
    }

    #[test]
    fn timestamps_round_trip_through_rfc3339() {
        let t = Timestamp::from_unix_millis(1_796_290_357_042);
        assert_eq!(t.to_rfc3339(), "2026-12-03T09:32:37.042Z");
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        assert_eq!(
            Timestamp::parse_rfc3339("2026-12-03T10:32:37.042+01:00"),
            Some(t)
        );
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn task_ids_round_trip_through_their_canonical_form() {
        for bytes in [[0u8; 16], [0xff; 16], *b"0123456789abcdef", [7; 16]] {
            let id = TaskId::from_random(bytes);
            let text = id.to_string();
            assert_eq!(text.len(), 28, "{text}");
            assert!(text.starts_with("t-"));
            assert_eq!(TaskId::parse(&text), Some(id));
        }
    }

    #[test]
    fn task_ids_reject_other_spellings() {
        let text = TaskId::from_random([0xab; 16]).to_string();
        assert_eq!(TaskId::parse(&text.to_uppercase()), None);
        assert_eq!(TaskId::parse(&text[..27]), None);
        assert_eq!(TaskId::parse(&format!("{text}a")), None);
        assert_eq!(TaskId::parse(&text.replacen("t-", "x-", 1)), None);
        // Non-zero padding bits in the last digit would give a second spelling.
        let mut bad = text.clone().into_bytes();
        bad[27] = b'b';
        assert_eq!(TaskId::parse(std::str::from_utf8(&bad).unwrap()), None);
        assert_eq!(TaskId::parse("t-abc123"), None);
        assert_eq!(TaskId::parse(""), None);
    }

    #[test]
    fn trace_ids_are_32_lowercase_hex_digits() {
        let id = TraceId::from_bytes(
            *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef",
        );
        assert_eq!(id.to_string(), "0123456789abcdef0123456789abcdef");
        assert_eq!(TraceId::parse("0123456789ABCDEF0123456789abcdef"), Some(id));
        assert_eq!(TraceId::parse("00000000000000000000000000000000"), None);
        assert_eq!(TraceId::parse("0123"), None);
        assert_ne!(TraceId::from_bytes([0; 16]).to_string(), "0".repeat(32));
    }

    #[test]
    fn tenant_ids_must_be_uuids() {
        assert!(TenantId::parse("11111111-1111-4111-8111-111111111111").is_ok());
        assert_eq!(TenantId::parse("a"), Err(ParseTenantIdError));
        assert_eq!(TenantId::parse(""), Err(ParseTenantIdError));
    }

    #[test]
    fn a_tenant_id_has_one_spelling() {
        let canonical = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";
        assert_eq!(TenantId::parse(canonical).unwrap().to_string(), canonical);
        for other in [
            "0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2D3",
            "0a1b2c3d4e5f4a6b8c7d8e9fa0b1c2d3",
            "{0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3}",
            "urn:uuid:0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3",
            " 0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3",
        ] {
            assert_eq!(TenantId::parse(other), Err(ParseTenantIdError), "{other}");
        }
    }

    proptest! {
        #[test]
        fn every_task_id_round_trips(bytes in any::<[u8; 16]>()) {
            let id = TaskId::from_random(bytes);
            prop_assert_eq!(TaskId::parse(&id.to_string()), Some(id));
        }

        /// A task id has one spelling: whatever parses prints back as the same text.
        #[test]
        fn only_canonical_task_ids_parse(text in "(t-)?[a-z2-7A-Z0-9=]{0,30}|\\PC{0,40}") {
            if let Some(id) = TaskId::parse(&text) {
                prop_assert_eq!(id.to_string(), text);
            }
        }

        /// A tenant id has one spelling too, and every UUID but nil has it.
        #[test]
        fn only_canonical_tenant_ids_parse(
            bytes in any::<[u8; 16]>(),
            text in "(urn:uuid:|\\{)?[0-9a-fA-F-]{32,36}\\}?|\\PC{0,40}",
        ) {
            let uuid = uuid::Uuid::from_bytes(bytes);
            let canonical = uuid.hyphenated().to_string();
            prop_assert_eq!(TenantId::parse(&canonical).is_ok(), !uuid.is_nil());
            if let Ok(id) = TenantId::parse(&text) {
                prop_assert_eq!(id.to_string(), text);
            }
        }

        #[test]
        fn trace_ids_round_trip_and_zero_is_refused(bytes in any::<[u8; 16]>(), text in "\\PC{0,40}") {
            let id = TraceId::from_bytes(bytes);
            prop_assert_eq!(TraceId::parse(&id.to_hex()), Some(id));
            prop_assert_eq!(id.to_string(), id.to_hex());
            if let Some(parsed) = TraceId::parse(&text) {
                prop_assert_eq!(parsed.to_hex(), text.to_ascii_lowercase());
                prop_assert_ne!(parsed.bytes(), [0; 16]);
            }
        }

        #[test]
        fn hex_written_in_pieces_is_the_whole_hex(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut written = String::new();
            write_hex(&mut written, &bytes).unwrap();
            prop_assert_eq!(written, hex_lower(&bytes));
        }

        #[test]
        fn any_timestamp_round_trips_through_rfc3339(ms in 0i64..=253_402_300_799_999) {
            let t = Timestamp::from_unix_millis(ms);
            prop_assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        }
    }
}
