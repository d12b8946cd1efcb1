//! `dynamo-log` end to end: every corpus fixture, the fold per wording generation (expectations computed by hand from
//! the lines), generated logs of any size, and robustness.

use infertrace_adapter::testing::mutate;
use infertrace_adapter::time::civil_to_nanos;
use infertrace_adapter::{
    Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, ParseReport, UtcOffset,
};
use infertrace_adapter_dynamo::DynamoLog;
use infertrace_adapter_dynamo::generate::log::{CANARY, LogMode, LogOptions, write_log};
use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, Status};
use proptest::prelude::*;

fn parse(bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "logs/frontend.log", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = DynamoLog.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../testdata/dynamo/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// UTC nanoseconds of `y-m-d h:mi:s` plus `micros`.
fn utc(y: i32, m: u32, d: u32, (h, mi, s): (u32, u32, u32), micros: i64) -> i64 {
    civil_to_nanos(y, m, d, (h, mi, s), UtcOffset::UTC).unwrap() + micros * 1000
}

fn diagnostics(sink: &CollectSink) -> Vec<(u64, DiagnosticKind)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect()
}

/// (instance, tier, hit_blocks, blocks, request_id) of each lookup.
/// A lookup as (instance, tier, hit_blocks, blocks, request_id).
type Lookup = (String, CacheTier, Option<u32>, Option<u32>, Option<String>);

fn lookups(sink: &CollectSink) -> Vec<Lookup> {
    sink.cache_events
        .iter()
        .map(|e: &CacheEvent| {
            assert_eq!(e.event, CacheEventKind::Lookup);
            (e.instance.as_deref().unwrap().to_owned(), e.tier.unwrap(), e.hit_blocks, e.blocks, e.request_id.clone())
        })
        .collect()
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn legacy_sdk_0_3() {
    let bytes = fixture("log-sdk-0.3/dynamo_readable_logs_legacy_sdk_2025-04_to-06.log");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High), "`serve_dynamo` targets");
    let (sink, report) = parse(&bytes);
    // Four `#` source lines, `Loaded plugin UCX_MO` and a vLLM worker-process line are not Dynamo records.
    let expected: Vec<_> = (1..=6).map(|line| (line, DiagnosticKind::NotARecord)).collect();
    assert_eq!(diagnostics(&sink), expected);
    assert_eq!(report.format_version.as_deref(), Some("readable-ms-sdk-0.3"));
    assert_eq!(report.lines, 17);
    let [row] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
    // `2025-04-24T07:46:08.693Z … Dequeued prefill request: 2a3f7b10-…` (line 12).
    assert_eq!(row.request_id, "2a3f7b10-5626-46a1-a301-a9962e156746");
    assert_eq!(row.arrival_time, Some(utc(2025, 4, 24, (7, 46, 8), 693_000)));
    assert_eq!((row.status, row.source_line), (Status::Unknown, Some(12)));
    assert!(sink.cache_events.is_empty());
}

#[test]
fn bridged_python_worker_2025_09() {
    let bytes = fixture("log-readable-2025-09/dynamo_readable_logs_docs_vllm_worker_2025-09.log");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::Low), "Python targets only: no Dynamo signature");
    let (sink, report) = parse(&bytes);
    assert_eq!(diagnostics(&sink), [(1, DiagnosticKind::NotARecord)], "the `# source` line");
    assert_eq!(report.format_version.as_deref(), Some("readable"));
    assert!(sink.requests.is_empty() && sink.cache_events.is_empty());
}

