//! TraceLab end to end: generated round traces and replay CSVs, the excerpts under `testdata/traces/tracelab/`, the
//! whole published example files (compressed under `testdata/traces-full/tracelab/`) against figures computed apart
//! with Python, and property tests that no input panics or loses a line.

use std::collections::BTreeSet;
use std::path::Path;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, Input, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::TraceLab;
use infertrace_adapter_traces::tracelab::generate::{Generated, write_replay, write_rounds};
use infertrace_schema::RequestRow;
use proptest::prelude::*;
use serde_json::json;

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = TraceLab.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

/// A file under `testdata/`, decompressed the way the CLI opens inputs.
fn read(relative: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(relative);
    let mut input = Input::open(&path, None).unwrap();
    let mut bytes = Vec::new();
    input.reader().read_to_end(&mut bytes).unwrap();
    bytes
}

fn sum(sink: &CollectSink, column: impl Fn(&RequestRow) -> Option<u32>) -> u64 {
    sink.requests.iter().filter_map(column).map(u64::from).sum()
}

fn check_generated(bytes: &[u8], generated: Generated, version: &str) -> (CollectSink, ParseReport) {
    assert_eq!(TraceLab.detect(bytes), Some(Confidence::High));
    let (sink, report) = parse(bytes, "generated");
    assert_eq!(sink.diagnostics, [], "{version}");
    assert_eq!(report.format_version.as_deref(), Some(version));
    assert_eq!(report.lines, generated.lines);
    assert_eq!(sink.requests.len() as u64, generated.rounds);
    assert_eq!(report.details["sessions"], json!(generated.sessions));
    assert_eq!(sum(&sink, |r| r.input_tokens), generated.input_tokens);
    assert_eq!(sum(&sink, |r| r.cached_tokens), generated.cached_tokens);
    assert_eq!(sum(&sink, |r| r.output_tokens), generated.output_tokens);
    (sink, report)
}

#[test]
fn generated_round_traces() {
    let mut bytes = Vec::new();
    let generated = write_rounds(&mut bytes, 12, 6, 3).unwrap();
    let (sink, report) = check_generated(&bytes, generated, "round-trace");
    assert_eq!(report.details["tool_calls"], json!(generated.tool_calls));
    assert_eq!(sum(&sink, |r| r.tool_calls), generated.tool_calls);
    assert!(sink.requests.iter().all(|r| r.arrival_time.is_some() && r.completion_time >= r.arrival_time));
    assert_eq!(report.details["providers"], json!({"claude": 36, "codex": 36}), "rows by provider");
}

#[test]
fn generated_replay_csvs() {
    for canonical in [false, true] {
        let mut bytes = Vec::new();
        let generated = write_replay(&mut bytes, 20, 5, canonical, 9).unwrap();
        let (sink, report) = check_generated(&bytes, generated, "replay-csv");
        assert_eq!(report.details["arrivals_derived"], json!(generated.derived_arrivals));
        assert_eq!(report.details["compactions"], json!(0));
        assert!(sink.requests.iter().all(|r| r.arrival_time.is_some()));
    }
}

#[test]
fn round_trace_excerpt() {
    // Lines 1-3 (Claude) and 11-13 (Codex) of the sanitized example.
    let bytes = read("traces/tracelab/round_trace_excerpt.jsonl");
    assert_eq!(TraceLab.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "round_trace_excerpt.jsonl");
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.turn, r.input_tokens, r.cached_tokens, r.reasoning_tokens, r.tool_calls))
        .collect();
    assert_eq!(
        rows,
        [
            (Some(0), Some(32272), Some(27217), None, Some(2)),
            (Some(1), Some(35740), Some(29380), None, Some(1)),
            (Some(2), Some(38592), Some(35738), None, Some(1)),
            (Some(0), Some(9324), Some(6912), Some(199), Some(3)),
            (Some(1), Some(9917), Some(9600), Some(11), Some(1)),
            (Some(2), Some(10058), Some(9856), Some(15), Some(1)),
        ]
    );
    assert_eq!(report.details["providers"], json!({"claude": 3, "codex": 3}));
}

