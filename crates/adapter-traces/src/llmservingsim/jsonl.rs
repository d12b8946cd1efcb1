//! The JSONL generations: the bench's `requests.jsonl` and the workloads, told apart per line by their keys.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::hash::chained_block_hashes;
use infertrace_adapter::parallel::map_json_lines;
use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::LlmServingSim;

/// Tokens per block of the prefix hashes made from workload token ids: vLLM's block size in these runs.
pub(super) const BLOCK_SIZE: usize = 16;

/// One line of either generation: the union of their keys. Id lists are read as hashes or counts, never kept.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Record {
    request_id: Option<Id>,
    input_toks: Option<u32>,
    output_toks: Option<u32>,
    arrival_time: Option<f64>,
    queued_ts: Option<f64>,
    scheduled_ts: Option<f64>,
    first_token_ts: Option<f64>,
    last_token_ts: Option<f64>,
    arrival_time_ns: Option<i64>,
    input_tok_ids: Option<TokenIds>,
    output_tok_ids: Option<Count>,
    sub_requests: Option<IgnoredAny>,
}

impl Record {
    /// Whether the line is a bench request record rather than a workload row.
    fn is_bench(&self) -> bool {
        self.request_id.is_some()
            || self.arrival_time.is_some()
            || [self.queued_ts, self.scheduled_ts, self.first_token_ts, self.last_token_ts].iter().any(Option::is_some)
    }
}

/// A prompt's token ids as the row needs them: how many, and their chained block hashes. Hashed while the line is
/// parsed (on any thread), so the ids are never kept.
#[derive(Debug)]
struct TokenIds {
    len: usize,
    hashes: Vec<u64>,
}

impl<'de> Deserialize<'de> for TokenIds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ids = Vec::<u64>::deserialize(deserializer)?;
        Ok(TokenIds { len: ids.len(), hashes: chained_block_hashes(&ids, BLOCK_SIZE) })
    }
}

