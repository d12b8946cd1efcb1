//! `vllm-log` end to end: generated logs of every release family, the clock, request joining, and robustness.

use infertrace_adapter::time::civil_to_nanos;
use infertrace_adapter::{Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, UtcOffset};
use infertrace_adapter_vllm::VllmLog;
use infertrace_adapter_vllm::generate::{Generation, LogOptions, write_log};
use infertrace_schema::{ClockDomain, Status, YearSource, metrics};
use proptest::prelude::*;

fn parse_with(
    text: &str,
    options: ParseOptions,
    modified_year: Option<i32>,
) -> (CollectSink, infertrace_adapter::ParseReport) {
    let modified = modified_year.map(|year| utc(year, 6, 1, 12, 0, 0));
    let ctx = ParseContext { source_file: "logs/server.log", options: &options, modified, sidecars: None };
    let mut sink = CollectSink::default();
    let report = VllmLog.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str) -> CollectSink {
    parse_with(text, ParseOptions { year: Some(2025), ..ParseOptions::default() }, None).0
}

fn utc(year: i32, month: u32, day: u32, h: u32, m: u32, s: u32) -> i64 {
    civil_to_nanos(year, month, day, (h, m, s), UtcOffset::UTC).unwrap()
}

#[test]
fn generated_logs_of_every_generation_parse_completely() {
    for generation in Generation::ALL {
        let mut text = Vec::new();
        let options = LogOptions { requests: 60, prompt_tokens: (20, 70), seed: 7 };
        let expected = write_log(&mut text, generation, options).unwrap();
        let (sink, report) = parse_with(
            std::str::from_utf8(&text).unwrap(),
            ParseOptions { year: Some(2025), ..Default::default() },
            None,
        );
        assert_eq!(sink.diagnostics, [], "{generation:?}");
        assert_eq!(report.lines, expected.lines, "{generation:?}");
        assert_eq!(
            sink.requests.len() as u64,
            expected.requests,
            "{generation:?}: internal ids must join their requests"
        );
        let count = |status| sink.requests.iter().filter(|r| r.status == status).count() as u64;
        assert_eq!(count(Status::Aborted), expected.aborted, "{generation:?}");
        assert_eq!(count(Status::Ok), expected.finished, "{generation:?}");
        let tokens: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
        assert_eq!(tokens, expected.prompt_tokens, "{generation:?}");
        for row in &sink.requests {
            let blocks = row.input_tokens.unwrap() / 16;
            assert_eq!(row.prefix_hashes.as_ref().map(Vec::len), Some(blocks as usize), "{generation:?}");
            assert!(row.max_tokens.is_some_and(|m| (64..576).contains(&m)), "{generation:?}");
            assert!(row.arrival_time.is_some(), "{generation:?}");
        }
        assert_eq!(sink.samples.len() as u64, expected.samples, "{generation:?}");
        assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)), "{generation:?}");
    }
}

#[test]
fn the_year_rolls_over_inside_one_file() {
    let mut text = Vec::new();
    write_log(&mut text, Generation::V0_31, LogOptions { requests: 40, ..Default::default() }).unwrap();
    let (sink, report) =
        parse_with(std::str::from_utf8(&text).unwrap(), ParseOptions { year: Some(2025), ..Default::default() }, None);
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2025, YearSource::Option)));
    let first = sink.requests.first().unwrap().arrival_time.unwrap();
    let last = sink.requests.last().unwrap().arrival_time.unwrap();
    assert!(first < utc(2026, 1, 1, 0, 0, 0), "the log starts on 2025-12-31");
    assert!(last >= utc(2026, 1, 1, 0, 0, 0), "and continues into 2026-01-01, not 2025-01-01");
}

