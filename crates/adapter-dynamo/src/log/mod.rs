//! `dynamo-log`: NVIDIA Dynamo logs, readable text and JSONL, from the ≤0.3 Python SDK to 1.6: request lifecycles
//! to `requests`, router decisions to `cache_events` lookups.
//!
//! Two stages, as in every adapter: [`line`] turns one record into a typed, borrowing [`line::Line`] (its doc comment
//! has the literal router wording of every generation); [`events`] folds records into rows. This module holds the
//! adapter and the reassembly of physical lines into records.
//!
//! # Records
//!
//! ```text
//! readable  <UTC µs>Z  INFO [span:]… target: message k=v …      (≤0.3 SDK: milliseconds; DYN_LOG_USE_LOCAL_TZ: +hh:mm)
//! JSONL     {"time":"<UTC µs>Z","level":"INFO","file":…,"line":…,"target":…,"message":…,<fields, flattened>}
//! ```
//!
//! ANSI colour codes (on by default, even in files) are removed. A record starts when the ANSI-stripped line matches
//! `^\d{4}-\d\d-\d\dT\S+(Z|[+-]\d\d:\d\d)\s+(TRACE|DEBUG|INFO|WARN|ERROR)\b` (plus Python's `WARNING`/`CRITICAL`,
//! which Dynamo's vLLM formatter writes in the same layout) or starts with `{`; a following line that starts neither
//! a record nor another program's output (vLLM's `INFO 04-01 …`, `(EngineCore pid=…)`, SGLang's `[2026-…`, TRT-LLM's
//! `[10/07/2026-…]`, tracebacks, indented lines, `#` comments) is a piece of a record torn by writers sharing a pipe,
//! and is appended to it without a delimiter (then colour codes are removed again, as a code can be torn too).
//! Records of other programs are `not-a-record` diagnostics, one per line, even when frequent (an engine's own lines
//! in a worker's log): the manifest counts them by kind. A harness's `<ts> - sflow.task.<name> - <LEVEL> - <n>: `
//! wrapper is removed first.
//!
//! Readable lines repeat keys (`request_id`, `model`: the event's field, then the enclosing span's): the first
//! occurrence wins, and every `request_id` value is used to join (the two can differ: the first is the lifecycle id
//! the router also logs, the second the HTTP span's). JSONL numbers are read exactly (ids above 2^53 as `u64`).
//!
//! # Requests
//!
//! One row per request, folded from every record that names it by `request_id` (or `x_dynamo_request_id`),
//! `x_request_id` or `trace_id`:
//!
//! - frontend `request received` → `arrival_time`;
//! - frontend `request completed` (`status`, `error_type`, `elapsed_ms`, then the `http-request` span fields) →
//!   `completion_time` = arrival + `elapsed_ms` (else the line's time), `e2e_s` = `elapsed_ms`, `status` (`success` →
//!   ok, `cancelled` → aborted, `error` → error with `error` = `error_type`, or timeout for `response_timeout`);
//!   the row is written;
//! - frontend `request cancelled` → status aborted (the row waits for `request completed`);
//! - `http-request` span fields, on any record of the span (the end of the readable `request completed`,
//!   `SPAN_CLOSED`): `ttft_ms` → `ttft_s` and `first_token_time` = arrival + ttft, `avg_itl_ms` → `tpot_s`,
//!   `input_tokens`, `output_tokens`, `prefill_worker_id` → `prefill_instance`, `decode_worker_id` →
//!   `decode_instance`, `model`;
//! - `http-request` `SPAN_CREATED` / `SPAN_FIRST_ENTRY` / `SPAN_CLOSED` (readable `new` / `close`) → arrival (span
//!   start; for a close, `time` − `time.duration_us`, or busy + idle) when no `request received`, completion (close
//!   time); the close writes the row;
//! - worker `request received` / `request completed` and `handle_payload` span events (`component`, `instance_id`)
//!   → `prefill_instance` (component `prefill`) or `decode_instance` (any other); with both legs,
//!   `prefill_end_time` = prefill leg's end and `decode_start_time` = decode leg's start; a worker-only log's row
//!   gets its arrival and completion from the legs;
//! - `route request completed/cancelled/failed` → status when no frontend status (the last attempt's outcome wins;
//!   all are counted in `details.route_outcomes`);
//! - ≤0.3 SDK `Prefilling remotely for request <id> with length <n>` / `Dequeued prefill request: <id>` →
//!   `input_tokens`, the decode and prefill legs' start.
//!
//! `instance` is the decode instance (else the prefill one). Worker ids are written as decimal `u64` strings
//! (`"7587888160958627596"`); on `cache_events` rows, whose lines give a data-parallel rank, `"/dp<r>"` is appended
//! whenever the rank is logged, `dp0` included (`"7587888160958627596/dp0"`).
//!
//! # Router decisions
//!
//! Every `Selected worker` line (all wordings), `Selected pinned worker` and `[ROUTING] Best` line is one decision:
//! a `cache_events` row of kind `lookup`, tier `gpu`, `instance` = chosen worker, `hit_blocks` = its cached (device)
//! blocks, `blocks` = prompt blocks (only `[ROUTING] Best` logs them; `total blocks`/`total_kv_blocks` is the
//! worker's capacity and is not used), `request_id` when the line has one (the request's row id when it is open).
//! 1.6's per-tier matches become further `lookup` rows of the same decision: tier `cpu` (`host_pinned_blocks`) and
//! tier `disk` (`disk_blocks`), so a lookup count is a count of `gpu` rows.
//!
//! # Decided where the reference is silent
//!
//! - The row's `request_id` is the client's `x_request_id` when present (AIPerf sends its own request id as
//!   `X-Request-ID`, so client and server rows of one run join), else Dynamo's first `request_id`, else the trace id;
//!   `details.request_id_from` counts which. Lookup rows use the same id when their request is open.
//! - `Formula for …` lines (one per candidate worker) never make rows: the latest one of the chosen worker gives
//!   `hit_blocks` to a following `Selected worker` line that lacks them (the ~0.4 `normalized logit` wording), so a
//!   decision is counted once; they are counted in `details.formula_lines`.
//! - A `[ROUTING] Best` line and a `Selected worker` line of the same worker (and request, when both say) within two
//!   seconds of log time are one decision: one row, with `blocks` from the former. Other router modes' `Selected
//!   worker` (no cache lookup) are counted in `details.selections_without_lookup`.
//! - `kv_router.route_request` span events are not lookups (they repeat the decision); GET `http-request` spans
//!   (health, metrics probes) make no rows (`details.non_inference_spans`).
//! - A request without an end record is written ten minutes of log time after it was first seen (at most 100,000
//!   are held open; past that the oldest is written early, with a diagnostic), or at the end of the input, with
//!   status `unknown` unless a cancellation or route outcome was seen. A closed `http-request` span without a
//!   lifecycle status keeps status `unknown`: a close does not tell success from cancellation.
//! - Records of an already written request (a `SPAN_CLOSED` after `request completed`) are counted in
//!   `details.lines_after_request_end`.
//! - A request record without a usable `time` still joins its request (the PR #7734 example is abridged that way),
//!   with a `missing-field` diagnostic: its instants are unknown.
//! - Other Dynamo records (startup, warnings, bridged Python `target: "log"` lines) carry nothing and are skipped
//!   without a diagnostic; `http response sent` is counted by status in `details.http_responses`.