#[test]
fn jsonl_span_created_2025_09() {
    let bytes = fixture("log-jsonl-2025-09/dynamo_jsonl_logs_docs_2025-09_span_events.jsonl");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    assert_eq!(diagnostics(&sink), []);
    assert_eq!(report.format_version.as_deref(), Some("jsonl-span-created-2025"));
    let [first, second] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
    // No request id at all in the first request: its trace id names it.
    assert_eq!(first.request_id, "425ef761ca5b44c795b4c912f1d84b39");
    assert_eq!(first.arrival_time, Some(utc(2025, 9, 2, (16, 38, 6), 656_503)), "SPAN_CREATED of http-request");
    assert_eq!(first.completion_time, Some(utc(2025, 9, 2, (16, 38, 8), 788_268)), "its SPAN_CLOSED");
    assert_eq!(first.decode_instance.as_deref(), Some("7587888160958627596"), "handle_payload component=backend");
    assert_eq!(first.instance.as_deref(), Some("7587888160958627596"));
    assert_eq!((first.prefill_instance.as_deref(), first.prefill_end_time), (None, None));
    assert_eq!((first.status, first.source_line), (Status::Unknown, Some(5)));
    assert_eq!(second.request_id, "8372eac7-5f43-4d76-beca-0a94cfb311d0", "x_request_id");
    assert_eq!(second.arrival_time, Some(utc(2025, 9, 2, (17, 1, 46), 306_801)));
    assert_eq!(second.completion_time, Some(utc(2025, 9, 2, (17, 1, 47), 975_616)));
    assert_eq!(second.source_line, Some(9));
    assert_eq!(report.details["request_id_from"], serde_json::json!({"trace_id": 1, "x_request_id": 1}));
}

#[test]
fn jsonl_frontend_disagg_2025_10_has_no_request_records() {
    let bytes = fixture("log-jsonl-2025-10/dynamo_jsonl_logs_docs_2025-10_frontend_disagg.jsonl");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    assert_eq!(diagnostics(&sink), []);
    assert_eq!((report.format_version.as_deref(), report.lines), (Some("jsonl"), 7));
    assert!(sink.requests.is_empty() && sink.cache_events.is_empty());
}

#[test]
fn abridged_lifecycle_lines_of_pr_7734() {
    let bytes = fixture("log-jsonl-lifecycle-pr7734/dynamo_jsonl_lifecycle_logs_pr7734_example.jsonl");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    // The PR author dropped `time`: both lifecycle lines say so.
    assert_eq!(diagnostics(&sink), [(1, DiagnosticKind::MissingField), (2, DiagnosticKind::MissingField)]);
    let [row] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
    assert_eq!(row.request_id, "6ec6ddd9-...");
    assert_eq!((row.status, row.model.as_deref()), (Status::Ok, Some("qwen/qwen3-0.6b")));
    assert!(close(row.e2e_s, 0.005), "elapsed_ms \"5\"");
    assert_eq!((row.arrival_time, row.completion_time), (None, None));
    assert_eq!(report.details["http_responses"], serde_json::json!({"200": 1}));
}

