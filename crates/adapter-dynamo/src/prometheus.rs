//! `dynamo-metrics`: Prometheus text exposition scraped from NVIDIA Dynamo, one scrape or many per file, read with
//! the shared [`read_scrapes`] (scrape times, repeated families and `_created`/`_bucket` series as described there).
//!
//! Dynamo serves (names from `lib/runtime/src/metrics/prometheus_names.rs`):
//!
//! ```text
//! frontend  :8000/metrics  dynamo_frontend_<name>{model="…"}             (nv_llm_http_service_<name> before the
//!                          dynamo_frontend_ prefix; DYN_METRICS_PREFIX can override it)
//!                          dynamo_frontend_worker_<name>{worker_id="…",dp_rank="…",worker_type="…"}
//!                          dynamo_component_router_<name>{dynamo_namespace,dynamo_component,router_id,…}
//!                          dynamo_router_overhead_<phase>_ms{router_id}
//! worker    :$DYN_SYSTEM_PORT/metrics
//!                          dynamo_component_<name>{dynamo_namespace,dynamo_component,dynamo_endpoint,model,…}
//!                          dynamo_component_kvstats_<name> (2025), dynamo_component_<name> (1.6: kv stats renamed)
//!                          + the engine's own series passed through (vllm:*, sglang:*, trtllm_*)
//! KVBM      :$DYN_KVBM_METRICS_PORT/metrics  kvbm_<name>, no labels
//! ```
//!
//! Mapping onto canonical metrics (table [`MAPPINGS`]): frontend and worker `inflight_requests` →
//! `requests_inflight`, frontend `queued_requests` → `requests_waiting`, histograms `time_to_first_token_seconds`,
//! `inter_token_latency_seconds`, `request_duration_seconds` (frontend and worker handler alike: end-to-end at that
//! instance), `input_sequence_tokens` and `output_sequence_tokens` → their `_count`/`_sum` metrics,
//! `output_tokens_total` → `generation_tokens_total`, `cached_tokens_sum` (prefix-cache hits per request, summed) →
//! `prefix_cache_hits_total`, per-worker `worker_active_prefill_tokens` → `pending_tokens`, KV stats
//! `gpu_cache_usage_percent` (a 0–1 fraction despite its name) → `kv_cache_usage` and `gpu_prefix_cache_hit_rate` /
//! `kv_cache_hit_rate` → `prefix_cache_hit_rate`, KVBM `host_`/`disk_`/`object_` (or `remote_`) `cache_hit_rate`
//! → the cpu/disk/remote prefix-cache hit rates and `kvbm_matched_tokens` (KVBM is a KV connector) →
//! `external_prefix_cache_hits_total`. Renamed pairs map to one metric and the newer name wins in a scrape.
//!
//! Deliberately unmapped (listed in `details.unmapped_series`): `requests_total` and other series split by labels
//! that are not an instance (status, endpoint, error type — one canonical value per instance cannot hold them);
//! every `dynamo_component_router_*` series, which repeat the frontend's request histograms at the router (mapping
//! both would count each request twice) or predict cache hits rather than measure them; routing overheads, model
//! configuration gauges, transport, tokio and KVBM block counters, which have no canonical name; and engine series
//! passed through on a worker port.
//!
//! `instance`: a series with a `worker_id` label is that worker, written as the id string exactly as scraped (a
//! u64 that never passes through a float) with `/dp<rank>` appended when `dp_rank` is present
//! (`7587888160958627596/dp1`); otherwise a series with `dynamo_component` is the endpoint address
//! `<dynamo_namespace>/<dynamo_component>/<dynamo_endpoint>` (absent parts left out, `/dp<rank>` appended);
//! otherwise a frontend series is `frontend`, followed by its `model` label when it has one (`frontend
//! qwen/qwen3-0.6b`), so the series of a frontend serving several models stay apart; KVBM series have none.
//!
//! Who claims a scrape: any line of the head that is a `dynamo_`, `kvbm_` or `nv_llm_http_service_` sample, or a
//! `# HELP`/`# TYPE` line of one, claims it with high confidence — unless the head also holds `vllm:` or `sglang:`
//! names, as a worker's system port does: the engine's adapter then wins (this one claims low), because the
//! engine's series are the richer ones. The two sets of names do not overlap, so the same file can be read again
//! with `--format dynamo-metrics` for the Dynamo series. When the engine's series start after the first 4 KiB, this
//! adapter claims the scrape and lists them as unmapped.

