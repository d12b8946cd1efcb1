//! The `aiperf` adapter end to end: generated records of every generation and layout and generated summaries parse
//! completely, the AIPerf fixtures under `testdata/dynamo/aiperf-*` give exactly their expected diagnostics, other
//! formats' fixtures are not claimed, and no input makes the adapter panic.

use std::path::{Path, PathBuf};

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_dynamo::Aiperf;
use infertrace_adapter_dynamo::generate::aiperf::{
    Generation, Layout, write_records, write_summary_csv, write_summary_json,
};
use infertrace_schema::{Status, WorkloadClass};
use proptest::prelude::*;

const CANARY: &str = "synthetic error message";

fn parse(bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext {
        source_file: "artifacts/run/profile_export.jsonl",
        options: &options,
        modified: Some(0),
        sidecars: None,
    };
    let mut sink = CollectSink::default();
    let report = Aiperf.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn head(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(4096)]
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(testdata().join("dynamo").join(path)).unwrap()
}

fn no_canary(sink: &CollectSink, report: &ParseReport) {
    let all = format!("{:?} {:?} {:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!all.contains(CANARY) && !all.contains("Internal Server Error") && !all.contains("cancelled after"));
}

#[test]
fn generated_records_parse_completely() {
    for generation in Generation::ALL {
        for layout in [Layout::Lines, Layout::Pretty] {
            let mut bytes = Vec::new();
            let expected = write_records(&mut bytes, generation, layout, 60, 7).unwrap();
            assert_eq!(Aiperf.detect(head(&bytes)), Some(Confidence::High), "{generation:?} {layout:?}");
            let (sink, report) = parse(&bytes);
            assert_eq!(sink.diagnostics, [], "{generation:?} {layout:?}");
            assert_eq!((report.lines, sink.requests.len() as u64), (expected.lines, expected.requests));
            let failed = sink.requests.iter().filter(|r| r.status != Status::Ok).count() as u64;
            assert_eq!(failed, expected.failed);
            // i % 7 == 5 are cancelled: 5, 12, …, 54 (eight of sixty).
            assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Aborted).count(), 8);
            assert_eq!(report.details["warmup_records"], 2);
            for r in sink.requests.iter().filter(|r| r.status == Status::Ok) {
                let (arrival, first, last) = (r.arrival_time.unwrap(), r.first_token_time.unwrap(), r.last_token_time);
                assert!(arrival < first && Some(first) < last, "{r:?}");
                assert!(r.ttft_s.unwrap() > 0.0 && r.e2e_s.unwrap() > r.ttft_s.unwrap());
                assert!(r.output_tokens.unwrap() > r.reasoning_tokens.unwrap());
                assert!(r.request_id.starts_with("req-7-") && r.session_id.as_deref().unwrap().starts_with("sess-7-"));
            }
            let agents = sink.requests.iter().filter(|r| r.workload_class == Some(WorkloadClass::Agent)).count();
            // 0.13 marks every fifth request (i % 5 == 4) as a sub-agent.
            assert_eq!(agents, if generation == Generation::V0_13 { 12 } else { 0 });
            no_canary(&sink, &report);
        }
    }
}

#[test]
fn generated_summaries_write_details_only() {
    let mut json = Vec::new();
    let expected = write_summary_json(&mut json, 12, 3).unwrap();
    assert_eq!(Aiperf.detect(head(&json)), Some(Confidence::High));
    let (sink, report) = parse(&json);
    assert_eq!((sink.diagnostics.len(), sink.requests.len(), report.lines), (0, 0, expected.lines));
    assert_eq!(report.details["summary"].as_object().unwrap().len(), 13);
    assert_eq!(report.details["errors"][0]["count"], 2);
    no_canary(&sink, &report);

    for early in [false, true] {
        let mut csv = Vec::new();
        let expected = write_summary_csv(&mut csv, 9, early, 3).unwrap();
        assert_eq!(Aiperf.detect(head(&csv)), Some(Confidence::High));
        let (sink, report) = parse(&csv);
        assert_eq!((sink.diagnostics.len(), sink.requests.len(), report.lines), (0, 0, expected.lines));
        assert_eq!(report.details["summary"].as_object().unwrap().len(), 11);
        assert_eq!(report.details["summary"]["metric_0"]["unit"], "ms");
    }
}

