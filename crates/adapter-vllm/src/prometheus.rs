//! `vllm-metrics`: Prometheus text exposition scraped from vLLM's `/metrics`, one scrape or many in one file.
//!
//! Exposition (prometheus_client 0.0.4): `# HELP name text`, `# TYPE name gauge|counter|histogram`, then samples
//! `name{label="value",…} value [timestamp_ms]`. Counters are scraped as `<name>_total`, histograms as
//! `_bucket{le=…}`, `_sum` and `_count`; V1 adds a `_created` series per counter and histogram (ignored here) and an
//! `engine` label per data-parallel engine, which becomes `instance` `engine-<n>`.
//!
//! vLLM's names map onto canonical metrics (table [`MAPPINGS`]); renamed generations map to the same canonical
//! name (`gpu_cache_usage_perc` → `kv_cache_usage_perc` in 0.9.2, `gpu_prefix_cache_*` → `prefix_cache_*`,
//! `time_per_output_token_seconds` → `inter_token_latency_seconds`), and when a scrape holds both, the newer wins.
//! Gauges and counters keep their value (counters stay cumulative), histograms become `_count` and `_sum`.
//! Series without a canonical name are counted in the manifest (`details.unmapped_series`), not dropped silently.
//!
//! Time of a scrape: a sample's own timestamp; else the last line that is only an RFC 3339 instant (as
//! `date -Is; curl …/metrics` loops write, `# ` allowed before it); else the file's modification time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

use infertrace_adapter::time::parse_rfc3339;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line,
};
use infertrace_schema::{ClockDomain, EngineSample, metrics};
use serde_json::Value;

/// The Prometheus `/metrics` adapter for vLLM.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmMetrics;

impl VllmMetrics {
    /// Format id.
    pub const ID: &'static str = "vllm-metrics";
}

/// A scraped series name → canonical metric; lower `rank` wins when a scrape has two names for one metric.
struct Mapping {
    scraped: &'static str,
    canonical: &'static str,
    rank: u8,
}

const fn map(scraped: &'static str, canonical: &'static str, rank: u8) -> Mapping {
    Mapping { scraped, canonical, rank }
}

