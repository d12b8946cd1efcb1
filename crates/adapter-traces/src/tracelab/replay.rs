//! TraceLab `session_runner` replay CSVs (see the parent module for the format and mapping).

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::time::millis_to_nanos;
use infertrace_adapter::{
    Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status, WorkloadClass};

use crate::sessions::{Digest, MAX_SESSIONS, Sessions};

const MAX_FIELDS: usize = 16;

/// Positions of the columns used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Columns {
    session: usize,
    /// Whether the session column is csv_export's `id` rather than `session_id`.
    canonical: bool,
    arrival: Option<usize>,
    round: usize,
    prefix: usize,
    input: usize,
    output: usize,
    wait: usize,
}

impl Columns {
    /// The runner's first documented header without `arrival_time`, assumed for a file without a header.
    const DEFAULT: Columns =
        Columns { session: 0, canonical: false, arrival: None, round: 1, prefix: 2, input: 3, output: 4, wait: 5 };

    /// The columns of a header line, if it is one of the runner's.
    pub(super) fn from_header(line: &[u8]) -> Option<Self> {
        let line = infertrace_adapter::utf8(line)?;
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        let fields: Vec<&str> = line.split(',').take(MAX_FIELDS).map(|f| f.trim().trim_matches('"')).collect();
        let find = |name: &str| fields.iter().position(|&field| field == name);
        let (session, canonical) = match (find("session_id"), find("id")) {
            (Some(i), _) => (i, false),
            (None, Some(i)) => (i, true),
            (None, None) => return None,
        };
        Some(Columns {
            session,
            canonical,
            arrival: find("arrival_time"),
            round: find("round_idx")?,
            prefix: find("prefix_len")?,
            input: find("input_len")?,
            output: find("output_len")?,
            wait: find("tool_wait_after_ms")?,
        })
    }

    fn width(self) -> usize {
        [self.session, self.arrival.unwrap_or(0), self.round, self.prefix, self.input, self.output, self.wait]
            .into_iter()
            .max()
            .unwrap_or(0)
            + 1
    }
}

/// What a session's next round needs from the previous one.
#[derive(Debug, Clone, Copy, Default)]
struct Previous {
    /// Arrival of the previous round, plus its tool wait.
    next_arrival: Option<i64>,
    /// The previous round's whole context: prefix, new input and output.
    context: Option<u64>,
}

#[derive(Debug, Default)]
struct Counts {
    arrivals_derived: u64,
    compactions: u64,
}

