//! The log lines' timestamps: RFC 3339 in UTC to the microsecond, as tracing-subscriber's
//! default timer (`fmt::time::SystemTime`) prints them, but written as bytes. The default
//! goes through `core::fmt` with padding for each of its seven numbers, and a serving
//! bridge stamps a line for every tool call. The tests hold it to chrono's RFC 3339
//! output, day by day over four centuries.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// `2026-12-06T01:10:27.140665Z`.
#[derive(Debug, Clone, Copy, Default)]
pub struct UtcMicros;

impl FormatTime for UtcMicros {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        // A clock before 1970 prints as the epoch rather than failing the line.
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let text = rfc3339_micros(since);
        // Only ASCII digits and separators are written.
        w.write_str(std::str::from_utf8(&text).unwrap_or("1970-01-01T00:00:00.000000Z"))
    }
}

/// `since` the Unix epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (years past 9999 wrap their
/// thousands, which no clock this code runs under will reach).
fn rfc3339_micros(since: Duration) -> [u8; 27] {
    let secs = since.as_secs();
    let (year, month, day) = civil_date(secs / 86_400);
    let of_day = secs % 86_400;
    let mut out = *b"0000-00-00T00:00:00.000000Z";
    digits(&mut out[0..4], year);
    digits(&mut out[5..7], month);
    digits(&mut out[8..10], day);
    digits(&mut out[11..13], of_day / 3600);
    digits(&mut out[14..16], of_day / 60 % 60);
    digits(&mut out[17..19], of_day % 60);
    digits(&mut out[20..26], u64::from(since.subsec_micros()));
    out
}

/// Fills `slot` with the low decimal digits of `n`, zero-padded.
fn digits(slot: &mut [u8], mut n: u64) {
    for b in slot.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01, by
/// counting 400-year eras from 0000-03-01 (so a leap day ends its year).
fn civil_date(days: u64) -> (u64, u64, u64) {
    const DAYS_TO_1970_FROM_MARCH_0000: u64 = 719_468;
    const ERA: u64 = 146_097;
    let z = days + DAYS_TO_1970_FROM_MARCH_0000;
    let era = z / ERA;
    let day_of_era = z % ERA;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, micros: u32) -> String {
        let text = rfc3339_micros(Duration::new(secs, micros * 1000));
        String::from_utf8(text.to_vec()).unwrap()
    }

    #[test]
    fn known_instants_print_as_rfc3339_micros() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 1), "2000-02-29T00:00:00.000001Z");
        assert_eq!(at(1_709_251_199, 999_999), "2024-02-29T23:59:59.999999Z");
        assert_eq!(at(1_796_519_427, 140_665), "2026-12-06T01:10:27.140665Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
    }

    #[test]
    fn every_day_for_four_centuries_agrees_with_chrono() {
        // 1970 to 2370: every month length, leap year and century rule.
        for day in 0..146_097 {
            let secs = day * 86_400 + 45_296;
            let expected = chrono::DateTime::from_timestamp(secs as i64, 7_000)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            assert_eq!(at(secs, 7), expected, "day {day}");
        }
    }
}