use std::io::BufRead;

use infertrace_adapter::prometheus::{SampleLine, Target, parse_sample, read_scrapes};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::metrics;

/// The Prometheus `/metrics` adapter for NVIDIA Dynamo.
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamoMetrics;

impl DynamoMetrics {
    /// Format id.
    pub const ID: &'static str = "dynamo-metrics";
}

/// Metric-name prefixes of Dynamo's own series.
const PREFIXES: &[&str] = &["dynamo_", "kvbm_", "nv_llm_http_service_"];
/// Prefixes of the frontend's series: the current one and the one it replaced.
const FRONTEND_PREFIXES: &[&str] = &["dynamo_frontend_", "nv_llm_http_service_"];
/// Engine names a worker's system port passes through; their own adapters claim such scrapes.
const ENGINE_PREFIXES: &[&str] = &["vllm:", "sglang:"];

/// Where the name of a series is looked up: after a frontend prefix, or whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The name after `dynamo_frontend_` (or `nv_llm_http_service_`).
    Frontend,
    /// The whole series name.
    Full,
}

/// A scraped series name → canonical metric; lower `rank` wins when a scrape has two names for one metric.
struct Mapping {
    scope: Scope,
    scraped: &'static str,
    canonical: &'static str,
    rank: u8,
}

const fn frontend(scraped: &'static str, canonical: &'static str) -> Mapping {
    Mapping { scope: Scope::Frontend, scraped, canonical, rank: 0 }
}

const fn full(scraped: &'static str, canonical: &'static str, rank: u8) -> Mapping {
    Mapping { scope: Scope::Full, scraped, canonical, rank }
}

/// Every Dynamo series with a canonical name (reference `dynamo-aiperf.md` §2.2).
const MAPPINGS: &[Mapping] = &[
    frontend("inflight_requests", metrics::REQUESTS_INFLIGHT),
    frontend("queued_requests", metrics::REQUESTS_WAITING),
    frontend("time_to_first_token_seconds_count", metrics::TTFT_SECONDS_COUNT),
    frontend("time_to_first_token_seconds_sum", metrics::TTFT_SECONDS_SUM),
    frontend("inter_token_latency_seconds_count", metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT),
    frontend("inter_token_latency_seconds_sum", metrics::INTER_TOKEN_LATENCY_SECONDS_SUM),
    frontend("request_duration_seconds_count", metrics::E2E_LATENCY_SECONDS_COUNT),
    frontend("request_duration_seconds_sum", metrics::E2E_LATENCY_SECONDS_SUM),
    frontend("input_sequence_tokens_count", metrics::REQUEST_PROMPT_TOKENS_COUNT),
    frontend("input_sequence_tokens_sum", metrics::REQUEST_PROMPT_TOKENS_SUM),
    frontend("output_sequence_tokens_count", metrics::REQUEST_GENERATION_TOKENS_COUNT),
    frontend("output_sequence_tokens_sum", metrics::REQUEST_GENERATION_TOKENS_SUM),
    frontend("output_tokens_total", metrics::GENERATION_TOKENS_TOTAL),
    frontend("cached_tokens_sum", metrics::PREFIX_CACHE_HITS_TOTAL),
    frontend("worker_active_prefill_tokens", metrics::PENDING_TOKENS),
    full("dynamo_component_inflight_requests", metrics::REQUESTS_INFLIGHT, 0),
    full("dynamo_component_request_duration_seconds_count", metrics::E2E_LATENCY_SECONDS_COUNT, 0),
    full("dynamo_component_request_duration_seconds_sum", metrics::E2E_LATENCY_SECONDS_SUM, 0),
    full("dynamo_component_gpu_cache_usage_percent", metrics::KV_CACHE_USAGE, 0),
    full("dynamo_component_kvstats_gpu_cache_usage_percent", metrics::KV_CACHE_USAGE, 1),
    full("dynamo_component_kv_cache_hit_rate", metrics::PREFIX_CACHE_HIT_RATE, 0),
    full("dynamo_component_kvstats_gpu_prefix_cache_hit_rate", metrics::PREFIX_CACHE_HIT_RATE, 1),
    full("kvbm_host_cache_hit_rate", metrics::CPU_PREFIX_CACHE_HIT_RATE, 0),
    full("kvbm_disk_cache_hit_rate", metrics::DISK_PREFIX_CACHE_HIT_RATE, 0),
    full("kvbm_remote_cache_hit_rate", metrics::REMOTE_PREFIX_CACHE_HIT_RATE, 0),
    full("kvbm_object_cache_hit_rate", metrics::REMOTE_PREFIX_CACHE_HIT_RATE, 1),
    full("kvbm_matched_tokens", metrics::EXTERNAL_PREFIX_CACHE_HITS_TOTAL, 0),
];

