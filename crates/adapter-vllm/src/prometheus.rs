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

use std::io::BufRead;

use infertrace_adapter::prometheus::{SampleLine, Target, names_series, read_scrapes};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::metrics;

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

impl Adapter for VllmMetrics {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM Prometheus /metrics text exposition, one or many scrapes: gauges, counters, histogram count/sum"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        names_series(head, "vllm:").then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        read_scrapes(input, ctx, sink, Self::ID, &target)
    }
}

/// The canonical metric, rank and instance of a vLLM series, or `None` for a series without a canonical name.
fn target(sample: &SampleLine<'_>) -> Option<Target> {
    let (metric, rank) = if sample.name == "vllm:request_success_total" {
        let reason = sample.label("finished_reason")?;
        FINISHED.iter().find(|(r, _)| *r == reason).map(|(_, c)| (*c, 0))?
    } else {
        MAPPINGS.iter().find(|m| m.scraped == sample.name).map(|m| (m.canonical, m.rank))?
    };
    Some(Target::new(metric, rank, sample.label("engine").map(|e| format!("engine-{e}"))))
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::time::parse_rfc3339;
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str, modified: Option<i64>) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "metrics.prom", options: &options, modified, sidecars: None };
        let mut sink = CollectSink::default();
        let report = VllmMetrics.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
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
            .map(|s| ((s.time - t0) / 1_000_000_000, s.instance.as_deref(), &*s.metric, s.value))
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
        assert_eq!(report.clock_domain, infertrace_schema::ClockDomain::Utc);
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