#[test]
fn year_sources_in_order_of_preference() {
    let line = "INFO 07-24 09:55:30 metrics.py:334] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 9.0%, CPU KV cache usage: 0.0%\n";
    let (sink, report) = parse_with(line, ParseOptions { year: Some(2023), ..Default::default() }, Some(2026));
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2023, YearSource::Option)));
    assert_eq!(sink.samples[0].time, utc(2023, 7, 24, 9, 55, 30));

    let (sink, report) = parse_with(line, ParseOptions::default(), Some(2026));
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2026, YearSource::FileModified)));
    assert_eq!(sink.samples[0].time, utc(2026, 7, 24, 9, 55, 30));

    let (sink, report) = parse_with(line, ParseOptions::default(), None);
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((1970, YearSource::Unknown)));
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MissingField);

    // A wrapper's year wins over the file's; its clock (another zone) is not used.
    let wrapped = format!("[2024-07-24 17:55:30] {line}");
    let (sink, report) = parse_with(&wrapped, ParseOptions::default(), Some(2026));
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2024, YearSource::Prefix)));
    assert_eq!(sink.samples[0].time, utc(2024, 7, 24, 9, 55, 30));

    // --year outranks the wrapper.
    let (sink, report) = parse_with(&wrapped, ParseOptions { year: Some(2022), ..Default::default() }, Some(2026));
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2022, YearSource::Option)));
    assert_eq!(sink.samples[0].time, utc(2022, 7, 24, 9, 55, 30));

    // docker --timestamps gives the instant itself, in UTC, to the nanosecond.
    let docker = format!("2024-07-24T09:55:30.123456789Z {line}");
    let (sink, report) = parse_with(&docker, ParseOptions { year: Some(2020), ..Default::default() }, None);
    assert_eq!(sink.samples[0].time, utc(2024, 7, 24, 9, 55, 30) + 123_456_789);
    assert_eq!(report.clock_domain, ClockDomain::Utc);
}

#[test]
fn the_utc_offset_applies_to_local_times() {
    let line = "INFO 07-24 09:55:30 [logger.py:39] Received request r1: prompt: 'x', params: SamplingParams(n=1, max_tokens=9), prompt_token_ids: None, lora_request: None, prompt_adapter_request: None.\n";
    let options = ParseOptions { year: Some(2025), utc_offset: "+08:00".parse().unwrap(), ..Default::default() };
    let (sink, report) = parse_with(line, options, None);
    assert_eq!(sink.requests[0].arrival_time, Some(utc(2025, 7, 24, 1, 55, 30)));
    assert_eq!(sink.requests[0].max_tokens, Some(9));
    assert_eq!(report.clock_domain, ClockDomain::AssumedOffset);
}

#[test]
fn requests_join_across_lines_and_repeated_aborts_count_once() {
    let log = "\
INFO 05-01 10:00:00 [logger.py:49] Received request chatcmpl-a269fdcb7c6ce890: params: SamplingParams(n=1, max_tokens=100), lora_request: None.
INFO 05-01 10:00:00 [async_llm.py:382] Added request chatcmpl-a269fdcb7c6ce890-a8a65d16.
INFO 05-01 10:00:04 [async_llm.py:563] Request chatcmpl-a269fdcb7c6ce890 aborted.
INFO 05-01 10:00:04 [async_llm.py:563] Aborted request(s) chatcmpl-a269fdcb7c6ce890-a8a65d16.
INFO 05-01 10:00:05 [async_llm.py:382] Added request cmpl-b-0.
INFO 05-01 10:00:06 [async_llm.py:382] Added request cmpl-c-0.
INFO 05-01 10:00:07 [async_llm.py:563] Aborted request(s) cmpl-b-0,cmpl-c-0.
";
    let sink = parse(log);
    assert_eq!(sink.diagnostics, []);
    // The pipeline fills durations; here the span is computed from the two instants the adapter wrote.
    let span = |r: &infertrace_schema::RequestRow| Some((r.completion_time? - r.arrival_time?) as f64 / 1e9);
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.request_id.as_str(), r.status, span(r))).collect();
    assert_eq!(
        rows,
        [
            ("chatcmpl-a269fdcb7c6ce890", Status::Aborted, Some(4.0)),
            ("cmpl-b-0", Status::Aborted, Some(2.0)),
            ("cmpl-c-0", Status::Aborted, Some(1.0))
        ]
    );
}

