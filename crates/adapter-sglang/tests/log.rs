//! `sglang-log` end to end: generated logs of every generation, clocks, ranks and robustness.

use infertrace_adapter::time::civil_to_nanos;
use infertrace_adapter::{
    Adapter, CollectSink, Confidence, DiagnosticKind, ParseContext, ParseOptions, ParseReport, UtcOffset,
};
use infertrace_adapter_sglang::SglangLog;
use infertrace_adapter_sglang::generate::{Generation, write_log};
use infertrace_schema::{YearSource, metrics};
use proptest::prelude::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    civil_to_nanos(y, mo, d, (h, mi, s), UtcOffset::UTC).unwrap()
}

fn parse(text: &str, options: ParseOptions, modified: Option<i64>) -> (CollectSink, ParseReport) {
    let ctx = ParseContext { source_file: "sglang.log", options: &options, modified, sidecars: None };
    let mut sink = CollectSink::default();
    let report = SglangLog.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

/// Within a second of the last instant nanoseconds hold (2262-04-11 23:47:16.854775807 UTC), adding a line's
/// milliseconds overflowed: the line's time is out of range, said so, not wrapped.
#[test]
fn milliseconds_past_the_last_representable_instant_are_out_of_range() {
    let log = "[2262-04-11 23:47:16.900 DP0 TP0] Decode batch, #running-req: 3, #token: 10, token usage: 0.50, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n\
               [2262-04-11 23:47:16.800 DP0 TP0] Decode batch, #running-req: 2, #token: 10, token usage: 0.50, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n";
    let (sink, _) = parse(log, ParseOptions::default(), None);
    let kinds: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
    assert_eq!(kinds, [(1, "invalid-value"), (1, "missing-field")]);
    // The second line's time fits: 16.8 s is before 16.854775807 s.
    assert!(sink.samples.iter().all(|s| s.source_line == Some(2) && s.time == 9_223_372_036_800_000_000));
    assert!(!sink.samples.is_empty());
}

#[test]
fn generated_logs_of_every_generation_parse_completely() {
    for generation in Generation::ALL {
        let mut bytes = Vec::new();
        let expected = write_log(&mut bytes, generation, 90, 4).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(SglangLog.detect(text.as_bytes()), Some(Confidence::High), "{generation:?}");
        let (sink, report) = parse(&text, ParseOptions::default(), Some(utc(2025, 3, 14, 12, 0, 0)));
        assert_eq!(sink.diagnostics, [], "{generation:?}");
        assert_eq!(report.lines, expected.lines, "{generation:?}");
        assert_eq!(sink.samples.len() as u64, expected.samples, "{generation:?}");
        assert_eq!(sink.requests.len() as u64, expected.requests, "{generation:?}");
        assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)), "{generation:?}");
        let prefills = sink.samples.iter().filter(|s| &*s.metric == metrics::BATCH_REQUESTS).count() as u64;
        assert_eq!(prefills, expected.prefill_lines, "{generation:?}");
    }
}

#[test]
fn data_parallel_ranks_stay_apart_and_milliseconds_count() {
    let log = "[2026-04-05 09:00:00.250 DP0 TP0] Decode batch, #running-req: 3, #token: 10, token usage: 0.50, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n\
               [2026-04-05 09:00:00.500 DP1 TP0] Decode batch, #running-req: 4, #token: 10, token usage: 0.25, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n";
    let options = ParseOptions { utc_offset: "+08:00".parse().unwrap(), ..Default::default() };
    let (sink, report) = parse(log, options, None);
    let running: Vec<_> = sink
        .samples
        .iter()
        .filter(|s| &*s.metric == metrics::REQUESTS_RUNNING)
        .map(|s| (s.instance.as_deref(), s.value, s.time))
        .collect();
    assert_eq!(
        running,
        [
            (Some("DP0 TP0"), 3.0, utc(2026, 4, 5, 1, 0, 0) + 250_000_000),
            (Some("DP1 TP0"), 4.0, utc(2026, 4, 5, 1, 0, 0) + 500_000_000)
        ]
    );
    assert_eq!(report.year, None, "dated envelopes need no assumption");
}