pub(super) fn parse(
    source: &'static str,
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let stem = ctx.source_stem();
    let mut lines = LineReader::new(input);
    let mut columns: Option<Columns> = None;
    let digest = Digest::default();
    let mut sessions = Sessions::<Previous>::new(MAX_SESSIONS);
    let mut counts = Counts::default();
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let line = if line_no == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
        if line.trim_ascii().is_empty() {
            continue;
        }
        let cols = match columns {
            Some(cols) => cols,
            None => {
                let header = Columns::from_header(line.as_bytes());
                columns = Some(header.unwrap_or(Columns::DEFAULT));
                if header.is_some() {
                    continue;
                }
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "no session_runner header; assuming session_id,round_idx,prefix_len,input_len,output_len,\
                     tool_wait_after_ms",
                ));
                Columns::DEFAULT
            }
        };
        let mut buf = [""; MAX_FIELDS];
        let mut count = 0;
        for field in line.split(',').take(MAX_FIELDS) {
            buf[count] = field.trim().trim_matches('"');
            count += 1;
        }
        let fields = &buf[..count];
        if fields.len() < cols.width() {
            sink.diagnostic(Diagnostic::new(
                line_no,
                DiagnosticKind::MalformedCsv,
                format!("{} fields, expected at least {}", fields.len(), cols.width()),
            ));
            continue;
        }
        let record = Record::read(fields, cols, line_no, sink);
        let session = Some(fields[cols.session]).filter(|s| !s.is_empty());
        let key = session.map(|id| digest.key(id));
        let previous = match key {
            Some(key) => {
                sessions.touch_reporting(key, line_no, "a later round of one arrives at its own arrival_time", sink)
            }
            None => {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MissingField, "empty session id"));
                None
            }
        };
        let arrival = match previous.and_then(|p| p.next_arrival) {
            Some(derived) => {
                counts.arrivals_derived += 1;
                Some(derived)
            }
            None => record.arrival_ms.and_then(|ms| millis_to_nanos(ms)?.checked_add(ctx.options.start_ns)),
        };
        let prompt = record.prefix.zip(record.input).and_then(|(p, i)| p.checked_add(i));
        if let (Some(context), Some(prefix)) = (previous.and_then(|p| p.context), record.prefix)
            && prefix < context
        {
            counts.compactions += 1;
        }
        if let Some(key) = key {
            let next = Previous {
                next_arrival: arrival.zip(record.wait_ns).and_then(|(a, w)| a.checked_add(w)),
                context: prompt.zip(record.output).and_then(|(p, o)| p.checked_add(o)),
            };
            sessions.set(key, next);
        }
        let row = RequestRow {
            request_id: match (session, record.round) {
                (Some(id), Some(round)) => format!("{id}_round_{round:06}"),
                _ => infertrace_adapter::line_id(stem, line_no),
            },
            source: source.to_owned(),
            session_id: session.map(str::to_owned),
            turn: record.round.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            arrival_time: arrival,
            input_tokens: prompt.and_then(|n| crate::token_count(n, "prefix_len + input_len", line_no, sink)),
            cached_tokens: record.prefix.and_then(|n| crate::token_count(n, "prefix_len", line_no, sink)),
            output_tokens: record.output.and_then(|n| crate::token_count(n, "output_len", line_no, sink)),
            workload_class: Some(WorkloadClass::Agent),
            status: Status::Unknown,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line_no),
            ..RequestRow::default()
        };
        sink.request(row)?;
    }
    let mut details: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    details.insert("sessions".into(), sessions.started.into());
    details.insert("arrivals_derived".into(), counts.arrivals_derived.into());
    details.insert("compactions".into(), counts.compactions.into());
    if sessions.evicted > 0 {
        details.insert("sessions_evicted".into(), sessions.evicted.into());
    }
    let header = match columns {
        Some(Columns { canonical: true, .. }) => "id",
        _ => "session_id",
    };
    details.insert("session_column".into(), header.into());
    Ok(ParseReport {
        format_version: Some("replay-csv".to_owned()),
        clock_domain: ClockDomain::Relative,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

/// The numbers of one record; `None` where a field is unusable (reported).
struct Record {
    arrival_ms: Option<f64>,
    round: Option<u64>,
    prefix: Option<u64>,
    input: Option<u64>,
    output: Option<u64>,
    wait_ns: Option<i64>,
}

impl Record {
    fn read(fields: &[&str], cols: Columns, line: u64, sink: &mut dyn Sink) -> Self {
        let mut bad: Vec<&str> = Vec::new();
        let mut count = |index: usize, name: &'static str| {
            let value = fields[index].parse::<u64>().ok();
            if value.is_none() {
                bad.push(name);
            }
            value
        };
        let round = count(cols.round, "round_idx");
        let prefix = count(cols.prefix, "prefix_len");
        let input = count(cols.input, "input_len");
        let output = count(cols.output, "output_len");
        let mut millis = |index: usize, name: &'static str| {
            let value = fields[index].parse::<f64>().ok().filter(|ms| ms.is_finite() && *ms >= 0.0);
            if value.is_none() {
                bad.push(name);
            }
            value
        };
        // The runner reads a missing arrival as 0.
        let arrival_ms = match cols.arrival {
            Some(index) if !fields[index].is_empty() => millis(index, "arrival_time"),
            _ => Some(0.0),
        };
        let wait_ns = millis(cols.wait, "tool_wait_after_ms").and_then(millis_to_nanos);
        if !bad.is_empty() {
            let names: Vec<String> = bad.iter().map(|name| format!("`{name}`")).collect();
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("not a non-negative number: {}", names.join(", ")),
            ));
        }
        Record { arrival_ms, round, prefix, input, output, wait_ns }
    }
}