#[test]
fn readable_frontend_and_router_shape() {
    let bytes = fixture("log-readable-1.x-shape/frontend_router_shape.log");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    assert_eq!(diagnostics(&sink), [(13, DiagnosticKind::NotARecord)], "a traceback line");
    assert_eq!(report.details["continuation_lines"], 1, "line 8 is the torn tail of line 7");
    let w = "7587888160958627596/dp1".to_owned();
    let aiperf = Some("aiperf-req-0001".to_owned());
    assert_eq!(
        lookups(&sink),
        [
            // ~0.5 wording: the line's own `cached blocks: 0` wins over the formula's 5; `total blocks` is capacity.
            ("7587890043311737930".to_owned(), CacheTier::Gpu, Some(0), None, None),
            ("7042394012839217798/dp0".to_owned(), CacheTier::Gpu, Some(0), None, None),
            // 1.6 decode selection + `[ROUTING] Best … 17/18`: one decision, three tiers, joined to the request.
            (w.clone(), CacheTier::Gpu, Some(17), Some(18), aiperf.clone()),
            (w.clone(), CacheTier::Cpu, Some(4), Some(18), aiperf.clone()),
            (w, CacheTier::Disk, Some(0), Some(18), aiperf),
        ]
    );
    assert_eq!(sink.cache_events[2].time, Some(utc(2026, 5, 21, (3, 56, 0), 838_500)));
    let [ok, cancelled, timeout, unfinished] = &sink.requests[..] else { panic!("{:?}", sink.requests) };

    assert_eq!(ok.request_id, "aiperf-req-0001");
    assert_eq!(ok.model.as_deref(), Some("qwen3-coder-30b-a3b-instruct-fp8"));
    let arrival = utc(2026, 5, 21, (3, 56, 0), 837_115);
    assert_eq!(ok.arrival_time, Some(arrival));
    assert_eq!(ok.completion_time, Some(arrival + 297_000_000), "received + elapsed_ms=297");
    assert_eq!(ok.first_token_time, Some(arrival + 187_480_000), "received + ttft_ms=187.48");
    assert!(close(ok.e2e_s, 0.297) && close(ok.ttft_s, 0.18748) && close(ok.tpot_s, 0.00907));
    assert_eq!((ok.input_tokens, ok.output_tokens), (Some(1187), Some(13)));
    assert_eq!(ok.decode_instance.as_deref(), Some("7587888160958627596"));
    assert_eq!((ok.status, ok.source_line), (Status::Ok, Some(7)));

    // +02:00 local times; no x_request_id, so the first request_id names the row.
    assert_eq!(cancelled.request_id, "0b5e6c1a-0000-4000-8000-000000000002");
    let arrival = utc(2026, 5, 21, (3, 56, 2), 0);
    assert_eq!(cancelled.arrival_time, Some(arrival));
    assert_eq!(cancelled.completion_time, Some(arrival + 501_000_000));
    assert_eq!((cancelled.status, cancelled.error.as_deref()), (Status::Aborted, None));
    assert_eq!((cancelled.input_tokens, cancelled.output_tokens), (Some(20), Some(3)));

    // Only a completion line: arrival is its time minus elapsed_ms=250.
    assert_eq!(timeout.request_id, "aiperf-req-0003");
    assert_eq!(timeout.arrival_time, Some(utc(2026, 5, 21, (3, 56, 3), 0)));
    assert_eq!(timeout.completion_time, Some(utc(2026, 5, 21, (3, 56, 3), 250_000)));
    assert_eq!((timeout.status, timeout.error.as_deref()), (Status::Timeout, Some("response_timeout")));

    // Never completed; its route attempt was rejected.
    assert_eq!(unfinished.request_id, "u1u1u1u1-0000-4000-8000-000000000004");
    assert_eq!((unfinished.status, unfinished.error.as_deref()), (Status::Error, Some("overload")));
    assert_eq!(unfinished.completion_time, None);
    assert_eq!(report.details["route_outcomes"], serde_json::json!({"failed": 1}));
    assert_eq!(report.details["formula_lines"], 1);
}

#[test]
fn jsonl_disaggregated_request_of_1_6_shape() {
    let bytes = fixture("log-jsonl-1.6-shape/disagg_shape.jsonl");
    assert_eq!(DynamoLog.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes);
    assert_eq!(diagnostics(&sink), [(6, DiagnosticKind::NotARecord)], "a plugin's line between JSON records");
    assert_eq!(report.format_version.as_deref(), Some("jsonl-span-first-entry"));
    let [row] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
    let at = |micros| utc(2026, 5, 21, (10, 0, 0), micros);
    assert_eq!(row.request_id, "aiperf-7f3c");
    assert_eq!(row.arrival_time, Some(at(100)), "`request received`, not the span's first entry");
    assert_eq!(row.completion_time, Some(at(900_100)));
    assert_eq!(row.first_token_time, Some(at(60_100)));
    assert_eq!(row.prefill_end_time, Some(at(50_100)), "prefill handle_payload SPAN_CLOSED");
    assert_eq!(row.decode_start_time, Some(at(51_000)), "backend handle_payload SPAN_FIRST_ENTRY");
    assert_eq!(row.prefill_instance.as_deref(), Some("111"));
    assert_eq!(row.decode_instance.as_deref(), Some("18446744073709551615"), "u64::MAX, exact");
    assert_eq!((row.input_tokens, row.output_tokens, row.status), (Some(512), Some(85), Status::Ok));
    assert_eq!(row.source_line, Some(14));
    assert_eq!(report.details["lines_after_request_end"], 1, "the http-request SPAN_CLOSED");
    let x = Some("aiperf-7f3c".to_owned());
    assert_eq!(
        lookups(&sink),
        [
            ("111/dp0".to_owned(), CacheTier::Gpu, Some(2), None, x.clone()),
            ("111/dp0".to_owned(), CacheTier::Cpu, Some(1), None, x.clone()),
            ("111/dp0".to_owned(), CacheTier::Disk, Some(0), None, x.clone()),
            ("18446744073709551615/dp1".to_owned(), CacheTier::Gpu, None, None, x.clone()),
            ("18446744073709551615/dp1".to_owned(), CacheTier::Cpu, Some(0), None, x.clone()),
            ("18446744073709551615/dp1".to_owned(), CacheTier::Disk, Some(3), None, x),
        ]
    );
}

