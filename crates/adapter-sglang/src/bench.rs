//! `sglang-bench`: the JSONL file `python -m sglang.bench_serving` (0.5.15+: `sglang.benchmark.serving`) appends
//! one record to per run (per request rate), `--output-file` or its default `{backend}_{MMDD}_…jsonl`.
//!
//! ```text
//! 0.3.0 – 0.4.1   backend, dataset_name, request_rate, total_input_tokens, total_output_tokens,
//!                 total_output_tokens_retokenized, mean/median_e2e_latency_ms, median_ttft_ms, median_itl_ms,
//!                 output_throughput, sharegpt_output_len, random_*, duration, completed (+ max_concurrency 0.4.0)
//! 0.4.2 – 0.5.x   the full summary: request/input/output_throughput, mean/median/std/p99 of e2e, ttft, tpot, itl,
//!                 concurrency (+ p95_itl_ms, accept_length 0.4.4; tag, server_info 0.5.5; p90/p95 0.5.8-0.5.15)
//! 0.4.7+          --output-details merges the per-request arrays input_lens, output_lens, ttfts (s), itls (lists
//!                 of s), generated_texts, errors (index-aligned; a failure has output_len 0, ttft 0.0, an error)
//! 0.5.23          --cache-report adds cache_report{…} and per request cached_tokens, cached_tokens_details
//! ```
//!
//! Each element of the per-request arrays becomes one request row, id `{file stem}:{line}:{index}`; a record
//! without them writes no row. `e2e_s` is `ttft + Σ itls` (the time of the last chunk: the record has no
//! per-request latency), `tpot_s` is `(e2e − ttft) / (output − 1)`. The record has no arrival times and no request
//! ids, so rows have no absolute times (clock `relative`). Every run's scalar summary, and its `cache_report`, goes
//! to the manifest's `details.runs` in file order, with the line it came from. `generated_texts` and `server_info`
//! are skipped unread; error strings are not copied (they can quote the request). Python's `Infinity` (the default
//! request rate) and `NaN` are read as the strings `"Infinity"` and `"NaN"`.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::json::{Scalar, SumOf};
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

/// The SGLang bench_serving result adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct SglangBench;

impl SglangBench {
    /// Format id.
    pub const ID: &'static str = "sglang-bench";
}

/// Keys of every generation of the written record that vLLM's result files never have (`dataset_name` sorts
/// before the per-request arrays when a tool rewrites the record with sorted keys).
pub(crate) const SIGNATURE: &[&str] =
    &["\"total_output_tokens_retokenized\"", "\"sharegpt_output_len\"", "\"dataset_name\""];

/// The tier split of one request's cached tokens.
#[derive(Debug, Default, Deserialize)]
struct CachedDetails {
    device: Option<u64>,
    host: Option<u64>,
    storage: Option<u64>,
}

/// One run: the per-request arrays and the scalars of its summary, read key by key so that the texts are skipped
/// unread and ITL lists are summed as they pass.
#[derive(Debug, Default)]
struct Run {
    input_lens: Option<Vec<Option<u64>>>,
    output_lens: Option<Vec<Option<u64>>>,
    ttfts: Option<Vec<Option<f64>>>,
    itls: Option<Vec<Option<f64>>>,
    errors: Option<Vec<Option<String>>>,
    cached_tokens: Option<Vec<Option<u64>>>,
    cached_tokens_details: Option<Vec<Option<CachedDetails>>>,
    cache_report: Option<BTreeMap<String, Value>>,
    summary: BTreeMap<String, Value>,
    /// Whether the 0.5.5+ `tag` key was present (it is usually null).
    tagged: bool,
}

