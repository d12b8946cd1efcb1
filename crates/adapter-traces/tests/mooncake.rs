//! Mooncake variants end to end: generated inputs of each variant parse with no diagnostics and the counts the
//! generator reports, and the fixtures under `testdata/mooncake/` give the rows worked out by hand.

use std::path::Path;

use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::generate::{
    Generated, write_agentic_legacy, write_agentic_v2, write_applied_compute, write_mooncake,
};
use infertrace_adapter_traces::{Mooncake, MooncakeDelta};
use infertrace_schema::WorkloadClass;

fn parse(adapter: &dyn Adapter, bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn check_generated(adapter: &dyn Adapter, bytes: &[u8], generated: Generated, version: Option<&str>) -> CollectSink {
    let (sink, report) = parse(adapter, bytes, "generated.jsonl");
    assert_eq!(sink.diagnostics, [], "{version:?}");
    assert_eq!(report.format_version.as_deref(), version);
    assert_eq!(report.lines, generated.lines);
    assert_eq!(sink.requests.len() as u64, generated.requests);
    assert_eq!(report.details.get("sessions").and_then(|v| v.as_u64()), Some(generated.sessions));
    let derived = report.details.get("arrivals_derived").and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(derived, generated.derived_arrivals);
    let input: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
    assert_eq!(input, generated.input_tokens);
    assert!(sink.requests.iter().all(|r| r.arrival_time.is_some() && r.turn.is_some()));
    sink
}

#[test]
fn generated_mooncake_sessions() {
    let mut bytes = Vec::new();
    let generated = write_mooncake(&mut bytes, 40, 5, false, 7).unwrap();
    assert_eq!((generated.requests, generated.derived_arrivals), (200, 160));
    let sink = check_generated(&Mooncake, &bytes, generated, None);
    assert_eq!(sink.requests.iter().filter_map(|r| r.turn).max(), Some(4));
}

/// A trace of more sessions than the adapter remembers (100,000): the generator keeps at most `OPEN_SESSIONS` open at
/// once, so the sessions the adapter forgets are finished ones, and every turn is numbered and timed from its own
/// session. Forgetting is still reported, once.
#[test]
fn generated_sessions_beyond_the_bound_keep_their_turns() {
    let mut bytes = Vec::new();
    let generated = write_mooncake(&mut bytes, 120_000, 2, false, 7).unwrap();
    let (sink, report) = parse(&Mooncake, &bytes, "generated.jsonl");
    let kinds: Vec<_> =
        sink.diagnostics.iter().map(|d| (d.line, d.message.starts_with("more than 100000 sessions"))).collect();
    // The 100,001st session's first turn, in the 11th group: line 10 groups × 20,000 + 1.
    assert_eq!(kinds, [(200_001, true)]);
    assert_eq!(report.details.get("sessions_evicted").and_then(|v| v.as_u64()), Some(20_000));
    assert_eq!(
        (sink.requests.len() as u64, generated.requests, generated.derived_arrivals),
        (240_000, 240_000, 120_000)
    );
    for row in &sink.requests {
        // `r<session>-<turn>` in `s<session>`, with an arrival.
        let (session, turn) = row.request_id[1..].split_once('-').unwrap();
        assert_eq!(row.session_id.as_deref().and_then(|s| s.strip_prefix('s')), Some(session), "{}", row.request_id);
        assert_eq!(row.turn, turn.parse().ok(), "{}", row.request_id);
        assert!(row.arrival_time.is_some(), "{}", row.request_id);
    }
    // The first group's sessions are all written before the second group starts, a minute later.
    let at = |id: &str| sink.requests.iter().position(|r| r.request_id == id).unwrap();
    assert!(at("r9999-1") < at("r10000-0"));
    let minute = 60_000_000_000;
    let arrival = |id: &str| sink.requests[at(id)].arrival_time.unwrap();
    assert!(arrival("r0-0") < minute && (minute..2 * minute).contains(&arrival("r10000-0")));
}

#[test]
fn generated_mooncake_delta_sessions() {
    let mut bytes = Vec::new();
    let generated = write_mooncake(&mut bytes, 25, 4, true, 3).unwrap();
    let sink = check_generated(&MooncakeDelta, &bytes, generated, Some("mooncake-delta"));
    assert_eq!(sink.requests.iter().filter(|r| r.prefix_hashes.is_some()).count(), 25, "first turns only");
}

#[test]
fn generated_agentic_v2_plays() {
    let mut bytes = Vec::new();
    let generated = write_agentic_v2(&mut bytes, 6, 10, 11).unwrap();
    assert_eq!(generated.lines, 61);
    let sink = check_generated(&Mooncake, &bytes, generated, Some("agentic_mooncake-v2"));
    assert!(sink.requests.iter().all(|r| r.workload_class == Some(WorkloadClass::Agent) && r.block_size == Some(64)));
    assert!(sink.requests.iter().all(|r| r.e2e_s.is_some() && r.model.as_deref() == Some("synthetic-model")));
}

#[test]
fn generated_agentic_legacy_sessions() {
    let mut bytes = Vec::new();
    let generated = write_agentic_legacy(&mut bytes, 12, 6, 5).unwrap();
    let sink = check_generated(&Mooncake, &bytes, generated, Some("agentic_mooncake"));
    assert_eq!(sink.requests.iter().filter(|r| r.tool_calls == Some(1)).count(), 12 * 5);
}

#[test]
fn generated_applied_compute_sessions() {
    let mut bytes = Vec::new();
    let generated = write_applied_compute(&mut bytes, 50, 9).unwrap();
    let sink = check_generated(&Mooncake, &bytes, generated, Some("applied_compute_agentic"));
    let finals = sink.requests.iter().filter(|r| r.tool_calls == Some(0)).count();
    assert_eq!(finals, 50, "one final turn per session");
}

#[test]
fn generated_inputs_are_detected() {
    let mut bytes = Vec::new();
    write_agentic_v2(&mut bytes, 1, 2, 1).unwrap();
    assert!(Mooncake.detect(&bytes).is_some());
    for write in [
        |b: &mut Vec<u8>| write_mooncake(b, 2, 2, false, 1),
        |b: &mut Vec<u8>| write_agentic_legacy(b, 2, 2, 1),
        |b: &mut Vec<u8>| write_applied_compute(b, 2, 1),
    ] {
        let mut bytes = Vec::new();
        write(&mut bytes).unwrap();
        assert_eq!(Mooncake.detect(&bytes), Some(infertrace_adapter::Confidence::High));
    }
}

fn fixture(relative: &str) -> (CollectSink, ParseReport) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/mooncake").join(relative);
    let bytes = std::fs::read(&path).unwrap();
    assert!(Mooncake.detect(&bytes).is_some(), "{relative} is detected");
    parse(&Mooncake, &bytes, relative)
}