/// The name of a frontend series after its prefix, if it is one.
fn frontend_suffix(name: &str) -> Option<&str> {
    FRONTEND_PREFIXES.iter().find_map(|p| name.strip_prefix(p))
}

/// The instance of a series: its worker, else its component endpoint, else the frontend (and model).
fn instance(sample: &SampleLine<'_>) -> Option<String> {
    let dp = sample.label("dp_rank").map(|rank| format!("/dp{rank}")).unwrap_or_default();
    if let Some(worker) = sample.label("worker_id") {
        return Some(format!("{worker}{dp}"));
    }
    if sample.label("dynamo_component").is_some() {
        let parts: Vec<&str> = ["dynamo_namespace", "dynamo_component", "dynamo_endpoint"]
            .iter()
            .filter_map(|l| sample.label(l))
            .collect();
        return Some(format!("{}{dp}", parts.join("/")));
    }
    frontend_suffix(sample.name)?;
    Some(match sample.label("model") {
        Some(model) => format!("frontend {model}"),
        None => "frontend".to_owned(),
    })
}

fn target(sample: &SampleLine<'_>) -> Option<Target> {
    let suffix = frontend_suffix(sample.name);
    let mapping = MAPPINGS.iter().find(|m| match m.scope {
        Scope::Frontend => suffix == Some(m.scraped),
        Scope::Full => sample.name == m.scraped,
    })?;
    Some(Target::new(mapping.canonical, mapping.rank, instance(sample)))
}

/// The series name a head line is about: a sample's name or the family of a `# HELP`/`# TYPE` line.
fn line_name(line: &str) -> Option<&str> {
    match line.strip_prefix("# TYPE ").or_else(|| line.strip_prefix("# HELP ")) {
        Some(rest) => rest.split_whitespace().next(),
        None => parse_sample(line).map(|s| s.name),
    }
}