/// The fold reuses one sample row per instance (at most 64 kept) and copies short rank tags: every sample still
/// carries its own line's instance, time, line and values, for tags of any length and any number of instances.
#[test]
fn every_sample_keeps_its_own_instance_time_and_line() {
    let decode = |ranks: &str, second: u32, running: u32| {
        format!(
            "[2026-04-05 09:00:{second:02}.000{ranks}] Decode batch, #running-req: {running}, #token: 10, token usage: 0.50, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n"
        )
    };
    // 70 data-parallel ranks, then the first again, tags longer than the copy (32 bytes), none, and a line
    // re-logged by a parent logger (the envelope found past a prefix).
    let long = " DP1 TP3 EP2 PP1 ATTN_CP0 MOE_DP1";
    let mut log: String = (0..70).map(|i| decode(&format!(" DP{i} TP0"), 0, i)).collect();
    log += &decode(" DP0 TP0", 1, 100);
    log += &decode(long, 2, 101);
    log += &decode("", 3, 102);
    log += &format!("2025-03-08 02:04:48,693 - __main__ - INFO - {}", decode(" TP7", 4, 103));
    log += &decode(long, 5, 104);
    log += &decode(" DP69 TP0", 6, 105);
    let (sink, _) = parse(&log, ParseOptions::default(), None);
    assert_eq!(sink.diagnostics, []);
    let at = |second: u32| utc(2026, 4, 5, 9, 0, second);
    let mut expected: Vec<(Option<String>, f64, i64, u64)> =
        (0..70u32).map(|i| (Some(format!("DP{i} TP0")), f64::from(i), at(0), u64::from(i) + 1)).collect();
    let long = Some(long.trim().to_owned());
    expected.extend([
        (Some("DP0 TP0".to_owned()), 100.0, at(1), 71),
        (long.clone(), 101.0, at(2), 72),
        (None, 102.0, at(3), 73),
        (Some("TP7".to_owned()), 103.0, at(4), 74),
        (long, 104.0, at(5), 75),
        (Some("DP69 TP0".to_owned()), 105.0, at(6), 76),
    ]);
    let running: Vec<_> = sink
        .samples
        .iter()
        .filter(|s| &*s.metric == metrics::REQUESTS_RUNNING)
        .map(|s| (s.instance.as_deref().map(str::to_owned), s.value, s.time, s.source_line.unwrap()))
        .collect();
    assert_eq!(running, expected);
    // Five samples a line (`cuda graph` is not kept), each with its line's own values in the order written.
    assert_eq!(sink.samples.len(), 76 * 5);
    let line_72: Vec<_> =
        sink.samples.iter().filter(|s| s.source_line == Some(72)).map(|s| (&*s.metric, s.value)).collect();
    assert_eq!(
        line_72,
        [
            (metrics::REQUESTS_RUNNING, 101.0),
            (metrics::KV_CACHE_TOKENS, 10.0),
            (metrics::KV_CACHE_USAGE, 0.5),
            (metrics::GENERATION_THROUGHPUT_TPS, 1.0),
            (metrics::REQUESTS_WAITING, 0.0),
        ]
    );
}

#[test]
fn time_only_envelopes_take_the_file_date_and_cross_midnight() {
    let log = "[23:59:58 TP0] Decode batch. #running-req: 1, #token: 1, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0\n\
               [00:00:02 TP0] Decode batch. #running-req: 2, #token: 1, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0\n";
    let (sink, report) = parse(log, ParseOptions::default(), Some(utc(2024, 9, 1, 10, 0, 0)));
    let times: Vec<_> =
        sink.samples.iter().filter(|s| &*s.metric == metrics::REQUESTS_RUNNING).map(|s| s.time).collect();
    assert_eq!(times, [utc(2024, 9, 1, 23, 59, 58), utc(2024, 9, 2, 0, 0, 2)]);
    assert_eq!(report.year.map(|y| (y.year, y.source)), Some((2024, YearSource::FileModified)));
    let (sink, _) = parse(log, ParseOptions::default(), None);
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MissingField);
}

