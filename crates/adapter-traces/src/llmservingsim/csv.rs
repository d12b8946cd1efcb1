//! The CSV generations: the bench's `timeseries.csv` and the simulator's `sim.csv`, told apart by the header.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line,
};
use infertrace_schema::{ClockDomain, EngineSample, RequestRow, Status, metrics};

use super::LlmServingSim;
use crate::burstgpt::split_csv_line;

/// Fields looked at per line: both files have at most a dozen.
const MAX_FIELDS: usize = 64;
/// Unmapped column names listed in `details`.
const MAX_UNMAPPED: usize = 32;

/// Timeseries columns → canonical metric and the factor to its unit.
const METRICS: &[(&str, &str, f64)] = &[
    ("prompt_throughput", metrics::PROMPT_THROUGHPUT_TPS, 1.0),
    ("gen_throughput", metrics::GENERATION_THROUGHPUT_TPS, 1.0),
    ("running", metrics::REQUESTS_RUNNING, 1.0),
    ("waiting", metrics::REQUESTS_WAITING, 1.0),
    ("preempted", metrics::PREEMPTIONS, 1.0),
    ("kv_cache_pct", metrics::KV_CACHE_USAGE, 0.01),
];

/// The column a KV-usage value is checked against (see the module doc: 0 % with requests running is withheld).
const KV_CACHE_PCT: &str = "kv_cache_pct";
const RUNNING: &str = "running";

/// Which CSV the header says this is.
#[derive(Debug)]
enum Layout {
    Timeseries { t: usize, columns: Vec<(usize, &'static str, &'static str, f64)>, running: Option<usize> },
    Sim(SimColumns),
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct SimColumns {
    instance: Option<usize>,
    request: usize,
    model: Option<usize>,
    input: Option<usize>,
    output: Option<usize>,
    arrival: usize,
    end: Option<usize>,
    latency: Option<usize>,
    queuing: Option<usize>,
    ttft: Option<usize>,
    tpot: Option<usize>,
}

impl Layout {
    fn from_header(header: &[&str], unmapped: &mut Vec<String>) -> Layout {
        let find = |name: &str| header.iter().position(|&f| f == name);
        if let (Some(t), Some(_)) = (find("t"), find("prompt_throughput")) {
            let mut columns = Vec::new();
            for (i, &name) in header.iter().enumerate() {
                if i == t {
                    continue;
                }
                match METRICS.iter().find(|(column, ..)| *column == name) {
                    Some(&(column, metric, factor)) => columns.push((i, column, metric, factor)),
                    None if unmapped.len() < MAX_UNMAPPED => unmapped.push(name.to_owned()),
                    None => {}
                }
            }
            return Layout::Timeseries { t, columns, running: find(RUNNING) };
        }
        if let (Some(request), Some(arrival)) = (find("request id"), find("arrival")) {
            return Layout::Sim(SimColumns {
                instance: find("instance id"),
                request,
                model: find("model"),
                input: find("input"),
                output: find("output"),
                arrival,
                end: find("end_time"),
                latency: find("latency"),
                queuing: find("queuing_delay"),
                ttft: find("TTFT"),
                tpot: find("TPOT"),
            });
        }
        Layout::Unknown
    }

