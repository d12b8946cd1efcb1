//! The other vLLM formats end to end: generated inputs of each parse completely, and no input makes them panic.

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_vllm::generate::{KvEncoding, write_bench, write_kv_events, write_metrics, write_otlp};
use infertrace_adapter_vllm::{VllmBench, VllmKvEvents, VllmMetrics, VllmOtlp};
use infertrace_schema::{CacheEventKind, Status, metrics};
use proptest::prelude::*;

fn parse(adapter: &dyn Adapter, bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "generated", options: &options, modified: Some(0), sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

/// A sample timestamp past 2262 in milliseconds overflows nanoseconds: the sample is skipped with a diagnostic (it
/// used to be multiplied unchecked: a panic with overflow checks, a wrapped time without).
#[test]
fn a_sample_timestamp_past_2262_is_a_diagnostic_not_an_overflow() {
    let scrape = "# TYPE vllm:num_requests_running gauge\n\
                  vllm:num_requests_running{engine=\"0\"} 3 99999999999999999\n\
                  vllm:num_requests_waiting{engine=\"0\"} 2 1700000000000\n";
    let (sink, _) = parse(&VllmMetrics, scrape.as_bytes());
    let kept: Vec<(i64, &str, f64)> = sink.samples.iter().map(|s| (s.time, &*s.metric, s.value)).collect();
    assert_eq!(kept, [(1_700_000_000_000_000_000, "requests_waiting", 2.0)]);
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!((sink.diagnostics[0].line, sink.diagnostics[0].kind.as_str()), (2, "invalid-value"));
}

#[test]
fn generated_bench_results_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_bench(&mut bytes, 50, 3).unwrap();
    assert!(VllmBench.detect(&bytes[..bytes.len().min(4096)]).is_some());
    let (sink, _) = parse(&VllmBench, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests.len() as u64, expected.requests);
    assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Error).count() as u64, expected.aborted);
    let ok_inputs: u64 =
        sink.requests.iter().filter(|r| r.status == Status::Ok).map(|r| u64::from(r.input_tokens.unwrap())).sum();
    assert_eq!(ok_inputs, expected.prompt_tokens);
    let arrivals: Vec<i64> = sink.requests.iter().map(|r| r.arrival_time.unwrap()).collect();
    assert!(arrivals.windows(2).all(|w| w[0] <= w[1]), "start_times increase");
}

#[test]
fn generated_scrapes_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_metrics(&mut bytes, 12, 2, 5).unwrap();
    assert!(VllmMetrics.detect(&bytes[..4096.min(bytes.len())]).is_some());
    let (sink, report) = parse(&VllmMetrics, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, expected.lines);
    assert_eq!(sink.samples.len() as u64, expected.samples);
    assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)));
    let times: std::collections::BTreeSet<i64> = sink.samples.iter().map(|s| s.time).collect();
    assert_eq!(times.len(), 12, "one time per scrape");
}

#[test]
fn generated_spans_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_otlp(&mut bytes, 30, 7, 9).unwrap();
    assert_eq!(expected.lines, 5, "30 spans, 7 per line");
    let (sink, _) = parse(&VllmOtlp, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests.len() as u64, expected.requests);
    let tokens: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
    assert_eq!(tokens, expected.prompt_tokens);
}

#[test]
fn generated_kv_events_parse_completely_in_every_encoding() {
    for encoding in [KvEncoding::MsgpackArrays, KvEncoding::MsgpackMaps, KvEncoding::JsonLines] {
        let mut bytes = Vec::new();
        let expected = write_kv_events(&mut bytes, 40, encoding, 11).unwrap();
        assert!(VllmKvEvents.detect(&bytes[..4096.min(bytes.len())]).is_some(), "{encoding:?}");
        let (sink, report) = parse(&VllmKvEvents, &bytes);
        assert_eq!(sink.diagnostics, [], "{encoding:?}");
        assert_eq!(report.lines, expected.lines, "{encoding:?}");
        assert_eq!(sink.cache_events.len() as u64, expected.samples, "{encoding:?}");
        assert!(sink.cache_events.iter().any(|e| e.event == CacheEventKind::Stored));
    }
}

proptest! {
    #[test]
    fn no_adapter_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        for adapter in [&VllmBench as &dyn Adapter, &VllmMetrics, &VllmOtlp, &VllmKvEvents] {
            let _ = adapter.detect(&bytes);
            let _ = parse(adapter, &bytes);
        }
    }

    #[test]
    fn no_adapter_panics_on_mutated_inputs(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut bench = Vec::new();
        write_bench(&mut bench, 4, 1).unwrap();
        let mut scrape = Vec::new();
        write_metrics(&mut scrape, 2, 2, 1).unwrap();
        let mut spans = Vec::new();
        write_otlp(&mut spans, 3, 2, 1).unwrap();
        let mut kv = Vec::new();
        write_kv_events(&mut kv, 3, KvEncoding::MsgpackArrays, 1).unwrap();
        let mut kv_json = Vec::new();
        write_kv_events(&mut kv_json, 3, KvEncoding::JsonLines, 1).unwrap();
        for (adapter, input) in [(&VllmBench as &dyn Adapter, bench), (&VllmMetrics, scrape), (&VllmOtlp, spans), (&VllmKvEvents, kv), (&VllmKvEvents, kv_json)] {
            let _ = parse(adapter, &mutate(input, &edits));
        }
    }
}
