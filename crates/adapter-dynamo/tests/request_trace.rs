//! `dynamo-request-trace` and `dynamo-kv-events` end to end: generated inputs parse completely, and nothing
//! makes them panic.

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_dynamo::generate::kv_events::write_kv_events;
use infertrace_adapter_dynamo::generate::request_trace::write_request_trace;
use infertrace_adapter_dynamo::{DynamoKvEvents, DynamoRequestTrace};
use infertrace_schema::{CacheTier, Status};
use proptest::prelude::*;

fn parse(adapter: &dyn Adapter, bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "generated.jsonl", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

/// Found by `cargo fuzz run -a dynamo-request-trace` (overflow checks on): a `request_received_ms` with one digit too
/// many overflowed its conversion to nanoseconds (a panic with overflow checks, a wrapped time without).
#[test]
fn an_arrival_past_2262_is_a_diagnostic_not_an_overflow() {
    let line = r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":110,"request":{"request_id":"r","output_tokens":2,"request_received_ms":17672256300040,"ttft_ms":5,"total_time_ms":10}}"#;
    let (sink, _) = parse(&DynamoRequestTrace, line.as_bytes());
    assert_eq!(sink.requests.len(), 1);
    let row = &sink.requests[0];
    assert_eq!((row.arrival_time, row.first_token_time, row.completion_time), (None, None, None));
    // The durations do not depend on the arrival and are kept.
    assert_eq!((row.ttft_s, row.e2e_s), (Some(0.005), Some(0.01)));
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!((sink.diagnostics[0].line, sink.diagnostics[0].kind.as_str()), (1, "invalid-value"));
    // The largest arrival that fits (2262-04-11) is kept.
    let line = line.replace("17672256300040", "9223372036854");
    let (sink, _) = parse(&DynamoRequestTrace, line.as_bytes());
    assert_eq!(sink.requests[0].arrival_time, Some(9_223_372_036_854_000_000));
    assert_eq!(sink.diagnostics, []);
}

#[test]
fn generated_request_traces_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_request_trace(&mut bytes, 60, 3).unwrap();
    assert_eq!(DynamoRequestTrace.detect(&bytes[..bytes.len().min(4096)]), Some(Confidence::High));
    assert_eq!(DynamoKvEvents.detect(&bytes[..bytes.len().min(4096)]), None);
    let (sink, report) = parse(&DynamoRequestTrace, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, expected.lines);
    assert_eq!(
        (sink.requests.len() as u64, sink.cache_events.len() as u64),
        (expected.requests, expected.cache_events)
    );
    assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Aborted).count() as u64, expected.failed);
    for r in &sink.requests {
        // The client sees the first token after the prefill worker's, by the transfer estimate.
        assert_eq!(
            r.first_token_time.unwrap() - r.prefill_end_time.unwrap(),
            (r.kv_transfer_s.unwrap() * 1e9).round() as i64
        );
        assert!(r.prefill_instance.as_deref().unwrap().starts_with("75878881609586275"));
        assert_eq!(r.prefix_hashes.as_ref().unwrap().len() as u32, r.input_tokens.unwrap().div_ceil(64));
    }
}

#[test]
fn generated_kv_events_parse_completely() {
    let mut bytes = Vec::new();
    let expected = write_kv_events(&mut bytes, 70, 5).unwrap();
    assert_eq!(DynamoKvEvents.detect(&bytes[..bytes.len().min(4096)]), Some(Confidence::High));
    assert_eq!(DynamoRequestTrace.detect(&bytes[..bytes.len().min(4096)]), None);
    let (sink, report) = parse(&DynamoKvEvents, &bytes);
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.cache_events.len() as u64), (expected.lines, expected.cache_events));
    for tier in [CacheTier::Gpu, CacheTier::Cpu, CacheTier::Disk, CacheTier::Remote] {
        assert!(sink.cache_events.iter().any(|e| e.tier == Some(tier)), "{tier:?}");
    }
}

proptest! {
    #[test]
    fn no_panics_on_random_or_mutated_input(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12),
    ) {
        let mut trace = Vec::new();
        write_request_trace(&mut trace, 3, 1).unwrap();
        let mut kv = Vec::new();
        write_kv_events(&mut kv, 8, 1).unwrap();
        for (adapter, input) in [(&DynamoRequestTrace as &dyn Adapter, trace), (&DynamoKvEvents, kv)] {
            let _ = adapter.detect(&bytes);
            let _ = parse(adapter, &bytes);
            let _ = parse(adapter, &mutate(input, &edits));
        }
    }
}