impl Adapter for DynamoMetrics {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "NVIDIA Dynamo Prometheus /metrics text exposition (frontend, worker component, KV stats, KVBM), one or many \
         scrapes"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let mut dynamo = false;
        let mut engine = false;
        for name in text.lines().filter_map(|l| line_name(l.trim())) {
            dynamo |= PREFIXES.iter().any(|p| name.starts_with(p));
            engine |= ENGINE_PREFIXES.iter().any(|p| name.starts_with(p));
        }
        match (dynamo, engine) {
            (true, false) => Some(Confidence::High),
            (true, true) => Some(Confidence::Low),
            _ => None,
        }
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

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "dynamo.prom", options: &options, modified: Some(7), sidecars: None };
        let mut sink = CollectSink::default();
        let report = DynamoMetrics.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn frontend_worker_component_and_kvbm_series() {
        let text = "\
2026-03-01T12:00:00Z
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{model=\"a\"} 3
dynamo_frontend_inflight_requests{model=\"b\"} 1
# TYPE dynamo_frontend_time_to_first_token_seconds histogram
dynamo_frontend_time_to_first_token_seconds_bucket{model=\"a\",le=\"+Inf\"} 4
dynamo_frontend_time_to_first_token_seconds_sum{model=\"a\"} 0.5
dynamo_frontend_time_to_first_token_seconds_count{model=\"a\"} 4
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{endpoint=\"chat_completions\",model=\"a\",\
request_type=\"stream\",status=\"success\"} 4
# TYPE dynamo_frontend_worker_active_prefill_tokens gauge
dynamo_frontend_worker_active_prefill_tokens{dp_rank=\"1\",worker_id=\"7587888160958627596\",\
worker_type=\"prefill\"} 512
# TYPE dynamo_component_kvstats_gpu_cache_usage_percent gauge
dynamo_component_kvstats_gpu_cache_usage_percent{dynamo_component=\"backend\",dynamo_namespace=\"dynamo\"} 0.5
# TYPE dynamo_component_gpu_cache_usage_percent gauge
dynamo_component_gpu_cache_usage_percent{dynamo_component=\"backend\",dynamo_namespace=\"dynamo\"} 0.25
# TYPE dynamo_component_inflight_requests gauge
dynamo_component_inflight_requests{dynamo_component=\"backend\",dynamo_endpoint=\"generate\",\
dynamo_namespace=\"dynamo\",model=\"a\"} 2
# TYPE dynamo_component_router_time_to_first_token_seconds histogram
dynamo_component_router_time_to_first_token_seconds_count{dynamo_component=\"router\",router_id=\"1\"} 4
# TYPE kvbm_disk_cache_hit_rate gauge
kvbm_disk_cache_hit_rate 0.125
# TYPE kvbm_matched_tokens counter
kvbm_matched_tokens 4096
vllm:num_requests_running{engine=\"0\"} 1
";
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        let t0 = parse_rfc3339("2026-03-01T12:00:00Z").unwrap();
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.instance.as_deref(), &*s.metric, s.value)).collect();
        assert_eq!(
            got,
            [
                (t0, None, metrics::DISK_PREFIX_CACHE_HIT_RATE, 0.125),
                (t0, None, metrics::EXTERNAL_PREFIX_CACHE_HITS_TOTAL, 4096.0),
                (t0, Some("dynamo/backend"), metrics::KV_CACHE_USAGE, 0.25),
                (t0, Some("7587888160958627596/dp1"), metrics::PENDING_TOKENS, 512.0),
                (t0, Some("dynamo/backend/generate"), metrics::REQUESTS_INFLIGHT, 2.0),
                (t0, Some("frontend a"), metrics::REQUESTS_INFLIGHT, 3.0),
                (t0, Some("frontend b"), metrics::REQUESTS_INFLIGHT, 1.0),
                (t0, Some("frontend a"), metrics::TTFT_SECONDS_COUNT, 4.0),
                (t0, Some("frontend a"), metrics::TTFT_SECONDS_SUM, 0.5),
            ]
        );
        assert_eq!(
            report.details["unmapped_series"],
            serde_json::json!([
                "dynamo_component_router_time_to_first_token_seconds_count",
                "dynamo_frontend_requests_total",
                "vllm:num_requests_running"
            ])
        );
    }

    #[test]
    fn legacy_frontend_prefix() {
        let (sink, _) = parse("nv_llm_http_service_inflight_requests{model=\"m\"} 2\n");
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.instance.as_deref(), &*s.metric)).collect();
        assert_eq!(got, [(7, Some("frontend m"), metrics::REQUESTS_INFLIGHT)]);
    }

    #[test]
    fn detection_leaves_engine_scrapes_to_engine_adapters() {
        let detect = |s: &str| DynamoMetrics.detect(s.as_bytes());
        assert_eq!(detect("# HELP dynamo_frontend_inflight_requests Number\n"), Some(Confidence::High));
        assert_eq!(detect("kvbm_matched_tokens 3\n"), Some(Confidence::High));
        assert_eq!(detect("dynamo_component_uptime_seconds 1\nvllm:num_requests_running 1\n"), Some(Confidence::Low));
        assert_eq!(
            detect("# TYPE dynamo_component_x gauge\n# TYPE sglang:num_running_reqs gauge\n"),
            Some(Confidence::Low)
        );
        assert_eq!(detect("vllm:num_requests_running 1\n"), None);
        assert_eq!(detect("2026-01-01 INFO dynamo_runtime::logging: started\n"), None);
        assert_eq!(detect(r#"{"dynamo_frontend_x": 1}"#), None);
    }

    #[test]
    fn every_mapped_name_is_canonical() {
        assert!(MAPPINGS.iter().all(|m| metrics::is_known(m.canonical)));
    }
}