#[test]
fn a_coloured_details_line_with_a_glued_record_is_read_whole() {
    // vllm-project/vllm#18115: a record pasted onto the end of another without a newline. Here it follows a
    // coloured `details` line, whose fields are read in the parallel stage, and it must still be read as a record.
    let ids: Vec<String> = (1..=40).map(|i| (i * 37).to_string()).collect();
    let log = format!(
        "\
INFO 05-01 10:00:00 [logger.py:49] Received request r1: params: SamplingParams(n=1, max_tokens=100), lora_request: None.
\x1b[90mDEBUG\x1b[0m 05-01 10:00:00 [logger.py:49] Request r1 details: prompt: 'x', prompt_token_ids: [{}], prompt_embeds shape: None.\
INFO 05-01 10:00:03 [async_llm.py:563] Request r1 aborted.
",
        ids.join(", ")
    );
    let sink = parse(&log);
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| {
            let blocks = r.prefix_hashes.as_ref().map(Vec::len);
            (r.request_id.as_str(), r.input_tokens, blocks, r.status, r.completion_time.zip(r.arrival_time))
        })
        .collect();
    let (start, end) = (utc(2025, 5, 1, 10, 0, 0), utc(2025, 5, 1, 10, 0, 3));
    // 40 tokens: two full blocks of 16; the glued abort ends the request three seconds in.
    assert_eq!(rows, [("r1", Some(40), Some(2), Status::Aborted, Some((end, start)))]);
}

#[test]
fn requests_without_an_end_are_written_after_the_grace_period_in_arrival_order() {
    let log = "\
INFO 05-01 10:00:00 [async_llm.py:382] Added request a.
INFO 05-01 10:05:00 [async_llm.py:382] Added request b.
INFO 05-01 10:10:01 [async_llm.py:382] Added request c.
INFO 05-01 10:20:00 [async_llm.py:563] Aborted request(s) b.
";
    let sink = parse(log);
    // `a` is written when the log passes 10:10:00; `b` ends by its abort; `c` is written at the end.
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.request_id.as_str(), r.status)).collect();
    assert_eq!(rows, [("a", Status::Unknown), ("b", Status::Unknown), ("c", Status::Unknown)]);
    assert_eq!(sink.diagnostics, [], "the late abort of an already written request is not an error");
}

#[test]
fn json_records_of_0_32_carry_year_and_milliseconds() {
    let log = r#"{"asctime": "2026-05-12 08:01:39,331", "levelname": "INFO", "name": "vllm.entrypoints.serve.utils.request_logger", "processName": "APIServer", "process": 1, "message": "Received request chatcmpl-1: params: SamplingParams(n=1, max_tokens=64), lora_request: None."}
{"asctime": "2026-05-12 08:01:39,400", "levelname": "INFO", "name": "vllm.v1.engine.async_llm", "processName": "APIServer", "process": 1, "message": "Added request chatcmpl-1-0a1b2c3d."}
{"asctime": "2026-05-12 08:01:49,000", "levelname": "INFO", "name": "vllm.v1.metrics.loggers", "processName": "APIServer", "process": 1, "message": "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%"}
{"asctime": "2026-05-12 08:01:50", "levelname": "INFO", "message": "#;
    let (sink, report) =
        parse_with(log, ParseOptions { utc_offset: "+02:00".parse().unwrap(), ..Default::default() }, None);
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2026, YearSource::Record)));
    assert_eq!(sink.requests.len(), 1);
    assert_eq!(sink.requests[0].arrival_time, Some(utc(2026, 5, 12, 6, 1, 39) + 331_000_000));
    assert_eq!(sink.requests[0].max_tokens, Some(64));
    assert_eq!(sink.samples.len(), 5);
    assert_eq!(sink.samples[0].instance.as_deref(), Some("engine-0"));
    let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
    assert_eq!(kinds, [(4, DiagnosticKind::MalformedRecord)]);
    assert_eq!(VllmLog.detect(log.as_bytes()), Some(Confidence::High));
}

#[test]
fn access_lines_are_counted_by_endpoint_and_status() {
    let log = r#"INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=1) INFO:     127.0.0.1:2 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:3 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
INFO:     10.0.0.9:4 - "GET /metrics HTTP/1.1" 200 OK
"#;
    let (sink, report) = parse_with(log, ParseOptions::default(), Some(2025));
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests.len(), 0);
    assert_eq!(
        report.details["http_responses"],
        serde_json::json!({"GET /metrics 200": 1, "POST /v1/chat/completions 200": 2, "POST /v1/completions 500": 1})
    );
}

