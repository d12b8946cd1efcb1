//! The non-log SGLang formats end to end: generated inputs of each parse completely, are claimed by their own
//! adapter, and no input makes an adapter panic.

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_sglang::generate::{write_bench, write_kv_events, write_metrics, write_request_metrics};
use infertrace_adapter_sglang::{SglangBench, SglangKvEvents, SglangMetrics, SglangRequestMetrics};
use infertrace_schema::{CacheTier, Status, metrics};
use proptest::prelude::*;

fn parse(adapter: &dyn Adapter, bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "generated.jsonl", options: &options, modified: Some(0), sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn head(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(4096)]
}

#[test]
fn generated_request_metrics_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_request_metrics(&mut bytes, 50, 3).unwrap();
    assert_eq!(SglangRequestMetrics.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&SglangRequestMetrics, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.requests.len() as u64), (expected.lines, expected.requests));
    // Every ninth is an abort (i = 8, 17, …, 44: five of fifty).
    assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Aborted).count(), 5);
    for r in &sink.requests {
        assert!(r.arrival_time.unwrap() < r.completion_time.unwrap());
        assert_eq!(r.cached_tokens, Some(r.cached_tokens_gpu.unwrap() + r.cached_tokens_cpu.unwrap()));
        assert!(!format!("{r:?}").contains("synthetic prompt"));
    }
}

#[test]
fn generated_scrapes_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_metrics(&mut bytes, 6, 2, 5).unwrap();
    assert_eq!(SglangMetrics.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&SglangMetrics, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.samples.len() as u64), (expected.lines, expected.samples));
    assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)));
    let instances: std::collections::BTreeSet<_> = sink.samples.iter().filter_map(|s| s.instance.as_deref()).collect();
    assert_eq!(instances.len(), 2, "{instances:?}");
}

#[test]
fn generated_kv_events_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_kv_events(&mut bytes, 40, 7).unwrap();
    assert_eq!(SglangKvEvents.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&SglangKvEvents, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.cache_events.len() as u64), (expected.lines, expected.cache_events));
    for tier in [CacheTier::Gpu, CacheTier::Cpu, CacheTier::Disk, CacheTier::Remote] {
        assert!(sink.cache_events.iter().any(|e| e.tier == Some(tier)), "{tier:?}");
    }
}

#[test]
fn generated_bench_runs_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_bench(&mut bytes, 3, 20, 9).unwrap();
    assert_eq!(SglangBench.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&SglangBench, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.requests.len() as u64), (expected.lines, expected.requests));
    // i = 6 and 13 of every run of twenty failed.
    assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Error).count(), 6);
    let runs = report.details["runs"].as_array().unwrap();
    assert_eq!(runs[0]["request_rate"], "Infinity");
    assert_eq!(runs[2]["request_rate"], 3.0);
}

proptest! {
    #[test]
    fn no_adapter_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        for adapter in [&SglangBench as &dyn Adapter, &SglangKvEvents, &SglangMetrics, &SglangRequestMetrics] {
            let _ = adapter.detect(&bytes);
            let _ = parse(adapter, &bytes);
        }
    }

    #[test]
    fn no_adapter_panics_on_mutated_inputs(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut bench = Vec::new();
        write_bench(&mut bench, 2, 4, 1).unwrap();
        let mut kv = Vec::new();
        write_kv_events(&mut kv, 4, 1).unwrap();
        let mut scrape = Vec::new();
        write_metrics(&mut scrape, 2, 2, 1).unwrap();
        let mut records = Vec::new();
        write_request_metrics(&mut records, 4, 1).unwrap();
        for (adapter, input) in [(&SglangBench as &dyn Adapter, bench), (&SglangKvEvents, kv), (&SglangMetrics, scrape), (&SglangRequestMetrics, records)] {
            let _ = parse(adapter, &mutate(input, &edits));
        }
    }
}