/// One decision per wording generation, with `hit_blocks` read off the line by hand.
#[test]
fn router_wording_generations() {
    let t = "2026-01-01T00:00:00.000000Z  INFO dynamo_llm::kv_router::scheduler:";
    type Decision = (&'static str, Option<u32>, Option<u32>);
    let cases: &[(&[&str], &[Decision])] = &[
        // ≤0.3: no blocks anywhere (the formula's score is a fraction).
        (
            &["Formula for 7: 0.250 = 2.0 * 0.500 - 0.400 - 0.350", "Selected worker: 7, logit: 0.250"],
            &[("7", None, None)],
        ),
        // ~0.4: the chosen worker's formula line gives the hit; the other candidate's is ignored.
        (
            &[
                "Formula for 7: 1.500 = 1.0 * 1.000 + 0.500  (cached_blocks: 12)",
                "Formula for 8: 0.900 = 1.0 * 0.400 + 0.500  (cached_blocks: 30)",
                "Selected worker: 7, normalized logit: 1.000",
            ],
            &[("7", Some(12), None)],
        ),
        // ~0.5.
        (&["Selected worker: 9, logit: 3.000, cached blocks: 4, total blocks: 2859"], &[("9", Some(4), None)]),
        // ~0.7 with the optional capacity.
        (
            &[
                "Selected worker: worker_id=9 dp_rank=2, logit: 3.000, cached blocks: 5, tree size: 40, total blocks: 10",
            ],
            &[("9/dp2", Some(5), None)],
        ),
        // A formula does not carry over to the next decision.
        (
            &[
                "Formula for 7: 1.500 = 1.0 * 1.000 + 0.500  (cached_blocks: 12)",
                "Selected worker: 7, normalized logit: 1.000",
                "Selected worker: 7, normalized logit: 1.000",
            ],
            &[("7", Some(12), None), ("7", None, None)],
        ),
        // An unmatched `[ROUTING] Best` is a decision of its own.
        (&["[ROUTING] Best: worker_3 dp_rank=0 with 17/18 blocks overlap"], &[("3/dp0", Some(17), Some(18))]),
        // 1.x pinned: effective 6.60 rounds to 7.
        (
            &[
                "Selected pinned worker: worker_type=decode, worker_id=44 dp_rank=1, logit: 0.100, effective cached blocks: 6.60",
            ],
            &[("44/dp1", Some(7), None)],
        ),
    ];
    for (lines, expected) in cases {
        let text: String = lines.iter().map(|l| format!("{t} {l}\n")).collect();
        let (sink, _) = parse(text.as_bytes());
        assert_eq!(diagnostics(&sink), [], "{lines:?}");
        let got: Vec<_> =
            sink.cache_events.iter().map(|e| (e.instance.as_deref().unwrap(), e.hit_blocks, e.blocks)).collect();
        assert_eq!(&got, expected, "{lines:?}");
    }
}

#[test]
fn torn_records_and_colour_codes_torn_with_them() {
    // The colour code of `request_id=` is torn in the middle of its escape sequence.
    let text = "2026-01-01T00:00:00.000000Z  INFO http-request: dynamo_llm::http::service::metrics: request completed \x1b[3mrequest_id\x1b[0m\x1b[\n2m=\x1b[0mr1 status=success elapsed_ms=10\n";
    let (sink, report) = parse(text.as_bytes());
    assert_eq!(diagnostics(&sink), []);
    assert_eq!(sink.requests.len(), 1);
    assert_eq!((sink.requests[0].request_id.as_str(), sink.requests[0].status), ("r1", Status::Ok));
    assert_eq!(report.details["continuation_lines"], 1);
    // A tail with no record before it is not a record.
    let (sink, _) = parse(b"est_id=r1 status=success\n");
    assert_eq!(diagnostics(&sink), [(1, DiagnosticKind::NotARecord)]);
    // A torn JSON record is joined; an unjoinable one is malformed.
    let (sink, _) = parse(b"{\"time\":\"2026-01-01T00:00:00Z\",\"level\":\"INFO\",\"target\":\"a::b\",\n\"message\":\"x\"}\n{\"level\":\n");
    assert_eq!(diagnostics(&sink), [(3, DiagnosticKind::MalformedJson)]);
}

#[test]
fn requests_without_an_end_are_written_after_the_grace_period() {
    let received = |time: &str, id: &str| {
        format!("{time}  INFO http-request: dynamo_llm::http::service::metrics: request received request_id={id}\n")
    };
    let text = received("2026-01-01T00:00:00.000000Z", "a") + &received("2026-01-01T00:10:00.000001Z", "b");
    let (sink, _) = parse(text.as_bytes());
    // `a` is written when `b` comes more than ten minutes later, before `b` (written at the end).
    let ids: Vec<_> = sink.requests.iter().map(|r| (r.request_id.as_str(), r.source_line)).collect();
    assert_eq!(ids, [("a", Some(1)), ("b", Some(2))]);
    assert!(sink.requests.iter().all(|r| r.status == Status::Unknown));
}

#[test]
fn generated_logs_parse_completely_and_keep_user_text_out() {
    for mode in [LogMode::Readable, LogMode::Jsonl] {
        let mut bytes = Vec::new();
        let expected = write_log(&mut bytes, LogOptions { requests: 90, mode, seed: 5 }).unwrap();
        assert_eq!(DynamoLog.detect(&bytes[..bytes.len().min(4096)]), Some(Confidence::High), "{mode:?}");
        let (sink, report) = parse(&bytes);
        assert_eq!(sink.diagnostics, [], "{mode:?}");
        assert_eq!(report.lines, expected.lines, "{mode:?}");
        assert_eq!(sink.requests.len() as u64, expected.requests, "{mode:?}");
        assert_eq!(sink.cache_events.len() as u64, expected.cache_events, "{mode:?}");
        let failed = sink.requests.iter().filter(|r| r.status == Status::Error).count() as u64;
        assert_eq!(failed, expected.failed, "{mode:?}");
        // Every ninth request (i = 7, 16, …) was cancelled.
        assert_eq!(sink.requests.iter().filter(|r| r.status == Status::Aborted).count(), 10, "{mode:?}");
        for row in &sink.requests {
            assert!(row.request_id.starts_with("aiperf-"), "{mode:?}: x_request_id names the row");
            assert!(row.arrival_time.unwrap() < row.completion_time.unwrap(), "{mode:?}");
            assert!(row.ttft_s.is_some() && row.tpot_s.is_some() && row.output_tokens.is_some(), "{mode:?}");
        }
        // Decisions with a request id (1.6 wording) join their row's id.
        assert!(sink.cache_events.iter().filter_map(|e| e.request_id.as_deref()).all(|id| id.starts_with("aiperf-")));
        let everything = format!("{:?}{:?}{:?}{:?}", sink.requests, sink.cache_events, sink.diagnostics, report);
        assert!(!everything.contains(CANARY), "{mode:?}");
        assert!(!everything.contains("CANARY"), "{mode:?}");
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = DynamoLog.detect(&bytes);
        let _ = parse(&bytes);
    }

    #[test]
    fn mutated_logs_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16),
        jsonl in any::<bool>(),
    ) {
        let mut bytes = Vec::new();
        let mode = if jsonl { LogMode::Jsonl } else { LogMode::Readable };
        write_log(&mut bytes, LogOptions { requests: 6, mode, seed: 3 }).unwrap();
        let bytes = mutate(bytes, &edits);
        let _ = DynamoLog.detect(&bytes);
        let _ = parse(&bytes);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16),
        which in 0usize..3,
    ) {
        let path = ["log-readable-1.x-shape/frontend_router_shape.log", "log-jsonl-1.6-shape/disagg_shape.jsonl",
            "log-jsonl-2025-09/dynamo_jsonl_logs_docs_2025-09_span_events.jsonl"][which];
        let _ = parse(&mutate(fixture(path), &edits));
    }
}

