//! `exp` and `nbf` against the bridge's clock, with the leeway: the rule of the verified
//! decode (jsonwebtoken's own check, which reads the system's clock, is off) and of the
//! cache's check on every use.

use serde::{Deserialize, Deserializer};

use crate::domain::{Timestamp, TokenRejection};

/// A NumericDate claim (`exp`, `nbf`) as jsonwebtoken reads one: absent, a non-negative
/// number (rounded to whole seconds), or anything else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum NumericDate {
    /// Not in the token.
    #[default]
    Absent,
    /// Unix seconds.
    Secs(u64),
    /// Present but not a NumericDate.
    Unreadable,
}

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NumericDate, D::Error> {
        // The whole value is read, whatever it is, so the claims after it still parse.
        let value = serde_json::Value::deserialize(d)?;
        Ok(value
            .as_number()
            .and_then(|n| n.as_u64().or_else(|| n.as_f64().and_then(whole_seconds)))
            .map_or(NumericDate::Unreadable, NumericDate::Secs))
    }
}

fn whole_seconds(f: f64) -> Option<u64> {
    (f.is_finite() && f >= 0.0 && f < u64::MAX as f64).then(|| f.round() as u64)
}

/// Whether a token with `exp` and `nbf` is in force at `now`, each with `leeway_s`; the
/// refusal in jsonwebtoken's order: an unreadable claim, then expiry, then `nbf`.
pub(super) fn in_force(
    exp: NumericDate,
    nbf: NumericDate,
    now: Timestamp,
    leeway_s: u64,
) -> Result<(), TokenRejection> {
    let now_s = now.unix_millis().div_euclid(1000);
    let leeway = i64::try_from(leeway_s).unwrap_or(i64::MAX);
    let secs = |s: u64| i64::try_from(s).unwrap_or(i64::MAX);
    if exp == NumericDate::Unreadable || nbf == NumericDate::Unreadable {
        return Err(TokenRejection::Malformed);
    }
    if let NumericDate::Secs(exp) = exp
        && secs(exp).saturating_add(leeway) < now_s
    {
        return Err(TokenRejection::Expired);
    }
    if let NumericDate::Secs(nbf) = nbf
        && secs(nbf) > now_s.saturating_add(leeway)
    {
        return Err(TokenRejection::NotYetValid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_unix_millis(s * 1000)
    }

    fn read(json: &str) -> (NumericDate, NumericDate) {
        #[derive(Deserialize)]
        struct Claims {
            #[serde(default)]
            exp: NumericDate,
            #[serde(default)]
            nbf: NumericDate,
        }
        let c: Claims = serde_json::from_str(json).unwrap();
        (c.exp, c.nbf)
    }

    #[test]
    fn numeric_dates_are_read_as_jsonwebtoken_reads_them() {
        use NumericDate::{Absent, Secs, Unreadable};
        assert_eq!(read(r#"{"exp": 10}"#), (Secs(10), Absent));
        assert_eq!(read(r#"{"exp": 10.6, "nbf": 2.4}"#), (Secs(11), Secs(2)));
        assert_eq!(
            read(r#"{"exp": -1, "nbf": null}"#),
            (Unreadable, Unreadable)
        );
        assert_eq!(
            read(r#"{"exp": "10", "nbf": {"a": [1]}, "later": 1}"#),
            (Unreadable, Unreadable)
        );
        assert_eq!(read(r#"{"exp": 1e30}"#), (Unreadable, Absent));
    }

    #[test]
    fn times_hold_with_the_leeway_and_not_a_second_past_it() {
        use NumericDate::{Absent, Secs, Unreadable};
        assert_eq!(in_force(Secs(1_000), Secs(900), at(1_030), 30), Ok(()));
        assert_eq!(
            in_force(Secs(1_000), Absent, at(1_031), 30),
            Err(TokenRejection::Expired)
        );
        assert_eq!(in_force(Secs(1_000), Secs(900), at(870), 30), Ok(()));
        assert_eq!(
            in_force(Secs(1_000), Secs(900), at(869), 30),
            Err(TokenRejection::NotYetValid)
        );
        // Expiry is refused before `nbf`, an unreadable claim before either.
        assert_eq!(
            in_force(Secs(10), Secs(5_000), at(1_000), 30),
            Err(TokenRejection::Expired)
        );
        assert_eq!(
            in_force(Secs(10), Unreadable, at(1_000), 30),
            Err(TokenRejection::Malformed)
        );
    }
}