impl<'de> Deserialize<'de> for Run {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Run;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a bench_serving record")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Run, A::Error> {
                let mut r = Run::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "input_lens" => r.input_lens = map.next_value()?,
                        "output_lens" => r.output_lens = map.next_value()?,
                        "ttfts" => r.ttfts = map.next_value()?,
                        "itls" => {
                            r.itls = map
                                .next_value::<Option<Vec<Option<SumOf>>>>()?
                                .map(|v| v.into_iter().map(|s| s.map(|s| s.0)).collect())
                        }
                        "errors" => r.errors = map.next_value()?,
                        "cached_tokens" => r.cached_tokens = map.next_value()?,
                        "cached_tokens_details" => r.cached_tokens_details = map.next_value()?,
                        "cache_report" => r.cache_report = map.next_value()?,
                        "generated_texts" | "server_info" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        _ => {
                            r.tagged |= key == "tag";
                            match map.next_value()? {
                                // Text under a text key could quote a request: not copied.
                                Scalar(Some(Value::String(_))) if json::is_free_text_key(&key) => {}
                                Scalar(Some(value)) => {
                                    r.summary.insert(key, value);
                                }
                                Scalar(None) => {}
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

impl Adapter for SglangBench {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "SGLang bench_serving result JSONL, 0.3-0.5.23 (per-request rows with --output-details; summaries)"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let json = text.trim_start().starts_with('{');
        (json && SIGNATURE.iter().any(|k| text.contains(k))).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut runs = Vec::new();
        let mut generation = None;
        let stem = ctx.source_stem().to_owned();
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            if line.trim_ascii().is_empty() {
                continue;
            }
            let run: Run = match serde_json::from_str(&json::quote_python_floats(line)) {
                Ok(run) => run,
                Err(e) => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, json::error_message(&e)));
                    continue;
                }
            };
            let mut summary: serde_json::Map<String, Value> = run.summary.clone().into_iter().collect();
            summary.insert("line".to_owned(), Value::from(line_no));
            if let Some(report) = &run.cache_report {
                summary.insert("cache_report".to_owned(), Value::Object(report.clone().into_iter().collect()));
            }
            runs.push(Value::Object(summary));
            generation = Some(generation_of(&run));
            write_requests(&run, &stem, line_no, ctx, sink)?;
        }
        let mut details = BTreeMap::new();
        if !runs.is_empty() {
            details.insert("runs".to_owned(), Value::Array(runs));
        }
        Ok(ParseReport {
            format_version: generation.map(str::to_owned),
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}

/// The record generation, from the keys it has (that of the last record when a file mixes them).
fn generation_of(run: &Run) -> &'static str {
    let has = |key: &str| run.summary.contains_key(key);
    if run.cached_tokens.is_some() || run.cache_report.is_some() {
        "0.5.23+ (cache report)"
    } else if has("p95_ttft_ms") {
        "0.5.15+"
    } else if run.tagged {
        "0.5.5+"
    } else if has("mean_ttft_ms") {
        "0.4.2+"
    } else {
        "0.3.0-0.4.1"
    }
}