#[test]
fn lines_outside_the_envelope_are_diagnostics_and_pre_0_3_lines_are_read() {
    let log = "# source: https://example.invalid\nTraceback (most recent call last):\nnew fill batch. #seq: 1. #cached_token: 757. #new_token: 1. #remaining_req: 4. #running_req: 2. tree_cache_hit_rate: 80.83%.\n";
    let (sink, _) = parse(log, ParseOptions::default(), None);
    let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
    // The pre-0.3 line has no time: its values cannot become samples, and that is said.
    assert_eq!(
        kinds,
        [(1, DiagnosticKind::NotARecord), (2, DiagnosticKind::NotARecord), (3, DiagnosticKind::MissingField)]
    );
    assert_eq!(SglangLog.detect(b"new fill batch. #seq: 1. #cached_token: 7."), Some(Confidence::High));
    assert_eq!(SglangLog.detect(b"INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request x."), None);
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "x", options: &options, modified: Some(0), sidecars: None };
        for adapter in [&SglangLog as &dyn Adapter, &infertrace_adapter_sglang::SglangRequestMetrics, &infertrace_adapter_sglang::SglangMetrics] {
            let mut sink = CollectSink::default();
            adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
            let _ = adapter.detect(&bytes);
        }
    }

    #[test]
    fn never_panics_on_mutated_lines(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..10), generation in 0usize..Generation::ALL.len()) {
        let mut bytes = Vec::new();
        write_log(&mut bytes, Generation::ALL[generation], 8, 2).unwrap();
        let bytes = infertrace_adapter::testing::mutate(bytes, &edits);
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "x", options: &options, modified: Some(0), sidecars: None };
        let mut sink = CollectSink::default();
        SglangLog.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    }
}

#[test]
fn request_logs_become_rows_joined_by_rid() {
    let log = "\
[2025-09-03 18:33:18] Receive: obj=GenerateReqInput(rid='a', text=None, input_ids=[1, 2, 3, 4], sampling_params={'max_new_tokens': 16})
[2025-09-03 18:33:18] Receive: obj=GenerateReqInput(rid='b', text='never finished', sampling_params={'max_new_tokens': 8})
[2025-09-03 18:33:20] Finish: obj=GenerateReqInput(rid='a', text=None), out={'text': 'secret', 'meta_info': {'id': 'a', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 4, 'completion_tokens': 10, 'cached_tokens': 3, 'e2e_latency': 2.0}}
{\"timestamp\": \"2025-09-03T18:33:21\", \"event\": \"request.finished\", \"rid\": \"c\", \"obj\": {\"received_time\": 1756924400.5}, \"out\": {\"meta_info\": {\"id\": \"c\", \"prompt_tokens\": 7, \"completion_tokens\": 1, \"finish_reason\": {\"type\": \"abort\", \"status_code\": 499}}}}
";
    let (sink, _) = parse(log, ParseOptions::default(), None);
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| {
            (
                r.request_id.as_str(),
                r.status,
                r.input_tokens,
                r.output_tokens,
                r.max_tokens,
                r.arrival_time,
                r.completion_time,
            )
        })
        .collect();
    let at = |s| utc(2025, 9, 3, 18, 33, s);
    assert_eq!(
        rows,
        [
            ("a", infertrace_schema::Status::Ok, Some(4), Some(10), Some(16), Some(at(18)), Some(at(20))),
            (
                "c",
                infertrace_schema::Status::Aborted,
                Some(7),
                Some(1),
                None,
                Some(1_756_924_400_500_000_000),
                Some(at(21))
            ),
            ("b", infertrace_schema::Status::Unknown, None, None, Some(8), Some(at(18)), None),
        ]
    );
    assert_eq!(sink.requests[0].cached_tokens, Some(3));
    assert_eq!(sink.requests[1].http_status, Some(499));
    assert!(!format!("{:?}", sink.requests).contains("secret"));
}

