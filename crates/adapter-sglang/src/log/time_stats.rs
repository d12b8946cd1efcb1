//! `Req Time Stats` / `ReqTimeStats` lines (`--enable-request-time-stats-logging`, 0.4.7+): one per finished
//! request, written by the scheduler (with its rank tags) when the request leaves it.
//!
//! ```text
//! 0.4.7 – 0.5.10  Req Time Stats(rid=R, [bootstrap_room=N, ]input len=N, output len=N, type=T): DUR
//! 0.5.12 – 0.5.15 ReqTimeStats(rid=R[, bootstrap_room=N], input_len=N, cached_input_len=N, output_len=N, type=T): DUR
//! 0.5.18+         … output_len=N, attempts=N, type=T): DUR
//! T               unified | prefill | decode (| invalid, unknown)
//! DUR 0.4.7–0.5.4 [bootstrap_duration=…ms, | prealloc_duration=…ms, transfer_duration=…ms, ]queue_duration=…ms,
//!                 forward_duration=…ms, start_time=S
//!     0.5.5–0.5.10 bootstrap_queue_duration(…ms) [= alloc_wait(…ms) + bootstrap(…ms) + other(…ms)]; queue_duration=…,
//!                 forward_duration=…, start=S[, transfer_speed=…GB/s, transfer_total=…MB, #retries=N]
//!                 decode: prealloc_queue_duration(…) …; transfer_duration=…; queue_duration=…, …
//!     0.5.12+     key=value only: [bootstrap_duration=…ms, alloc_wait_duration=…ms, | bootstrap_queue_duration=…ms,]
//!                 queue_duration, forward_duration, entry_time=WALL[, transfer_speed=… GB/s, transfer_total=… MB]
//! ```
//!
//! Durations are read by name wherever they stand, so the reorderings and the `(…)` breakdowns need no template.
//! Clocks: `start_time`/`start` are `time.perf_counter()` (monotonic, unrelated to the epoch) and are ignored;
//! `entry_time` (0.5.12+) is wall-clock epoch seconds and is used. In 0.4.7–0.5.2 only the completion time was ever
//! set, so `queue_duration` is 0 and `forward_duration` the epoch in ms: those lines (recognised by `start_time`
//! printed unrounded, or by an epoch-sized duration) keep their token counts and lose their durations, and the
//! manifest counts them. `transfer_total` is MiB (`bytes / 2^20`).

use infertrace_schema::RequestRow;

/// The scheduler role of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Unified,
    Prefill,
    Decode,
    /// `invalid`, `unknown` or a new value.
    Other,
}

/// What one time-stats line says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimeStats {
    pub(crate) rid: String,
    pub(crate) role: Role,
    pub(crate) input_len: Option<u32>,
    pub(crate) cached_input_len: Option<u32>,
    pub(crate) output_len: Option<u32>,
    /// `false` for the 0.4.7–0.5.2 lines whose durations are meaningless, and for `Invalid Time Stats`.
    pub(crate) usable: bool,
    /// Seconds in the scheduler's waiting queue.
    pub(crate) queue_s: Option<f64>,
    /// Seconds from the first forward pass to completion (or, on a prefill server, to the end of the KV transfer).
    pub(crate) forward_s: Option<f64>,
    /// Seconds before the waiting queue: bootstrap (prefill) or pre-allocation (decode).
    pub(crate) before_queue_s: Option<f64>,
    /// Seconds receiving KV from the prefill server (decode).
    pub(crate) transfer_s: Option<f64>,
    /// KV bytes sent (prefill).
    pub(crate) transfer_bytes: Option<u64>,
    /// Wall-clock epoch seconds the request entered the scheduler (0.5.12+).
    pub(crate) entry_time: Option<f64>,
}

/// The pattern of a line, `^(?:Req Time Stats|ReqTimeStats)\((?P<args>[^)]*)\): (?P<body>.*)$`, read by
/// [`line_parts`] (and kept as the reference of its tests).
#[cfg(test)]
static LINE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^(?:Req Time Stats|ReqTimeStats)\((?P<args>[^)]*)\): (?P<body>.*)$").expect("valid regex")
});

/// The pattern of a duration or count, read by [`values`] (and kept as the reference of its tests).
#[cfg(test)]
static VALUE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?P<k>#?[A-Za-z_]+)(?:=|\()(?P<v>-?[0-9]+(?:\.(?P<frac>[0-9]+))?(?:[eE][+-]?[0-9]+)?) ?(?P<u>ms|GB/s|MB)?",
    )
    .expect("valid regex")
});

