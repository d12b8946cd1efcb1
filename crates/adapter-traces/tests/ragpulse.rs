//! RAGPulse end to end: generated inputs, the excerpts under `testdata/traces/ragpulse/`, the whole published trace
//! (compressed under `testdata/traces-full/ragpulse/`) against figures computed apart with Python, and property
//! tests that no input panics or loses a line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, Input, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::RagPulse;
use infertrace_adapter_traces::ragpulse::generate::{TEMPLATE_TOKENS, write_maps, write_trace};
use proptest::prelude::*;
use serde_json::json;

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = RagPulse.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn testdata(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(relative)
}

/// A file, decompressed the way the CLI opens inputs.
fn read(relative: &str) -> Vec<u8> {
    let mut input = Input::open(&testdata(relative), None).unwrap();
    let mut bytes = Vec::new();
    input.reader().read_to_end(&mut bytes).unwrap();
    bytes
}

fn sum(sink: &CollectSink, column: impl Fn(&infertrace_schema::RequestRow) -> Option<u32>) -> u64 {
    sink.requests.iter().filter_map(column).map(u64::from).sum()
}

#[test]
fn generated_trace_and_maps() {
    let mut trace = Vec::new();
    let generated = write_trace(&mut trace, 30, 4, 7).unwrap();
    let (sink, report) = parse(&trace, "generated.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("trace"));
    assert_eq!(report.lines, generated.lines);
    assert_eq!(sink.requests.len() as u64, generated.requests);
    assert_eq!(report.details["sessions"], json!(generated.sessions));
    assert_eq!(sum(&sink, |r| r.input_tokens), generated.input_tokens);
    assert_eq!(sum(&sink, |r| r.output_tokens), generated.output_tokens);
    assert_eq!(sum(&sink, |r| r.retrieved_docs), generated.passages);
    assert_eq!(sink.requests.iter().filter_map(|r| r.turn).max(), Some(3));
    assert!(!report.details.contains_key("timestamp_regressions"));

    // The maps before the trace, as `cat` would join them, give the generator's split.
    let mut joined = Vec::new();
    let map_lines = write_maps(&mut joined).unwrap();
    joined.extend_from_slice(&trace);
    let (sink, report) = parse(&joined, "joined.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("maps+trace"));
    assert_eq!(report.lines, map_lines + generated.lines);
    let [sys, passages, history, web, user] = generated.component_tokens;
    assert_eq!(
        report.details["component_tokens"],
        json!({"sys_prompt": sys, "passages": passages, "history": history, "web_search": web, "user_input": user})
    );
    assert_eq!(report.details["tokens_outside_components"], json!(TEMPLATE_TOKENS * generated.requests));
    assert_eq!(report.details["rows_with_component_lengths"], json!(generated.requests));
    assert_eq!(RagPulse.detect(&trace), Some(Confidence::High));
    assert_eq!(RagPulse.detect(&joined), Some(Confidence::High));
}

#[test]
fn trace_excerpt() {
    let bytes = read("traces/ragpulse/0_trace_excerpt.jsonl");
    assert_eq!(RagPulse.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "0_trace_excerpt.jsonl");
    assert_eq!(sink.diagnostics, []);
    // Lines 1-5 and 3,799-3,802 of the trace: the second run starts again at 0 s on excerpt line 8.
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.arrival_time.map(|t| t / 1_000_000_000), r.input_tokens, r.output_tokens, r.retrieved_docs))
        .collect();
    assert_eq!(
        rows,
        [
            (Some(82), Some(3112), Some(192), Some(6)),
            (Some(93), Some(3167), Some(86), Some(6)),
            (Some(125), Some(2890), Some(170), Some(6)),
            (Some(126), Some(3266), Some(429), Some(6)),
            (Some(176), Some(1166), Some(93), Some(0)),
            (Some(604452), Some(3516), Some(206), Some(6)),
            (Some(604453), Some(3362), Some(94), Some(6)),
            (Some(0), Some(2926), Some(154), Some(6)),
            (Some(27), Some(3861), Some(127), Some(6)),
        ]
    );
    assert_eq!(report.details["timestamp_regressions"], json!(1));
}

