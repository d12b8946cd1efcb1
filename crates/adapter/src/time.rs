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
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self { year: None, utc_offset: UtcOffset::UTC, start_ns: 0 }
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
    // `NaiveDateTime::parse_from_str`, with the format read once rather than on every call (it was the largest
    // cost of reading an Azure trace).
    let mut parsed = Parsed::new();
    chrono::format::parse(&mut parsed, local, items.iter()).map_err(|_| TimeError::Shape)?;
    let naive: NaiveDateTime = parsed.to_naive_datetime_with_offset(0).map_err(|_| TimeError::Shape)?;
    let utc = naive.and_utc().timestamp_nanos_opt().ok_or(TimeError::Range)?;
    let nanos = utc.checked_sub(i64::from(offset.seconds()) * NANOS_PER_SEC).ok_or(TimeError::Range)?;
    Ok(Instant { nanos, had_zone })
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
}