#[test]
fn fixtures_give_their_expected_diagnostics() {
    use DiagnosticKind::*;
    /// A fixture, the rows it holds and the diagnostics (line, kind) it must give.
    type Case = (&'static str, usize, &'static [(u64, DiagnosticKind)]);
    let cases: &[Case] = &[
        ("aiperf-pre-0.1.1/aiperf_profile_export_early_format_examples_run1_head.jsonl", 4, &[]),
        // The documentation example repeats `time_to_first_token` (the second is really the second-token time).
        ("aiperf-0.1.1-0.2/aiperf_profile_export_record_docs_success.json", 1, &[(1, Inconsistent)]),
        ("aiperf-0.1.1-0.2/aiperf_profile_export_record_docs_failed.json", 1, &[]),
        // Hand-minimised: `time_to_first_token` without a unit on every line.
        (
            "aiperf-srt-slurm-dsight/aiperf_profile_export_srt_slurm_dsight_fixture.jsonl",
            5,
            &[(1, Inconsistent), (2, Inconsistent), (3, Inconsistent), (4, Inconsistent), (5, Inconsistent)],
        ),
        ("aiperf-0.13/profile_export.jsonl", 5, &[]),
        ("aiperf-summary-pre-0.2/aiperf_profile_export_aiperf_examples_run1_v0.1_excerpt.json", 0, &[]),
        ("aiperf-summary-pre-0.2/aiperf_profile_export_aiperf_examples_run1.csv", 0, &[]),
        ("aiperf-summary-1.4/profile_export_aiperf.json", 0, &[]),
        ("aiperf-summary-1.4/profile_export_aiperf.csv", 0, &[]),
    ];
    for (path, rows, diagnostics) in cases {
        let bytes = fixture(path);
        assert_eq!(Aiperf.detect(head(&bytes)), Some(Confidence::High), "{path}");
        let (sink, report) = parse(&bytes);
        let found: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!((sink.requests.len(), found.as_slice()), (*rows, *diagnostics), "{path}");
        no_canary(&sink, &report);
    }
}

#[test]
fn fixture_values_by_hand() {
    // Early run1: three cancelled requests, then one with ttft 3340.543979 ms after 1759522419158355424 ns.
    let (sink, report) =
        parse(&fixture("aiperf-pre-0.1.1/aiperf_profile_export_early_format_examples_run1_head.jsonl"));
    assert_eq!(report.format_version.as_deref(), Some("pre-0.1.1"));
    assert!(sink.requests[..3].iter().all(|r| r.status == Status::Aborted && r.http_status == Some(499)));
    assert_eq!(sink.requests[0].error.as_deref(), Some("RequestCancellationError"));
    let r = &sink.requests[3];
    assert_eq!(r.request_id, "dc9ffe9b-0f48-4863-9db7-e106ea64d094");
    assert_eq!(r.session_id.as_deref(), Some("6f24617d-f29b-4399-af87-b98a61fe43f7"));
    assert_eq!(r.first_token_time, Some(1_759_522_419_158_355_424 + 3_340_543_979));
    assert_eq!(r.completion_time, Some(1_759_522_427_372_557_760));
    assert_eq!((r.input_tokens, r.output_tokens, r.reasoning_tokens), (Some(550), Some(193), Some(131)));

    // Docs success: the first `time_to_first_token` (255.886568 ms) is kept.
    let (sink, report) = parse(&fixture("aiperf-0.1.1-0.2/aiperf_profile_export_record_docs_success.json"));
    assert_eq!((report.format_version.as_deref(), report.lines), (Some("0.1.1-0.2"), 29));
    let r = &sink.requests[0];
    assert_eq!(r.first_token_time, Some(1_759_813_207_532_900_363 + 255_886_568));
    assert_eq!((r.completion_time, r.source_line), (Some(1_759_813_207_838_764_604), Some(29)));
    assert_eq!((r.status, r.output_tokens), (Status::Ok, Some(9)));
    assert!((r.tpot_s.unwrap() - 0.0052048325).abs() < 1e-15);

    // Docs failure: cancelled, its prompt length from `error_isl`.
    let (sink, _) = parse(&fixture("aiperf-0.1.1-0.2/aiperf_profile_export_record_docs_failed.json"));
    let r = &sink.requests[0];
    assert_eq!((r.status, r.http_status, r.input_tokens), (Status::Aborted, Some(499), Some(550)));

    // srt-slurm: ids from `request_id`, sessions from `x_correlation_id`, the three of `shared-session` agentic.
    let (sink, report) =
        parse(&fixture("aiperf-srt-slurm-dsight/aiperf_profile_export_srt_slurm_dsight_fixture.jsonl"));
    assert_eq!(sink.requests[2].request_id, "child-turn");
    assert_eq!(sink.requests[2].session_id.as_deref(), Some("child-agent"));
    assert_eq!(sink.requests[2].first_token_time, Some(1_789_642_715_100_000_000));
    assert_eq!(report.details["ids_from_request_id"], 5);
    assert_eq!(report.details["agentic"]["subagent_requests"], 2);

    // Pre-0.2 summary: four metrics, the cancellation errors without their message.
    let (_, report) =
        parse(&fixture("aiperf-summary-pre-0.2/aiperf_profile_export_aiperf_examples_run1_v0.1_excerpt.json"));
    assert_eq!(report.format_version.as_deref(), Some("summary-json pre-0.2"));
    assert_eq!(report.details["summary"]["ttft"]["count"], 89);
    assert_eq!(
        report.details["summary"]["error_request_count"],
        serde_json::json!({"unit": "requests", "avg": 11.0, "count": 1})
    );
    assert_eq!(
        report.details["errors"],
        serde_json::json!([{"code": 499, "type": "RequestCancellationError", "count": 11}])
    );
    assert_eq!(report.details["run"]["start_time"], "2025-10-03T13:13:39.146443");

    // Early CSV: ten statistics rows and eleven values.
    let (_, report) = parse(&fixture("aiperf-summary-pre-0.2/aiperf_profile_export_aiperf_examples_run1.csv"));
    assert_eq!(report.format_version.as_deref(), Some("summary-csv early"));
    let summary = report.details["summary"].as_object().unwrap();
    assert_eq!(summary.len(), 21);
    assert_eq!(summary["time_to_first_token"]["p99"], 3833.39);
    assert_eq!(summary["benchmark_duration"], serde_json::json!({"unit": "sec", "avg": 9.32}));

    // Synthetic 0.13: one warmup row kept, units `us` and `sec` converted, cached tokens, the server error's class.
    let (sink, report) = parse(&fixture("aiperf-0.13/profile_export.jsonl"));
    assert_eq!(report.details["warmup_records"], 1);
    let r = &sink.requests[1];
    assert_eq!(r.first_token_time, Some(1_780_000_001_180_200_000));
    assert_eq!(r.last_token_time, Some(1_780_000_002_200_200_000));
    assert_eq!((r.ttft_s, r.e2e_s, r.cached_tokens, r.http_status), (Some(0.18), Some(1.2), Some(1536), Some(200)));
    assert_eq!(sink.requests[2].workload_class, Some(WorkloadClass::Agent));
    let r = &sink.requests[3];
    assert_eq!(
        (r.status, r.error.as_deref(), r.input_tokens),
        (Status::Error, Some("aiohttp.ClientResponseError"), Some(700))
    );
}

