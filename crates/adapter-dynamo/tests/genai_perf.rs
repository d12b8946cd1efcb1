//! GenAI-Perf end to end: generated and corpus inputs parse completely, are claimed by this adapter, and no input
//! makes it panic.

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_dynamo::GenaiPerf;
use infertrace_adapter_dynamo::generate::genai_perf::{write_profile_export, write_summary_csv};
use infertrace_schema::Status;
use proptest::prelude::*;

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: Some(0), sidecars: None };
    let mut sink = CollectSink::default();
    let report = GenaiPerf.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn head(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(4096)]
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../../testdata/dynamo/genai-perf-testfixture/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn generated_profile_export_parses_completely() {
    let mut bytes = Vec::new();
    let expected = write_profile_export(&mut bytes, 3, 40, 5).unwrap();
    assert_eq!(GenaiPerf.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "artifacts/profile_export.json");
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.lines, sink.requests.len() as u64), (expected.lines, expected.requests));
    let unknown = sink.requests.iter().filter(|r| r.status == Status::Unknown).count() as u64;
    assert_eq!(unknown, expected.failed);
    assert_eq!(report.details["experiments"].as_array().map(Vec::len), Some(3));
    assert_eq!(report.details["requests_without_responses"], expected.failed);
    for r in &sink.requests {
        assert!(r.arrival_time.is_some());
        if r.status == Status::Ok {
            assert!(r.ttft_s.unwrap() > 0.0 && r.e2e_s.unwrap() >= r.ttft_s.unwrap());
        }
        assert!(!format!("{r:?}").contains("synthetic"));
    }
    assert_eq!(sink.requests[41].request_id, "profile_export:1:1");
}

#[test]
fn generated_summary_csv_parses_completely() {
    let mut bytes = Vec::new();
    let expected = write_summary_csv(&mut bytes, 2).unwrap();
    assert_eq!(GenaiPerf.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "profile_export_genai_perf.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, expected.lines);
    assert_eq!(report.details["statistics"].as_object().map(|o| o.len()), Some(4));
    assert_eq!(report.details["system"]["Request Count (count)"], 100.0);
}

#[test]
fn corpus_openai_fixture() {
    // perf_analyzer's unit-test dict: toy timestamps (ns 1, 2, …), six SSE chunks per request.
    let bytes = fixture("genai_perf_profile_export_testfixture_openai_profile_data.json");
    assert_eq!(GenaiPerf.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "genai_perf_profile_export_testfixture_openai_profile_data.json");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.details["service_kind"], "openai");
    assert_eq!(report.details["endpoint"], "v1/chat/completions");
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.arrival_time, r.first_token_time, r.completion_time)).collect();
    // Request 1: timestamp 1, responses 3 … 14; request 2: timestamp 2, responses 4 … 19.
    assert_eq!(rows, [(Some(1), Some(3), Some(14)), (Some(2), Some(4), Some(19))]);
    // (14 - 3) ns over five chunk gaps.
    assert_eq!(sink.requests[0].tpot_s, Some(11e-9 / 5.0));
    assert!(!format!("{:?}", sink.requests).contains("dogs"));
}

#[test]
fn corpus_triton_fixture() {
    let bytes = fixture("genai_perf_profile_export_testfixture_triton_profile_data.json");
    assert_eq!(GenaiPerf.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "triton_profile_data.json");
    assert_eq!(sink.diagnostics, []);
    let ids: Vec<_> = sink.requests.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(
        ids,
        ["triton_profile_data:0:0", "triton_profile_data:0:1", "triton_profile_data:1:0", "triton_profile_data:1:1"]
    );
    // Experiment 1, request 0: timestamp 5, responses 7, 8, 13, 18.
    let r = &sink.requests[2];
    assert_eq!((r.ttft_s, r.e2e_s), (Some(2e-9), Some(13e-9)));
    assert_eq!(
        report.details["experiments"],
        serde_json::json!([
            {"mode": "concurrency", "value": 10, "requests": 2},
            {"mode": "request_rate", "value": 2.0, "requests": 2}
        ])
    );
    assert_eq!(report.format_version.as_deref(), Some("profile_export.json 2024-05+ (service_kind, endpoint)"));
}

#[test]
fn corpus_summary_csv() {
    let bytes = fixture("genai_perf_profile_export_genai_perf_testfixture.csv");
    assert_eq!(GenaiPerf.detect(head(&bytes)), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "profile_export_genai_perf.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests, []);
    assert_eq!(report.details["statistics"]["Time To First Token (ms)"]["p90"], 8.8);
    assert_eq!(report.details["system"]["Request Throughput (per sec)"], 123.0);
    assert_eq!(report.lines, 13);
}

#[test]
fn a_document_that_is_not_an_object_is_reported() {
    let (sink, report) = parse(b"[1, 2]", "x.json");
    assert_eq!(report.lines, 1);
    let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
    assert_eq!(kinds, [(1, DiagnosticKind::NotARecord)], "read as CSV: a row outside any table");
    let (sink, _) = parse(b"{\"experiments\": 3}", "x.json");
    let kinds: Vec<_> = sink.diagnostics.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DiagnosticKind::MalformedRecord]);
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = GenaiPerf.detect(&bytes);
        let _ = parse(&bytes, "random.json");
    }

    #[test]
    fn never_panics_on_mutated_inputs(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut export = Vec::new();
        write_profile_export(&mut export, 2, 4, 1).unwrap();
        let mut csv = Vec::new();
        write_summary_csv(&mut csv, 1).unwrap();
        for input in [export, csv] {
            let mutated = mutate(input, &edits);
            let _ = GenaiPerf.detect(&mutated);
            let _ = parse(&mutated, "mutated.json");
        }
    }
}