mod events;
mod json;
mod line;

use std::borrow::Cow;
use std::io::BufRead;
use std::ops::Range;

use infertrace_adapter::drift::EnvelopeSets;
use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::time::parse_datetime;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Drift, Head, LineReader, ParseContext, ParseError, ParseReport,
    Sink, UtcOffset, utf8_line,
};
use infertrace_schema::ClockDomain;

use events::{Folder, Record};
use json::{JsonRecord, JsonValue};
use line::{Fields, Line};

/// A torn record stops growing at this many bytes.
const MAX_RECORD: usize = 1 << 20;

/// The Dynamo log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamoLog;

impl DynamoLog {
    /// Format id.
    pub const ID: &'static str = "dynamo-log";
}

/// Messages only Dynamo writes.
const DYNAMO_MESSAGES: &[&str] = &[
    "SPAN_CREATED",
    "SPAN_FIRST_ENTRY",
    "SPAN_CLOSED",
    "request received",
    "request completed",
    "Selected worker",
    "[ROUTING] Best",
];

impl Adapter for DynamoLog {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "NVIDIA Dynamo log, readable or JSONL, ≤0.3 SDK to 1.6: request lifecycle to requests, router decisions to \
         cache lookups"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let mut records = 0;
        let mut specific = false;
        for raw in text.lines().take(64) {
            let clean = line::unwrap(raw).clean;
            let trimmed = clean.trim_start();
            if trimmed.starts_with('{') {
                // Each key with its quotes and colon, `"level":`.
                let keyed = |key: &str| trimmed.contains(key);
                let (level, message) = (keyed(r#""level":"#), keyed(r#""message":"#));
                if level && message && (keyed(r#""target":"#) || keyed(r#""time":"#)) {
                    records += 1;
                    specific |= trimmed.contains("\"target\":\"dynamo")
                        || keyed(r#""log.target":"#)
                        || keyed(r#""x_dynamo_request_id":"#)
                        || DYNAMO_MESSAGES.iter().any(|m| trimmed.contains(&format!("\"message\":\"{m}")));
                } else if level && message && keyed(r#""request_id":"#) {
                    // Abridged lifecycle lines (no time, no target).
                    records += 1;
                    specific |= DYNAMO_MESSAGES.iter().any(|m| trimmed.contains(&format!("\"message\":\"{m}\"")));
                }
            } else if let Some(record) = line::parse_text(&clean) {
                records += 1;
                specific |=
                    record.target.contains("dynamo") || DYNAMO_MESSAGES.iter().any(|m| record.body.starts_with(m));
            }
        }
        match (records, specific) {
            (0, _) => None,
            (_, true) => Some(Confidence::High),
            (_, false) => Some(Confidence::Low),
        }
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut folder = Folder::new(ctx);
        let mut seen = Seen::default();
        let mut record = Pending::default();
        let mut envelopes = EnvelopeSets::new(line::ENVELOPE_NAMES.len());
        map_lines(&mut lines, prepare, |line_no, bytes, prepared| {
            match prepared {
                // Not UTF-8 or too long (reported here), or blank.
                Prepared::Skipped => drop(utf8_line(line_no, bytes, sink)),
                Prepared::Json(json, envelope) => {
                    envelopes.count(envelope);
                    record.flush(&mut folder, &mut seen, sink)?;
                    json_map(json, line_no, &mut folder, &mut seen, sink)?;
                }
                Prepared::Start { text, read, envelope } => {
                    envelopes.count(envelope);
                    record.flush(&mut folder, &mut seen, sink)?;
                    record = Pending { text, line: line_no, open: true, read };
                }
                Prepared::Piece(text) if record.open => {
                    if record.text.len() + text.len() <= MAX_RECORD {
                        record.text.push_str(&text);
                        // Read again, whole, when it ends.
                        record.read = None;
                    }
                    seen.continuation_lines += 1;
                }
                Prepared::Piece(_) | Prepared::Foreign => {
                    record.flush(&mut folder, &mut seen, sink)?;
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a Dynamo log record"));
                }
            }
            Ok::<_, ParseError>(())
        })?;
        record.flush(&mut folder, &mut seen, sink)?;
        let mut drift = Drift::default();
        envelopes.report(&line::ENVELOPE_NAMES, &mut drift);
        sink.drift(drift);
        let mut details = folder.finish(sink)?;
        if seen.continuation_lines > 0 {
            details.insert("continuation_lines".to_owned(), serde_json::json!(seen.continuation_lines));
        }
        Ok(ParseReport {
            format_version: seen.version(),
            clock_domain: ClockDomain::Utc,
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}

/// What the pool makes of one physical line ([`map_lines`] runs [`prepare`] on any thread), knowing nothing of the
/// lines before it: whether it starts a record and, if it does, the record read as if nothing were appended to it.
enum Prepared {
    /// Not UTF-8 or too long (the fold reports it), or blank.
    Skipped,
    /// A whole JSON record, parsed (into a [`JsonRecord`], two allocations: a `serde_json::Map`'s dozens, freed on
    /// the fold's thread, made a JSONL log 30% slower on two threads than on one).
    Json(JsonRecord, u16),
    /// The start of any other record: its text (harness wrapper removed, colour codes kept, since a piece appended
    /// to it can complete a torn code) and, for a readable record, what it says as it stands.
    Start { text: String, read: Option<TextRead>, envelope: u16 },
    /// A line of another program.
    Foreign,
    /// Neither: a piece of a torn record when one is open (wrapper removed).
    Piece(String),
}

/// [`map_lines`]'s pure stage: one physical line read on its own.
fn prepare(bytes: &[u8]) -> Prepared {
    let Some(text) = infertrace_adapter::utf8(bytes) else { return Prepared::Skipped };
    if text.trim_ascii().is_empty() {
        return Prepared::Skipped;
    }
    let line::Unwrapped { text, clean, envelope, kind } = line::unwrap(text);
    if kind == line::Kind::Record {
        if let Some(record) = whole_json(&clean) {
            return Prepared::Json(record, envelope);
        }
        // A JSON record that is not whole waits for its pieces, and is read when they have come.
        let read = (!clean.trim_start().starts_with('{')).then(|| read_text(clean));
        Prepared::Start { text: text.into_owned(), read, envelope }
    } else if kind == line::Kind::Foreign {
        Prepared::Foreign
    } else {
        Prepared::Piece(text.into_owned())
    }
}

/// The record being assembled from physical lines.
#[derive(Default)]
struct Pending {
    text: String,
    line: u64,
    open: bool,
    /// `text` read, while nothing has been appended to it.
    read: Option<TextRead>,
}

impl Pending {
    fn flush(&mut self, folder: &mut Folder<'_>, seen: &mut Seen, sink: &mut dyn Sink) -> Result<(), ParseError> {
        if !self.open {
            return Ok(());
        }
        self.open = false;
        let text = std::mem::take(&mut self.text);
        let read = match self.read.take() {
            Some(read) => read,
            None => {
                let clean = line::strip_ansi(&text);
                let trimmed = clean.trim();
                if trimmed.starts_with('{') {
                    return json_record(trimmed, self.line, folder, seen, sink);
                }
                read_text(clean)
            }
        };
        text_record(&text, read, self.line, folder, seen, sink)
    }
}

/// A readable record read on its own: its text without colour codes (when it had any; else the record's own text
/// is that text) and its parts as byte ranges of it, or `None` when it has no `target: message`.
struct TextRead {
    clean: Option<String>,
    parts: Option<TextParts>,
}

/// Where a readable record's parts are, and what its time says.
struct TextParts {
    time: Instant,
    /// Its time is written in milliseconds (`…:44.118Z`, the ≤0.3 SDK).
    millis: bool,
    span: Option<Range<usize>>,
    target: Range<usize>,
    body: Range<usize>,
    /// The body's `key=value` pairs ([`line::text_fields`]).
    pairs: Vec<(Range<usize>, Range<usize>)>,
}

/// A record's time: UTC nanoseconds, or why it has none.
type Instant = Result<i64, String>;

/// Reads a readable record whose colour codes `clean` has removed.
fn read_text(clean: Cow<'_, str>) -> TextRead {
    let parts = text_parts(&clean);
    TextRead {
        clean: match clean {
            Cow::Owned(clean) => Some(clean),
            Cow::Borrowed(_) => None,
        },
        parts,
    }
}

fn text_parts(clean: &str) -> Option<TextParts> {
    let record = line::parse_text(clean.trim())?;
    // Every part is a slice of `clean` (`parse_text` and `text_fields` return nothing else). Were one not, the
    // record would be reported as unreadable rather than its ranges point elsewhere.
    let at = |part: &str| {
        let start = (part.as_ptr() as usize).checked_sub(clean.as_ptr() as usize)?;
        (start + part.len() <= clean.len()).then_some(start..start + part.len())
    };
    let fraction = record.time.rsplit_once('.').map(|(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
    let pairs: Option<Vec<_>> =
        line::text_fields(record.body).into_iter().map(|(k, v)| Some((at(k)?, at(v)?))).collect();
    Some(TextParts {
        time: instant(record.time),
        millis: fraction == Some(3),
        span: match record.span {
            Some(span) => Some(at(span)?),
            None => None,
        },
        target: at(record.target)?,
        body: at(record.body)?,
        pairs: pairs?,
    })
}

/// What kinds of records the input held, for `format_version`.
#[derive(Debug, Default)]
struct Seen {
    readable: u64,
    readable_ms: u64,
    json: u64,
    span_created: u64,
    span_first_entry: u64,
    continuation_lines: u64,
}

impl Seen {
    fn version(&self) -> Option<String> {
        let version = match (self.readable > 0, self.json > 0) {
            (false, false) => return None,
            (true, true) => "mixed",
            (true, false) if self.readable_ms == self.readable => "readable-ms-sdk-0.3",
            (true, false) => "readable",
            (false, true) if self.span_created > 0 => "jsonl-span-created-2025",
            (false, true) if self.span_first_entry > 0 => "jsonl-span-first-entry",
            (false, true) => "jsonl",
        };
        Some(version.to_owned())
    }
}

fn instant(text: &str) -> Instant {
    parse_datetime(text, UtcOffset::UTC).map(|instant| instant.nanos).map_err(|e| e.to_string())
}

/// A record's time, or `None` with a diagnostic.
fn known(time: Instant, line: u64, sink: &mut dyn Sink) -> Option<i64> {
    time.map_err(|e| sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, format!("`time`: {e}")))).ok()
}

/// Folds in a readable record, `read` from `text`.
fn text_record(
    text: &str,
    read: TextRead,
    line_no: u64,
    folder: &mut Folder<'_>,
    seen: &mut Seen,
    sink: &mut dyn Sink,
) -> Result<(), ParseError> {
    let Some(parts) = read.parts else {
        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, "record without `target: message`"));
        return Ok(());
    };
    let clean = read.clean.as_deref().unwrap_or(text);
    seen.readable += 1;
    if parts.millis {
        seen.readable_ms += 1;
    }
    let time = known(parts.time, line_no, sink);
    let pairs: Vec<(&str, &str)> = parts.pairs.iter().map(|(k, v)| (&clean[k.clone()], &clean[v.clone()])).collect();
    let fields = Fields::Text(&pairs);
    let span = parts.span.map(|span| &clean[span]);
    let kind = line::classify(&clean[parts.body], &clean[parts.target], span, &fields);
    folder.apply(Record { line: line_no, time, fields, kind }, sink)?;
    Ok(())
}

/// The object a physical line holds whole (colour codes removed), if it is one: such a record needs no continuation.
fn whole_json(clean: &str) -> Option<JsonRecord> {
    let clean = clean.trim();
    if clean.starts_with('{') { JsonRecord::parse(clean).ok() } else { None }
}

fn json_record(
    clean: &str,
    line_no: u64,
    folder: &mut Folder<'_>,
    seen: &mut Seen,
    sink: &mut dyn Sink,
) -> Result<(), ParseError> {
    match JsonRecord::parse(clean) {
        Ok(json) => json_map(json, line_no, folder, seen, sink),
        Err(e) => {
            let message = infertrace_adapter::json::error_message(&e);
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, message));
            Ok(())
        }
    }
}

fn json_map(
    json: JsonRecord,
    line_no: u64,
    folder: &mut Folder<'_>,
    seen: &mut Seen,
    sink: &mut dyn Sink,
) -> Result<(), ParseError> {
    let Some(message) = json.str("message") else {
        sink.diagnostic(Diagnostic::new(
            line_no,
            DiagnosticKind::NotARecord,
            "JSON without a `message`: not a Dynamo log record",
        ));
        return Ok(());
    };
    seen.json += 1;
    match message {
        "SPAN_CREATED" => seen.span_created += 1,
        "SPAN_FIRST_ENTRY" => seen.span_first_entry += 1,
        _ => {}
    }
    let time = match json.get("time") {
        Some(JsonValue::Str(t)) => known(instant(json.text(t)), line_no, sink),
        Some(_) => {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::InvalidValue, "`time` is not a string"));
            None
        }
        None => None,
    };
    let target = json.str("target").unwrap_or("");
    let span = json.str("span_name");
    let fields = Fields::Json(&json);
    let kind = if target == "log" { Line::Other } else { line::classify(message, target, span, &fields) };
    folder.apply(Record { line: line_no, time, fields, kind }, sink)?;
    Ok(())
}