    fn width(&self) -> usize {
        match self {
            Layout::Timeseries { t, columns, .. } => columns.iter().map(|c| c.0).chain([*t]).max().unwrap_or(0) + 1,
            Layout::Sim(c) => {
                [c.instance, Some(c.request), c.model, c.input, c.output, Some(c.arrival), c.end, c.latency]
                    .into_iter()
                    .chain([c.queuing, c.ttft, c.tpot])
                    .flatten()
                    .max()
                    .unwrap_or(0)
                    + 1
            }
            Layout::Unknown => 0,
        }
    }
}

pub(super) fn parse(
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut layout = None;
    // Where the simulator's clock starts: the run's, when its `meta.json` is beside, else `--start`.
    let mut run_start = None;
    let mut unmapped = Vec::new();
    let mut withheld = 0u64;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let line = if line_no == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
        if line.trim_ascii().is_empty() {
            continue;
        }
        let mut buf = [""; MAX_FIELDS];
        let Ok(count) = split_csv_line(line, &mut buf) else {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, "a quoted field is not closed"));
            continue;
        };
        let fields = &buf[..count];
        let Some(current) = &layout else {
            let header = Layout::from_header(fields, &mut unmapped);
            if matches!(header, Layout::Sim(_)) {
                run_start = started_at(ctx);
            }
            if matches!(header, Layout::Unknown) {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "no LLMServingSim header (t,prompt_throughput,… or instance id,request id,…)",
                ));
            }
            layout = Some(header);
            continue;
        };
        if fields.len() < current.width() {
            sink.diagnostic(Diagnostic::new(
                line_no,
                DiagnosticKind::MalformedCsv,
                format!("{} fields, expected {}", fields.len(), current.width()),
            ));
            continue;
        }
        match current {
            Layout::Timeseries { t, columns, running } => {
                timeseries_row(fields, *t, columns, *running, line_no, ctx, &mut withheld, sink)?;
            }
            Layout::Sim(cols) => {
                let start = run_start.as_ref().map_or(ctx.options.start_ns, |s| s.nanos);
                if let Some(row) = sim_row(fields, *cols, line_no, start, ctx, sink) {
                    sink.request(row)?;
                }
            }
            Layout::Unknown => {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::UnrecognizedLine, "not an LLMServingSim CSV"));
            }
        }
    }
    let mut details = BTreeMap::new();
    let format_version = match &layout {
        Some(Layout::Timeseries { .. }) => {
            details.insert("kv_cache_pct_withheld".to_owned(), withheld.into());
            if !unmapped.is_empty() {
                details.insert("unmapped_columns".to_owned(), unmapped.into());
            }
            Some("bench-timeseries")
        }
        Some(Layout::Sim(_)) => Some("sim-output"),
        _ => None,
    };
    let clock_domain = match run_start {
        Some(start) => {
            let alignment = serde_json::json!({ "from": start.file, "started_at": start.text });
            details.insert("clock_alignment".to_owned(), alignment);
            ClockDomain::Utc
        }
        None => ClockDomain::Relative,
    };
    Ok(ParseReport {
        format_version: format_version.map(str::to_owned),
        clock_domain,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

#[allow(clippy::too_many_arguments)]
fn timeseries_row(
    fields: &[&str],
    t: usize,
    columns: &[(usize, &'static str, &'static str, f64)],
    running: Option<usize>,
    line: u64,
    ctx: &ParseContext<'_>,
    withheld: &mut u64,
    sink: &mut dyn Sink,
) -> Result<(), ParseError> {
    let time = fields
        .get(t)
        .and_then(|f| f.parse::<f64>().ok())
        .filter(|t| *t >= 0.0)
        .and_then(seconds_to_nanos)
        .and_then(|ns| ns.checked_add(ctx.options.start_ns));
    let Some(time) = time else {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            "t is not a non-negative number of seconds",
        ));
        return Ok(());
    };
    let value = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).filter(|v| v.is_finite());
    let busy = running.and_then(value).is_some_and(|r| r > 0.0);
    for &(i, column, metric, factor) in columns {
        let Some(v) = value(i) else {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, format!("{column} is not a number")));
            continue;
        };
        if column == KV_CACHE_PCT && v == 0.0 && busy {
            *withheld += 1;
            continue;
        }
        sink.sample(EngineSample {
            time,
            source: LlmServingSim::MEASURED.into(),
            instance: None,
            metric: metric.into(),
            value: v * factor,
            source_file: Some(ctx.source_file.into()),
            source_line: Some(line),
        })?;
    }
    Ok(())
}

