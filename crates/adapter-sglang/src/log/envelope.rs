//! The SGLang log envelope: `[%(asctime)s{.msecs}{rank tags}] %(message)s` (`configure_logger`).
//!
//! ```text
//! 0.3.0 – 0.3.2   [04:40:55 TP0] …                       datefmt %H:%M:%S (no date)
//! 0.3.4 – 0.5.5   [2025-03-03 17:53:04 TP0] …            datefmt %Y-%m-%d %H:%M:%S
//! 0.5.6 – 0.5.23  [2026-05-28 00:11:09.816 DP0 TP0 EP0] …  `.%(msecs)03d` iff SGLANG_LOG_MS=1
//! rank tags       TP always (0.3.4–0.4.6); from 0.4.7 only when >1: DP, TP, EP, PP, ATTN_CP, MOE_DP in each
//!                 release's order; none on the HTTP/tokenizer process; ` encode_server`, ` encode_dp_worker[N]`
//! ```
//!
//! Local host time, no zone. The envelope is searched for, not anchored: parent loggers re-log lines
//! (`2025-03-08 02:04:48,693 - __main__ - INFO - [2025-… TP0] …`) and progress bars share lines with it.

use std::sync::LazyLock;

use regex::Regex;

/// One SGLang log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    /// `(year, month, day)`, absent before 0.3.4.
    pub(crate) date: Option<(i32, u32, u32)>,
    /// `(hour, minute, second)`.
    pub(crate) hms: (u32, u32, u32),
    /// Milliseconds, with `SGLANG_LOG_MS=1`.
    pub(crate) millis: Option<u32>,
    /// Rank tags such as `DP0 TP0 EP0`, empty when none.
    pub(crate) ranks: &'a str,
    /// The message.
    pub(crate) message: &'a str,
    /// Where the envelope was found: [`Found::Start`] of the line, [`Found::Inside`] it (a parent logger's or
    /// a container's prefix before it), or [`Found::Custom`], a formatter of the deployment's own.
    pub(crate) found: Found,
}

/// Where an SGLang envelope was found on its line, for the manifest's `envelopes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// `[time ranks] message` at the start of the line.
    Start,
    /// The same after a prefix (a parent logger, a container runtime, a progress bar).
    Inside,
    /// A formatter of the deployment's own: the date and time before a bracket of rank tags and `file:line`
    /// (`2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] Decode batch. …`).
    Custom,
}

impl Found {
    /// The name in the manifest's `envelopes`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Found::Start => "plain",
            Found::Inside => "prefixed",
            Found::Custom => "custom-formatter",
        }
    }
}

/// A deployment's own formatter: a date and time, anything without a `[`, then a bracket holding rank tags and/or
/// the logging call's `file.py:line` (padded or not), or SGLang's logger name (`[INFO] sglang.srt.managers.…: `),
/// then the message.
static CUSTOM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        (?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[\ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<ms>\d{3})\d*)?
        [^\[\]]{0,80}?
        (?:
            \[\ *(?P<ranks>(?:[A-Z_]+\d+\ +)*[A-Z_]+\d+)?\ *(?P<file>[\w.-]+\.py:\d+)?\ *\]\ (?P<message>.*)
          | (?:\[[A-Z]+\]\ )?(?P<logger>sglang(?:\.\w+)*):\ (?P<logged>.*)
        )$",
    )
    .expect("valid regex")
});

/// The record of a deployment's own formatter ([`CUSTOM`]) in `line`: its bracket must hold rank tags or a
/// `file.py:line`, or it is not taken for one.
fn custom(line: &str) -> Option<Record<'_>> {
    let c = CUSTOM.captures(line)?;
    if c.name("ranks").is_none() && c.name("file").is_none() && c.name("logger").is_none() {
        return None;
    }
    let n = |name: &str| c.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    Some(Record {
        date: Some((c.name("y")?.as_str().parse().ok()?, n("mo")?, n("d")?)),
        hms: (n("h")?, n("mi")?, n("s")?),
        millis: n("ms"),
        ranks: c.name("ranks").map_or("", |m| m.as_str().trim()),
        message: c.name("message").or(c.name("logged")).map_or("", |m| m.as_str()),
        found: Found::Custom,
    })
}

static ENVELOPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \[(?:(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)\ )?(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.(?P<ms>\d{3}))?
        (?P<ranks>(?:\ [A-Z_]+\d+|\ encode_\S+)*)\]\ (?P<message>.*)$",
    )
    .expect("valid regex")
});

/// The record in `line`, if it has an SGLang envelope anywhere, or a deployment's formatter that keeps its rank tags.
pub(crate) fn parse(line: &str) -> Option<Record<'_>> {
    parse_at_start(line).or_else(|| by_regex(line)).or_else(|| custom(line))
}

/// [`parse`] for a line of a file not known to be SGLang's (detection): most such lines are no record, and a search
/// without captures (which allocate) answers those; a line of an SGLang log is read by [`parse`], whose records
/// would pay for the search twice.
pub(crate) fn parse_unknown(line: &str) -> Option<Record<'_>> {
    parse_at_start(line)
        .or_else(|| ENVELOPE.is_match(line).then(|| by_regex(line)).flatten())
        .or_else(|| CUSTOM.is_match(line).then(|| custom(line)).flatten())
}

/// The record [`ENVELOPE`] finds anywhere in `line`.
fn by_regex(line: &str) -> Option<Record<'_>> {
    let c = ENVELOPE.captures(line)?;
    let found = if c.get(0).is_some_and(|m| m.start() == 0) { Found::Start } else { Found::Inside };
    let n = |name: &str| c.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    let date = match (c.name("y"), n("mo"), n("d")) {
        (Some(y), Some(mo), Some(d)) => Some((y.as_str().parse().ok()?, mo, d)),
        _ => None,
    };
    Some(Record {
        date,
        hms: (n("h")?, n("mi")?, n("s")?),
        millis: n("ms"),
        ranks: c.name("ranks").map_or("", |m| m.as_str().trim()),
        message: c.name("message").map_or("", |m| m.as_str()),
        found,
    })
}

