//! Dynamo Prometheus scrapes end to end: generated and corpus scrapes parse completely, are claimed by this adapter,
//! and no input makes it panic.

use std::collections::BTreeSet;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_dynamo::DynamoMetrics;
use infertrace_adapter_dynamo::generate::metrics::write_metrics;
use infertrace_schema::metrics;
use proptest::prelude::*;

fn parse(bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "metrics.prom", options: &options, modified: Some(1_000), sidecars: None };
    let mut sink = CollectSink::default();
    let report = DynamoMetrics.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn head(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(4096)]
}

#[test]
fn generated_scrapes_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_metrics(&mut bytes, 5, 3, 11).unwrap();
    assert_eq!(DynamoMetrics.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.samples.len() as u64), (expected.lines, expected.samples));
    assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)));
    let instances: BTreeSet<_> = sink.samples.iter().filter_map(|s| s.instance.as_deref()).collect();
    // One frontend, three workers with two ranks each, three components.
    assert_eq!(instances.len(), 1 + 6 + 3, "{instances:?}");
    assert!(instances.contains("7587888160958627598/dp1"));
    assert_eq!(
        report.details["unmapped_series"],
        serde_json::json!(["dynamo_frontend_requests_total", "kvbm_offload_blocks_d2h"])
    );
}

#[test]
fn corpus_frontend_scrape() {
    let path = format!(
        "{}/../../testdata/dynamo/metrics-frontend/dynamo_frontend_metrics_excerpt.prom",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(DynamoMetrics.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    // The corpus' `# source:` header is a comment line the shared scrape reader does not know.
    let diagnostics: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
    assert_eq!(diagnostics, [(1, DiagnosticKind::NotARecord)]);
    let got: Vec<_> = sink.samples.iter().map(|s| (s.instance.as_deref(), &*s.metric, s.value)).collect();
    let m = Some("frontend qwen/qwen3-0.6b");
    assert_eq!(
        got,
        [
            (m, metrics::E2E_LATENCY_SECONDS_COUNT, 1.0),
            (m, metrics::E2E_LATENCY_SECONDS_SUM, 2.177646729),
            (m, metrics::GENERATION_TOKENS_TOTAL, 300.0),
            (m, metrics::INTER_TOKEN_LATENCY_SECONDS_COUNT, 299.0),
            (m, metrics::INTER_TOKEN_LATENCY_SECONDS_SUM, 0.6126917290000005),
            (m, metrics::REQUEST_PROMPT_TOKENS_COUNT, 1.0),
            (m, metrics::REQUEST_PROMPT_TOKENS_SUM, 33.0),
            (m, metrics::REQUESTS_INFLIGHT, 0.0),
            (m, metrics::REQUESTS_WAITING, 0.0),
            (m, metrics::TTFT_SECONDS_COUNT, 1.0),
            (m, metrics::TTFT_SECONDS_SUM, 1.5625701570000001),
        ]
    );
    assert!(sink.samples.iter().all(|s| s.time == 1_000), "no time line: the file time");
    assert_eq!(
        report.details["unmapped_series"],
        serde_json::json!([
            "dynamo_frontend_model_kv_cache_block_size",
            "dynamo_frontend_model_total_kv_blocks",
            "dynamo_frontend_requests_total"
        ])
    );
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = DynamoMetrics.detect(&bytes);
        let _ = parse(&bytes);
    }

    #[test]
    fn never_panics_on_mutated_inputs(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut scrape = Vec::new();
        write_metrics(&mut scrape, 2, 2, 1).unwrap();
        let mutated = mutate(scrape, &edits);
        let _ = DynamoMetrics.detect(&mutated);
        let _ = parse(&mutated);
    }
}