#[test]
fn time_stats_join_their_finish_line_and_old_durations_are_withheld() {
    let log = "[2025-07-02 10:15:00] Receive: obj=GenerateReqInput(rid='t-1', text='p', input_ids=None, sampling_params={'max_new_tokens': 32})\n\
[2025-07-02 10:15:01 TP0] Req Time Stats(rid=t-1, input len=24, output len=32, type=unified): queue_duration=0.00ms, forward_duration=1751451301412.53ms, start_time=0.0\n\
[2025-07-02 10:15:01] Finish: obj=GenerateReqInput(rid='t-1', text='p'), out={'text': 'a', 'meta_info': {'id': 't-1', 'finish_reason': {'type': 'length', 'length': 32}, 'prompt_tokens': 24, 'completion_tokens': 32, 'e2e_latency': 1.25}}\n\
[2025-07-02 10:15:02 DP1 TP0] Req Time Stats(rid=t-1, input len=24, output len=32, type=unified): queue_duration=1.00ms, forward_duration=2.00ms, start_time=5.000\n\
[2025-07-02 10:15:03 DP1 TP0] Req Time Stats(rid=t-2, bootstrap_room=7, input len=8, output len=2, type=decode): prealloc_queue_duration(3.00ms) = alloc_wait(1.00ms) + bootstrap(2.00ms) + other(0.00ms); transfer_duration=20.00ms; queue_duration=0.50ms, forward_duration=1600.00ms, start=9123.250\n";
    let (sink, report) = parse(log, ParseOptions::default(), None);
    let [late] = &sink.diagnostics[..] else { panic!("{:?}", sink.diagnostics) };
    assert_eq!((late.line, late.kind), (4, DiagnosticKind::Inconsistent));
    assert_eq!(report.details["req_time_stats_lines"], 3);
    assert_eq!(report.details["req_time_stats_unusable"], 1);

    let [t1, t2] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
    // The Finish line gives the outcome and latency; the unusable time stats add the instance and no duration.
    assert_eq!((t1.request_id.as_str(), t1.e2e_s, t1.queue_s), ("t-1", Some(1.25), None));
    assert_eq!((t1.instance.as_deref(), t1.output_tokens, t1.source_line), (Some("TP0"), Some(32), Some(3)));
    // A decode-server request known only from its time stats: durations by stage, no absolute start.
    assert_eq!((t2.request_id.as_str(), t2.status), ("t-2", infertrace_schema::Status::Unknown));
    assert_eq!((t2.queue_s, t2.decode_s, t2.kv_transfer_s), (Some(0.0005), Some(1.6), Some(0.02)));
    assert_eq!((t2.decode_instance.as_deref(), t2.arrival_time), (Some("DP1 TP0"), None));
    assert_eq!(t2.completion_time, Some(utc(2025, 7, 2, 10, 15, 3)));
    assert_eq!((t2.input_tokens, t2.output_tokens, t2.source_line), (Some(8), Some(2), Some(5)));
}

#[test]
fn access_lines_are_counted_by_endpoint_and_status_without_their_query() {
    let log = "[2025-09-03 18:33:18] INFO:     127.0.0.1:51234 - \"POST /generate HTTP/1.1\" 200 OK\n\
[2025-09-03 18:33:19] INFO:     10.0.0.2:40000 - \"GET /health?token=CANARY HTTP/1.1\" 503 Service Unavailable\n\
[2025-09-03 18:33:20] INFO:     127.0.0.1:51235 - \"POST /generate HTTP/1.1\" 200 OK\n";
    let (sink, report) = parse(log, ParseOptions::default(), None);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.details["http_responses"], serde_json::json!({"GET /health 503": 1, "POST /generate 200": 2}));
}

