//! BurstGPT (HPMLL/BurstGPT, KDD'25): Azure OpenAI GPT-3.5 and GPT-4 usage at a university, as CSV.
//!
//! # Formats
//!
//! Two generations, told apart by the header (columns are found by name, so their order does not matter):
//!
//! ```text
//! 1.x  Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//!      5,ChatGPT,472,18,490,Conversation log
//! 2.0  Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type
//!      19440110.0,1722ac82-0a46-4bf0-aa08-89794e7a2b3f,43,GPT-4,906,446,1352,Conversation log
//! ```
//!
//! 1.x is `BurstGPT_1.csv`, `BurstGPT_2.csv` and their `_without_fails_` variants (releases v1.1, v1.2); 2.0 is
//! release v2.0's `BurstGPT_3.csv` (110 days), whose `Session ID` is set on `Conversation log` rows only.
//!
//! # Columns
//!
//! - `Timestamp` (float seconds from 0:00:00 of the trace's first day, in the collectors' local time zone) →
//!   `arrival_time` = `--start` + `Timestamp`. The trace publishes neither the date nor the zone, so the clock
//!   domain is `relative`: pass the UTC instant of that local midnight as `--start` to place it in time.
//! - `Request tokens` → `input_tokens`, `Response tokens` → `output_tokens`, `Model` (`ChatGPT`, `GPT-4`) → `model`.
//! - `Response tokens` = 0 marks a failed request (the README: "failure that `Response tokens` are 0s"):
//!   `status` `error` with `error` = `no response tokens`; every other row is `ok` (it got an answer).
//! - `Elapsed time` (2.0, whole seconds from submission to the *full* response) → `e2e_s`, and
//!   `completion_time` = arrival + elapsed. It is not a time to first token: `ttft_s` stays empty.
//! - `Session ID` (2.0) → `session_id`, and `turn` counts the session's rows in file order from 0. Sessions are
//!   remembered least-recently-used up to 100,000; a forgotten session that comes back restarts at turn 0 (one
//!   `inconsistent` diagnostic at the first eviction, and every one counted in `details.sessions_evicted`).
//! - `Log Type` `Conversation log` → `workload_class` `chat`; `API log` rows have no class (API callers' traffic
//!   can be anything).
//! - `Total tokens` is checked against request + response tokens; a mismatch is an `inconsistent` diagnostic and
//!   the row is kept.
//! - Ids: the trace has none, so `request_id` is `<file stem>:<line>`.
//!
//! `details` counts `failures`, `sessions` (distinct session ids started), `log_types`, `models` (the first 32
//! names, then `other`) and `timestamps_decreasing` (rows earlier than the row before; the published files have
//! none, and rows are never reordered).

mod csv_line;
pub mod generate;

pub(crate) use csv_line::split as split_csv_line;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::ops::Range;

use csv_line::UnterminatedQuote;
use infertrace_adapter::parallel::map_lines;

use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status, WorkloadClass};

use crate::sessions::{Digest, Key, MAX_SESSIONS, RESTARTS_AT_TURN_0, Sessions};

/// The BurstGPT CSV trace adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct BurstGpt;

const TIMESTAMP: &str = "Timestamp";
const SESSION_ID: &str = "Session ID";
const ELAPSED_TIME: &str = "Elapsed time";
const MODEL: &str = "Model";
const REQUEST_TOKENS: &str = "Request tokens";
const RESPONSE_TOKENS: &str = "Response tokens";
const TOTAL_TOKENS: &str = "Total tokens";
const LOG_TYPE: &str = "Log Type";

const CONVERSATION_LOG: &str = "Conversation log";
const API_LOG: &str = "API log";

/// Fields looked at per line; BurstGPT has eight.
const MAX_FIELDS: usize = 32;
/// Model names counted by name in `details.models`.
const MAX_MODELS: usize = 32;

/// Positions of the columns, found by header name.
#[derive(Debug, Clone, Copy)]
struct Columns {
    timestamp: usize,
    request: usize,
    response: usize,
    session: Option<usize>,
    elapsed: Option<usize>,
    model: Option<usize>,
    total: Option<usize>,
    log_type: Option<usize>,
}