/// Every vLLM series with a canonical name (reference `vllm.md` §5).
const MAPPINGS: &[Mapping] = &[
    map("vllm:num_requests_running", metrics::REQUESTS_RUNNING, 0),
    map("vllm:num_requests_waiting", metrics::REQUESTS_WAITING, 0),
    map("vllm:num_requests_swapped", metrics::REQUESTS_SWAPPED, 0),
    map("vllm:kv_cache_usage_perc", metrics::KV_CACHE_USAGE, 0),
    map("vllm:gpu_cache_usage_perc", metrics::KV_CACHE_USAGE, 1),
    map("vllm:cpu_cache_usage_perc", metrics::CPU_KV_CACHE_USAGE, 0),
    map("vllm:gpu_prefix_cache_hit_rate", metrics::PREFIX_CACHE_HIT_RATE, 0),
    map("vllm:cpu_prefix_cache_hit_rate", metrics::CPU_PREFIX_CACHE_HIT_RATE, 0),
    map("vllm:avg_prompt_throughput_toks_per_s", metrics::PROMPT_THROUGHPUT_TPS, 0),
    map("vllm:avg_generation_throughput_toks_per_s", metrics::GENERATION_THROUGHPUT_TPS, 0),
    map("vllm:prompt_tokens_total", metrics::PROMPT_TOKENS_TOTAL, 0),
    map("vllm:generation_tokens_total", metrics::GENERATION_TOKENS_TOTAL, 0),
    map("vllm:prefix_cache_queries_total", metrics::PREFIX_CACHE_QUERIES_TOTAL, 0),
    map("vllm:gpu_prefix_cache_queries_total", metrics::PREFIX_CACHE_QUERIES_TOTAL, 1),
    map("vllm:prefix_cache_hits_total", metrics::PREFIX_CACHE_HITS_TOTAL, 0),
    map("vllm:gpu_prefix_cache_hits_total", metrics::PREFIX_CACHE_HITS_TOTAL, 1),
    map("vllm:external_prefix_cache_queries_total", metrics::EXTERNAL_PREFIX_CACHE_QUERIES_TOTAL, 0),
    map("vllm:external_prefix_cache_hits_total", metrics::EXTERNAL_PREFIX_CACHE_HITS_TOTAL, 0),
    map("vllm:num_preemptions_total", metrics::PREEMPTIONS_TOTAL, 0),
    map("vllm:time_to_first_token_seconds_count", metrics::TTFT_SECONDS_COUNT, 0),
    map("vllm:time_to_first_token_seconds_sum", metrics::TTFT_SECONDS_SUM, 0),
    map("vllm:inter_token_latency_seconds_count", metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT, 0),
    map("vllm:inter_token_latency_seconds_sum", metrics::INTER_TOKEN_LATENCY_SECONDS_SUM, 0),
    map("vllm:time_per_output_token_seconds_count", metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT, 1),
    map("vllm:time_per_output_token_seconds_sum", metrics::INTER_TOKEN_LATENCY_SECONDS_SUM, 1),
    map("vllm:e2e_request_latency_seconds_count", metrics::E2E_LATENCY_SECONDS_COUNT, 0),
    map("vllm:e2e_request_latency_seconds_sum", metrics::E2E_LATENCY_SECONDS_SUM, 0),
    map("vllm:request_queue_time_seconds_count", metrics::QUEUE_TIME_SECONDS_COUNT, 0),
    map("vllm:request_queue_time_seconds_sum", metrics::QUEUE_TIME_SECONDS_SUM, 0),
    map("vllm:request_prefill_time_seconds_count", metrics::PREFILL_TIME_SECONDS_COUNT, 0),
    map("vllm:request_prefill_time_seconds_sum", metrics::PREFILL_TIME_SECONDS_SUM, 0),
    map("vllm:request_decode_time_seconds_count", metrics::DECODE_TIME_SECONDS_COUNT, 0),
    map("vllm:request_decode_time_seconds_sum", metrics::DECODE_TIME_SECONDS_SUM, 0),
    map("vllm:request_prompt_tokens_count", metrics::REQUEST_PROMPT_TOKENS_COUNT, 0),
    map("vllm:request_prompt_tokens_sum", metrics::REQUEST_PROMPT_TOKENS_SUM, 0),
    map("vllm:request_generation_tokens_count", metrics::REQUEST_GENERATION_TOKENS_COUNT, 0),
    map("vllm:request_generation_tokens_sum", metrics::REQUEST_GENERATION_TOKENS_SUM, 0),
];

/// `vllm:request_success_total{finished_reason=…}` → canonical, by reason.
const FINISHED: &[(&str, &str)] = &[
    ("stop", metrics::REQUESTS_FINISHED_STOP_TOTAL),
    ("length", metrics::REQUESTS_FINISHED_LENGTH_TOTAL),
    ("abort", metrics::REQUESTS_FINISHED_ABORT_TOTAL),
    ("error", metrics::REQUESTS_FINISHED_ERROR_TOTAL),
    ("repetition", metrics::REQUESTS_FINISHED_REPETITION_TOTAL),
];

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SampleLine<'a> {
    pub(crate) name: &'a str,
    pub(crate) labels: Vec<(&'a str, String)>,
    pub(crate) value: f64,
    pub(crate) timestamp_ms: Option<i64>,
}

/// Parses `name{labels} value [timestamp]`, or `None` when the line is not a sample.
pub(crate) fn parse_sample(line: &str) -> Option<SampleLine<'_>> {
    let name_end = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        rest = body;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after) = rest.split_once('=')?;
            let after = after.strip_prefix('"')?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '"' => break i,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    c => value.push(c),
                }
            };
            labels.push((key.trim(), value));
            rest = &after[end + 1..];
        }
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = match fields.next()? {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        text => text.parse().ok()?,
    };
    let timestamp_ms = match fields.next() {
        Some(ts) => Some(ts.parse().ok()?),
        None => None,
    };
    if fields.next().is_some() {
        return None;
    }
    Some(SampleLine { name, labels, value, timestamp_ms })
}

