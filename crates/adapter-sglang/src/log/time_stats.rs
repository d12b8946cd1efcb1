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

use std::sync::LazyLock;

use infertrace_schema::RequestRow;
use regex::Regex;

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

static LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Req Time Stats|ReqTimeStats)\((?P<args>[^)]*)\): (?P<body>.*)$").expect("valid regex")
});
static VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<k>#?[A-Za-z_]+)(?:=|\()(?P<v>-?[0-9]+(?:\.(?P<frac>[0-9]+))?(?:[eE][+-]?[0-9]+)?) ?(?P<u>ms|GB/s|MB)?",
    )
    .expect("valid regex")
});

/// A line is recognised by its head; `Err` when the head is there and the rest is not readable.
pub(crate) fn parse(message: &str) -> Option<Result<TimeStats, &'static str>> {
    if !(message.starts_with("Req Time Stats(") || message.starts_with("ReqTimeStats(")) {
        return None;
    }
    let Some(caps) = LINE.captures(message) else { return Some(Err("a time-stats line cut short")) };
    let mut rid = None;
    let (mut role, mut input_len, mut cached_input_len, mut output_len) = (Role::Other, None, None, None);
    for arg in caps["args"].split(", ") {
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
    for c in VALUE.captures_iter(&caps["body"]) {
        let Ok(value) = c["v"].parse::<f64>() else { continue };
        let ms = || (c.name("u").map(|u| u.as_str()) == Some("ms")).then_some(value / 1e3);
        if c.name("u").is_some_and(|u| u.as_str() == "ms") && value >= 1e11 {
            epoch_sized = true;
        }
        match &c["k"] {
            "queue_duration" => stats.queue_s = ms(),
            "forward_duration" => stats.forward_s = ms(),
            // The whole pre-queue stage under each of its names; its `(…)` parts are not added again.
            "bootstrap_queue_duration" | "prealloc_queue_duration" | "prealloc_duration" => before_ms = Some(value),
            "bootstrap_duration" | "alloc_wait_duration" => before_ms = Some(before_ms.unwrap_or(0.0) + value),
            "transfer_duration" => stats.transfer_s = ms(),
            "transfer_total" => stats.transfer_bytes = Some((value * 1_048_576.0).round() as u64),
            "entry_time" => stats.entry_time = Some(value),
            "start_time" => unrounded_start = c.name("frac").is_none_or(|f| f.as_str().len() != 3) || value == 0.0,
            _ => {}
        }
    }
    stats.before_queue_s = before_ms.map(|ms| ms / 1e3);
    let no_stats = caps["body"].contains("Time Stats"); // `Invalid Time Stats`, `Unknown Time Stats`
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