#[test]
fn time_stats_past_the_bound_are_written_alone_with_one_diagnostic() {
    // Time-stats lines of 16,386 requests whose Finish lines never come (request logging off), the first request
    // with two (its prefill and decode stages, the second after the second request's): line 16,386 makes 16,385
    // requests wait, one too many, so the oldest, by its first line (lines 1 and 3), is written alone at once, with
    // the one diagnostic; line 16,387 writes the next (line 2) alone, without another. The rest are written at the
    // end of the file, as always.
    let stats = |i: usize| {
        format!(
            "[2025-07-02 10:15:03 TP0] Req Time Stats(rid=r{i}, input len=8, output len=2, type=unified): \
             queue_duration=0.50ms, forward_duration=16.00ms, start_time=9123.250\n"
        )
    };
    let log: String = [1, 2, 1].into_iter().chain(3..=16_386).map(stats).collect();
    let (sink, report) = parse(&log, ParseOptions::default(), None);
    let [diagnostic] = &sink.diagnostics[..] else {
        panic!("{:?}", sink.diagnostics.iter().take(3).collect::<Vec<_>>())
    };
    assert_eq!((diagnostic.line, diagnostic.kind), (16_386, DiagnosticKind::Inconsistent));
    assert_eq!(
        diagnostic.message,
        "the time-stats lines of more than 16384 requests wait for their Finish line: the oldest are written alone (a \
         later Finish line gives such a request a second row)"
    );
    assert_eq!(report.details["req_time_stats_lines"], 16_387);
    assert_eq!(report.details["req_time_stats_written_alone"], 3, "lines, not requests");
    // Every request is one row, in the order written: the two written early first, then the rest at the end.
    assert_eq!(sink.requests.len(), 16_386);
    let ids: Vec<&str> = sink.requests[..3].iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2", "r3"]);
    assert_eq!(sink.requests[0].status, infertrace_schema::Status::Unknown);
}