type Summary<'a> = (&'a str, Option<&'a str>, Option<u32>, Option<i64>, Option<u32>);

fn summary(sink: &CollectSink) -> Vec<Summary<'_>> {
    sink.requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.session_id.as_deref(), r.turn, r.arrival_time, r.input_tokens))
        .collect()
}

const MS: i64 = 1_000_000;

#[test]
fn legacy_agentic_fixture() {
    let (sink, report) = fixture("agentic-mooncake-legacy/agentic-legacy.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("agentic_mooncake"));
    assert_eq!(
        summary(&sink),
        [
            ("plan", Some("agent-1"), Some(0), Some(0), Some(1200)),
            // plan + delay 5 ms + tool wait 1250 ms.
            ("edit", Some("agent-1"), Some(1), Some(1255 * MS), Some(1300)),
            ("review", Some("agent-2"), Some(0), Some(100 * MS), Some(600)),
            // The later of edit (1255 ms) and review (100 ms), plus the 30 ms tool wait.
            ("merge", Some("agent-1"), Some(2), Some(1285 * MS), Some(1500)),
        ]
    );
    let classes: Vec<_> = sink.requests.iter().map(|r| r.workload_class).collect();
    assert_eq!(classes, [Some(WorkloadClass::Agent), Some(WorkloadClass::Agent), None, Some(WorkloadClass::Agent)]);
    assert_eq!(sink.requests[1].tool_calls, Some(1));
    assert_eq!(sink.requests[3].output_tokens, Some(10), "output_length wins over output_token_ids");
    let expected: serde_json::Value = serde_json::json!({
        "arrivals_derived": 2, "rows_with_priority": 1, "sessions": 2, "wait_for": 3
    });
    assert_eq!(serde_json::to_value(&report.details).unwrap(), expected);
}

#[test]
fn srt_slurm_fixture() {
    let (sink, report) = fixture("srt-slurm/trace_replay_sample.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version, None);
    assert_eq!(
        summary(&sink),
        [
            ("trace_replay_sample:1", Some("test-sess-001"), Some(0), Some(0), Some(1200)),
            ("trace_replay_sample:2", Some("test-sess-001"), Some(1), Some(100 * MS), Some(512)),
            ("trace_replay_sample:3", Some("test-sess-002"), Some(0), Some(500_000), Some(1500)),
        ]
    );
}

#[test]
fn agentic_and_applied_compute_fixtures() {
    let (sink, report) = fixture("agentic-mooncake/agentic-mooncake.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("agentic_mooncake-v2"));
    assert_eq!(
        summary(&sink),
        [
            ("agent-root", Some("root"), Some(0), Some(0), Some(4)),
            ("agent-child", Some("child"), Some(0), Some(5 * MS), Some(4)),
            ("agent-join", Some("root"), Some(1), Some(6 * MS), Some(4)),
        ]
    );
    let (sink, report) = fixture("applied-compute-agentic/applied-compute-agentic.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("applied_compute_agentic"));
    let session = Some("applied-compute-agentic:1");
    assert_eq!(
        summary(&sink),
        [
            ("applied-compute-agentic:1:0", session, Some(0), Some(0), Some(16)),
            ("applied-compute-agentic:1:1", session, Some(1), Some(10 * MS), Some(28)),
            ("applied-compute-agentic:1:2", session, Some(2), Some(30 * MS), Some(40)),
        ]
    );
}