impl Columns {
    /// The 1.x order, assumed when the header is missing.
    const V1: Columns = Columns {
        timestamp: 0,
        model: Some(1),
        request: 2,
        response: 3,
        total: Some(4),
        log_type: Some(5),
        session: None,
        elapsed: None,
    };

    fn from_header(header: &[&str]) -> Option<Self> {
        let find = |name: &str| header.iter().position(|&field| field == name);
        Some(Columns {
            timestamp: find(TIMESTAMP)?,
            request: find(REQUEST_TOKENS)?,
            response: find(RESPONSE_TOKENS)?,
            session: find(SESSION_ID),
            elapsed: find(ELAPSED_TIME),
            model: find(MODEL),
            total: find(TOTAL_TOKENS),
            log_type: find(LOG_TYPE),
        })
    }

    /// Fields a record needs to hold every column the header names.
    fn width(self) -> usize {
        // A plain loop: the chained iterator this was took about 200 instructions a line.
        let mut widest = self.timestamp.max(self.request).max(self.response);
        for column in [self.session, self.elapsed, self.model, self.total, self.log_type].into_iter().flatten() {
            widest = widest.max(column);
        }
        widest + 1
    }

    fn generation(self) -> &'static str {
        if self.session.is_some() || self.elapsed.is_some() { "2.0" } else { "1.x" }
    }
}

impl Adapter for BurstGpt {
    fn id(&self) -> &'static str {
        "burstgpt"
    }

    fn description(&self) -> &'static str {
        "BurstGPT CSV trace (1.x: Timestamp,Model,Request tokens,…; 2.0 adds Session ID, Elapsed time): \
         seconds from the first day's midnight, zero-response rows are failures"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        let has = |name: &str| line.split(|&b| b == b',').any(|f| f.trim_ascii() == name.as_bytes());
        (has(TIMESTAMP) && has(REQUEST_TOKENS) && has(RESPONSE_TOKENS)).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut state = State::new(ctx.source_stem());
        // The header (or the first record, when there is none) settles the columns; every later line is read on
        // any thread and folded in order.
        let mut columns = None;
        while columns.is_none() {
            let Some((line_no, bytes)) = lines.next_bytes()? else { break };
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            let line = if line_no == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
            if line.trim_ascii().is_empty() {
                continue; // A blank line carries nothing to lose.
            }
            let mut buf = [""; MAX_FIELDS];
            let Ok(count) = split_csv_line(line, &mut buf) else {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, "a quoted field is not closed"));
                continue;
            };
            let header = Columns::from_header(&buf[..count]);
            columns = Some(header.unwrap_or(Columns::V1));
            if header.is_none() {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "no Timestamp,Request tokens,Response tokens header; assuming the 1.x column order",
                ));
                let record = Record::read(line, Columns::V1, &state.digest);
                state.fold(record, line.as_bytes(), Columns::V1, line_no, ctx, sink)?;
            }
        }
        if let Some(cols) = columns {
            let digest = state.digest.clone();
            let prepare = |bytes: &[u8]| {
                let line = infertrace_adapter::utf8(bytes)?;
                (!line.trim_ascii().is_empty()).then(|| Record::read(line, cols, &digest))
            };
            map_lines(&mut lines, prepare, |line_no, bytes, record| match record {
                Some(record) => state.fold(record, bytes, cols, line_no, ctx, sink),
                None => {
                    // Not UTF-8 (a diagnostic), or blank: a blank line carries nothing to lose.
                    utf8_line(line_no, bytes, sink);
                    Ok(())
                }
            })?;
        }
        Ok(ParseReport {
            format_version: columns.map(|c| c.generation().to_owned()),
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: lines.lines_read(),
            details: state.details(),
        })
    }
}

/// What a parse keeps across lines: session turns and the counts for `details`.
#[derive(Debug)]
struct State<'a> {
    stem: &'a str,
    /// Keys `sessions`; a copy computes the key of each line's session where the line is read.
    digest: Digest,
    /// Each session's next turn.
    sessions: Sessions<u32>,
    failures: u64,
    log_types: BTreeMap<&'static str, u64>,
    models: BTreeMap<String, u64>,
    decreasing: u64,
    previous: Option<f64>,
}

