//! `vllm-bench`: results of `benchmarks/benchmark_serving.py --save-result` and `vllm bench serve --save-result`
//! (0.8.0+), and the console summary both print.
//!
//! The JSON holds the run summary (`duration`, `completed`, `request_throughput`, `"request_goodput:"` with its
//! stray colon up to 0.9.0, `mean_ttft_ms`, `p99_tpot_ms`, …) and, in every generation of the old script and with
//! `--save-detailed` from 0.9.2, per-request arrays: `input_lens`, `output_lens`, `ttfts` (s, 0 for failures),
//! `itls` (lists of s), `errors` ("" on success), `generated_texts`, and later `start_times` (0.15+,
//! `time.perf_counter()` seconds: monotonic, not epoch), `latencies` (0.30+), `server_queue_times` and `server_ttfts`
//! (0.33). Each array element becomes one request row; the summary goes to the manifest's `details`.
//! `generated_texts` is skipped unread: completions never reach an output. The document is read as a stream and
//! only one number per request per used array is kept (ITL lists are summed as they pass), so memory follows the
//! number of requests, not the size of the file.
//!
//! Arrivals: `start_times` are offsets on a monotonic clock. They are anchored at the run's start, `date` (written
//! when the run ended, `%Y%m%d-%H%M%S` local time, `--utc-offset` applied) minus `duration`, when both exist, and
//! at `--start` otherwise; the manifest's `details.arrival_anchor` says which.
//!
//! The console summary (`============ Serving Benchmark Result ============`, then `{:<40} {:<10}` rows) has no
//! per-request data: its rows go to `details` and no request row is written.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::json::{Scalar, SumOf};
use infertrace_adapter::time::{civil_to_nanos, seconds_to_nanos};
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use serde::Deserialize;
use serde_json::Value;

/// The vLLM benchmark result adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmBench;

impl VllmBench {
    /// Format id.
    pub const ID: &'static str = "vllm-bench";
}

/// The per-request arrays and the scalars of the run summary.
///
/// Deserialized key by key (no `#[serde(flatten)]`, which would buffer the whole document): `generated_texts` is
/// skipped unread, ITL lists are summed as they stream past, other arrays and objects are skipped.
#[derive(Debug, Default)]
struct BenchResult {
    date: Option<String>,
    model_id: Option<String>,
    duration: Option<f64>,
    input_lens: Option<Vec<Option<u64>>>,
    output_lens: Option<Vec<Option<u64>>>,
    ttfts: Option<Vec<Option<f64>>>,
    /// Per request, the sum of its inter-token latencies.
    itls: Option<Vec<Option<f64>>>,
    errors: Option<Vec<Option<String>>>,
    start_times: Option<Vec<Option<f64>>>,
    latencies: Option<Vec<Option<f64>>>,
    server_queue_times: Option<Vec<Option<f64>>>,
    /// Scalars of the summary, by key (`"request_goodput:"` keeps its colon here).
    summary: BTreeMap<String, Value>,
    /// Whether the `"request_goodput:"` key of 0.8.0-0.9.0 (and the old script) was present.
    goodput_with_colon: bool,
}

impl<'de> Deserialize<'de> for BenchResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = BenchResult;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a benchmark result object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<BenchResult, A::Error> {
                let mut r = BenchResult::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "date" => r.date = map.next_value()?,
                        "model_id" => r.model_id = map.next_value()?,
                        "duration" => r.duration = map.next_value()?,
                        "input_lens" => r.input_lens = map.next_value()?,
                        "output_lens" => r.output_lens = map.next_value()?,
                        "ttfts" => r.ttfts = map.next_value()?,
                        "itls" => {
                            r.itls = map
                                .next_value::<Option<Vec<Option<SumOf>>>>()?
                                .map(|v| v.into_iter().map(|s| s.map(|s| s.0)).collect())
                        }
                        "errors" => r.errors = map.next_value()?,
                        "start_times" => r.start_times = map.next_value()?,
                        "latencies" => r.latencies = map.next_value()?,
                        "server_queue_times" => r.server_queue_times = map.next_value()?,
                        _ => {
                            r.goodput_with_colon |= key == "request_goodput:";
                            // Scalars are the summary; arrays and objects (texts, nested reports) are skipped.
                            let value: Scalar = map.next_value()?;
                            if let Scalar(Some(value)) = value {
                                r.summary.insert(key, value);
                            }
                        }
                    }
                }
                Ok(r)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