/// Where the bench's run clock starts, from its `meta.json`.
struct RunStart {
    nanos: i64,
    /// The file it was read from, relative to the input.
    file: String,
    /// `started_at` as written.
    text: String,
}

/// The bench's `meta.json` beside the simulator's output, as LLMServingSim lays a run out (`outputs/sim.csv`
/// beside `vllm/meta.json`) or as it is flattened for publishing (`vllm_meta.json`), plain or compressed.
const META_BESIDE: &[&str] = &["vllm_meta.json", "meta.json", "../vllm/meta.json"];

/// The run's start (`started_at`, RFC 3339 UTC) from the first `meta.json` beside the input that has one: the
/// simulator counts from the workload's start, which the bench starts at `started_at` (on the published RTXPRO6000
/// run the simulated arrivals then fall 1.9 ms to 18 ms before the frontend's arrivals of the same requests).
fn started_at(ctx: &ParseContext<'_>) -> Option<RunStart> {
    let sidecars = ctx.sidecars?;
    META_BESIDE.iter().flat_map(|name| ["", ".zst", ".gz"].map(|ext| format!("{name}{ext}"))).find_map(|file| {
        let bytes = sidecars.read(&file)?;
        let meta: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let text = meta.get("started_at")?.as_str()?.to_owned();
        let nanos = infertrace_adapter::time::parse_rfc3339(&text).ok()?;
        Some(RunStart { nanos, file, text })
    })
}

fn sim_row(
    fields: &[&str],
    cols: SimColumns,
    line: u64,
    start: i64,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Option<RequestRow> {
    let text = |i: Option<usize>| i.and_then(|i| fields.get(i).copied()).filter(|f| !f.is_empty());
    let mut invalid = Vec::new();
    let mut number = |name: &'static str, i: Option<usize>| -> Option<i64> {
        let raw = text(i)?;
        let n = raw.parse::<i64>().ok().filter(|n| *n >= 0);
        if n.is_none() {
            invalid.push(name);
        }
        n
    };
    let arrival = number("arrival", Some(cols.arrival));
    let end = number("end_time", cols.end);
    let latency = number("latency", cols.latency);
    let queuing = number("queuing_delay", cols.queuing);
    let ttft = number("TTFT", cols.ttft);
    let tpot = number("TPOT", cols.tpot);
    let input = number("input", cols.input);
    let output = number("output", cols.output);
    let request = text(Some(cols.request));
    if arrival.is_none() && request.is_none() && input.is_none() {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::UnrecognizedLine,
            "no usable request id, arrival or input",
        ));
        return None;
    }
    for name in invalid {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            format!("{name} is not a non-negative integer"),
        ));
    }
    if let (Some(a), Some(e), Some(l)) = (arrival, end, latency)
        && e.checked_sub(a) != Some(l)
    {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::Inconsistent, "latency differs from end_time - arrival"));
    }
    let at = |ns: Option<i64>| ns?.checked_add(start);
    let after_arrival = |d: Option<i64>| at(arrival?.checked_add(d?));
    let seconds = |ns: Option<i64>| ns.map(|ns| ns as f64 / 1e9);
    let tokens = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok());
    Some(RequestRow {
        request_id: request.map_or_else(|| format!("{}:{line}", ctx.source_stem()), str::to_owned),
        source: LlmServingSim::SIMULATED.to_owned(),
        model: text(cols.model).map(str::to_owned),
        instance: text(cols.instance).map(str::to_owned),
        arrival_time: at(arrival),
        scheduled_time: after_arrival(queuing),
        first_token_time: after_arrival(ttft),
        last_token_time: at(end),
        queue_s: seconds(queuing),
        ttft_s: seconds(ttft),
        tpot_s: seconds(tpot),
        e2e_s: seconds(latency),
        input_tokens: tokens(input),
        output_tokens: tokens(output),
        status: Status::Ok,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    })
}