#[test]
fn replay_excerpt() {
    let bytes = read("traces/tracelab/multi_session_large_excerpt.csv");
    assert_eq!(TraceLab.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "multi_session_large_excerpt.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests.len(), 6);
    // Session 1: 393 ms, then + 273 ms, then + 77 ms.
    let arrivals: Vec<_> = sink.requests[3..].iter().map(|r| r.arrival_time.map(|t| t / 1_000_000)).collect();
    assert_eq!(arrivals, [Some(393), Some(666), Some(743)]);
    assert_eq!(report.details["arrivals_derived"], json!(4));
}

/// `example_sessions/sanitized/round_trace.jsonl` of `uw-syfi/TraceLab` (commit 0b8a262b), whole, `zstd -19`.
/// Figures computed apart with Python: `rows = [json.loads(l) for l in open("round_trace.jsonl") if l.strip()]`.
#[test]
fn the_whole_sanitized_round_trace() {
    let bytes = read("traces-full/tracelab/round_trace.jsonl.zst");
    let (sink, report) = parse(&bytes, "round_trace.jsonl");
    assert_eq!(sink.diagnostics, []);
    // len(rows), len({r["session_id"] for r in rows})
    assert_eq!(sink.requests.len(), 19);
    assert_eq!(report.details["sessions"], json!(2));
    // sum(r[k] or 0 for r in rows) for input_tokens_total, prefix_tokens, output_tokens, reasoning_output_tokens
    assert_eq!(sum(&sink, |r| r.input_tokens), 514_012);
    assert_eq!(sum(&sink, |r| r.cached_tokens), 473_556);
    assert_eq!(sum(&sink, |r| r.output_tokens), 11_335);
    assert_eq!(sum(&sink, |r| r.reasoning_tokens), 581);
    // sum(r["claude_cache_creation_input_tokens"] or 0 for r in rows)
    assert_eq!(report.details["cache_creation_tokens"], json!(21_086));
    // sum(len(r["tools"]) for r in rows), sum(t["is_error"] is True for r in rows for t in r["tools"])
    assert_eq!(report.details["tool_calls"], json!(19));
    assert_eq!(report.details["tool_errors"], json!(1));
    // Sum over rows of max(output times) - max(input times <= min(output times)), in ms (TraceLab's timing.py).
    let span_ms: i64 =
        sink.requests.iter().map(|r| (r.completion_time.unwrap() - r.arrival_time.unwrap()) / 1_000_000).sum();
    assert_eq!(span_ms, 139_078);
}

/// `replay/examples/multi_session_large.csv` of `uw-syfi/TraceLab` (commit 0b8a262b), whole, `zstd -19`.
/// Figures computed apart with Python: `rows = list(csv.DictReader(open("multi_session_large.csv")))`.
#[test]
fn the_whole_multi_session_replay() {
    let bytes = read("traces-full/tracelab/multi_session_large.csv.zst");
    let (sink, report) = parse(&bytes, "multi_session_large.csv");
    assert_eq!(sink.diagnostics, []);
    // len(rows), len({r["session_id"] for r in rows})
    assert_eq!(sink.requests.len(), 303);
    assert_eq!(report.details["sessions"], json!(48));
    // sum(int(r["prefix_len"]) + int(r["input_len"])), sum(int(r["prefix_len"])), sum(int(r["output_len"]))
    assert_eq!(sum(&sink, |r| r.input_tokens), 1_150_397);
    assert_eq!(sum(&sink, |r| r.cached_tokens), 939_365);
    assert_eq!(sum(&sink, |r| r.output_tokens), 58_678);
    // 303 rounds - 48 first rounds; every prefix_len is the previous round's prefix + input + output.
    assert_eq!(report.details["arrivals_derived"], json!(255));
    assert_eq!(report.details["compactions"], json!(0));
}

/// Parses `bytes` and checks that every non-blank line but a CSV header became a row or a diagnostic.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(bytes, "fuzz");
    let csv = report.format_version.as_deref() == Some("replay-csv");
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    let mut header_seen = !csv;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines || line.iter().all(|b| b.is_ascii_whitespace()) || line == b"\xef\xbb\xbf" {
            continue;
        }
        if !header_seen && std::str::from_utf8(line).is_ok() {
            header_seen = true;
            continue;
        }
        prop_assert!(
            accounted.contains(&number),
            "line {} was dropped silently: {:?}",
            number,
            String::from_utf8_lossy(line)
        );
    }
    Ok(())
}

fn small_input(kind: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    match kind % 3 {
        0 => write_rounds(&mut bytes, 2, 2, 1),
        1 => write_replay(&mut bytes, 2, 3, false, 1),
        _ => write_replay(&mut bytes, 2, 3, true, 1),
    }
    .unwrap();
    bytes
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = TraceLab.detect(&bytes);
    }

    #[test]
    fn mutated_inputs_never_panic(
        kind in 0u8..3,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        check(&mutate(small_input(kind), &edits))?;
    }
}