/// The `args` and `body` of a line that [`LINE`] matches, found without the regex engine (which took half the
/// time of these lines): the head, the arguments up to the first `)`, `: `, and a body without a line break.
fn line_parts(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("Req Time Stats(").or_else(|| message.strip_prefix("ReqTimeStats("))?;
    let close = memchr::memchr(b')', rest.as_bytes())?;
    let body = rest[close + 1..].strip_prefix(": ")?;
    memchr::memchr(b'\n', body.as_bytes()).is_none().then_some((&rest[..close], body))
}

/// One match of [`VALUE`]: `key=number` or `key(number`, with the number's fraction and a unit after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value<'a> {
    key: &'a str,
    number: &'a str,
    frac: Option<&'a str>,
    unit: Option<&'a str>,
}

/// The successive matches of [`VALUE`] in `body`, as its leftmost-first search finds them, without the regex
/// engine. Every match has its key just before a `=` or `(`: the key is the run of `[A-Za-z_]` that ends there
/// (started no earlier than the end of the previous match, with a `#` before it taken in), and the number must follow.
fn values(body: &str) -> impl Iterator<Item = Value<'_>> {
    let bytes = body.as_bytes();
    let letter = |b: u8| b.is_ascii_alphabetic() || b == b'_';
    let digits = |from: usize| bytes[from.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let (mut from, mut at) = (0, 0);
    std::iter::from_fn(move || {
        while let Some(found) = memchr::memchr2(b'=', b'(', &bytes[at..]) {
            let open = at + found;
            at = open + 1;
            let mut start = open;
            while start > from && letter(bytes[start - 1]) {
                start -= 1;
            }
            if start == open {
                continue;
            }
            if start > from && bytes[start - 1] == b'#' {
                start -= 1;
            }
            // The number: `-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?`, each optional part taken when whole.
            let mut end = open + 1;
            end += usize::from(bytes.get(end) == Some(&b'-'));
            let whole = digits(end);
            if whole == 0 {
                continue;
            }
            end += whole;
            let mut frac = None;
            if bytes.get(end) == Some(&b'.') && digits(end + 1) > 0 {
                let n = digits(end + 1);
                frac = Some(&body[end + 1..end + 1 + n]);
                end += 1 + n;
            }
            if matches!(bytes.get(end), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
                let n = digits(end + 1 + sign);
                if n > 0 {
                    end += 1 + sign + n;
                }
            }
            let number = &body[open + 1..end];
            let mut tail = end + usize::from(bytes.get(end) == Some(&b' '));
            let unit = ["ms", "GB/s", "MB"].into_iter().find(|u| body[tail..].starts_with(u));
            tail += unit.map_or(0, str::len);
            (from, at) = (tail, tail);
            return Some(Value { key: &body[start..open], number, frac, unit });
        }
        at = bytes.len();
        None
    })
}