const SUMMARY_HEADER: &str = "Serving Benchmark Result";

/// Counts the newlines of what passes through, for the manifest's line count.
struct CountingReader<'r> {
    inner: &'r mut dyn BufRead,
    newlines: u64,
    last: Option<u8>,
}

impl std::io::Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.newlines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

impl Adapter for VllmBench {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM benchmark_serving.py / `vllm bench serve` result JSON (per-request rows) or console summary"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        // Key order differs between writers (Python keeps insertion order, others sort), and per-request arrays can
        // push the summary past the head: accept any two of the run-level keys.
        let keys = [
            "\"request_throughput\"",
            "\"num_prompts\"",
            "\"completed\"",
            "\"duration\"",
            "\"mean_ttft_ms\"",
            "\"ttfts\"",
        ];
        let json = text.trim_start().starts_with('{') && keys.iter().filter(|k| text.contains(*k)).count() >= 2;
        let console = text.lines().take(8).any(|l| l.contains(SUMMARY_HEADER) && l.starts_with("=="));
        // SGLang's bench_serving records share the summary keys; these are its own.
        let sglang = ["\"total_output_tokens_retokenized\"", "\"sharegpt_output_len\"", "\"dataset_name\""]
            .iter()
            .any(|k| text.contains(k));
        match (json, console) {
            (true, _) if sglang => Some(Confidence::Low),
            (true, _) | (_, true) => Some(Confidence::High),
            _ => None,
        }
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let first = input.fill_buf()?.iter().copied().find(|b| !b.is_ascii_whitespace());
        if first == Some(b'{') { self.parse_json(input, ctx, sink) } else { parse_console(input, sink) }
    }
}

impl VllmBench {
    fn parse_json(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut counting = CountingReader { inner: input, newlines: 0, last: None };
        let parsed: Result<BenchResult, serde_json::Error> = serde_json::from_reader(&mut counting);
        let lines = counting.newlines + u64::from(counting.last.is_some_and(|b| b != b'\n'));
        let mut report = ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Relative,
            year: None,
            lines,
            details: BTreeMap::new(),
        };
        let result = match parsed {
            Ok(result) => result,
            Err(e) if e.is_io() => return Err(ParseError::Read(e.into())),
            Err(e) => {
                sink.diagnostic(Diagnostic::new(
                    e.line() as u64,
                    DiagnosticKind::MalformedJson,
                    json::error_message(&e),
                ));
                return Ok(report);
            }
        };
        let summary_keys = result.summary.keys().cloned().collect::<Vec<_>>();
        for key in summary_keys {
            let value = &result.summary[&key];
            // Scalars only: arrays are per-request data this version does not map, objects are nested reports.
            if value.is_number() || value.is_string() || value.is_boolean() {
                report.details.insert(key.trim_end_matches(':').to_owned(), value.clone());
            }
        }
        for (key, value) in
            [("date", result.date.clone().map(Value::from)), ("duration", result.duration.map(Value::from))]
        {
            if let Some(value) = value {
                report.details.insert(key.to_owned(), value);
            }
        }
        report.format_version = Some(
            if result.goodput_with_colon {
                "0.8.0-0.9.0 (request_goodput: key)"
            } else if result.start_times.is_some() {
                "0.15+ (start_times)"
            } else {
                "benchmark_serving.py / vllm bench serve"
            }
            .to_owned(),
        );

