//! `sglang-metrics`: Prometheus text exposition scraped from SGLang's `/metrics` (`--enable-metrics`, 0.3.6+), one
//! scrape or many per file, read with the shared [`read_scrapes`].
//!
//! SGLang exposes counters with `_total`, histograms as `_bucket`/`_sum`/`_count`, and labels every scheduler
//! series with `model_name`, `engine_type` (`unified`/`prefill`/`decode`), `tp_rank`, `pp_rank`, and from some
//! releases `dp_rank` and `moe_ep_rank`; those ranks become `instance` in the rank-tag style of the scheduler log
//! (`DP1 TP0`), prefixed by the engine type when it is not `unified`. Renames map to one canonical metric
//! (`queue_time_s` → `queue_time_seconds` 0.5.3, `time_per_output_token_seconds` → `inter_token_latency_seconds`),
//! and `cached_tokens_total` split by `cache_source` (0.5.9+) is summed only when unsplit: split series are
//! listed as unmapped rather than guessed into one tier.

use std::io::BufRead;

use infertrace_adapter::prometheus::{SampleLine, Target, names_series, read_scrapes};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::metrics;

/// The Prometheus `/metrics` adapter for SGLang.
#[derive(Debug, Clone, Copy, Default)]
pub struct SglangMetrics;

impl SglangMetrics {
    /// Format id.
    pub const ID: &'static str = "sglang-metrics";
}

/// Scraped series name → canonical metric, rank (lower wins when a scrape has both names).
const MAPPINGS: &[(&str, &str, u8)] = &[
    ("sglang:num_running_reqs", metrics::REQUESTS_RUNNING, 0),
    ("sglang:num_queue_reqs", metrics::REQUESTS_WAITING, 0),
    ("sglang:token_usage", metrics::KV_CACHE_USAGE, 0),
    ("sglang:full_token_usage", metrics::KV_CACHE_USAGE, 1),
    ("sglang:swa_token_usage", metrics::SWA_KV_CACHE_USAGE, 0),
    ("sglang:mamba_usage", metrics::MAMBA_CACHE_USAGE, 0),
    ("sglang:num_used_tokens", metrics::KV_CACHE_TOKENS, 0),
    ("sglang:gen_throughput", metrics::GENERATION_THROUGHPUT_TPS, 0),
    ("sglang:cache_hit_rate", metrics::PREFIX_CACHE_HIT_RATE, 0),
    ("sglang:spec_accept_length", metrics::SPEC_ACCEPT_LENGTH, 0),
    ("sglang:spec_accept_rate", metrics::SPEC_ACCEPT_RATE, 0),
    ("sglang:num_retracted_reqs", metrics::REQUESTS_RETRACTED, 0),
    ("sglang:prompt_tokens_total", metrics::PROMPT_TOKENS_TOTAL, 0),
    ("sglang:generation_tokens_total", metrics::GENERATION_TOKENS_TOTAL, 0),
    ("sglang:cached_tokens_total", metrics::PREFIX_CACHE_HITS_TOTAL, 0),
    ("sglang:num_aborted_requests_total", metrics::REQUESTS_FINISHED_ABORT_TOTAL, 0),
    ("sglang:time_to_first_token_seconds_count", metrics::TTFT_SECONDS_COUNT, 0),
    ("sglang:time_to_first_token_seconds_sum", metrics::TTFT_SECONDS_SUM, 0),
    ("sglang:inter_token_latency_seconds_count", metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT, 0),
    ("sglang:inter_token_latency_seconds_sum", metrics::INTER_TOKEN_LATENCY_SECONDS_SUM, 0),
    ("sglang:time_per_output_token_seconds_count", metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT, 1),
    ("sglang:time_per_output_token_seconds_sum", metrics::INTER_TOKEN_LATENCY_SECONDS_SUM, 1),
    ("sglang:e2e_request_latency_seconds_count", metrics::E2E_LATENCY_SECONDS_COUNT, 0),
    ("sglang:e2e_request_latency_seconds_sum", metrics::E2E_LATENCY_SECONDS_SUM, 0),
    ("sglang:queue_time_seconds_count", metrics::QUEUE_TIME_SECONDS_COUNT, 0),
    ("sglang:queue_time_seconds_sum", metrics::QUEUE_TIME_SECONDS_SUM, 0),
    ("sglang:queue_time_s_count", metrics::QUEUE_TIME_SECONDS_COUNT, 1),
    ("sglang:queue_time_s_sum", metrics::QUEUE_TIME_SECONDS_SUM, 1),
];

