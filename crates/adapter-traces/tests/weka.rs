//! `weka-trace` end to end: the verbatim corpus files under `testdata/traces/weka/` give the rows worked out by hand
//! from the JSON, the whole 109-trace corpus subset under `testdata/traces-full/weka/` gives the aggregates Python
//! computes, generated traces parse without diagnostics, and random or mutated input never panics.

use std::path::{Path, PathBuf};

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, Input, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::weka::generate::write_weka;
use infertrace_adapter_traces::{Mooncake, WekaTrace};
use infertrace_schema::WorkloadClass;
use proptest::prelude::*;

const SECOND: i64 = 1_000_000_000;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn parse_bytes(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = WekaTrace.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

/// Parses a (possibly compressed) file as the CLI would, with its path relative to `testdata/`.
fn parse_file(relative: &str) -> (CollectSink, ParseReport) {
    let mut input = Input::open(&testdata().join(relative), None).unwrap();
    assert_eq!(WekaTrace.detect(input.head()), Some(Confidence::High), "{relative}");
    assert_eq!(Mooncake.detect(input.head()), None, "{relative}");
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: relative, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = WekaTrace.parse(input.reader(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn seconds(s: f64) -> Option<i64> {
    Some((s * 1e3).round() as i64 * 1_000_000)
}

#[test]
fn trace_0504_three_calls_by_hand() {
    let (sink, report) = parse_file("traces/weka/trace_0504.json");
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.format_version.as_deref(), report.lines), (Some("v1"), 1));
    // (t, in, out, api_time, ttft, hash ids) of the three calls, read off the file.
    let calls = [
        (0, 11_133, 139, 8.79, None, 173),
        (13, 11_300, 96, 3.09, None, 176),
        (3075, 11_306, 102, 3.38, Some(1.75), 176),
    ];
    assert_eq!(sink.requests.len(), 3);
    for (turn, (row, (t, input, output, api, ttft, blocks))) in sink.requests.iter().zip(calls).enumerate() {
        assert_eq!(row.request_id, format!("trace_0504:{turn}"));
        assert_eq!(row.session_id.as_deref(), Some("trace_0504"));
        assert_eq!(row.turn, Some(turn as u32));
        assert_eq!(row.model.as_deref(), Some("claude-sonnet-4-20250514"));
        assert_eq!(row.arrival_time, Some(t * SECOND));
        assert_eq!((row.input_tokens, row.output_tokens), (Some(input), Some(output)));
        assert_eq!((row.e2e_s, row.ttft_s), (Some(api), ttft));
        assert_eq!(row.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(row.prefix_hashes.as_ref().map(Vec::len), Some(blocks));
        assert_eq!((row.block_size, row.workload_class), (Some(64), Some(WorkloadClass::Agent)));
        assert_eq!(row.source_line, Some(1));
    }
    // Ids 1..=170 are shared by all three calls; the third then has 177..=182 where the second has 171..=176.
    let hashes: Vec<&Vec<u64>> = sink.requests.iter().map(|r| r.prefix_hashes.as_ref().unwrap()).collect();
    assert_eq!(hashes[0][..], hashes[1][..173]);
    assert_eq!(hashes[1][..170], hashes[2][..170]);
    assert_ne!(hashes[1][170], hashes[2][170]);
    let d = &report.details;
    assert_eq!((d["requests"].as_u64(), d["streaming_requests"].as_u64()), (Some(3), Some(1)));
    assert_eq!(d["think_time_s"], serde_json::json!({"count": 3, "sum": 3062.0, "max": 3058.0}));
    assert_eq!((d["tool_tokens"].as_u64(), d["system_tokens"].as_u64()), (Some(9545), Some(1212)));
    assert_eq!(d["totals"]["combined_tokens"]["input"], 33_739);
    assert!(!d.contains_key("subagents"));
}

#[test]
fn trace_0187_streaming_calls_keep_their_ttft() {
    let (sink, _) = parse_file("traces/weka/trace_0187.json");
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.arrival_time, r.ttft_s, r.e2e_s)).collect();
    assert_eq!(
        rows,
        [
            (Some(0), Some(1.43), Some(3.1)),
            (Some(6 * SECOND), Some(0.63), Some(2.32)),
            (Some(12 * SECOND), Some(1.26), Some(2.99))
        ]
    );
}

#[test]
fn trace_0291_sub_agents_are_sessions_of_their_own() {
    let (sink, report) = parse_file("traces/weka/trace_0291.json.zst");
    assert_eq!(sink.diagnostics, [], "its totals agree with its calls");
    assert_eq!(sink.requests.len(), 20 + 5 + 7);
    // The parent's 16 calls before the two markers, then agent_001's 5, agent_002's 7, then the parent's last 4.
    let sessions: Vec<&str> = sink.requests.iter().map(|r| r.session_id.as_deref().unwrap()).collect();
    assert!(sessions[..16].iter().all(|s| *s == "trace_0291"));
    assert!(sessions[16..21].iter().all(|s| *s == "trace_0291/agent_001"));
    assert!(sessions[21..28].iter().all(|s| *s == "trace_0291/agent_002"));
    assert!(sessions[28..].iter().all(|s| *s == "trace_0291"));
    // agent_001 starts at 1148.013 s; its calls at 0, 5, 11, 15 and 20 s after that.
    let agent_001: Vec<_> = sink.requests[16..21].iter().map(|r| (r.turn, r.arrival_time)).collect();
    let expected: Vec<_> =
        [0.0, 5.0, 11.0, 15.0, 20.0].iter().enumerate().map(|(i, t)| (Some(i as u32), seconds(1148.013 + t))).collect();
    assert_eq!(agent_001, expected);
    let last = &sink.requests[31];
    assert_eq!((last.request_id.as_str(), last.arrival_time), ("trace_0291:19", Some(1363 * SECOND)));
    assert_eq!((last.input_tokens, last.output_tokens, last.e2e_s), (Some(101_059), Some(66), Some(3.47)));
    assert_eq!(sink.requests[16].model.as_deref(), Some("claude-haiku-4-5-20251001"));
    // The two sub-agents start from the same prompt: their first blocks share hashes, unlike the parent's.
    let (a, b, parent) = (&sink.requests[16], &sink.requests[21], &sink.requests[0]);
    let (a, b, parent) =
        (a.prefix_hashes.as_ref().unwrap(), b.prefix_hashes.as_ref().unwrap(), parent.prefix_hashes.as_ref().unwrap());
    assert_eq!(a[0], b[0]);
    assert_ne!(a[0], parent[0]);
    let d = &report.details;
    assert_eq!((d["subagents"].as_u64(), d["subagent_requests"].as_u64()), (Some(2), Some(12)));
    assert_eq!(d["subagent_types"], serde_json::json!({"Explore": 2}));
    assert_eq!(d["subagent_tool_uses"], 14);
}

#[test]
fn malformed_shape_gives_one_diagnostic_per_problem() {
    let (sink, report) = parse_file("traces/weka/malformed_shape.json");
    let diagnostics: Vec<(u64, &str, &str)> =
        sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect();
    assert_eq!(
        diagnostics,
        [
            (3, "inconsistent", "`ttft` is longer than `api_time`"),
            (4, "invalid-value", "`in` is not a token count (a non-negative integer below 2^32)"),
            (5, "malformed-record", "`type` is not `n`, `s` or `subagent`"),
            (6, "invalid-value", "`hash_ids` is not a list of non-negative integers; no prefix hashes"),
            (
                7,
                "inconsistent",
                "a sub-agent's `requests` come before a usable `agent_id`; the session is named by position"
            ),
            (7, "inconsistent", "a sub-agent's `requests` come before a usable `t`; its calls have no arrival"),
            (10, "inconsistent", "`hash_ids` has 3 blocks but `in` 400 holds 6 full blocks of 64 tokens"),
            (11, "inconsistent", "totals.parent_tokens.input is 999 but the calls sum to 830"),
        ]
    );
    let ids: Vec<&str> = sink.requests.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids, ["trace_shape:0", "trace_shape:1", "trace_shape:2", "trace_shape/subagent-1:0", "trace_shape:3"]);
    assert_eq!(sink.requests[3].arrival_time, None);
    assert_eq!(report.details["subagent_types"], serde_json::json!({"other": 1}));
    let everything = format!("{:?}{:?}{:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!everything.contains("CANARY"));
}

/// Aggregates of the 109 traces of the corpus subset (kv-cache-tester commit 94f6046d), computed independently in
/// the corpus directory with:
///
/// ```text
/// python3 -c '
/// import json, glob, collections
/// calls = lambda rs: [c for r in rs for c in (calls(r["requests"]) if r["type"] == "subagent" else [r])]
/// docs = [json.load(open(f)) for f in sorted(glob.glob("trace_*.json"))]
/// rows = [c for d in docs for c in calls(d["requests"])]
/// print(len(docs), len(rows), sum(c["in"] for c in rows), sum(c["out"] for c in rows),
///       sum(len(c["hash_ids"]) for c in rows))
/// print(sum(r["type"] == "subagent" for d in docs for r in d["requests"]),
///       sum(len(r["requests"]) for d in docs for r in d["requests"] if r["type"] == "subagent"))
/// print(sum(c["type"] == "s" for c in rows), sum("ttft" in c for c in rows), sum("api_time" in c for c in rows))
/// print(collections.Counter(c["stop"] for c in rows))'
/// ```
///
/// which prints `109 1267 68394071 746637 1068051`, `9 104`, `265 148 1150` and
/// `Counter({'tool_use': 1019, 'end_turn': 131, '': 117})`.
#[test]
fn the_whole_corpus_subset_gives_the_python_aggregates() {
    let dir = testdata().join("traces-full/weka");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json.zst"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 109);
    let (mut rows, mut input, mut output, mut blocks) = (0u64, 0u64, 0u64, 0u64);
    let (mut markers, mut subagent_rows, mut streaming, mut ttft, mut e2e) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut tool_use, mut end_turn, mut no_reason) = (0u64, 0u64, 0u64);
    let mut sessions = std::collections::BTreeSet::new();
    let mut subagent_sessions = std::collections::BTreeSet::new();
    for file in &files {
        let (sink, report) = parse_file(&format!("traces-full/weka/{file}"));
        assert_eq!(sink.diagnostics, [], "{file}");
        assert_eq!(report.format_version.as_deref(), Some("v1"));
        let stem = file.trim_end_matches(".json.zst");
        assert_eq!(report.details["trace_id"], stem, "every trace's id is its file stem");
        for row in &sink.requests {
            rows += 1;
            input += u64::from(row.input_tokens.unwrap());
            output += u64::from(row.output_tokens.unwrap());
            blocks += row.prefix_hashes.as_ref().unwrap().len() as u64;
            ttft += u64::from(row.ttft_s.is_some());
            e2e += u64::from(row.e2e_s.is_some());
            match row.finish_reason.as_deref() {
                Some("tool_use") => tool_use += 1,
                Some("end_turn") => end_turn += 1,
                None => no_reason += 1,
                Some(other) => panic!("{other}"),
            }
            assert!(row.arrival_time.is_some());
            let session = row.session_id.clone().unwrap();
            if session != stem {
                subagent_rows += 1;
                assert!(session.starts_with(&format!("{stem}/agent_")), "{session}");
                subagent_sessions.insert(session.clone());
            }
            sessions.insert(session);
        }
        let detail = |key: &str| report.details.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
        markers += detail("subagents");
        streaming += detail("streaming_requests");
    }
    assert_eq!((rows, input, output, blocks), (1267, 68_394_071, 746_637, 1_068_051));
    assert_eq!((markers, subagent_rows, subagent_sessions.len()), (9, 104, 9));
    assert_eq!(sessions.len(), 109 + 9);
    assert_eq!((streaming, ttft, e2e), (265, 148, 1150));
    assert_eq!((tool_use, end_turn, no_reason), (1019, 131, 117));
}