        let n = [
            result.input_lens.as_ref().map(Vec::len),
            result.output_lens.as_ref().map(Vec::len),
            result.ttfts.as_ref().map(Vec::len),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        let anchor = self.anchor(&result, ctx, sink, &mut report);
        let start_min = result.start_times.iter().flatten().flatten().copied().fold(f64::INFINITY, f64::min);
        let stem = ctx.source_stem();
        for i in 0..n {
            let at = |v: &Option<Vec<Option<f64>>>| v.as_ref().and_then(|v| v.get(i).copied().flatten());
            let input = result.input_lens.as_ref().and_then(|v| v.get(i).copied().flatten());
            let output = result.output_lens.as_ref().and_then(|v| v.get(i).copied().flatten());
            let error = result.errors.as_ref().and_then(|v| v.get(i).cloned().flatten()).is_some_and(|e| !e.is_empty());
            let ttft = at(&result.ttfts);
            // The old script stores ttft 0 and output 0 for failures and may have no errors array.
            let failed = error || (result.errors.is_none() && ttft == Some(0.0) && output == Some(0));
            let itl_sum = at(&result.itls);
            let e2e = at(&result.latencies).or_else(|| Some(ttft? + itl_sum?)).filter(|_| !failed);
            let mut row = RequestRow {
                request_id: infertrace_adapter::line_id(stem, i as u64),
                source: Self::ID.to_owned(),
                model: result.model_id.clone(),
                input_tokens: input.and_then(|n| u32::try_from(n).ok()),
                output_tokens: output.and_then(|n| u32::try_from(n).ok()),
                ttft_s: ttft.filter(|_| !failed),
                e2e_s: e2e,
                queue_s: at(&result.server_queue_times),
                status: if failed { Status::Error } else { Status::Ok },
                source_file: Some(ctx.source_file.to_owned()),
                source_line: None,
                ..RequestRow::default()
            };
            if let (Some(e2e), Some(ttft), Some(out)) = (row.e2e_s, row.ttft_s, row.output_tokens.filter(|&o| o > 1)) {
                row.tpot_s = Some((e2e - ttft) / f64::from(out - 1));
            }
            let offset = at(&result.start_times).and_then(|start| seconds_to_nanos(start - start_min));
            if let (Some(anchor), Some(offset)) = (anchor, offset) {
                let arrival = anchor + offset;
                row.arrival_time = Some(arrival);
                row.first_token_time = row.ttft_s.and_then(seconds_to_nanos).map(|t| arrival + t);
                row.completion_time = row.e2e_s.and_then(seconds_to_nanos).map(|t| arrival + t);
            }
            sink.request(row)?;
        }
        Ok(report)
    }

    /// The instant `start_times` count from, and the clock domain that follows.
    fn anchor(
        &self,
        result: &BenchResult,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
        report: &mut ParseReport,
    ) -> Option<i64> {
        result.start_times.as_ref()?;
        let date = result.date.as_deref().and_then(|d| parse_date(d, ctx));
        match (date, result.duration) {
            (Some(end), Some(duration)) if seconds_to_nanos(duration).is_some() => {
                report.clock_domain = ClockDomain::AssumedOffset;
                report.details.insert("arrival_anchor".to_owned(), Value::from("date minus duration"));
                Some(end - seconds_to_nanos(duration)?)
            }
            _ => {
                if result.date.is_some() {
                    sink.diagnostic(Diagnostic::new(1, DiagnosticKind::InvalidValue, "`date` is not %Y%m%d-%H%M%S"));
                }
                report.details.insert("arrival_anchor".to_owned(), Value::from("--start"));
                Some(ctx.options.start_ns)
            }
        }
    }
}