/// Batch lines of every generation (reference `sglang.md` §2.2-2.3), as a head, `key: value` fields joined by
/// `, ` and an ending, with the values each gives, written by hand from the format strings in `log/batch.rs`.
/// `(envelope, head, fields, ending, values)`.
type BatchGeneration = (&'static str, &'static str, Vec<&'static str>, &'static str, Vec<(&'static str, f64)>);

fn batch_generations() -> Vec<BatchGeneration> {
    use metrics::*;
    let decode = vec![
        "#running-req: 32",
        "#token: 12345",
        "token usage: 0.12",
        "gen throughput (token/s): 1234.56",
        "#queue-req: 7",
    ];
    let decode_values = vec![
        (REQUESTS_RUNNING, 32.0),
        (KV_CACHE_TOKENS, 12345.0),
        (KV_CACHE_USAGE, 0.12),
        (GENERATION_THROUGHPUT_TPS, 1234.56),
        (REQUESTS_WAITING, 7.0),
    ];
    let prefill = vec![
        "#new-seq: 2",
        "#new-token: 896",
        "#cached-token: 128",
        "token usage: 0.05",
        "#running-req: 3",
        "#queue-req: 4",
    ];
    let prefill_values = vec![
        (BATCH_REQUESTS, 2.0),
        (BATCH_TOKENS, 896.0),
        (PREFILL_CACHED_TOKENS, 128.0),
        (KV_CACHE_USAGE, 0.05),
        (REQUESTS_RUNNING, 3.0),
        (REQUESTS_WAITING, 4.0),
    ];
    // (envelope, head, fields, ending, values); the envelope is put before the head.
    vec![
        ("[2025-03-03 17:53:04 TP0] ", "Decode batch. ", decode.clone(), "", decode_values.clone()),
        ("[2025-03-03 17:53:04 TP0] ", "Prefill batch. ", prefill.clone(), "", prefill_values.clone()),
        (
            "[04:40:55 TP0] ",
            "Prefill batch(mixed #running-req: 5). ",
            vec!["#new-seq: 2", "#new-token: 896", "#cached-token: 128", "cache hit rate: 12.50%", "#queue-req: 4"],
            "",
            vec![
                (REQUESTS_RUNNING, 5.0),
                (BATCH_REQUESTS, 2.0),
                (BATCH_TOKENS, 896.0),
                (PREFILL_CACHED_TOKENS, 128.0),
                (PREFIX_CACHE_HIT_RATE, 0.125),
                (REQUESTS_WAITING, 4.0),
            ],
        ),
        ("[2025-10-01 10:00:00 DP0 TP0 EP0] ", "Decode batch [12], ", decode.clone(), ", ", decode_values.clone()),
        ("[2026-05-28 00:11:09.816 DP0 TP0 EP0] ", "Decode batch, ", decode.clone(), ", ", decode_values.clone()),
        ("[2026-05-28 00:11:09.816 DP0 TP0 EP0] ", "Prefill batch, ", prefill.clone(), "", prefill_values.clone()),
        (
            "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] ",
            "Decode batch. ",
            decode,
            ", ",
            decode_values,
        ),
        (
            "2026-06-07 10:59:31,659 [INFO] sglang.srt.managers.scheduler_metrics_mixin: ",
            "Prefill batch, ",
            prefill,
            ",",
            prefill_values,
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Unknown `key: value` fields inserted anywhere among a batch line's fields, or appended, in any head
    /// generation and envelope: every known value is still read, and each unknown key is counted by name.
    #[test]
    fn unknown_batch_fields_anywhere_leave_every_known_value_read(
        generation in 0..8usize,
        inserted in proptest::collection::vec(
            (0..16usize, "xnew[a-z]{0,6}( [a-z]{1,6}){0,2}", prop_oneof![Just("5"), Just("0.25"), Just("True"), Just("12.5%")]),
            1..4,
        ),
    ) {
        let (envelope, head, fields, ending, expected) = &batch_generations()[generation];
        let mut all: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
        let mut names: std::collections::BTreeMap<String, u64> = Default::default();
        for (at, name, value) in &inserted {
            all.insert(at % (all.len() + 1), format!("{name}: {value}"));
            *names.entry(name.clone()).or_default() += 1;
        }
        let line = format!("{envelope}{head}{}{ending}\n", all.join(", "));
        let (sink, _) = parse(&line, ParseOptions { year: Some(2025), ..ParseOptions::default() }, None);
        prop_assert!(sink.diagnostics.is_empty(), "{line}: {:?}", sink.diagnostics);
        let mut got: Vec<(&str, f64)> = sink.samples.iter().map(|s| (&*s.metric, s.value)).collect();
        let mut want = expected.clone();
        got.sort_by(|a, b| a.0.cmp(b.0));
        want.sort_by(|a, b| a.0.cmp(b.0));
        prop_assert_eq!(got, want, "{}", line);
        prop_assert_eq!(&sink.drift.as_ref().unwrap().unknown_fields, &names, "{}", line);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A request's lines in every request-log generation (0.3.0–0.4.0 `in=…, out=…` at finish only; 0.4.1
    /// double-quoted strings and unquoted keys; 0.4.2+ Python reprs; 0.5.7+ JSON records), with unknown keys inserted
    /// anywhere in the request's sampling parameters and in `meta_info`: the rid, `max_new_tokens` and every
    /// `meta_info` count are still read, and the unknown `meta_info` keys are counted by name.
    #[test]
    fn unknown_request_keys_anywhere_leave_the_request_read(
        form in 0..4usize,
        in_obj in proptest::collection::vec((0..6usize, "xnew_[a-z]{1,8}"), 0..3),
        in_meta in proptest::collection::vec((0..8usize, "xnew_[a-z]{1,8}"), 0..3),
    ) {
        // How each form writes a key and a string.
        let (json, v041) = (form == 1, form == 2);
        let key = |k: &str| if json { format!("\"{k}\"") } else if v041 { k.to_owned() } else { format!("'{k}'") };
        let string = |t: &str| if json || v041 { format!("\"{t}\"") } else { format!("'{t}'") };
        let value = string("a, b: c");
        let mut sampling = vec![format!("{}: 0.7", key("temperature")), format!("{}: 128", key("max_new_tokens"))];
        let reason = if form == 3 { string("FINISH_LENGTH: 128") } else { format!("{{{}: {}}}", key("type"), string("length")) };
        let mut meta = vec![
            format!("{}: {}", key("id"), string("r-1")),
            format!("{}: {reason}", key("finish_reason")),
            format!("{}: 32", key("prompt_tokens")),
            format!("{}: 128", key("completion_tokens")),
            format!("{}: 12", key("cached_tokens")),
            format!("{}: 3.25", key("e2e_latency")),
        ];
        let mut names: std::collections::BTreeMap<String, u64> = Default::default();
        for (at, name) in &in_meta {
            // A key once per object, as SGLang writes them (a JSON object's repeated key is one entry).
            if names.contains_key(name) {
                continue;
            }
            meta.insert(at % (meta.len() + 1), format!("{}: [1, {value}]", key(name)));
            names.insert(name.clone(), 1);
        }
        for (at, name) in &in_obj {
            sampling.insert(at % (sampling.len() + 1), format!("{}: [1, {value}]", key(name)));
        }
        let (s, m) = (sampling.join(", "), meta.join(", "));
        let text = match form {
            0 => format!(
                "[2025-10-01 12:00:00] Receive: obj=GenerateReqInput(rid='r-1', text='a prompt, rid=no', input_ids=None, sampling_params={{{s}}})\n\
                 [2025-10-01 12:00:03] Finish: obj=GenerateReqInput(rid='r-1', text='a prompt'), out={{'text': 'x', 'meta_info': {{{m}}}}}\n"
            ),
            1 => format!(
                "{{\"timestamp\": \"2025-10-01T12:00:00\", \"event\": \"request.received\", \"rid\": \"r-1\", \"obj\": {{\"rid\": \"r-1\", \"sampling_params\": {{{s}}}}}}}\n\
                 {{\"timestamp\": \"2025-10-01T12:00:03.250\", \"event\": \"request.finished\", \"rid\": \"r-1\", \"obj\": {{\"rid\": \"r-1\"}}, \"out\": {{\"text\": \"x\", \"meta_info\": {{{m}}}}}}}\n"
            ),
            2 => format!(
                "[2025-10-01 12:00:00] Receive: obj=GenerateReqInput(rid=\"r-1\", text=\"a prompt, rid=no\", sampling_params={{{s}}})\n\
                 [2025-10-01 12:00:03] Finish: obj=GenerateReqInput(rid=\"r-1\", text=\"a prompt\"), out={{text: \"x\", meta_info: {{{m}}}}}\n"
            ),
            _ => format!(
                "[12:00:03 TP0] in=GenerateReqInput(text='a prompt, rid=no', sampling_params={{{s}}}, rid='r-1'), out={{'text': 'x', 'meta_info': {{{m}}}}}\n"
            ),
        };
        let (sink, _) = parse(&text, ParseOptions { year: Some(2025), ..ParseOptions::default() }, Some(utc(2025, 10, 1, 0, 0, 0)));
        prop_assert!(sink.diagnostics.is_empty(), "{text}: {:?}", sink.diagnostics);
        prop_assert_eq!(sink.requests.len(), 1, "{}", text);
        let r = &sink.requests[0];
        prop_assert_eq!(r.request_id.as_str(), "r-1");
        prop_assert_eq!(r.max_tokens, Some(128), "{}", text);
        prop_assert_eq!((r.input_tokens, r.output_tokens, r.cached_tokens), (Some(32), Some(128), Some(12)), "{}", text);
        prop_assert_eq!(r.e2e_s, Some(3.25));
        prop_assert_eq!(&sink.drift.as_ref().unwrap().unknown_fields, &names, "{}", text);
    }
}