#[test]
fn other_formats_are_not_claimed() {
    // GenAI-Perf's summary CSV (perf_analyzer's test_csv_exporter.py expected output, first rows).
    let genai = b"Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1\r\n\
        Time To First Token (ms),8.00,7.00,9.00,8.98,8.90,8.80,8.50,8.00,7.50,7.20,7.10,7.02\r\n";
    let mut heads = vec![genai.to_vec()];
    for framework in ["mooncake", "azure-llm", "vllm", "sglang"] {
        for generation in std::fs::read_dir(testdata().join(framework)).unwrap() {
            for file in std::fs::read_dir(generation.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                let name = path.to_string_lossy().into_owned();
                if !name.ends_with(".gz") && !name.ends_with(".zst") {
                    let bytes = std::fs::read(&path).unwrap();
                    heads.push(head(&bytes).to_vec());
                }
            }
        }
    }
    for bytes in heads {
        assert_eq!(Aiperf.detect(&bytes), None, "{}", String::from_utf8_lossy(&bytes));
    }
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Aiperf.detect(&bytes);
        let _ = parse(&bytes);
        let mut braced = b"{\n".to_vec();
        braced.extend_from_slice(&bytes);
        let _ = parse(&braced);
    }

    #[test]
    fn never_panics_on_mutated_inputs(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut inputs = Vec::new();
        for generation in Generation::ALL {
            for layout in [Layout::Lines, Layout::Pretty] {
                let mut bytes = Vec::new();
                write_records(&mut bytes, generation, layout, 4, 1).unwrap();
                inputs.push(bytes);
            }
        }
        let mut json = Vec::new();
        write_summary_json(&mut json, 2, 1).unwrap();
        inputs.push(json);
        let mut csv = Vec::new();
        write_summary_csv(&mut csv, 2, false, 1).unwrap();
        inputs.push(csv);
        for input in inputs {
            let mutated = mutate(input, &edits);
            let _ = Aiperf.detect(&mutated);
            let (sink, _) = parse(&mutated);
            let diagnostics = format!("{:?}", sink.diagnostics);
            prop_assert!(!diagnostics.contains(CANARY));
        }
    }
}