#[test]
fn an_access_line_goes_to_the_only_request_that_can_own_it() {
    let log = r#"INFO 02-02 09:05:41 async_llm_engine.py:431] Received request a: prompt: None, prefix_pos: None,sampling params: SamplingParams(n=1, max_tokens=5), prompt token ids: [1], lora_request: None.
INFO:     127.0.0.1:46374 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
INFO 02-02 09:05:42 async_llm_engine.py:110] Finished request a.
INFO 02-02 09:05:43 async_llm_engine.py:431] Received request b: prompt: None, prefix_pos: None,sampling params: SamplingParams(n=1, max_tokens=5), prompt token ids: [1], lora_request: None.
INFO 02-02 09:05:43 async_llm_engine.py:431] Received request c: prompt: None, prefix_pos: None,sampling params: SamplingParams(n=1, max_tokens=5), prompt token ids: [1], lora_request: None.
INFO:     127.0.0.1:46375 - "POST /v1/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:46376 - "GET /metrics HTTP/1.1" 200 OK
"#;
    let (sink, report) = parse_with(log, ParseOptions { year: Some(2024), ..Default::default() }, None);
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.request_id.as_str(), r.http_status, r.status)).collect();
    // `a` was alone: its 500 is its own and marks it failed. `b` and `c` were both open: the 200 names neither.
    assert_eq!(rows, [("a", Some(500), Status::Error), ("b", None, Status::Unknown), ("c", None, Status::Unknown)]);
    assert_eq!(report.details["http_statuses_joined"], serde_json::json!(1));
}

#[test]
fn detection() {
    let v1 = b"(APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s";
    assert_eq!(VllmLog.detect(v1), Some(Confidence::High));
    assert_eq!(
        VllmLog.detect(b"# comment\nINFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request x.\n"),
        Some(Confidence::High)
    );
    assert_eq!(VllmLog.detect(b"INFO 01-17 03:11:25 [my_app.py:1] hello\n"), Some(Confidence::Low));
    assert_eq!(VllmLog.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
    assert_eq!(VllmLog.detect(br#"{"timestamp": 0, "input_length": 1}"#), None);
}

#[test]
fn prompts_and_token_ids_never_reach_rows() {
    let log = "INFO 02-02 09:05:41 async_llm_engine.py:431] Received request cmpl-1: prompt: 'CANARY secret text', prefix_pos: None,sampling params: SamplingParams(n=1, max_tokens=5), prompt token ids: [424242, 424243], lora_request: None.\n";
    let sink = parse(log);
    let rendered = format!("{:?}", sink.requests);
    assert!(!rendered.contains("CANARY") && !rendered.contains("424242"), "{rendered}");
    assert_eq!(sink.requests[0].input_tokens, Some(2));
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..500)) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "x.log", options: &options, modified: Some(infertrace_adapter::time::civil_to_nanos(2025, 6, 1, (0, 0, 0), UtcOffset::UTC).unwrap()), sidecars: None };
        let mut sink = CollectSink::default();
        VllmLog.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
        let _ = VllmLog.detect(&bytes);
    }

    #[test]
    fn never_panics_on_mutated_records(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..10), generation in 0usize..Generation::ALL.len()) {
        let mut text = Vec::new();
        write_log(&mut text, Generation::ALL[generation], LogOptions { requests: 6, prompt_tokens: (1, 40), seed: 3 }).unwrap();
        let text = infertrace_adapter::testing::mutate(text, &edits);
        let options = ParseOptions { year: Some(2025), ..ParseOptions::default() };
        let ctx = ParseContext { source_file: "x.log", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        VllmLog.parse(&mut &text[..], &ctx, &mut sink).unwrap();
    }
}

/// Statistics lines of every generation, as a lead-in, `Key: value` fields (joined by `, `) and an ending, with the
/// values each field gives, written by hand from the format strings in `log/line.rs`.
/// `(lead-in, fields, ending, values)`.
type StatsGeneration = (&'static str, Vec<&'static str>, &'static str, Vec<(&'static str, f64)>);

