//! `merge` on small hand-built datasets: a server log and a client export of the same run.

use std::collections::BTreeMap;

use infertrace_schema::{EngineSample, RequestRow, Status, metrics};

use crate::merge::{MergeOptions, merge};
use crate::tests::{T0, write_open as write};

/// `T0` plus `n` milliseconds.
fn ms(n: i64) -> Option<i64> {
    Some(T0 + n * 1_000_000)
}

fn row(source: &str, id: &str) -> RequestRow {
    RequestRow { request_id: id.into(), source: source.into(), ..RequestRow::default() }
}

/// What the server logged: durations are derived from these instants by `merge`.
fn server() -> Vec<RequestRow> {
    vec![
        // Joins c1 by id. queue 0.1, prefill 0.4, ttft 0.5, decode 1.0, tpot 1.0 / 10 = 0.1, e2e 1.51.
        RequestRow {
            arrival_time: ms(10),
            scheduled_time: ms(110),
            first_token_time: ms(510),
            last_token_time: ms(1510),
            completion_time: ms(1520),
            input_tokens: Some(100),
            cached_tokens: Some(50),
            output_tokens: Some(11),
            instance: Some("i0".into()),
            status: Status::Ok,
            ..row("vllm-log", "req-1")
        },
        // Joins c2 by time: 2 ms apart, same token counts.
        RequestRow {
            arrival_time: ms(5002),
            input_tokens: Some(200),
            output_tokens: Some(21),
            status: Status::Ok,
            ..row("vllm-log", "cmpl-xyz")
        },
        // Alone.
        RequestRow { arrival_time: ms(100_000), input_tokens: Some(7), ..row("vllm-log", "cmpl-lonely") },
        // A made-up id equal to c4's: never joined by id, and arrivals 10 s apart.
        RequestRow {
            arrival_time: ms(60_000),
            input_tokens: Some(9),
            source_file: Some("logs/profile_export.log".into()),
            source_line: Some(5),
            ..row("vllm-log", "profile_export:5")
        },
    ]
}

/// What the client exported.
fn client() -> Vec<RequestRow> {
    vec![
        RequestRow {
            arrival_time: ms(0),
            first_token_time: ms(600),
            completion_time: ms(1600),
            input_tokens: Some(100),
            output_tokens: Some(11),
            status: Status::Ok,
            http_status: Some(200),
            ..row("aiperf", "req-1")
        },
        RequestRow {
            arrival_time: ms(5000),
            ttft_s: Some(0.3),
            input_tokens: Some(200),
            output_tokens: Some(21),
            status: Status::Error,
            ..row("aiperf", "x-2")
        },
        // 1 ms from cmpl-xyz but one output token more: not the same request.
        RequestRow { arrival_time: ms(5001), input_tokens: Some(200), output_tokens: Some(22), ..row("aiperf", "x-3") },
        RequestRow {
            arrival_time: ms(50_000),
            input_tokens: Some(9),
            source_file: Some("runs/profile_export.jsonl".into()),
            source_line: Some(5),
            ..row("aiperf", "profile_export:5")
        },
    ]
}

fn options() -> MergeOptions {
    MergeOptions { tolerance_ns: 500_000_000, token_slack: 0, client_sources: ["aiperf".to_owned()].into() }
}