#[test]
fn generated_traces_parse_without_diagnostics() {
    for (calls, subagents, subagent_calls, seed) in [(1, 0, 0, 1), (40, 3, 6, 2), (200, 10, 20, 3)] {
        let mut bytes = Vec::new();
        let generated = write_weka(&mut bytes, "gen", calls, subagents, subagent_calls, seed).unwrap();
        assert_eq!(generated.requests, calls + generated.subagents * subagent_calls);
        let (sink, report) = parse_bytes(&bytes, "gen.json");
        assert_eq!(sink.diagnostics, [], "{calls} {subagents}");
        assert_eq!(sink.requests.len() as u64, generated.requests);
        let input: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
        let output: u64 = sink.requests.iter().map(|r| u64::from(r.output_tokens.unwrap())).sum();
        assert_eq!((input, output), (generated.input_tokens, generated.output_tokens));
        let d = |k: &str| report.details.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        assert_eq!(
            (d("subagents"), d("subagent_requests"), d("streaming_requests")),
            (generated.subagents, generated.subagent_requests, generated.streaming)
        );
        assert!(sink.requests.iter().all(|r| r.arrival_time.is_some() && r.prefix_hashes.is_some()));
    }
}

/// Parses `bytes`: never panics, and a non-blank input leaves a row or a diagnostic (or is a trace without calls).
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse_bytes(bytes, "fuzz.json");
    let blank = bytes.iter().all(u8::is_ascii_whitespace);
    let empty_trace = report.format_version.is_some() && !report.details.contains_key("requests");
    prop_assert!(blank || empty_trace || !sink.requests.is_empty() || !sink.diagnostics.is_empty());
    prop_assert!(report.lines <= bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1);
    Ok(())
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = WekaTrace.detect(&bytes);
    }

    #[test]
    fn mutated_traces_never_panic(
        seed in 0u64..1000,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = Vec::new();
        write_weka(&mut bytes, "fuzz", 4, 1, 2, seed).unwrap();
        check(&mutate(bytes, &edits))?;
    }

    #[test]
    fn mutated_fixture_never_panics(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        let bytes = std::fs::read(testdata().join("traces/weka/malformed_shape.json")).unwrap();
        check(&mutate(bytes, &edits))?;
    }
}