impl<'a> State<'a> {
    fn new(stem: &'a str) -> Self {
        Self {
            stem,
            digest: Digest::default(),
            sessions: Sessions::new(MAX_SESSIONS),
            failures: 0,
            log_types: BTreeMap::new(),
            models: BTreeMap::new(),
            decreasing: 0,
            previous: None,
        }
    }

    /// One data record as a request row, or `None` (with a diagnostic) when nothing in it is usable.
    /// One prepared data line: its request row, if any, to `sink`.
    fn fold(
        &mut self,
        record: Result<Record, UnterminatedQuote>,
        line: &[u8],
        cols: Columns,
        line_no: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), ParseError> {
        let Ok(record) = record else {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, "a quoted field is not closed"));
            return Ok(());
        };
        if let Some(row) = self.row(&record, line, cols, line_no, ctx, sink) {
            sink.request(row)?;
        }
        Ok(())
    }

    fn row(
        &mut self,
        record: &Record,
        text: &[u8],
        cols: Columns,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Option<RequestRow> {
        if record.fields < cols.width() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MalformedCsv,
                format!("{} fields, expected {}", record.fields, cols.width()),
            ));
            return None;
        }
        // The ranges are of fields split from this same UTF-8 text, so they are on character boundaries.
        let field = |range: &Option<Range<usize>>| range.clone().and_then(|r| std::str::from_utf8(&text[r]).ok());
        let Record { timestamp, request, response, elapsed, total, .. } = *record;
        let arrival = timestamp.and_then(seconds_to_nanos).and_then(|ns| ns.checked_add(ctx.options.start_ns));
        if arrival.is_none() && request.is_none() && response.is_none() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::UnrecognizedLine,
                "no usable Timestamp, Request tokens or Response tokens",
            ));
            return None;
        }
        let mut invalid = Vec::new();
        for (ok, name, expected) in [
            (arrival.is_some(), TIMESTAMP, "a non-negative number of seconds"),
            (request.is_some(), REQUEST_TOKENS, "a token count"),
            (response.is_some(), RESPONSE_TOKENS, "a token count"),
            (!matches!(elapsed, Some(None)), ELAPSED_TIME, "a non-negative number of seconds"),
            (!matches!(total, Some(None)), TOTAL_TOKENS, "a token count"),
        ] {
            if !ok {
                invalid.push(format!("{name} is not {expected}"));
            }
        }
        for message in invalid {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, message));
        }
        if let (Some(Some(total)), Some(request), Some(response)) = (total, request, response)
            && total != u64::from(request) + u64::from(response)
        {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                "Total tokens differs from Request tokens + Response tokens",
            ));
        }
        if let Some(t) = timestamp {
            if self.previous.is_some_and(|p| t < p) {
                self.decreasing += 1;
            }
            self.previous = Some(t);
        }

        let model = field(&record.model);
        if let Some(model) = model {
            if let Some(count) = self.models.get_mut(model) {
                *count += 1;
            } else if self.models.len() < MAX_MODELS {
                self.models.insert(model.to_owned(), 1);
            } else {
                *self.models.entry("other".to_owned()).or_default() += 1;
            }
        }
        let log_type = field(&record.log_type);
        let (class, log_key) = match log_type {
            Some(CONVERSATION_LOG) => (Some(WorkloadClass::Chat), CONVERSATION_LOG),
            Some(API_LOG) => (None, API_LOG),
            Some(_) => (None, "other"),
            None => (None, "none"),
        };
        if cols.log_type.is_some() {
            *self.log_types.entry(log_key).or_default() += 1;
        }
        let session = field(&record.session);
        let turn = record.session_key.map(|key| self.next_turn(key, line, sink));
        let failed = response == Some(0);
        if failed {
            self.failures += 1;
        }
        let e2e = elapsed.flatten();
        Some(RequestRow {
            request_id: infertrace_adapter::line_id(self.stem, line),
            source: "burstgpt".to_owned(),
            model: model.map(str::to_owned),
            session_id: session.map(str::to_owned),
            turn,
            arrival_time: arrival,
            completion_time: arrival.zip(e2e.and_then(seconds_to_nanos)).and_then(|(a, e)| a.checked_add(e)),
            e2e_s: e2e,
            input_tokens: request,
            output_tokens: response,
            workload_class: class,
            status: if failed { Status::Error } else { Status::Ok },
            error: failed.then(|| "no response tokens".to_owned()),
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        })
    }

    /// The turn of this row of the session keyed `key` (0 for a new session, or one forgotten), counting it; the
    /// parse's first eviction is reported at `line`.
    fn next_turn(&mut self, key: Key, line: u64, sink: &mut dyn Sink) -> u32 {
        let turn = self.sessions.touch_reporting(key, line, RESTARTS_AT_TURN_0, sink).unwrap_or(0);
        self.sessions.set(key, turn.saturating_add(1));
        turn
    }

    fn details(self) -> BTreeMap<String, serde_json::Value> {
        let mut details = BTreeMap::new();
        details.insert("failures".to_owned(), self.failures.into());
        if self.sessions.started > 0 {
            details.insert("sessions".to_owned(), self.sessions.started.into());
        }
        if self.sessions.evicted > 0 {
            details.insert("sessions_evicted".to_owned(), self.sessions.evicted.into());
        }
        if !self.log_types.is_empty() {
            details.insert("log_types".to_owned(), serde_json::to_value(&self.log_types).unwrap_or_default());
        }
        if !self.models.is_empty() {
            details.insert("models".to_owned(), serde_json::to_value(&self.models).unwrap_or_default());
        }
        details.insert("timestamps_decreasing".to_owned(), self.decreasing.into());
        details
    }
}