/// A line is recognised by its head; `Err` when the head is there and the rest is not readable.
pub(crate) fn parse(message: &str) -> Option<Result<TimeStats, &'static str>> {
    if !(message.starts_with("Req Time Stats(") || message.starts_with("ReqTimeStats(")) {
        return None;
    }
    let Some((args, body)) = line_parts(message) else { return Some(Err("a time-stats line cut short")) };
    let mut rid = None;
    let (mut role, mut input_len, mut cached_input_len, mut output_len) = (Role::Other, None, None, None);
    for arg in args.split(", ") {
        let Some((key, value)) = arg.split_once('=') else { continue };
        match key {
            "rid" => rid = Some(value.to_owned()),
            "input len" | "input_len" => input_len = value.parse().ok(),
            "cached_input_len" => cached_input_len = value.parse().ok(),
            "output len" | "output_len" => output_len = value.parse().ok(),
            "type" => {
                role = match value {
                    "unified" => Role::Unified,
                    "prefill" => Role::Prefill,
                    "decode" => Role::Decode,
                    _ => Role::Other,
                }
            }
            _ => {} // bootstrap_room, attempts
        }
    }
    let Some(rid) = rid.filter(|r| !r.is_empty()) else { return Some(Err("a time-stats line without a rid")) };
    let mut stats = TimeStats {
        rid,
        role,
        input_len,
        cached_input_len,
        output_len,
        usable: true,
        queue_s: None,
        forward_s: None,
        before_queue_s: None,
        transfer_s: None,
        transfer_bytes: None,
        entry_time: None,
    };
    // The pre-queue stage, in ms as printed: summed before converting so that the parts add up exactly.
    let mut before_ms: Option<f64> = None;
    let mut unrounded_start = false;
    let mut epoch_sized = false;
    for c in values(body) {
        let Ok(value) = c.number.parse::<f64>() else { continue };
        let ms = || (c.unit == Some("ms")).then_some(value / 1e3);
        if c.unit == Some("ms") && value >= 1e11 {
            epoch_sized = true;
        }
        match c.key {
            "queue_duration" => stats.queue_s = ms(),
            "forward_duration" => stats.forward_s = ms(),
            // The whole pre-queue stage under each of its names; its `(…)` parts are not added again.
            "bootstrap_queue_duration" | "prealloc_queue_duration" | "prealloc_duration" => before_ms = Some(value),
            "bootstrap_duration" | "alloc_wait_duration" => before_ms = Some(before_ms.unwrap_or(0.0) + value),
            "transfer_duration" => stats.transfer_s = ms(),
            "transfer_total" => stats.transfer_bytes = Some((value * 1_048_576.0).round() as u64),
            "entry_time" => stats.entry_time = Some(value),
            "start_time" => unrounded_start = c.frac.is_none_or(|f| f.len() != 3) || value == 0.0,
            _ => {}
        }
    }
    stats.before_queue_s = before_ms.map(|ms| ms / 1e3);
    let no_stats = body.contains("Time Stats"); // `Invalid Time Stats`, `Unknown Time Stats`
    if !no_stats && stats.forward_s.is_none() {
        return Some(Err("a time-stats line without forward_duration (cut short?)"));
    }
    if unrounded_start || epoch_sized || no_stats {
        stats.usable = false;
        (stats.queue_s, stats.forward_s, stats.before_queue_s, stats.transfer_s, stats.entry_time) =
            (None, None, None, None, None);
    }
    Some(Ok(stats))
}

