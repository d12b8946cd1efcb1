//! Timestamps: parsing the shapes logs and traces write, under the user's assumptions, into UTC nanoseconds.
//!
//! Every adapter converts to nanoseconds since the Unix epoch, UTC, at the boundary; nothing downstream converts.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use chrono::format::{Item, Parsed, StrftimeItems};
use chrono::{DateTime, NaiveDateTime};

/// Nanoseconds per second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;

/// A fixed offset from UTC, such as `+05:30`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UtcOffset {
    seconds: i32,
}

impl UtcOffset {
    /// UTC itself.
    pub const UTC: UtcOffset = UtcOffset { seconds: 0 };

    /// An offset of `seconds` east of UTC, if within ±23:59.
    pub fn from_seconds(seconds: i32) -> Option<Self> {
        (seconds.abs() < 24 * 3600).then_some(Self { seconds })
    }

    /// Seconds east of UTC.
    pub fn seconds(self) -> i32 {
        self.seconds
    }
}

impl fmt::Display for UtcOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.seconds < 0 { '-' } else { '+' };
        let abs = self.seconds.unsigned_abs();
        write!(f, "{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60)
    }
}

/// Why a timestamp could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeError {
    /// The text is not a timestamp of a supported shape.
    #[error("not a timestamp of the form YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]")]
    Shape,
    /// The UTC offset is malformed.
    #[error("invalid UTC offset, expected ±HH:MM")]
    Offset,
    /// The instant cannot be represented in nanoseconds since 1970 (before 1677 or after 2262).
    #[error("timestamp out of the representable range (1677..2262)")]
    Range,
}

impl FromStr for UtcOffset {
    type Err = TimeError;

    /// Parses `Z`, `±HH:MM`, `±HHMM` or `±HH`.
    fn from_str(text: &str) -> Result<Self, TimeError> {
        if text == "Z" || text == "z" {
            return Ok(Self::UTC);
        }
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (1, &text[1..]),
            Some(b'-') => (-1, &text[1..]),
            _ => return Err(TimeError::Offset),
        };
        let digits: String = rest.chars().filter(|&c| c != ':').collect();
        let all_digits = digits.bytes().all(|b| b.is_ascii_digit());
        let colon_ok = !rest.contains(':') || (rest.len() == 5 && rest.as_bytes()[2] == b':');
        if !all_digits || !colon_ok || !(digits.len() == 2 || digits.len() == 4) {
            return Err(TimeError::Offset);
        }
        let hours: i32 = digits[..2].parse().map_err(|_| TimeError::Offset)?;
        let minutes: i32 = if digits.len() == 4 { digits[2..].parse().map_err(|_| TimeError::Offset)? } else { 0 };
        if hours > 23 || minutes > 59 {
            return Err(TimeError::Offset);
        }
        Ok(Self { seconds: sign * (hours * 3600 + minutes * 60) })
    }
}

/// Assumptions an adapter applies to inputs that lack the information.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Year for timestamps written without one (`MM-DD HH:MM:SS`).
    pub year: Option<i32>,
    /// Offset of timestamps written without a zone.
    pub utc_offset: UtcOffset,
    /// Instant that relative trace times count from, in UTC nanoseconds (0 = 1970-01-01T00:00:00Z).
    pub start_ns: i64,
    /// Tokens per `hash_ids` block of Mooncake-style traces, whose lines do not say (512 when `None`; a header
    /// that says wins).
    pub block_size: Option<u32>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self { year: None, utc_offset: UtcOffset::UTC, start_ns: 0, block_size: None }
    }
}

/// A parsed timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    pub nanos: i64,
    /// Whether the text carried its own zone; if not, the assumed offset was applied.
    pub had_zone: bool,
}

/// The parsed formats of [`parse_datetime`].
static SPACED: LazyLock<Vec<Item<'static>>> = LazyLock::new(|| items("%Y-%m-%d %H:%M:%S%.f"));
static T_SEPARATED: LazyLock<Vec<Item<'static>>> = LazyLock::new(|| items("%Y-%m-%dT%H:%M:%S%.f"));