/// What a data line holds, read without the fold's state (on any thread): numbers parsed, text fields as byte
/// ranges of the line.
#[derive(Debug, Clone, Default)]
struct Record {
    /// Fields on the line (at most [`MAX_FIELDS`]); the rest is unread when too few for the columns.
    fields: usize,
    /// Seconds, when a non-negative number.
    timestamp: Option<f64>,
    request: Option<u32>,
    response: Option<u32>,
    /// `None` without the column or value, `Some(None)` when unreadable.
    elapsed: Option<Option<f64>>,
    /// As `elapsed`.
    total: Option<Option<u64>>,
    model: Option<Range<usize>>,
    log_type: Option<Range<usize>>,
    session: Option<Range<usize>>,
    /// [`Digest::key`] of the session id.
    session_key: Option<Key>,
}

impl Record {
    fn read(line: &str, cols: Columns, digest: &Digest) -> Result<Record, UnterminatedQuote> {
        let mut buf = [""; MAX_FIELDS];
        let count = split_csv_line(line, &mut buf)?;
        let fields = &buf[..count];
        if count < cols.width() {
            return Ok(Record { fields: count, ..Record::default() });
        }
        let get = |i: Option<usize>| i.and_then(|i| fields.get(i).copied()).filter(|f| !f.is_empty());
        // Every field is a subslice of `line`.
        let range = |i: Option<usize>| {
            get(i).map(|f| {
                let start = f.as_ptr() as usize - line.as_ptr() as usize;
                start..start + f.len()
            })
        };
        Ok(Record {
            fields: count,
            timestamp: get(Some(cols.timestamp)).and_then(|f| f.parse::<f64>().ok()).filter(|t| *t >= 0.0),
            request: get(Some(cols.request)).and_then(|f| f.parse::<u32>().ok()),
            response: get(Some(cols.response)).and_then(|f| f.parse::<u32>().ok()),
            elapsed: get(cols.elapsed).map(|f| f.parse::<f64>().ok().filter(|e| e.is_finite() && *e >= 0.0)),
            total: get(cols.total).map(|f| f.parse::<u64>().ok()),
            model: range(cols.model),
            log_type: range(cols.log_type),
            session: range(cols.session),
            session_key: get(cols.session).map(|id| digest.key(id)),
        })
    }
}

#[cfg(test)]
mod tests;