/// The envelope when it starts the line with plain rank tags: the same record [`ENVELOPE`] finds there (its match
/// at 0 is the leftmost), read without the regex engine, which costs several times the rest of a batch line.
/// `None` for anything else (`encode_…` tags, a prefix before the bracket), left to the regex.
fn parse_at_start(line: &str) -> Option<Record<'_>> {
    let bytes = line.as_bytes();
    let digits = |at: usize, n: usize| -> Option<u32> {
        let text = bytes.get(at..at + n)?;
        text.iter().all(u8::is_ascii_digit).then(|| text.iter().fold(0, |v, &d| v * 10 + u32::from(d - b'0')))
    };
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let mut at = 1;
    let date = if bytes.get(5) == Some(&b'-') {
        let (y, mo, d) = (digits(1, 4)?, digits(6, 2)?, digits(9, 2)?);
        (bytes.get(8) == Some(&b'-') && bytes.get(11) == Some(&b' ')).then_some(())?;
        at = 12;
        Some((i32::try_from(y).ok()?, mo, d))
    } else {
        None
    };
    let hms = (digits(at, 2)?, digits(at + 3, 2)?, digits(at + 6, 2)?);
    (bytes.get(at + 2) == Some(&b':') && bytes.get(at + 5) == Some(&b':')).then_some(())?;
    at += 8;
    let millis = if bytes.get(at) == Some(&b'.') {
        at += 4;
        Some(digits(at - 3, 3)?)
    } else {
        None
    };
    let ranks_start = at;
    loop {
        match bytes.get(at)? {
            b']' => break,
            b' ' => {
                // One ` [A-Z_]+\d+` tag.
                let letters = bytes[at + 1..].iter().take_while(|b| b.is_ascii_uppercase() || **b == b'_').count();
                let numbers = bytes[at + 1 + letters..].iter().take_while(|b| b.is_ascii_digit()).count();
                if letters == 0 || numbers == 0 {
                    return None;
                }
                at += 1 + letters + numbers;
            }
            _ => return None,
        }
    }
    (bytes.get(at + 1) == Some(&b' ')).then_some(())?;
    Some(Record {
        date,
        hms,
        millis,
        ranks: line[ranks_start..at].trim(),
        message: &line[at + 2..],
        found: Found::Start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_envelope_generation() {
        type Case<'a> = (&'a str, Option<(i32, u32, u32)>, (u32, u32, u32), Option<u32>, &'a str, &'a str);
        let cases: &[Case<'_>] = &[
            ("[04:40:55 TP0] Decode batch. x", None, (4, 40, 55), None, "TP0", "Decode batch. x"),
            (
                "[2025-03-03 17:53:04 TP0] Prefill batch. x",
                Some((2025, 3, 3)),
                (17, 53, 4),
                None,
                "TP0",
                "Prefill batch. x",
            ),
            ("[2025-05-14 09:31:43] Prefill batch. x", Some((2025, 5, 14)), (9, 31, 43), None, "", "Prefill batch. x"),
            ("[2026-05-28 00:11:09.816 DP0 TP0 EP0] m", Some((2026, 5, 28)), (0, 11, 9), Some(816), "DP0 TP0 EP0", "m"),
            (
                "[2026-05-28 00:11:09 DP1 PP0 ATTN_CP2 MOE_DP3 TP4 EP5] m",
                Some((2026, 5, 28)),
                (0, 11, 9),
                None,
                "DP1 PP0 ATTN_CP2 MOE_DP3 TP4 EP5",
                "m",
            ),
            (
                "[2026-01-01 00:00:00 encode_dp_worker[2]] m",
                Some((2026, 1, 1)),
                (0, 0, 0),
                None,
                "encode_dp_worker[2]",
                "m",
            ),
            (
                "2025-03-08 02:04:48,693 - __main__ - INFO - [2025-03-08 02:04:48 TP0] Decode batch. x",
                Some((2025, 3, 8)),
                (2, 4, 48),
                None,
                "TP0",
                "Decode batch. x",
            ),
            (
                "  0%|     [2026-05-28 02:59:50 TP0] Prefill batch, x",
                Some((2026, 5, 28)),
                (2, 59, 50),
                None,
                "TP0",
                "Prefill batch, x",
            ),
        ];
        for &(line, date, hms, millis, ranks, message) in cases {
            let found = parse(line).map_or(Found::Start, |r| r.found);
            assert_eq!(parse(line), Some(Record { date, hms, millis, ranks, message, found }), "{line}");
            assert_eq!(parse_unknown(line), parse(line), "{line}");
        }
        let others = [
            "# source: x",
            "Traceback (most recent call last):",
            "new fill batch. #seq: 1.",
            "",
            r#"{"timestamp": 27482, "hash_ids": [46, 47], "input_length": 6755}"#,
        ];
        for other in others {
            assert_eq!(parse(other), None, "{other}");
            assert_eq!(parse_unknown(other), None, "{other}");
        }
    }

    #[test]
    fn the_fast_path_declines_what_it_does_not_read_exactly() {
        let taken = "[2026-05-28 00:11:09.816 DP0 TP0] Decode batch, #running-req: 1";
        assert!(parse_at_start(taken).is_some());
        for declined in [
            "[2026-01-01 00:00:00 encode_dp_worker[2]] m",
            "[2026-05-28 00:11:09.8161 TP0] m",
            "[2026-05-28 00:11:09 TP] m",
            "[2026-05-28 00:11:09 tp0] m",
            "[2026-05-28 0:11:09 TP0] m",
            "[2026-05-28 00:11:09 TP0]m",
            "x [2026-05-28 00:11:09 TP0] m",
            "[2026-05-28 00:11:09 TP0",
        ] {
            assert_eq!(parse_at_start(declined), None, "{declined}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_fast_path_agrees_with_the_regex(
            line in "\\[(20[0-9]{2}-[01][0-9]-[0-3][0-9] )?[0-9]{2}:[0-9]{2}:[0-9]{1,2}(\\.[0-9]{2,4})?( [A-Z_]{0,3}[0-9]{0,2}| encode_x){0,3}\\] ?[ -~]{0,20}"
        ) {
            if let Some(record) = parse_at_start(&line) {
                proptest::prop_assert_eq!(Some(record), by_regex(&line));
            }
            proptest::prop_assert_eq!(parse(&line), by_regex(&line));
            proptest::prop_assert_eq!(parse_unknown(&line), parse(&line));
            let prefixed = format!("x {line}");
            proptest::prop_assert_eq!(parse_unknown(&prefixed), parse(&prefixed));
        }
    }
}