#[test]
fn a_server_log_and_a_client_export_merge_by_id_then_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let sample = EngineSample {
        time: T0,
        source: "vllm-log".into(),
        metric: metrics::KV_CACHE_USAGE.into(),
        value: 0.5,
        ..EngineSample::default()
    };
    let server = write(&dir.path().join("server"), &server(), std::slice::from_ref(&sample));
    let client = write(&dir.path().join("client"), &client(), &[]);
    let merged = merge(&[server, client], &options()).unwrap();

    let r = &merged.record;
    let counts = |pairs: &[(&str, u64)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect::<BTreeMap<_, _>>();
    assert_eq!(r.rows_in, counts(&[("aiperf", 4), ("vllm-log", 4)]));
    assert_eq!((r.matched_by_id, r.matched_by_time, r.ambiguous, r.merged_requests), (1, 1, 0, 2));
    assert_eq!(r.unmatched, counts(&[("aiperf", 2), ("vllm-log", 2)]));
    assert_eq!(r.client_sources, ["aiperf"]);

    // Ordered by arrival: req-1 (0 ms), x-2 + cmpl-xyz (5000), x-3 (5001), c4 (50 s), s4 (60 s), lonely (100 s).
    let ids: Vec<(&str, &str)> = merged.requests.iter().map(|r| (r.request_id.as_str(), r.source.as_str())).collect();
    assert_eq!(
        ids,
        [
            ("req-1", "aiperf+vllm-log"),
            ("cmpl-xyz", "aiperf+vllm-log"),
            ("x-3", "aiperf"),
            ("profile_export:5", "aiperf"),
            ("profile_export:5", "vllm-log"),
            ("cmpl-lonely", "vllm-log"),
        ]
    );

    let first = &merged.requests[0];
    // Client-observed: arrival, first token, completion, TTFT, e2e, status, HTTP status.
    assert_eq!((first.arrival_time, first.first_token_time, first.completion_time), (ms(0), ms(600), ms(1600)));
    assert_eq!((first.ttft_s, first.e2e_s), (Some(0.6), Some(1.6)));
    assert_eq!((first.status, first.http_status), (Status::Ok, Some(200)));
    // Server-observed: scheduling, queue, prefill, decode; TPOT too, as the client saw no last token.
    assert_eq!(first.scheduled_time, ms(110));
    assert_eq!(
        (first.queue_s, first.prefill_s, first.decode_s, first.tpot_s),
        (Some(0.1), Some(0.4), Some(1.0), Some(0.1))
    );
    assert_eq!((first.input_tokens, first.cached_tokens, first.output_tokens), (Some(100), Some(50), Some(11)));
    assert_eq!(first.instance.as_deref(), Some("i0"));
    assert_eq!(
        first.column_sources.as_deref(),
        Some(
            "request_id=vllm-log;instance=vllm-log;arrival_time=aiperf;scheduled_time=vllm-log;\
             first_token_time=aiperf;last_token_time=vllm-log;completion_time=aiperf;queue_s=vllm-log;\
             prefill_s=vllm-log;ttft_s=aiperf;tpot_s=vllm-log;decode_s=vllm-log;e2e_s=aiperf;\
             input_tokens=vllm-log;cached_tokens=vllm-log;output_tokens=vllm-log;status=aiperf;http_status=aiperf"
        )
    );

    // The time-joined pair: the client's error status and TTFT, the server's id.
    let second = &merged.requests[1];
    assert_eq!((second.status, second.ttft_s, second.arrival_time), (Status::Error, Some(0.3), ms(5000)));
    // Rows of one source keep their columns' source implicit.
    assert_eq!(merged.requests[2].column_sources, None);
    assert_eq!(merged.samples, [sample]);

    assert_eq!(r.columns["ttft_s"], counts(&[("aiperf", 2)]));
    assert_eq!(r.columns["request_id"], counts(&[("vllm-log", 2)]));
}

#[test]
fn time_matches_are_taken_nearest_first_and_counted_ambiguous() {
    let dir = tempfile::tempdir().unwrap();
    let at = |source: &str, id: &str, t: i64| RequestRow {
        arrival_time: ms(t),
        input_tokens: Some(10),
        output_tokens: Some(5),
        ..row(source, id)
    };
    // Pairs within 500 ms: s1–c1 60, s1–c2 40, s2–c1 110, s2–c2 10. Nearest first: s2–c2, then s1–c2 is taken,
    // so s1–c1. A greedy pass in row order would have paired s1 with c2 and left s2 with c1.
    let client = write(&dir.path().join("c"), &[at("aiperf", "c1", 0), at("aiperf", "c2", 100)], &[]);
    let server = write(&dir.path().join("s"), &[at("vllm-log", "s1", 60), at("vllm-log", "s2", 110)], &[]);
    let merged = merge(&[client, server], &options()).unwrap();
    let pairs: Vec<(&str, Option<i64>)> =
        merged.requests.iter().map(|r| (r.request_id.as_str(), r.arrival_time)).collect();
    // Server ids, client arrivals.
    assert_eq!(pairs, [("s1", ms(0)), ("s2", ms(100))]);
    assert_eq!((merged.record.matched_by_time, merged.record.ambiguous), (2, 2));
}