/// A record whose target ends the line has no message; it is read (and makes no diagnostic) on the pool and on one
/// thread alike. Its empty parts are slices at the end of the line, which the pool hands on as byte ranges.
#[test]
fn a_record_that_ends_with_its_target_is_read() {
    let text = concat!(
        "2026-02-27T14:47:21.385061Z  INFO dynamo_llm::http::service:\n",
        "2026-02-27T14:47:22.000000Z  INFO x::y: request received request_id=r1\n",
    );
    let (sink, report) = parse(text.as_bytes());
    assert_eq!(diagnostics(&sink), []);
    assert_eq!(report.format_version.as_deref(), Some("readable"));
    assert_eq!(sink.requests.len(), 1);
    assert_eq!(sink.requests[0].arrival_time, Some(utc(2026, 2, 27, (14, 47, 22), 0)));
}

/// The envelopes deployments put around a Dynamo record, each with the name the drift report gives it.
const ENVELOPES: [(&str, Option<&str>); 7] = [
    ("", None),
    ("2026-05-21T03:56:09.000000001Z ", Some("docker-timestamps")),
    ("frontend-1  | ", Some("compose")),
    ("[pod/frontend-7d9f/main] ", Some("kubectl")),
    ("Dec 05 10:00:00 gpu-node-1 dynamo-frontend[4242]: ", Some("journald")),
    ("[frontend] pid=12 | ", Some("custom-prefix")),
    ("2025-03-08 02:04:48,693 - sflow.task.frontend - INFO - 0: ", Some("sflow-wrapper")),
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// A request's `request received` and `request completed` lines, readable or JSONL, with unknown `key=value`
    /// fields inserted anywhere among theirs, in any envelope: arrival, e2e, status and error are still read, and
    /// the envelope is named in the drift report.
    #[test]
    fn unknown_request_fields_anywhere_and_any_envelope_leave_the_request_read(
        envelope in 0..ENVELOPES.len(),
        json in proptest::bool::ANY,
        inserted in proptest::collection::vec((0..10usize, "xnew_[a-z]{1,8}", proptest::prop_oneof![proptest::strategy::Just("7"), proptest::strategy::Just("\"a b\""), proptest::strategy::Just("Some(3)")]), 0..4),
    ) {
        let (prefix, name) = ENVELOPES[envelope];
        let mut received = vec!["request_id=r1", "model=m", "endpoint=chat_completions", "request_type=stream"]
            .into_iter().map(str::to_owned).collect::<Vec<_>>();
        let mut completed = vec!["request_id=r1", "model=m", "status=error", "error_type=internal", "elapsed_ms=297"]
            .into_iter().map(str::to_owned).collect::<Vec<_>>();
        for (at, key, value) in &inserted {
            received.insert(1 + at % received.len(), format!("{key}={value}"));
            completed.insert(1 + at % completed.len(), format!("{key}={value}"));
        }
        let line = |time: &str, message: &str, fields: &[String]| {
            if json {
                let fields: Vec<String> = fields.iter().map(|f| {
                    let (k, v) = f.split_once('=').unwrap();
                    let v = if v.starts_with('"') || v.parse::<f64>().is_ok() { v.to_owned() } else { format!("\"{v}\"") };
                    format!("\"{k}\":{v}")
                }).collect();
                format!(r#"{prefix}{{"time":"{time}","level":"INFO","target":"dynamo_llm::http::service::metrics","message":"{message}",{}}}"#, fields.join(","))
            } else {
                format!("{prefix}{time}  INFO http-request: dynamo_llm::http::service::metrics: {message} {}", fields.join(" "))
            }
        };
        let text = format!(
            "{}\n{}\n",
            line("2026-05-21T03:56:00.837115Z", "request received", &received),
            line("2026-05-21T03:56:01.134595Z", "request completed", &completed)
        );
        let (sink, _) = parse(text.as_bytes());
        proptest::prop_assert!(sink.diagnostics.is_empty(), "{text}: {:?}", sink.diagnostics);
        proptest::prop_assert_eq!(sink.requests.len(), 1, "{}", text);
        let request = &sink.requests[0];
        // 2026-05-21T03:56:00.837115Z and `elapsed_ms=297`, read by hand.
        proptest::prop_assert_eq!(request.arrival_time, Some(1_779_335_760_837_115_000));
        proptest::prop_assert_eq!(request.e2e_s, Some(0.297));
        proptest::prop_assert_eq!(request.status, infertrace_schema::Status::Error);
        proptest::prop_assert_eq!(request.error.as_deref(), Some("internal"));
        let envelopes = &sink.drift.as_ref().unwrap().envelopes;
        let want = name.unwrap_or("plain");
        proptest::prop_assert_eq!(envelopes.get(want), Some(&2), "{}: {:?}", text, envelopes);
    }
}