#[test]
fn maps_then_trace_excerpt() {
    // The 28 map lines that give the first three trace rows their chunk lengths, then those rows.
    let bytes = read("traces/ragpulse/maps_then_trace_excerpt.jsonl");
    assert_eq!(RagPulse.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "maps_then_trace_excerpt.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests.len(), 3);
    assert_eq!(report.details["rows_with_component_lengths"], json!(3));
    // Python over the same file: maps[(component, id)] = token_length from the map lines, then
    // {c: sum(maps[(c, i)] for r in rows for i in r["hash_ids"][c])} and sum(input_length) - sum of those.
    assert_eq!(
        report.details["component_tokens"],
        json!({"sys_prompt": 4383, "passages": 4547, "history": 187, "web_search": 0, "user_input": 28})
    );
    assert_eq!(report.details["tokens_outside_components"], json!(24));
}

#[test]
fn map_excerpt() {
    let bytes = read("traces/ragpulse/2_passages_excerpt.jsonl");
    assert_eq!(RagPulse.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "2_passages_excerpt.jsonl");
    assert_eq!((sink.requests.len(), sink.diagnostics.len()), (0, 0));
    assert_eq!(report.format_version.as_deref(), Some("maps"));
    // 84 + 286 + 163 + … over the first five passages.
    assert_eq!(report.details["maps"]["passages"]["ids"], json!(5));
}

/// The whole published trace (`flashserve/RAGPulse` `data/`, commit 3672232d), compressed with `zstd -19`.
/// Every figure below was computed apart with Python from the uncompressed files:
/// `rows = [json.loads(l) for l in open("0_trace.jsonl") if l.strip()]`.
#[test]
fn the_whole_published_trace() {
    let trace = read("traces-full/ragpulse/0_trace.jsonl.zst");
    let (sink, report) = parse(&trace, "0_trace.jsonl");
    assert_eq!(sink.diagnostics, []);
    // len(rows)
    assert_eq!(sink.requests.len(), 7_106);
    // 7,106 rows and the final blank line.
    assert_eq!(report.lines, 7_107);
    // len({r["session_id"] for r in rows})
    assert_eq!(report.details["sessions"], json!(3_990));
    // sum(r["input_length"] for r in rows), sum(r["output_length"] for r in rows)
    assert_eq!(sum(&sink, |r| r.input_tokens), 20_917_099);
    assert_eq!(sum(&sink, |r| r.output_tokens), 2_012_676);
    // {c: sum(len(r["hash_ids"][c]) for r in rows) for c in r["hash_ids"]}
    assert_eq!(
        report.details["chunks"],
        json!({"sys_prompt": 21_318, "passages": 33_255, "history": 9_243, "web_search": 661, "user_input": 7_106})
    );
    assert_eq!(sum(&sink, |r| r.retrieved_docs), 33_255);
    // ts = [int(r["timestamp"]) for r in rows]; sum(b < a for a, b in zip(ts, ts[1:]))
    assert_eq!(report.details["timestamp_regressions"], json!(1));
    // max(Counter(r["session_id"] for r in rows).values()) - 1
    assert_eq!(sink.requests.iter().filter_map(|r| r.turn).max(), Some(24));

    // The maps, then the trace: the run's token split.
    let mut joined = Vec::new();
    for map in ["1_sys_prompt", "2_passages", "3_history", "4_user_input", "5_web_search"] {
        let bytes = read(&format!("traces-full/ragpulse/{map}.jsonl.zst"));
        let (sink, report) = parse(&bytes, map);
        assert_eq!((sink.requests.len(), sink.diagnostics.len()), (0, 0), "{map}");
        assert_eq!(report.format_version.as_deref(), Some("maps"));
        joined.extend_from_slice(&bytes);
    }
    joined.extend_from_slice(&trace);
    let (sink, report) = parse(&joined, "joined.jsonl");
    assert_eq!(sink.diagnostics, []);
    // m = {id: token_length} per map file: (len(m), sum(m.values()))
    assert_eq!(
        report.details["maps"],
        json!({
            "sys_prompt": {"ids": 6_898, "tokens": 3_122_903},
            "passages": {"ids": 8_302, "tokens": 2_001_402},
            "history": {"ids": 4_910, "tokens": 1_627_088},
            "user_input": {"ids": 6_292, "tokens": 47_384},
            "web_search": {"ids": 522, "tokens": 215_074},
        })
    );
    // {c: sum(maps[c][i] for r in rows for i in r["hash_ids"][c]) for c in components}
    assert_eq!(
        report.details["component_tokens"],
        json!({
            "sys_prompt": 9_777_360,
            "passages": 8_859_192,
            "history": 1_894_205,
            "web_search": 269_982,
            "user_input": 50_710,
        })
    );
    // sum(r["input_length"] - sum(maps[c][i] for c in components for i in r["hash_ids"][c]) for r in rows)
    assert_eq!(report.details["tokens_outside_components"], json!(65_650));
    assert_eq!(report.details["rows_with_component_lengths"], json!(7_106));
    assert_eq!(report.details["rows_without_component_lengths"], json!(0));
}

/// Parses `bytes` and checks that every non-blank line became a row, a diagnostic, or a map entry.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(bytes, "fuzz.jsonl");
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines || line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        prop_assert!(
            accounted.contains(&number) || is_map_line(line),
            "line {} was dropped silently: {:?}",
            number,
            String::from_utf8_lossy(line)
        );
    }
    Ok(())
}

/// Whether `line` is an id→length map line, which the adapter remembers rather than writing.
fn is_map_line(line: &[u8]) -> bool {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(line) else { return false };
    map.contains_key("token_length") && map.keys().any(|k| k.ends_with("_id"))
}

fn small_input(with_maps: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    if with_maps {
        write_maps(&mut bytes).unwrap();
        bytes = bytes.split(|&b| b == b'\n').step_by(60).collect::<Vec<_>>().join(&b'\n');
        bytes.push(b'\n');
    }
    write_trace(&mut bytes, 2, 2, 1).unwrap();
    bytes
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = RagPulse.detect(&bytes);
    }

    #[test]
    fn mutated_inputs_never_panic(
        with_maps in any::<bool>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        check(&mutate(small_input(with_maps), &edits))?;
    }
}
