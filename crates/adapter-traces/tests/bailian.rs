//! `bailian-trace` end to end: the fixtures under `testdata/traces/bailian/` (written from the documented schema; no
//! trace file is in git, they are Git LFS objects) give the rows worked out by hand, generated traces parse without
//! diagnostics, and random or mutated lines never panic nor vanish.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::bailian::generate::write_bailian;
use infertrace_adapter_traces::{BailianTrace, WekaTrace};
use infertrace_schema::WorkloadClass;
use proptest::prelude::*;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = BailianTrace.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn fixture(name: &str) -> (CollectSink, ParseReport) {
    let path = format!("traces/bailian/{name}");
    let bytes = std::fs::read(testdata().join(&path)).unwrap();
    assert_eq!(BailianTrace.detect(&bytes[..bytes.len().min(4096)]), Some(Confidence::High));
    assert_eq!(WekaTrace.detect(&bytes[..bytes.len().min(4096)]), None);
    parse(&bytes, &path)
}

/// (request id, session, turn) of every row.
fn sessions(sink: &CollectSink) -> Vec<(&str, &str, u32)> {
    sink.requests.iter().map(|r| (r.request_id.as_str(), r.session_id.as_deref().unwrap(), r.turn.unwrap())).collect()
}

#[test]
fn shape_fixture_sessions_by_hand() {
    let (sink, report) = fixture("qwen_trace_shape.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, 9);
    assert_eq!(
        sessions(&sink),
        [
            ("0", "0", 0),
            ("1", "1", 0),
            ("2", "2", 0),
            ("3", "0", 1),
            // The README's record: a follow-up of chat 55, which the file does not hold.
            ("159", "55", 1),
            ("5", "0", 2),
            ("6", "1", 1),
            ("7", "7", 0),
            ("160", "55", 1),
        ]
    );
    let readme = &sink.requests[4];
    assert_eq!(readme.arrival_time, Some(61_114_000_000));
    assert_eq!((readme.input_tokens, readme.output_tokens), (Some(521), Some(132)));
    assert_eq!(readme.prefix_hashes.as_ref().map(Vec::len), Some(33), "ceil(521 / 16)");
    assert_eq!(readme.block_size, Some(16));
    // Chats 159 and 160 share their first two blocks (ids 1089, 1090), so their first two hashes.
    let (a, b) = (readme.prefix_hashes.as_ref().unwrap(), sink.requests[8].prefix_hashes.as_ref().unwrap());
    assert_eq!(a[..2], b[..2]);
    assert_ne!(a[2], b[2]);
    // Chat 5 repeats ten blocks of chat 3, its parent.
    assert_eq!(
        sink.requests[5].prefix_hashes.as_ref().unwrap()[..10],
        sink.requests[3].prefix_hashes.as_ref().unwrap()[..10]
    );
    let rag: Vec<&str> = sink
        .requests
        .iter()
        .filter(|r| r.workload_class == Some(WorkloadClass::Rag))
        .map(|r| r.request_id.as_str())
        .collect();
    assert_eq!(rag, ["1", "6"]);
    let d = &report.details;
    assert_eq!((d["sessions"].as_u64(), d["parents_unseen"].as_u64()), (Some(5), Some(1)));
    assert_eq!(d["request_types"], serde_json::json!({"file": 1, "image": 1, "search": 2, "text": 4, "thinking": 1}));
}

#[test]
fn bad_lines_fixture_gives_one_diagnostic_per_problem() {
    let (sink, report) = fixture("bad_lines.jsonl");
    let diagnostics: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
    assert_eq!(
        diagnostics,
        [
            (2, "inconsistent"),
            (4, "inconsistent"),
            (5, "malformed-json"),
            (6, "missing-field"),
            (8, "invalid-value"),
            (9, "inconsistent"),
            (10, "malformed-json"),
            (11, "invalid-utf8"),
        ]
    );
    assert_eq!(
        sessions(&sink),
        [
            ("10", "10", 0),
            ("11", "10", 1),
            ("12", "12", 0),
            ("14", "14", 0),
            ("15", "15", 0),
            ("12", "12", 0),
            ("18", "17", 1)
        ]
    );
    assert_eq!(report.lines, 12);
    let everything = format!("{:?}{:?}{:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!everything.contains("CANARY"));
    assert_eq!(report.details["request_types"]["other"], 1);
}

#[test]
fn generated_traces_parse_without_diagnostics() {
    for (sessions, turns, seed) in [(1, 1, 1), (30, 4, 2), (200, 7, 3)] {
        let mut bytes = Vec::new();
        let generated = write_bailian(&mut bytes, sessions, turns, seed).unwrap();
        let (sink, report) = parse(&bytes, "generated.jsonl");
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.lines, generated.lines);
        assert_eq!(sink.requests.len() as u64, generated.requests);
        assert_eq!(report.details["sessions"].as_u64(), Some(generated.sessions));
        let input: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
        let output: u64 = sink.requests.iter().map(|r| u64::from(r.output_tokens.unwrap())).sum();
        assert_eq!((input, output), (generated.input_tokens, generated.output_tokens));
        let rag = sink.requests.iter().filter(|r| r.workload_class == Some(WorkloadClass::Rag)).count() as u64;
        assert_eq!(rag, generated.search);
        assert_eq!(sink.requests.iter().filter_map(|r| r.turn).max(), Some(turns as u32 - 1));
        let distinct: BTreeSet<&str> = sink.requests.iter().filter_map(|r| r.session_id.as_deref()).collect();
        assert_eq!(distinct.len() as u64, generated.sessions);
    }
}

/// Parses `bytes`: never panics, and every non-blank line ends up as a row, a diagnostic or both.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(bytes, "fuzz.jsonl");
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) || line == b"\xef\xbb\xbf" {
            continue;
        }
        prop_assert!(accounted.contains(&number), "line {} dropped: {:?}", number, String::from_utf8_lossy(line));
    }
    Ok(())
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = BailianTrace.detect(&bytes);
    }

    #[test]
    fn mutated_traces_never_panic(
        seed in 0u64..1000,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = Vec::new();
        write_bailian(&mut bytes, 3, 3, seed).unwrap();
        check(&mutate(bytes, &edits))?;
    }

    #[test]
    fn mutated_fixture_never_panics(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        let bytes = std::fs::read(testdata().join("traces/bailian/bad_lines.jsonl")).unwrap();
        check(&mutate(bytes, &edits))?;
    }
}