impl TimeStats {
    /// Fills what `row` lacks from these stats; `instance` is the scheduler's rank tags.
    pub(crate) fn apply(&self, row: &mut RequestRow, instance: Option<&str>) {
        row.input_tokens = row.input_tokens.or(self.input_len);
        row.output_tokens = row.output_tokens.or(self.output_len);
        row.cached_tokens = row.cached_tokens.or(self.cached_input_len);
        row.queue_s = row.queue_s.or(self.queue_s);
        let instance = instance.map(str::to_owned);
        match self.role {
            Role::Prefill => {
                row.prefill_s = row.prefill_s.or(self.forward_s);
                row.kv_transfer_bytes = row.kv_transfer_bytes.or(self.transfer_bytes);
                row.prefill_instance = row.prefill_instance.take().or(instance);
            }
            Role::Decode => {
                row.decode_s = row.decode_s.or(self.forward_s);
                row.kv_transfer_s = row.kv_transfer_s.or(self.transfer_s);
                row.decode_instance = row.decode_instance.take().or(instance);
            }
            Role::Unified | Role::Other => row.instance = row.instance.take().or(instance),
        }
        // The wall-clock entry time anchors the stages: forward starts after the pre-queue stages and the queue.
        if let Some(entry) = self.entry_time.and_then(infertrace_adapter::time::seconds_to_nanos) {
            let before =
                self.before_queue_s.unwrap_or(0.0) + self.transfer_s.unwrap_or(0.0) + self.queue_s.unwrap_or(0.0);
            let scheduled = infertrace_adapter::time::seconds_to_nanos(before).map(|b| entry + b);
            row.arrival_time = row.arrival_time.or(Some(entry));
            row.scheduled_time = row.scheduled_time.or(scheduled);
            if row.completion_time.is_none() {
                row.completion_time = scheduled
                    .zip(self.forward_s.and_then(infertrace_adapter::time::seconds_to_nanos))
                    .map(|(s, f)| s + f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(line: &str) -> TimeStats {
        parse(line).expect("recognised").expect("readable")
    }

    #[test]
    fn every_generation() {
        // 0.4.7-0.5.2: entry times never set; the line keeps its counts only.
        let old = stats(
            "Req Time Stats(rid=a1, input len=120, output len=30, type=unified): queue_duration=0.00ms, forward_duration=1766581535123.45ms, start_time=0.0",
        );
        assert_eq!(
            (old.rid.as_str(), old.role, old.input_len, old.output_len),
            ("a1", Role::Unified, Some(120), Some(30))
        );
        assert_eq!((old.usable, old.queue_s, old.forward_s), (false, None, None));
        // 0.5.3-0.5.4: perf_counter start, 3 decimals: durations usable, no absolute time.
        let v053 = stats(
            "Req Time Stats(rid=a2, bootstrap_room=77, input len=8, output len=2, type=decode): prealloc_duration=1.50ms, transfer_duration=12.25ms, queue_duration=0.50ms, forward_duration=200.00ms, start_time=13744958.123",
        );
        assert_eq!(v053.role, Role::Decode);
        assert_eq!(
            (v053.usable, v053.before_queue_s, v053.transfer_s, v053.queue_s, v053.forward_s, v053.entry_time),
            (true, Some(0.0015), Some(0.01225), Some(0.0005), Some(0.2), None)
        );
        // 0.5.10 prefill: the breakdown is not added twice; MiB transfer.
        let v0510 = stats(
            "Req Time Stats(rid=a3, bootstrap_room=5, input len=4096, output len=1, type=prefill): bootstrap_queue_duration(40.00ms) = bootstrap(30.00ms) + alloc_wait(10.00ms); queue_duration=2.00ms, forward_duration=150.00ms, start=13744958.500, transfer_speed=12.50GB/s, transfer_total=2.00MB, #retries=0",
        );
        assert_eq!(
            (v0510.before_queue_s, v0510.queue_s, v0510.forward_s, v0510.transfer_bytes),
            (Some(0.04), Some(0.002), Some(0.15), Some(2_097_152))
        );
        // 0.5.18 key=value with attempts, cached input, wall-clock entry time.
        let v0518 = stats(
            "ReqTimeStats(rid=a4, input_len=100, cached_input_len=64, output_len=10, attempts=1, type=prefill): bootstrap_duration=3.00ms, alloc_wait_duration=1.00ms, queue_duration=1.00ms, forward_duration=20.00ms, entry_time=1766581535.250, transfer_speed=1.00 GB/s, transfer_total=0.50 MB",
        );
        assert_eq!(
            (v0518.cached_input_len, v0518.before_queue_s, v0518.entry_time, v0518.transfer_bytes),
            (Some(64), Some(0.004), Some(1766581535.25), Some(524_288))
        );
        let invalid = stats("Req Time Stats(rid=a5, input len=1, output len=0, type=invalid): Invalid Time Stats");
        assert!(!invalid.usable);
        assert_eq!(parse("ReqTimeStats(rid=a6, input_len=1"), Some(Err("a time-stats line cut short")));
        assert_eq!(parse("Prefill batch. #new-seq: 1"), None);
    }

    /// What [`VALUE`] finds in `body`, for comparison with [`values`].
    fn values_by_regex(body: &str) -> Vec<Value<'_>> {
        VALUE
            .captures_iter(body)
            .map(|c| Value {
                key: c.name("k").map_or("", |m| m.as_str()),
                number: c.name("v").map_or("", |m| m.as_str()),
                frac: c.name("frac").map(|m| m.as_str()),
                unit: c.name("u").map(|m| m.as_str()),
            })
            .collect()
    }

    /// What [`LINE`] and [`VALUE`] find in `message`, for comparison with [`line_parts`] and [`values`].
    fn by_regex(message: &str) -> Option<(&str, &str, Vec<Value<'_>>)> {
        let caps = LINE.captures(message)?;
        let (args, body) = (caps.name("args")?.as_str(), caps.name("body")?.as_str());
        Some((args, body, values_by_regex(body)))
    }

    fn by_hand(message: &str) -> Option<(&str, &str, Vec<Value<'_>>)> {
        let (args, body) = line_parts(message)?;
        Some((args, body, values(body).collect()))
    }

    #[test]
    fn the_hand_reader_finds_what_the_patterns_find() {
        let cases = [
            "Req Time Stats(rid=g4, input len=818, output len=356, type=unified): queue_duration=798.39ms, forward_duration=8213.73ms, start=13000001.000",
            "Req Time Stats(rid=a3, bootstrap_room=5, input len=4096, output len=1, type=prefill): bootstrap_queue_duration(40.00ms) = bootstrap(30.00ms) + alloc_wait(10.00ms); queue_duration=2.00ms, forward_duration=150.00ms, start=13744958.500, transfer_speed=12.50GB/s, transfer_total=2.00MB, #retries=0",
            "ReqTimeStats(rid=a4, input_len=100, cached_input_len=64, output_len=10, attempts=1, type=prefill): bootstrap_duration=3.00ms, alloc_wait_duration=1.00ms, queue_duration=1.00ms, forward_duration=20.00ms, entry_time=1766581535.250, transfer_speed=1.00 GB/s, transfer_total=0.50 MB",
            "Req Time Stats(rid=a5, input len=1, output len=0, type=invalid): Invalid Time Stats",
            "ReqTimeStats(rid=a6, input_len=1",
            "ReqTimeStats(rid=a6): ",
            "ReqTimeStats(a)): x",
            "ReqTimeStats(a):x=1",
            // Units glued to the next key, keys after digits, `#` alone, exponents whole and cut, signs.
            "ReqTimeStats(): a=1msb=2 9c=3 #=4 #d=5 ##e=6 f=1e5 g=1e h=1E+7 i=-2.5e-3ms j=1. k=.5 l=-x m==1 n(7 MB",
            "ReqTimeStats(): p=1 ms q=2  ms r=3GB/s s=4 GB/ss t=5MBu=6",
        ];
        for case in cases {
            assert_eq!(by_hand(case), by_regex(case), "{case}");
        }
        // A line break in the body: the pattern's `.` stops there and `$` does not match.
        assert_eq!(line_parts("ReqTimeStats(a): x\ny"), None);
        assert!(LINE.captures("ReqTimeStats(a): x\ny").is_none());
    }

    proptest::proptest! {
        #[test]
        fn the_hand_reader_agrees_with_the_patterns(
            head in proptest::prop_oneof![
                proptest::strategy::Just("Req Time Stats("),
                proptest::strategy::Just("ReqTimeStats("),
            ],
            args in "[a-z_ =,0-9]{0,12}",
            close in proptest::prop_oneof![
                8 => proptest::strategy::Just("): "),
                1 => proptest::strategy::Just(")"),
                1 => proptest::strategy::Just("):"),
                1 => proptest::strategy::Just(") x): "),
                1 => proptest::strategy::Just(""),
            ],
            body in "(([a-zA-Z_#é]{0,3}|queue_duration|start_time)[=( \u{2003}]?-?[0-9٣]{0,3}([.][0-9]{0,4})?([eE][+-]?[0-9]{0,2})? ?(ms|GB/s|MB|M|G|µs)?[,;:)= \n]{0,2}){0,6}",
        ) {
            // Mostly whole heads, so that the values are compared too; some cut short or with a `)` in the body.
            let message = format!("{head}{args}{close}{body}");
            proptest::prop_assert_eq!(by_hand(&message), by_regex(&message));
        }

        /// The pattern's values over bodies alone: mostly whole `key=number unit` tokens, glued or apart, among
        /// bits of text that come close (a `#`, digits, a `(`, other scripts).
        #[test]
        fn values_agree_with_the_pattern(
            body in "((#?[a-z_é]{1,3}|#|queue_duration|start_time)[=(]-?[0-9]{0,3}([.][0-9]{0,3})?([eE][+-]?[0-9]{0,2})?( ?(ms|GB/s|MB|M|µs))?[,; ]?|[a-z#٣(=. \u{2003}]{0,3}){0,8}",
        ) {
            proptest::prop_assert_eq!(values(&body).collect::<Vec<_>>(), values_by_regex(&body));
        }
    }

    #[test]
    fn applying_anchors_the_stages_on_the_entry_time() {
        let s = stats(
            "ReqTimeStats(rid=a4, input_len=100, cached_input_len=64, output_len=10, type=decode): prealloc_queue_duration=2.00ms, transfer_duration=8.00ms, queue_duration=1.00ms, forward_duration=89.00ms, entry_time=1766581535.250",
        );
        let mut row = RequestRow::default();
        s.apply(&mut row, Some("DP0 TP0"));
        let entry = 1_766_581_535_250_000_000;
        assert_eq!(
            (row.arrival_time, row.scheduled_time, row.completion_time),
            (Some(entry), Some(entry + 11_000_000), Some(entry + 100_000_000))
        );
        assert_eq!((row.decode_s, row.kv_transfer_s, row.queue_s), (Some(0.089), Some(0.008), Some(0.001)));
        assert_eq!((row.decode_instance.as_deref(), row.instance.as_deref()), (Some("DP0 TP0"), None));
        assert_eq!((row.input_tokens, row.cached_tokens, row.output_tokens), (Some(100), Some(64), Some(10)));
    }
}