/// A line that is only an RFC 3339 instant, possibly after `# `.
fn time_line(line: &str) -> Option<i64> {
    let text = line.strip_prefix('#').unwrap_or(line).trim();
    (text.len() >= 20 && text.as_bytes()[10] == b'T').then(|| parse_rfc3339(text).ok()).flatten()
}

/// A kept sample: the rank of the name it came under, its value, its own time and its line.
#[derive(Debug, Clone, Copy)]
struct Kept {
    rank: u8,
    value: f64,
    time: Option<i64>,
    line: u64,
}

/// The samples of one scrape, keyed by (metric, instance) so that renamed duplicates collapse.
#[derive(Default)]
struct Scrape {
    samples: BTreeMap<(&'static str, Option<String>), Kept>,
    families: BTreeSet<String>,
}

impl Adapter for VllmMetrics {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM Prometheus /metrics text exposition, one or many scrapes: gauges, counters, histogram count/sum"
    }

    fn detect(&self, head: &[u8]) -> Option<Confidence> {
        let text = String::from_utf8_lossy(head);
        text.lines()
            .any(|l| l.starts_with("# TYPE vllm:") || l.starts_with("# HELP vllm:") || l.starts_with("vllm:"))
            .then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut scrape = Scrape::default();
        let mut scrape_time: Option<i64> = None;
        let mut unmapped: BTreeSet<String> = BTreeSet::new();
        let mut clock_utc = true;
        let mut warned = false;
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(at) = time_line(line) {
                flush(&mut scrape, scrape_time, ctx, sink)?;
                scrape_time = Some(at);
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ").or_else(|| line.strip_prefix("# HELP ")) {
                let family = rest.split_whitespace().next().unwrap_or_default().to_owned();
                if line.starts_with("# TYPE ") && !scrape.families.insert(family) {
                    // The same family again: a new scrape without a time line of its own.
                    flush(&mut scrape, scrape_time, ctx, sink)?;
                    scrape.families.insert(rest.split_whitespace().next().unwrap_or_default().to_owned());
                }
                continue;
            }
            let Some(sample) = parse_sample(line) else {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a Prometheus sample"));
                continue;
            };
            if sample.value.is_nan() || sample.name.ends_with("_created") || sample.name.ends_with("_bucket") {
                continue; // NaN means "no value"; _created and buckets are not kept.
            }
            let label = |key: &str| sample.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str());
            let target = if sample.name == "vllm:request_success_total" {
                label("finished_reason")
                    .and_then(|r| FINISHED.iter().find(|(reason, _)| *reason == r))
                    .map(|(_, c)| (*c, 0))
            } else {
                MAPPINGS.iter().find(|m| m.scraped == sample.name).map(|m| (m.canonical, m.rank))
            };
            let Some((canonical, rank)) = target else {
                unmapped.insert(sample.name.to_owned());
                continue;
            };
            if sample.timestamp_ms.is_none() && scrape_time.is_none() {
                if ctx.modified.is_none() && !warned {
                    warned = true;
                    sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::MissingField,
                        "no scrape time (no timestamps, no RFC 3339 line, no file time): --start is used",
                    ));
                }
                clock_utc &= ctx.modified.is_some();
            }
            let instance = label("engine").map(|e| format!("engine-{e}"));
            let time = sample.timestamp_ms.map(|ms| ms * 1_000_000);
            let kept = Kept { rank, value: sample.value, time, line: line_no };
            let entry = scrape.samples.entry((canonical, instance)).or_insert(kept);
            if rank < entry.rank {
                *entry = kept;
            }
        }
        flush(&mut scrape, scrape_time, ctx, sink)?;
        let mut details = BTreeMap::new();
        if !unmapped.is_empty() {
            details.insert("unmapped_series".to_owned(), Value::from(unmapped.into_iter().collect::<Vec<_>>()));
        }
        Ok(ParseReport {
            format_version: None,
            clock_domain: if clock_utc { ClockDomain::Utc } else { ClockDomain::Relative },
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}

fn flush(scrape: &mut Scrape, at: Option<i64>, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<(), ParseError> {
    let fallback = at.or(ctx.modified).unwrap_or(ctx.options.start_ns);
    for ((metric, instance), kept) in std::mem::take(&mut scrape.samples) {
        sink.sample(EngineSample {
            time: kept.time.unwrap_or(fallback),
            source: VllmMetrics::ID.to_owned(),
            instance,
            metric: metric.to_owned(),
            value: kept.value,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(kept.line),
        })?;
    }
    scrape.families.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str, modified: Option<i64>) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "metrics.prom", options: &options, modified };
        let mut sink = CollectSink::default();
        let report = VllmMetrics.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn sample_lines() {
        assert_eq!(
            parse_sample(r#"vllm:kv_cache_usage_perc{engine="0",model_name="zai-org/GLM-4.5"} 9.75010481363281e-06"#),
            Some(SampleLine {
                name: "vllm:kv_cache_usage_perc",
                labels: vec![("engine", "0".into()), ("model_name", "zai-org/GLM-4.5".into())],
                value: 9.75010481363281e-06,
                timestamp_ms: None,
            })
        );
        let s = parse_sample(r#"x{a="q\"uo,te"} +Inf 1700000000000"#).unwrap();
        assert_eq!(
            (s.labels[0].1.as_str(), s.value, s.timestamp_ms),
            ("q\"uo,te", f64::INFINITY, Some(1_700_000_000_000))
        );
        assert_eq!(
            parse_sample("vllm:x 1.0"),
            Some(SampleLine { name: "vllm:x", labels: vec![], value: 1.0, timestamp_ms: None })
        );
        for bad in ["", "# HELP x", "vllm:x{a=\"1\" 2", "vllm:x", "vllm:x one", "1abc 2", "vllm:x 1 2 3"] {
            assert_eq!(parse_sample(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn scrapes_map_renames_and_keep_engines_apart() {
        let text = "\
2026-05-12T08:00:00Z
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25
vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"m\"} 3.0
vllm:request_success_created{engine=\"0\",finished_reason=\"abort\",model_name=\"m\"} 1.7e9
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"m\"} 1.0
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 10.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 2.5
vllm:new_metric_of_2027{engine=\"0\"} 1.0
# 2026-05-12T08:00:10Z
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.3
";
        let (sink, report) = parse(text, None);
        assert_eq!(sink.diagnostics, []);
        let t0 = parse_rfc3339("2026-05-12T08:00:00Z").unwrap();
        let got: Vec<_> = sink
            .samples
            .iter()
            .map(|s| ((s.time - t0) / 1_000_000_000, s.instance.as_deref(), s.metric.as_str(), s.value))
            .collect();
        assert_eq!(
            got,
            [
                (0, Some("engine-0"), "kv_cache_usage", 0.25),
                (0, Some("engine-1"), "kv_cache_usage", 0.75),
                (0, Some("engine-0"), "requests_finished_abort_total", 3.0),
                (0, Some("engine-0"), "ttft_seconds_count", 10.0),
                (0, Some("engine-0"), "ttft_seconds_sum", 2.5),
                (10, Some("engine-0"), "kv_cache_usage", 0.3),
            ]
        );
        assert_eq!(report.details["unmapped_series"], serde_json::json!(["vllm:new_metric_of_2027"]));
        assert_eq!(report.clock_domain, ClockDomain::Utc);
    }

    #[test]
    fn without_a_time_line_the_file_time_is_used_and_repeated_families_split_scrapes() {
        let text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 1.0\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 2.0\n";
        let (sink, _) = parse(text, Some(42));
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.value, s.source_line)).collect();
        assert_eq!(got, [(42, 1.0, Some(2)), (42, 2.0, Some(4))]);
        let (sink, _) = parse(text, None);
        assert_eq!(sink.diagnostics.len(), 1, "no time at all is reported once");
    }

    #[test]
    fn every_mapped_name_is_canonical() {
        assert!(MAPPINGS.iter().all(|m| metrics::is_known(m.canonical)));
        assert!(FINISHED.iter().all(|(_, c)| metrics::is_known(c)));
    }
}