#[test]
fn rows_without_a_common_token_count_or_beyond_the_tolerance_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let client = vec![
        RequestRow { arrival_time: ms(0), input_tokens: Some(10), ..row("aiperf", "c1") },
        RequestRow { arrival_time: ms(1000), input_tokens: Some(10), ..row("aiperf", "c2") },
    ];
    let server = vec![
        // Shares no count with c1.
        RequestRow { arrival_time: ms(1), output_tokens: Some(3), ..row("vllm-log", "s1") },
        // 501 ms from c2.
        RequestRow { arrival_time: ms(1501), input_tokens: Some(10), ..row("vllm-log", "s2") },
    ];
    let c = write(&dir.path().join("c"), &client, &[]);
    let s = write(&dir.path().join("s"), &server, &[]);
    let merged = merge(&[c, s], &options()).unwrap();
    assert_eq!(merged.requests.len(), 4);
    assert_eq!(merged.record.merged_requests, 0);
    // With a 2-token slack and a 600 ms tolerance, s2 joins c2 (and s1 still shares no count).
    let c = write(&dir.path().join("c2"), &client, &[]);
    let s = write(&dir.path().join("s2"), &server, &[]);
    let wide = MergeOptions { tolerance_ns: 600_000_000, token_slack: 2, ..options() };
    let merged = merge(&[c, s], &wide).unwrap();
    assert_eq!(merged.record.matched_by_time, 1);
    let joined: Vec<(&str, Option<i64>)> = merged
        .requests
        .iter()
        .filter(|r| r.source == "aiperf+vllm-log")
        .map(|r| (r.request_id.as_str(), r.arrival_time))
        .collect();
    assert_eq!(joined, [("s2", ms(1000))]);
}

#[test]
fn every_column_of_either_side_survives_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let full = RequestRow {
        request_id: "r".into(),
        source: "vllm-log".into(),
        model: Some("m".into()),
        session_id: Some("s".into()),
        turn: Some(2),
        instance: Some("i".into()),
        prefill_instance: Some("p".into()),
        decode_instance: Some("d".into()),
        arrival_time: ms(1),
        scheduled_time: ms(2),
        first_token_time: ms(3),
        prefill_end_time: ms(3),
        decode_start_time: ms(4),
        last_token_time: ms(5),
        completion_time: ms(6),
        queue_s: Some(0.25),
        prefill_s: Some(0.5),
        ttft_s: Some(0.75),
        tpot_s: Some(0.125),
        decode_s: Some(1.5),
        e2e_s: Some(2.5),
        kv_transfer_s: Some(0.0625),
        kv_transfer_bytes: Some(1 << 40),
        input_tokens: Some(10),
        cached_tokens: Some(8),
        cached_tokens_gpu: Some(4),
        cached_tokens_cpu: Some(2),
        cached_tokens_disk: Some(1),
        cached_tokens_remote: Some(1),
        output_tokens: Some(7),
        reasoning_tokens: Some(3),
        max_tokens: Some(100),
        prefix_hashes: Some(vec![1, 2]),
        block_size: Some(16),
        retrieved_docs: Some(3),
        tool_calls: Some(1),
        workload_class: Some(infertrace_schema::WorkloadClass::Rag),
        status: Status::Timeout,
        finish_reason: Some("length".into()),
        http_status: Some(504),
        error: Some("deadline".into()),
        source_file: Some("a.log".into()),
        source_line: Some(9),
        column_sources: None,
    };
    for (full_source, bare_source) in [("vllm-log", "aiperf"), ("aiperf", "vllm-log")] {
        let full = RequestRow { source: full_source.into(), ..full.clone() };
        let a = write(&dir.path().join(format!("{full_source}-full")), std::slice::from_ref(&full), &[]);
        let b = write(&dir.path().join(format!("{full_source}-bare")), &[row(bare_source, "r")], &[]);
        let merged = merge(&[a, b], &options()).unwrap();
        let [one] = &merged.requests[..] else { panic!("one row expected: {:?}", merged.requests) };
        let sources = one.column_sources.clone().unwrap();
        // Every column but `source` and `column_sources` came from the full row, the request id (equal on both
        // sides) from the server.
        assert_eq!(sources.split(';').count(), infertrace_schema::RequestRow::columns().len() - 2);
        let others = sources.split(';').filter(|pair| !pair.starts_with("request_id="));
        assert!(others.clone().all(|pair| pair.ends_with(&format!("={full_source}"))), "{sources}");
        assert!(sources.starts_with("request_id=vllm-log;"), "{sources}");
        let expected =
            RequestRow { source: "aiperf+vllm-log".into(), column_sources: one.column_sources.clone(), ..full.clone() };
        assert_eq!(one, &expected);
    }
}

#[test]
fn the_order_of_the_datasets_does_not_change_the_requests() {
    let dir = tempfile::tempdir().unwrap();
    let s = |name: &str| write(&dir.path().join(name), &server(), &[]);
    let c = |name: &str| write(&dir.path().join(name), &client(), &[]);
    let forward = merge(&[s("s1"), c("c1")], &options()).unwrap();
    let backward = merge(&[c("c2"), s("s2")], &options()).unwrap();
    assert_eq!(forward.requests, backward.requests);
    assert_eq!(forward.record, backward.record);
}