fn stats_generations() -> Vec<StatsGeneration> {
    use metrics::*;
    let v0 = vec![
        "Avg prompt throughput: 1.5 tokens/s",
        "Avg generation throughput: 2.5 tokens/s",
        "Running: 3 reqs",
        "Swapped: 4 reqs",
        "Pending: 5 reqs",
        "GPU KV cache usage: 6.0%",
        "CPU KV cache usage: 7.0%",
    ];
    let v0_values = vec![
        (PROMPT_THROUGHPUT_TPS, 1.5),
        (GENERATION_THROUGHPUT_TPS, 2.5),
        (REQUESTS_RUNNING, 3.0),
        (REQUESTS_SWAPPED, 4.0),
        (REQUESTS_WAITING, 5.0),
        (KV_CACHE_USAGE, 0.06),
        (CPU_KV_CACHE_USAGE, 0.07),
    ];
    let v1 = vec![
        "Avg prompt throughput: 10.8 tokens/s",
        "Avg generation throughput: 34.3 tokens/s",
        "Running: 2 reqs",
        "Waiting: 1 reqs",
        "GPU KV cache usage: 0.5%",
        "Prefix cache hit rate: 85.0%",
    ];
    let v1_values = vec![
        (PROMPT_THROUGHPUT_TPS, 10.8),
        (GENERATION_THROUGHPUT_TPS, 34.3),
        (REQUESTS_RUNNING, 2.0),
        (REQUESTS_WAITING, 1.0),
        (KV_CACHE_USAGE, 0.005),
        (PREFIX_CACHE_HIT_RATE, 0.85),
    ];
    vec![
        ("", v0.clone(), "", v0_values.clone()),
        ("", v0, ".", v0_values),
        (
            "",
            vec!["Prefix cache hit rate: GPU: 12.50%", "CPU: 25.00%"],
            "",
            vec![(PREFIX_CACHE_HIT_RATE, 0.125), (CPU_PREFIX_CACHE_HIT_RATE, 0.25)],
        ),
        (
            "Speculative metrics: ",
            vec![
                "Draft acceptance rate: 0.651",
                "System efficiency: 0.570",
                "Number of speculative tokens: 5",
                "Number of accepted tokens: 651",
                "Number of draft tokens tokens: 1000",
                "Number of emitted tokens tokens: 700",
            ],
            ".",
            vec![(SPEC_ACCEPT_RATE, 0.651), (SPEC_ACCEPTED_TOKENS, 651.0), (SPEC_DRAFTED_TOKENS, 1000.0)],
        ),
        ("", vec!["Running: 3 reqs", "Waiting: 1 reqs"], " ", vec![(REQUESTS_RUNNING, 3.0), (REQUESTS_WAITING, 1.0)]),
        ("", v1.clone(), "", v1_values.clone()),
        ("Engine 000: ", v1, "", v1_values),
        (
            "2 Engines Aggregated: ",
            vec![
                "Avg prompt throughput: 1.5 tokens/s",
                "Avg generation throughput: 2.5 tokens/s",
                "Running: 4 reqs",
                "Waiting: 5 reqs",
                "Deferred: 6 reqs",
                "KV fetch: 1 waiting to start, 2 in progress, 3 completed waiting",
                "Preemptions: 7",
                "XPU KV cache usage: 12.5%",
                "Prefix cache hit rate: 50.0%",
                "Corrupted: 1 reqs",
                "External prefix cache hit rate: 25.0%",
                "MM cache hit rate: 75.0%",
            ],
            "",
            vec![
                (PROMPT_THROUGHPUT_TPS, 1.5),
                (GENERATION_THROUGHPUT_TPS, 2.5),
                (REQUESTS_RUNNING, 4.0),
                (REQUESTS_WAITING, 5.0),
                (REQUESTS_DEFERRED, 6.0),
                (KV_FETCH_WAITING, 1.0),
                (KV_FETCH_IN_PROGRESS, 2.0),
                (KV_FETCH_COMPLETED_WAITING, 3.0),
                (PREEMPTIONS, 7.0),
                (KV_CACHE_USAGE, 0.125),
                (PREFIX_CACHE_HIT_RATE, 0.5),
                (REQUESTS_CORRUPTED, 1.0),
                (EXTERNAL_PREFIX_CACHE_HIT_RATE, 0.25),
                (MM_CACHE_HIT_RATE, 0.75),
            ],
        ),
        (
            "SpecDecoding metrics: ",
            vec![
                "Draft acceptance rate: 60.0%",
                "Mean acceptance length: 2.20",
                "Accepted: 120 tokens",
                "Drafted: 200 tokens",
                "Per-position acceptance rate: 0.800, 0.400",
            ],
            "",
            vec![
                (SPEC_ACCEPT_RATE, 0.6),
                (SPEC_ACCEPT_LENGTH, 2.2),
                (SPEC_ACCEPTED_TOKENS, 120.0),
                (SPEC_DRAFTED_TOKENS, 200.0),
            ],
        ),
        (
            "SpecDecoding metrics: ",
            vec![
                "Mean acceptance length: 2.63",
                "Accepted throughput: 76.80 tokens/s",
                "Drafted throughput: 235.49 tokens/s",
                "Accepted: 768 tokens",
                "Drafted: 2355 tokens",
                "Per-position acceptance rate: 0.700, 0.560, 0.372",
                "Avg Draft acceptance rate: 32.6%",
            ],
            "",
            vec![
                (SPEC_ACCEPT_LENGTH, 2.63),
                (SPEC_ACCEPTED_TPS, 76.8),
                (SPEC_DRAFTED_TPS, 235.49),
                (SPEC_ACCEPTED_TOKENS, 768.0),
                (SPEC_DRAFTED_TOKENS, 2355.0),
                (SPEC_ACCEPT_RATE, 0.326),
            ],
        ),
    ]
}