/// The instance of a series: its ranks in the scheduler log's tag order, after a non-unified engine type.
fn instance(sample: &SampleLine<'_>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(kind) = sample.label("engine_type").filter(|k| *k != "unified") {
        parts.push(kind.to_owned());
    }
    for (label, tag) in [("dp_rank", "DP"), ("pp_rank", "PP"), ("tp_rank", "TP"), ("moe_ep_rank", "EP")] {
        if let Some(rank) = sample.label(label) {
            parts.push(format!("{tag}{rank}"));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn target(sample: &SampleLine<'_>) -> Option<Target> {
    if sample.label("cache_source").is_some() {
        return None; // Per-tier split of cached tokens: no canonical per-tier counter yet.
    }
    let (_, metric, rank) = MAPPINGS.iter().find(|(name, _, _)| *name == sample.name)?;
    Some(Target::new(metric, *rank, instance(sample)))
}

impl Adapter for SglangMetrics {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "SGLang Prometheus /metrics text exposition, one or many scrapes: gauges, counters, histogram count/sum"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        names_series(head, "sglang:").then_some(Confidence::High)
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

#[cfg(test)]
mod tests {
    use infertrace_adapter::time::parse_rfc3339;
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    #[test]
    fn scrapes_map_ranks_and_renames() {
        let text = "\
2026-04-05T20:00:00Z
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank=\"1\",engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\"} 12.0
sglang:num_running_reqs{engine_type=\"prefill\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"2\"} 3.0
# TYPE sglang:queue_time_s histogram
sglang:queue_time_s_count{model_name=\"m\"} 5.0
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6.0
sglang:queue_time_seconds_count{model_name=\"m\"} 6.0
sglang:queue_time_seconds_sum{model_name=\"m\"} 0.75
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source=\"device\",model_name=\"m\"} 100.0
sglang:cached_tokens_total{model_name=\"m\"} 150.0
sglang:func_latency_seconds_count{name=\"generate_request\"} 9.0
";
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "sglang.prom", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = SglangMetrics.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        assert_eq!(sink.diagnostics, []);
        let t0 = parse_rfc3339("2026-04-05T20:00:00Z").unwrap();
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.instance.as_deref(), &*s.metric, s.value)).collect();
        assert_eq!(
            got,
            [
                (t0, None, metrics::PREFIX_CACHE_HITS_TOTAL, 150.0),
                (t0, None, metrics::QUEUE_TIME_SECONDS_COUNT, 6.0),
                (t0, None, metrics::QUEUE_TIME_SECONDS_SUM, 0.75),
                (t0, Some("DP1 PP0 TP0"), metrics::REQUESTS_RUNNING, 12.0),
                (t0, Some("prefill PP0 TP2"), metrics::REQUESTS_RUNNING, 3.0),
            ]
        );
        assert_eq!(
            report.details["unmapped_series"],
            serde_json::json!(["sglang:cached_tokens_total", "sglang:func_latency_seconds_count"])
        );
        assert_eq!(SglangMetrics.detect(text.as_bytes()), Some(Confidence::High));
    }

    #[test]
    fn every_mapped_metric_is_canonical() {
        assert!(MAPPINGS.iter().all(|(_, m, _)| metrics::is_known(m)));
    }
}