/// `YYYYmmdd-HHMMSS` local time → UTC nanoseconds.
fn parse_date(date: &str, ctx: &ParseContext<'_>) -> Option<i64> {
    let (day, time) = date.split_once('-')?;
    if day.len() != 8 || time.len() != 6 || !day.bytes().chain(time.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |s: &str| s.parse::<u32>().ok();
    civil_to_nanos(
        day[..4].parse().ok()?,
        n(&day[4..6])?,
        n(&day[6..8])?,
        (n(&time[..2])?, n(&time[2..4])?, n(&time[4..6])?),
        ctx.options.utc_offset,
    )
    .ok()
}

/// The console summary: `Label (unit):   value` rows into `details`, keyed by their label.
fn parse_console(input: &mut dyn BufRead, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut details = BTreeMap::new();
    let mut inside = false;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with("==") {
            inside = trimmed.contains(SUMMARY_HEADER);
            continue;
        }
        if inside && trimmed.starts_with('-') && trimmed.ends_with('-') {
            continue; // A section header such as `---Time to First Token---`.
        }
        let row =
            trimmed.rsplit_once(':').and_then(|(label, value)| Some((label.trim(), value.trim().parse::<f64>().ok()?)));
        match row {
            Some((label, value)) if inside => {
                details.insert(label.to_owned(), Value::from(value));
            }
            _ => sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a benchmark summary row")),
        }
    }
    Ok(ParseReport {
        format_version: Some("console summary".to_owned()),
        clock_domain: ClockDomain::Relative,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "bench/run.json", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = VllmBench.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn old_script_result_with_the_goodput_typo() {
        // The keys of benchmark_serving.py (commit 0049e29); the second request failed.
        let text = r#"{"date": "20250301-120010", "backend": "vllm", "model_id": "m", "num_prompts": 2,
            "request_rate": "inf", "duration": 10.0, "completed": 1, "total_input_tokens": 30,
            "request_throughput": 0.1, "request_goodput:": null, "mean_ttft_ms": 200.0, "p99_tpot_ms": 50.0,
            "input_lens": [10, 20], "output_lens": [5, 0], "ttfts": [0.2, 0], "itls": [[0.05, 0.05, 0.1, 0.2], []],
            "generated_texts": ["CANARY completion", ""], "errors": ["", "Bad Request"]}"#;
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("0.8.0-0.9.0 (request_goodput: key)"));
        assert_eq!(report.details["mean_ttft_ms"], Value::from(200.0));
        assert_eq!(report.details["request_rate"], Value::from("inf"));
        assert!(!report.details.contains_key("request_goodput"), "null is not a scalar worth keeping");
        let ok = &sink.requests[0];
        assert_eq!(
            (ok.request_id.as_str(), ok.status, ok.input_tokens, ok.output_tokens),
            ("run:0", Status::Ok, Some(10), Some(5))
        );
        assert_eq!(ok.ttft_s, Some(0.2));
        // e2e = ttft + Σ itl = 0.2 + 0.4; tpot = (0.6 - 0.2) / (5 - 1).
        assert!((ok.e2e_s.unwrap() - 0.6).abs() < 1e-12);
        assert!((ok.tpot_s.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(ok.arrival_time, None, "no start_times: no arrivals");
        let failed = &sink.requests[1];
        assert_eq!((failed.status, failed.ttft_s, failed.e2e_s), (Status::Error, None, None));
        assert!(!format!("{:?}{:?}", sink.requests, report.details).contains("CANARY"));
    }

    #[test]
    fn start_times_are_anchored_at_date_minus_duration() {
        let text = r#"{"date": "20260105-100030", "duration": 30.0, "request_throughput": 1.0, "completed": 2,
            "input_lens": [1, 2], "output_lens": [3, 4], "ttfts": [0.5, 0.25], "latencies": [1.5, 2.5],
            "start_times": [353399.5, 353401.0], "errors": ["", ""]}"#;
        let (sink, report) = parse(text);
        assert_eq!(report.clock_domain, ClockDomain::AssumedOffset);
        assert_eq!(report.details["arrival_anchor"], Value::from("date minus duration"));
        let start = civil_to_nanos(2026, 1, 5, (10, 0, 0), infertrace_adapter::UtcOffset::UTC).unwrap();
        let arrivals: Vec<_> = sink.requests.iter().map(|r| r.arrival_time.unwrap() - start).collect();
        assert_eq!(arrivals, [0, 1_500_000_000]);
        assert_eq!(sink.requests[1].first_token_time, Some(start + 1_750_000_000));
        assert_eq!(sink.requests[1].completion_time, Some(start + 4_000_000_000));
        assert_eq!(sink.requests[1].e2e_s, Some(2.5));
    }

    #[test]
    fn sglang_records_are_left_to_sglang() {
        let sglang =
            br#"{"backend": "sglang", "dataset_name": "random", "request_rate": 1.0, "duration": 2.0, "completed": 3}"#;
        assert_eq!(VllmBench.detect(sglang), Some(Confidence::Low));
        let vllm = br#"{"date": "20250101-000000", "backend": "vllm", "completed": 1, "duration": 1.0}"#;
        assert_eq!(VllmBench.detect(vllm), Some(Confidence::High));
    }

    #[test]
    fn console_summary_rows_become_details() {
        let text = "============ Serving Benchmark Result ============\nSuccessful requests:                     1000      \nBenchmark duration (s):                  30.85     \n---------------Time to First Token----------------\nMean TTFT (ms):                          9626.13   \n==================================================\n";
        let (sink, report) = parse(text);
        assert_eq!(sink.requests.len(), 0);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.details["Successful requests"], Value::from(1000.0));
        assert_eq!(report.details["Benchmark duration (s)"], Value::from(30.85));
        assert_eq!(report.details["Mean TTFT (ms)"], Value::from(9626.13));
        assert_eq!(report.lines, 6);
    }

    #[test]
    fn broken_json_is_a_diagnostic() {
        let (sink, _) = parse(r#"{"request_throughput": 1.0, "input_lens": [1, "#);
        assert_eq!(sink.diagnostics.len(), 1);
        assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MalformedJson);
    }
}