fn write_requests(
    run: &Run,
    stem: &str,
    line: u64,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<(), infertrace_schema::DatasetError> {
    let lengths = [
        run.input_lens.as_ref().map(Vec::len),
        run.output_lens.as_ref().map(Vec::len),
        run.ttfts.as_ref().map(Vec::len),
        run.itls.as_ref().map(Vec::len),
        run.errors.as_ref().map(Vec::len),
    ];
    let n = lengths.iter().flatten().copied().max().unwrap_or(0);
    if lengths.iter().flatten().any(|&len| len != n) {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::Inconsistent,
            "the per-request arrays have different lengths: missing elements are left empty",
        ));
    }
    let tokens = |v: &Option<Vec<Option<u64>>>, i: usize| {
        v.as_ref().and_then(|v| v.get(i).copied().flatten()).and_then(|n| u32::try_from(n).ok())
    };
    let seconds = |v: &Option<Vec<Option<f64>>>, i: usize| v.as_ref().and_then(|v| v.get(i).copied().flatten());
    for i in 0..n {
        let output = tokens(&run.output_lens, i);
        let ttft = seconds(&run.ttfts, i);
        let error = run.errors.as_ref().and_then(|v| v.get(i).cloned().flatten()).is_some_and(|e| !e.is_empty());
        let failed = error || (run.errors.is_none() && ttft == Some(0.0) && output == Some(0));
        let ttft = ttft.filter(|_| !failed);
        let e2e = seconds(&run.itls, i).and_then(|itl| Some(ttft? + itl));
        let tpot = match (e2e, ttft, output) {
            (Some(e2e), Some(ttft), Some(out)) if out > 1 => Some((e2e - ttft) / f64::from(out - 1)),
            _ => None,
        };
        let details = run.cached_tokens_details.as_ref().and_then(|v| v.get(i)).and_then(Option::as_ref);
        let tier = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok());
        sink.request(RequestRow {
            request_id: format!("{stem}:{line}:{i}"),
            source: SglangBench::ID.to_owned(),
            input_tokens: tokens(&run.input_lens, i),
            output_tokens: output,
            cached_tokens: tokens(&run.cached_tokens, i),
            cached_tokens_gpu: tier(details.and_then(|d| d.device)),
            cached_tokens_cpu: tier(details.and_then(|d| d.host)),
            cached_tokens_disk: tier(details.and_then(|d| d.storage)),
            ttft_s: ttft,
            e2e_s: e2e,
            tpot_s: tpot,
            status: if failed { Status::Error } else { Status::Ok },
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext {
            source_file: "runs/sglang_1129_100_1024_128.jsonl",
            options: &options,
            modified: None,
            sidecars: None,
        };
        let mut sink = CollectSink::default();
        let report = SglangBench.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn summary_only_and_detailed_runs() {
        let text = concat!(
            r#"{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, "total_input_tokens": 10, "total_output_tokens_retokenized": 9, "sharegpt_output_len": null, "duration": 1.5, "completed": 2}"#,
            "\n",
            r#"{"tag": null, "backend": "sglang", "request_rate": 4.0, "server_info": {"model_path": "m"}, "mean_ttft_ms": 50.0, "total_output_tokens_retokenized": 5, "input_lens": [100, 7, 30], "output_lens": [4, 0, 1], "ttfts": [0.25, 0.0, 0.5], "itls": [[0.125, 0.125, 0.25], [], []], "generated_texts": ["CANARY completion", "", "x"], "errors": ["", "CANARY error: 503", ""]}"#,
            "\n",
            r#"{"backend": "sglang", "total_output_tokens_retokenized": 1, "#,
            "\n"
        );
        let (sink, report) = parse(text);
        assert_eq!(report.lines, 3);
        assert_eq!(report.format_version.as_deref(), Some("0.5.5+"));
        let runs = report.details["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0]["line"], 1);
        assert_eq!(runs[0]["completed"], 2);
        assert_eq!(runs[0].get("sharegpt_output_len"), None); // null is not a summary value
        assert_eq!(runs[0]["request_rate"], "Infinity");
        assert_eq!(runs[1]["request_rate"], 4.0);
        assert_eq!(runs[1].get("server_info"), None);
        let [d] = &sink.diagnostics[..] else { panic!("{:?}", sink.diagnostics) };
        assert_eq!((d.line, d.kind), (3, DiagnosticKind::MalformedJson));

        let rows: Vec<_> = sink
            .requests
            .iter()
            .map(|r| (r.request_id.as_str(), r.input_tokens, r.output_tokens, r.ttft_s, r.e2e_s, r.tpot_s, r.status))
            .collect();
        assert_eq!(
            rows,
            [
                // e2e = 0.25 + 0.5, tpot = 0.5 / 3
                (
                    "sglang_1129_100_1024_128:2:0",
                    Some(100),
                    Some(4),
                    Some(0.25),
                    Some(0.75),
                    Some(0.5 / 3.0),
                    Status::Ok
                ),
                ("sglang_1129_100_1024_128:2:1", Some(7), Some(0), None, None, None, Status::Error),
                ("sglang_1129_100_1024_128:2:2", Some(30), Some(1), Some(0.5), Some(0.5), None, Status::Ok),
            ]
        );
        assert!(!format!("{:?} {:?}", sink.requests, report.details).contains("CANARY"));
    }

    #[test]
    fn cache_report_splits_cached_tokens_by_tier() {
        let text = r#"{"tag": "t", "backend": "sglang", "total_output_tokens_retokenized": 2, "p95_ttft_ms": 1.0, "cache_report": {"total_prompt_tokens": 300, "total_cached_tokens": 200, "cache_hit_rate_pct": 66.67, "storage_backend": "mooncake"}, "input_lens": [100, 200], "output_lens": [1, 1], "ttfts": [0.1, 0.2], "itls": [[], []], "errors": ["", ""], "cached_tokens": [64, 136], "cached_tokens_details": [{"device": 64, "host": 0, "storage": 0}, {"device": 8, "host": 64, "storage": 64}]}"#;
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("0.5.23+ (cache report)"));
        assert_eq!(report.details["runs"][0]["cache_report"]["storage_backend"], "mooncake");
        let tiers: Vec<_> = sink
            .requests
            .iter()
            .map(|r| (r.cached_tokens, r.cached_tokens_gpu, r.cached_tokens_cpu, r.cached_tokens_disk))
            .collect();
        assert_eq!(tiers, [(Some(64), Some(64), Some(0), Some(0)), (Some(136), Some(8), Some(64), Some(64))]);
    }

    #[test]
    fn detection_tells_sglang_records_from_vllm_results() {
        assert_eq!(
            SglangBench.detect(br#"{"backend": "sglang", "dataset_name": "sharegpt", "request_rate": 1.0, "total_input_tokens": 5, "total_output_tokens": 5, "total_output_tokens_retokenized": 5}"#),
            Some(Confidence::High)
        );
        assert_eq!(
            SglangBench.detect(br#"{"date": "20250101-000000", "backend": "vllm", "completed": 1, "duration": 1}"#),
            None
        );
    }
}