/// A request id written as a string or a number.
#[derive(Debug)]
struct Id(String);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E>(self, v: &str) -> Result<Id, E> {
                Ok(Id(v.to_owned()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Id, E> {
                Ok(Id(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Id, E> {
                Ok(Id(v.to_string()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The length of a list, counted without keeping it.
#[derive(Debug)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        deserializer.deserialize_seq(V)
    }
}

/// How the bench's monotonic stamps were put on the epoch, and what that says about frontend-to-queue delays.
#[derive(Debug, Default)]
struct Alignment {
    /// Nanoseconds added to a monotonic stamp to make it an epoch instant.
    offset_ns: Option<i64>,
    anchor_line: u64,
    anchor_id: Option<String>,
    /// Queue entry minus frontend arrival, over the rows with both (seconds).
    delay_min: f64,
    delay_max: f64,
    delay_sum: f64,
    delays: u64,
    /// Rows whose aligned queue entry precedes their frontend arrival.
    queued_before_arrival: u64,
}

impl Alignment {
    fn observe(&mut self, delay_ns: i64) {
        let delay = delay_ns as f64 / 1e9;
        if self.delays == 0 {
            (self.delay_min, self.delay_max) = (delay, delay);
        }
        self.delay_min = self.delay_min.min(delay);
        self.delay_max = self.delay_max.max(delay);
        self.delay_sum += delay;
        self.delays += 1;
        if delay_ns < 0 {
            self.queued_before_arrival += 1;
        }
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        let offset = self.offset_ns?;
        let mut value = serde_json::json!({
            "method": "first row with arrival_time and queued_ts: offset = arrival_time - queued_ts",
            "anchor_line": self.anchor_line,
            "monotonic_to_epoch_offset_s": offset as f64 / 1e9,
            "rows_queued_before_arrival": self.queued_before_arrival,
        });
        if let Some(id) = &self.anchor_id {
            value["anchor_request_id"] = id.clone().into();
        }
        if self.delays > 0 {
            value["frontend_to_queue_s"] = serde_json::json!({
                "min": self.delay_min,
                "mean": self.delay_sum / self.delays as f64,
                "max": self.delay_max,
            });
        }
        Some(value)
    }
}

/// Counts for `details`.
#[derive(Debug, Default)]
struct Counts {
    bench: u64,
    workload: u64,
    without_timing: u64,
    without_anchor: u64,
    without_token_ids: u64,
    sessions_skipped: u64,
}

pub(super) fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let stem = ctx.source_stem();
    let mut lines = LineReader::new(input);
    let mut alignment = Alignment::default();
    let mut counts = Counts::default();
    let mut first_kind = None;
    map_json_lines(&mut lines, sink, |line_no, record: Record, sink| {
        if record.sub_requests.is_some() {
            counts.sessions_skipped += 1;
            sink.diagnostic(Diagnostic::new(
                line_no,
                DiagnosticKind::MalformedRecord,
                "agentic session rows (sub_requests) are not read",
            ));
            return Ok(());
        }
        let bench = record.is_bench();
        first_kind.get_or_insert(if bench { "bench-requests" } else { "workload" });
        let row = if bench {
            counts.bench += 1;
            bench_row(record, line_no, ctx, &mut alignment, &mut counts, sink)
        } else {
            counts.workload += 1;
            workload_row(record, line_no, stem, ctx, &mut counts, sink)
        };
        match row {
            Some(row) => sink.request(row),
            None => Ok(()),
        }
    })?;
    let mut details = BTreeMap::new();
    if let Some(value) = alignment.to_json() {
        details.insert("clock_alignment".to_owned(), value);
    }
    if counts.bench > 0 {
        details.insert("requests_without_timing".to_owned(), counts.without_timing.into());
        if counts.without_anchor > 0 {
            details.insert("requests_before_alignment".to_owned(), counts.without_anchor.into());
        }
    }
    if counts.workload > 0 {
        details.insert("block_size".to_owned(), BLOCK_SIZE.into());
        details.insert("rows_without_token_ids".to_owned(), counts.without_token_ids.into());
    }
    if counts.sessions_skipped > 0 {
        details.insert("session_rows_skipped".to_owned(), counts.sessions_skipped.into());
    }
    // A request log is on the epoch once aligned; a workload counts from --start.
    let clock_domain = if counts.workload == 0 && counts.bench > 0 { ClockDomain::Utc } else { ClockDomain::Relative };
    Ok(ParseReport {
        format_version: first_kind.map(str::to_owned),
        clock_domain,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

/// A finite stamp, or `None`.
fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

fn bench_row(
    record: Record,
    line: u64,
    ctx: &ParseContext<'_>,
    alignment: &mut Alignment,
    counts: &mut Counts,
    sink: &mut dyn Sink,
) -> Option<RequestRow> {
    let arrival = finite(record.arrival_time).and_then(seconds_to_nanos);
    let queued = finite(record.queued_ts);
    let scheduled = finite(record.scheduled_ts);
    let first = finite(record.first_token_ts);
    let last = finite(record.last_token_ts);
    let request_id = record.request_id.map(|id| id.0);
    if alignment.offset_ns.is_none()
        && let Some((arrival, queued)) = arrival.zip(queued.and_then(seconds_to_nanos))
    {
        alignment.offset_ns = arrival.checked_sub(queued);
        alignment.anchor_line = line;
        alignment.anchor_id.clone_from(&request_id);
    }
    let offset = alignment.offset_ns;
    let instant = |mono: Option<f64>| -> Option<i64> { mono.and_then(seconds_to_nanos)?.checked_add(offset?) };
    let queued_at = instant(queued);
    if let (Some(queued_at), Some(arrival)) = (queued_at, arrival) {
        alignment.observe(queued_at.saturating_sub(arrival));
    }
    let stamps = [queued, scheduled, first, last];
    if stamps.iter().all(Option::is_none) {
        counts.without_timing += 1;
    } else if offset.is_none() {
        counts.without_anchor += 1;
    }

    let mut negative = Vec::new();
    let mut span = |name: &'static str, from: Option<f64>, to: Option<f64>| -> Option<f64> {
        let d = to? - from?;
        if d < 0.0 {
            negative.push(name);
            None
        } else {
            Some(d)
        }
    };
    let queue_s = span("queue_s", queued, scheduled);
    let prefill_s = span("prefill_s", scheduled, first);
    let decode_s = span("decode_s", first, last);
    let ttft_s = span("ttft_s", queued, first);
    let e2e_s = span("e2e_s", queued, last);
    if !negative.is_empty() {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::Inconsistent,
            format!("stamps out of order; left empty: {}", negative.join(", ")),
        ));
    }
    let tpot_s = decode_s.zip(record.output_toks.filter(|&n| n >= 2)).map(|(d, n)| d / f64::from(n - 1));
    let complete = stamps.iter().all(Option::is_some) && negative.is_empty();
    Some(RequestRow {
        request_id: request_id.unwrap_or_else(|| format!("{}:{line}", ctx.source_stem())),
        source: LlmServingSim::MEASURED.to_owned(),
        arrival_time: queued_at,
        scheduled_time: instant(scheduled),
        first_token_time: instant(first),
        last_token_time: instant(last),
        queue_s,
        prefill_s,
        ttft_s,
        tpot_s,
        decode_s,
        e2e_s,
        input_tokens: record.input_toks,
        output_tokens: record.output_toks,
        status: if complete { Status::Ok } else { Status::Unknown },
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    })
}

fn workload_row(
    record: Record,
    line: u64,
    stem: &str,
    ctx: &ParseContext<'_>,
    counts: &mut Counts,
    sink: &mut dyn Sink,
) -> Option<RequestRow> {
    let ids = record.input_tok_ids;
    let input = record.input_toks.or_else(|| ids.as_ref().and_then(|ids| u32::try_from(ids.len).ok()));
    let output = record.output_toks.or_else(|| record.output_tok_ids.as_ref().and_then(|c| u32::try_from(c.0).ok()));
    let arrival = match record.arrival_time_ns {
        Some(ns) if ns >= 0 => ns.checked_add(ctx.options.start_ns),
        Some(_) => {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, "arrival_time_ns is negative"));
            None
        }
        None => None,
    };
    if input.is_none() && output.is_none() && arrival.is_none() {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::MissingField,
            "none of input_toks, output_toks, arrival_time_ns, input_tok_ids",
        ));
        return None;
    }
    if record.arrival_time_ns.is_none() {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "missing arrival_time_ns"));
    }
    if let (Some(ids), Some(n)) = (&ids, record.input_toks)
        && ids.len as u64 != u64::from(n)
    {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::Inconsistent,
            "input_tok_ids has a different length than input_toks",
        ));
    }
    if let (Some(count), Some(n)) = (&record.output_tok_ids, record.output_toks)
        && count.0 != u64::from(n)
    {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::Inconsistent,
            "output_tok_ids has a different length than output_toks",
        ));
    }
    if ids.as_ref().is_none_or(|ids| ids.len == 0) {
        counts.without_token_ids += 1;
    }
    let hashes = ids.map(|ids| ids.hashes).filter(|h| !h.is_empty());
    Some(RequestRow {
        request_id: infertrace_adapter::line_id(stem, line),
        source: LlmServingSim::WORKLOAD.to_owned(),
        arrival_time: arrival,
        input_tokens: input,
        output_tokens: output,
        block_size: hashes.as_ref().map(|_| BLOCK_SIZE as u32),
        prefix_hashes: hashes,
        status: Status::Unknown,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    })
}