fn items(format: &'static str) -> Vec<Item<'static>> {
    StrftimeItems::new(format).parse().expect("a valid strftime format")
}

/// Parses `YYYY-MM-DD HH:MM:SS[.f]` (space or `T`, 0 to 9 fraction digits), optionally followed by `Z` or an
/// offset (`+00:00`, `+0000`, `+00`), into UTC nanoseconds. Without a zone, `assumed` is applied.
pub fn parse_datetime(text: &str, assumed: UtcOffset) -> Result<Instant, TimeError> {
    let text = text.trim();
    // The date-time part is at least `YYYY-MM-DD HH:MM:SS`; a zone can only start after it.
    if text.len() < 19 || !text.is_char_boundary(19) {
        return Err(TimeError::Shape);
    }
    let zone_at = text[19..].find(['Z', 'z', '+', '-']).map(|i| i + 19);
    let (local, offset, had_zone) = match zone_at {
        Some(i) => (&text[..i], text[i..].parse::<UtcOffset>()?, true),
        None => (text, assumed, false),
    };
    let items = match local.as_bytes()[10] {
        b' ' => &*SPACED,
        b'T' => &*T_SEPARATED,
        _ => return Err(TimeError::Shape),
    };
    let utc = match civil_by_hand(local.as_bytes()) {
        Some(nanos) => nanos,
        None => civil_by_chrono(local, items)?,
    };
    let nanos = utc.checked_sub(i64::from(offset.seconds()) * NANOS_PER_SEC).ok_or(TimeError::Range)?;
    Ok(Instant { nanos, had_zone })
}

/// `local` read by chrono: `NaiveDateTime::parse_from_str`, with the format read once rather than on every call.
fn civil_by_chrono(local: &str, items: &[Item<'static>]) -> Result<i64, TimeError> {
    let mut parsed = Parsed::new();
    chrono::format::parse(&mut parsed, local, items.iter()).map_err(|_| TimeError::Shape)?;
    let naive: NaiveDateTime = parsed.to_naive_datetime_with_offset(0).map_err(|_| TimeError::Shape)?;
    naive.and_utc().timestamp_nanos_opt().ok_or(TimeError::Range)
}

/// The common shape of [`parse_datetime`]'s local part read by hand: exactly `YYYY-MM-DD?HH:MM:SS`, then nothing or
/// `.` and one or more digits (the first nine kept, as chrono keeps them), every field in range (no leap second),
/// and the instant within `i64` nanoseconds. Anything else is `None` and left to chrono, which is what this must
/// agree with wherever it answers (a property test compares the two). Reading a timestamp through chrono's
/// general parser was the largest cost of an Azure trace (about 3,400 instructions a line).
fn civil_by_hand(b: &[u8]) -> Option<i64> {
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| {
        b[range].iter().try_fold(0u32, |n, &d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day == 0 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut fraction = 0i64;
    if b.len() > 19 {
        let digits = &b[20..];
        if b[19] != b'.' || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let kept = &digits[..digits.len().min(9)];
        fraction = kept.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0')) * 10i64.pow(9 - kept.len() as u32);
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    let (y, m) = (i64::from(year) - i64::from(month <= 2), i64::from(month));
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    seconds.checked_mul(NANOS_PER_SEC)?.checked_add(fraction)
}

/// A local civil time (`year-month-day hour:minute:second`) at `offset`, as UTC nanoseconds.
pub fn civil_to_nanos(
    year: i32,
    month: u32,
    day: u32,
    (hour, minute, second): (u32, u32, u32),
    offset: UtcOffset,
) -> Result<i64, TimeError> {
    let naive = chrono::NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|date| date.and_hms_opt(hour, minute, second))
        .ok_or(TimeError::Shape)?;
    let utc = naive.and_utc().timestamp_nanos_opt().ok_or(TimeError::Range)?;
    utc.checked_sub(i64::from(offset.seconds()) * NANOS_PER_SEC).ok_or(TimeError::Range)
}

/// The UTC calendar date `(year, month, day)` of an instant.
pub fn utc_date(nanos: i64) -> (i32, u32, u32) {
    use chrono::Datelike;
    let date = DateTime::from_timestamp_nanos(nanos).date_naive();
    (date.year(), date.month(), date.day())
}

/// The calendar date after `(year, month, day)`, if both exist.
pub fn next_date((year, month, day): (i32, u32, u32)) -> Option<(i32, u32, u32)> {
    use chrono::Datelike;
    let next = chrono::NaiveDate::from_ymd_opt(year, month, day)?.succ_opt()?;
    Some((next.year(), next.month(), next.day()))
}

/// Formats UTC nanoseconds as RFC 3339 with as many fraction digits as needed (none for whole seconds).
pub fn format_rfc3339(nanos: i64) -> String {
    DateTime::from_timestamp_nanos(nanos).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Parses an RFC 3339 instant (`--start`), returning UTC nanoseconds.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    let instant = parse_datetime(text, UtcOffset::UTC)?;
    if instant.had_zone { Ok(instant.nanos) } else { Err(TimeError::Offset) }
}

/// Converts seconds (possibly fractional, such as Python's `time.time()`) to nanoseconds.
///
/// The whole seconds and the fraction are converted apart: multiplying an epoch timestamp by 1e9 in `f64` would
/// lose the last digits (`1761816193.25` would become `…193.249999872`). Returns `None` for non-finite or
/// out-of-range values.
pub fn seconds_to_nanos(seconds: f64) -> Option<i64> {
    if !seconds.is_finite() || seconds.abs() >= (i64::MAX / NANOS_PER_SEC) as f64 {
        return None;
    }
    let whole = seconds.trunc();
    let fraction = ((seconds - whole) * NANOS_PER_SEC as f64).round() as i64;
    (whole as i64).checked_mul(NANOS_PER_SEC)?.checked_add(fraction)
}

/// Converts milliseconds (possibly fractional) to nanoseconds, rounding to the nearest nanosecond.
/// Returns `None` for non-finite values or values out of the `i64` nanosecond range.
pub fn millis_to_nanos(ms: f64) -> Option<i64> {
    let ns = (ms * 1e6).round();
    (ns.is_finite() && ns >= i64::MIN as f64 && ns < i64::MAX as f64).then_some(ns as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2023-11-16T18:17:03Z is 1_700_158_623 s after the epoch (19_677 days × 86_400 + 65_823 s).
    const AZURE_SECOND: i64 = 1_700_158_623;

    #[test]
    fn parses_the_shapes_traces_write() {
        let cases: &[(&str, i64, bool)] = &[
            // Azure 2023: seven fraction digits, no zone.
            ("2023-11-16 18:17:03.9799600", AZURE_SECOND * NANOS_PER_SEC + 979_960_000, false),
            ("2023-11-16 18:17:03.0000001", AZURE_SECOND * NANOS_PER_SEC + 100, false),
            // Azure 2024: explicit offset, fraction present or absent.
            ("2023-11-16 18:17:03.009930+00:00", AZURE_SECOND * NANOS_PER_SEC + 9_930_000, true),
            ("2023-11-16 18:17:03+00:00", AZURE_SECOND * NANOS_PER_SEC, true),
            ("2023-11-16T18:17:03Z", AZURE_SECOND * NANOS_PER_SEC, true),
            ("2023-11-16T20:17:03.5+02:00", AZURE_SECOND * NANOS_PER_SEC + 500_000_000, true),
            ("2023-11-16 13:17:03-0500", AZURE_SECOND * NANOS_PER_SEC, true),
            ("2023-11-16 18:17:03.123456789", AZURE_SECOND * NANOS_PER_SEC + 123_456_789, false),
        ];
        for &(text, nanos, had_zone) in cases {
            assert_eq!(parse_datetime(text, UtcOffset::UTC), Ok(Instant { nanos, had_zone }), "{text}");
        }
    }

    #[test]
    fn assumed_offset_applies_only_without_a_zone() {
        let ist: UtcOffset = "+05:30".parse().unwrap();
        assert_eq!(ist.seconds(), 19_800);
        assert_eq!(
            parse_datetime("2023-11-16 23:47:03", ist).unwrap().nanos,
            AZURE_SECOND * NANOS_PER_SEC,
            "23:47:03 at +05:30 is 18:17:03Z"
        );
        assert_eq!(parse_datetime("2023-11-16 18:17:03Z", ist).unwrap().nanos, AZURE_SECOND * NANOS_PER_SEC);
    }

    #[test]
    fn rejects_what_is_not_a_timestamp() {
        for text in ["", "0", "2023-11-16", "2023-13-16 18:17:03", "2023-11-16 25:17:03", "2023-11-16_18:17:03"] {
            assert_eq!(parse_datetime(text, UtcOffset::UTC), Err(TimeError::Shape), "{text:?}");
        }
        assert_eq!(parse_datetime("2023-11-16 18:17:03+25:00", UtcOffset::UTC), Err(TimeError::Offset));
        assert_eq!(parse_datetime("2500-01-01 00:00:00", UtcOffset::UTC), Err(TimeError::Range));
    }

    #[test]
    fn offsets_round_trip_through_text() {
        for text in ["+00:00", "+05:30", "-08:00", "+14:00"] {
            assert_eq!(text.parse::<UtcOffset>().unwrap().to_string(), text);
        }
        assert_eq!("Z".parse::<UtcOffset>(), Ok(UtcOffset::UTC));
        assert_eq!("+0530".parse::<UtcOffset>().unwrap().seconds(), 19_800);
        for bad in ["", "05:30", "+5:30", "+05:3", "+24:00", "+05:60", "+ab:cd"] {
            assert_eq!(bad.parse::<UtcOffset>(), Err(TimeError::Offset), "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_formats_and_parses() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(AZURE_SECOND * NANOS_PER_SEC + 979_960_000), "2023-11-16T18:17:03.979960Z");
        assert_eq!(parse_rfc3339("2023-11-16T18:17:03Z"), Ok(AZURE_SECOND * NANOS_PER_SEC));
        assert_eq!(parse_rfc3339("2023-11-16T18:17:03"), Err(TimeError::Offset));
    }

    #[test]
    fn civil_times_take_the_offset() {
        let at = |offset: &str| civil_to_nanos(2023, 11, 16, (18, 17, 3), offset.parse().unwrap());
        assert_eq!(at("+00:00"), Ok(AZURE_SECOND * NANOS_PER_SEC));
        assert_eq!(at("+01:00"), Ok((AZURE_SECOND - 3600) * NANOS_PER_SEC));
        assert_eq!(civil_to_nanos(2023, 2, 30, (0, 0, 0), UtcOffset::UTC), Err(TimeError::Shape));
        assert_eq!(civil_to_nanos(2024, 2, 29, (0, 0, 0), UtcOffset::UTC).map(|n| n > 0), Ok(true), "leap day");
    }

    #[test]
    fn calendar_dates() {
        assert_eq!(utc_date(0), (1970, 1, 1));
        assert_eq!(utc_date(AZURE_SECOND * NANOS_PER_SEC), (2023, 11, 16));
        assert_eq!(next_date((2023, 12, 31)), Some((2024, 1, 1)));
        assert_eq!(next_date((2024, 2, 28)), Some((2024, 2, 29)));
        assert_eq!(next_date((2023, 2, 30)), None);
    }

    #[test]
    fn epoch_seconds_keep_their_fraction() {
        assert_eq!(seconds_to_nanos(1_761_816_193.25), Some(1_761_816_193_250_000_000));
        assert_eq!(seconds_to_nanos(-1.5), Some(-1_500_000_000));
        assert_eq!(seconds_to_nanos(0.000_000_001), Some(1));
        assert_eq!(seconds_to_nanos(f64::INFINITY), None);
        assert_eq!(seconds_to_nanos(1e19), None);
    }

    #[test]
    fn millis_convert_exactly_for_integers() {
        assert_eq!(millis_to_nanos(27_482.0), Some(27_482_000_000));
        assert_eq!(millis_to_nanos(0.5), Some(500_000));
        assert_eq!(millis_to_nanos(f64::NAN), None);
        assert_eq!(millis_to_nanos(1e300), None);
    }

    #[test]
    fn the_common_shape_is_read_by_hand() {
        // The fast path answers these (so the property test below compares it, not chrono with itself).
        let by_hand = |s: &str| civil_by_hand(s.as_bytes());
        assert_eq!(by_hand("2023-11-16 18:17:03"), Some(AZURE_SECOND * NANOS_PER_SEC));
        assert_eq!(by_hand("2023-11-16T18:17:03.0204442"), Some(AZURE_SECOND * NANOS_PER_SEC + 20_444_200));
        // Digits past the ninth are read and dropped, as chrono drops them.
        assert_eq!(by_hand("2023-11-16 18:17:03.1234567891"), Some(AZURE_SECOND * NANOS_PER_SEC + 123_456_789));
        assert_eq!(by_hand("1970-01-01 00:00:00"), Some(0));
        // 1969-12-31 23:59:59.5 is half a second before the epoch; 2024-02-29 is 19_782 days after it.
        assert_eq!(by_hand("1969-12-31 23:59:59.5"), Some(-500_000_000));
        assert_eq!(by_hand("2024-02-29 00:00:00"), Some(19_782 * 86_400 * NANOS_PER_SEC));
        // Everything else is chrono's: a leap second, a bare dot, padding, an impossible date, beyond i64.
        for other in [
            "2016-12-31 23:59:60",
            "2023-11-16 18:17:03.",
            "2023-11-16 18:17: 3",
            "2023-02-29 00:00:00",
            "2023-11-16 18:17:03 ",
            "9999-12-31 23:59:59",
        ] {
            assert_eq!(by_hand(other), None, "{other}");
        }
        assert_eq!(
            parse_datetime("2016-12-31 23:59:60", UtcOffset::UTC).map(|i| i.nanos),
            Ok(1_483_228_800_000_000_000)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Where the hand reader answers, chrono answers the same; near-shapes (every byte drawn from digits and the
        /// separators) exercise its refusals.
        #[test]
        fn the_hand_reader_agrees_with_chrono(
            date in (0u32..10_000, 0u32..14, 0u32..33, 0u32..25, 0u32..61, 0u32..62),
            sep in proptest::sample::select(vec![' ', 'T']),
            fraction in proptest::option::of("[0-9]{0,12}"),
            noise in proptest::option::of((0usize..32, proptest::sample::select(vec![b'0', b'9', b' ', b'-', b':', b'.', b'T', b'x']))),
        ) {
            let (year, month, day, hour, minute, second) = date;
            let mut text = format!("{year:04}-{month:02}-{day:02}{sep}{hour:02}:{minute:02}:{second:02}");
            if let Some(fraction) = fraction {
                text.push('.');
                text.push_str(&fraction);
            }
            let mut bytes = text.into_bytes();
            if let Some((at, byte)) = noise && at < bytes.len() {
                bytes[at] = byte;
            }
            let text = String::from_utf8(bytes).unwrap();
            let items: &[Item<'static>] = if text.as_bytes()[10] == b'T' { &T_SEPARATED } else { &SPACED };
            if let Some(nanos) = civil_by_hand(text.as_bytes()) {
                proptest::prop_assert_eq!(Ok(nanos), civil_by_chrono(&text, items), "{}", text);
            }
        }
    }
}