/// An unknown `Key: value` field: a name no release writes, and a value in one of the shapes new fields take.
fn unknown_field() -> impl Strategy<Value = (String, String)> {
    let name = "Xnew( [a-z]{1,8}){0,2}";
    let value = prop_oneof![
        Just("11.3 TF/s/GPU 772.8 GB/s/GPU".to_owned()),
        Just("386.7 ms".to_owned()),
        Just("42".to_owned()),
        Just("9.5%".to_owned()),
        Just("3 reqs".to_owned()),
        Just("True".to_owned()),
    ];
    (name, value)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Unknown fields inserted anywhere among a statistics line's fields, or appended, of any generation: every
    /// known value is still read, and each unknown field is counted by name in the drift report.
    #[test]
    fn unknown_stats_fields_anywhere_leave_every_known_value_read(
        generation in 0..10usize,
        inserted in proptest::collection::vec((0..16usize, unknown_field()), 1..4),
    ) {
        let (lead_in, fields, ending, expected) = &stats_generations()[generation];
        let mut all: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
        let mut names: std::collections::BTreeMap<String, u64> = Default::default();
        for (at, (name, value)) in &inserted {
            all.insert(at % (all.len() + 1), format!("{name}: {value}"));
            *names.entry(name.clone()).or_default() += 1;
        }
        let line = format!("INFO 11-20 10:00:00 [loggers.py:123] {lead_in}{}{ending}\n", all.join(", "));
        let (sink, _) = parse_with(&line, ParseOptions { year: Some(2025), ..ParseOptions::default() }, None);
        prop_assert!(sink.diagnostics.is_empty(), "{line}: {:?}", sink.diagnostics);
        let read: Vec<(&str, f64)> = sink.samples.iter().map(|s| (&*s.metric, s.value)).collect();
        let mut want: Vec<(&str, f64)> = expected.clone();
        let mut got = read.clone();
        want.sort_by(|a, b| a.0.cmp(b.0));
        got.sort_by(|a, b| a.0.cmp(b.0));
        prop_assert_eq!(got, want, "{}", line);
        prop_assert_eq!(&sink.drift.as_ref().unwrap().unknown_fields, &names, "{}", line);
    }

    /// Unknown fields inserted anywhere among a `Received request` line's fields of any generation, and unknown
    /// parameters anywhere in its `SamplingParams`: `max_tokens` and the prompt's token count are still read, and the
    /// unknown fields are counted by name.
    #[test]
    fn unknown_request_fields_anywhere_leave_max_tokens_and_the_prompt_read(
        generation in 0..8usize,
        fields_in in proptest::collection::vec((0..8usize, "xnew_[a-z]{1,8}", prop_oneof![Just("None"), Just("'text, with: commas'"), Just("[1, 2]"), Just("Thing(a=1, b=[2, 3])")]), 0..3),
        params_in in proptest::collection::vec((0..8usize, "xnew_[a-z]{1,8}", prop_oneof![Just("None"), Just("0.5"), Just("Thing(a=1, b=[2, 3])"), Just("{'k': 'v, w'}")]), 0..3),
    ) {
        let mut params = vec!["n=1", "temperature=0.7", "max_tokens=77", "min_tokens=0"].into_iter().map(str::to_owned).collect::<Vec<_>>();
        for (at, name, value) in &params_in {
            params.insert(at % (params.len() + 1), format!("{name}={value}"));
        }
        let sampling = format!("SamplingParams({})", params.join(", "));
        let ids = "[11, 12, 13, 14, 15]";
        let prompt = "prompt: 'hi, params: no'".to_owned();
        // (head, fields, whether the line logs max_tokens, whether it logs the prompt's ids), by the format strings
        // of `log/line.rs`.
        let (head, mut fields, has_max, has_ids): (&str, Vec<String>, bool, bool) = match generation {
            0 => ("Received request cmpl-7: ", vec![prompt, format!("sampling params: {sampling}"), format!("prompt token ids: {ids}")], true, true),
            1 => ("Received request cmpl-7: ", vec![prompt, "prefix_pos: None".to_owned(), format!("sampling_params: {sampling}"), format!("prompt_token_ids: {ids}"), "lora_request: None".to_owned()], true, true),
            2 => ("Received request cmpl-7: ", vec![prompt, format!("params: {sampling}"), format!("prompt_token_ids: {ids}"), "lora_request: None".to_owned()], true, true),
            3 => ("Received request cmpl-7: ", vec![prompt, format!("params: {sampling}"), format!("prompt_token_ids: {ids}"), "lora_request: None".to_owned(), "prompt_adapter_request: None".to_owned()], true, true),
            4 => ("Received request cmpl-7: ", vec![prompt, format!("params: {sampling}"), format!("prompt_token_ids: {ids}"), "prompt_embeds shape: None".to_owned(), "lora_request: None".to_owned(), "prompt_adapter_request: None".to_owned()], true, true),
            5 => ("Received request cmpl-7: ", vec![prompt, format!("params: {sampling}"), format!("prompt_token_ids: {ids}"), "prompt_embeds shape: None".to_owned(), "lora_request: None".to_owned()], true, true),
            // 0.11.1+: the INFO line has no prompt; the DEBUG details line has no parameters.
            6 => ("Received request cmpl-7: ", vec![format!("params: {sampling}"), "lora_request: None".to_owned()], true, false),
            _ => ("Request cmpl-7 details: ", vec![prompt, format!("prompt_token_ids: {ids}"), "prompt_embeds shape: None".to_owned()], false, true),
        };
        let mut names: std::collections::BTreeMap<String, u64> = Default::default();
        let first = usize::from(fields[0].starts_with("prompt:"));
        for (at, name, value) in &fields_in {
            // After the prompt, which every generation that logs it writes first.
            fields.insert(first + at % (fields.len() + 1 - first), format!("{name}: {value}"));
            *names.entry(name.clone()).or_default() += 1;
        }
        let line = format!("INFO 11-20 10:00:00 [async_llm_engine.py:1] {head}{}.\n", fields.join(", "));
        let (sink, _) = parse_with(&line, ParseOptions { year: Some(2025), ..ParseOptions::default() }, None);
        prop_assert!(sink.diagnostics.is_empty(), "{line}: {:?}", sink.diagnostics);
        prop_assert_eq!(sink.requests.len(), 1);
        prop_assert_eq!(sink.requests[0].max_tokens, has_max.then_some(77), "{}", line);
        prop_assert_eq!(sink.requests[0].input_tokens, has_ids.then_some(5), "{}", line);
        let counted = sink.drift.as_ref().unwrap().unknown_fields.clone();
        prop_assert_eq!(counted, names, "{}", line);
    }
}
