//! Hand-written expectations for every variant (values worked out from the formats, not copied from output).

use std::collections::BTreeMap;

use infertrace_adapter::{CollectSink, ParseOptions};
use infertrace_schema::{RequestRow, Status, WorkloadClass};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use super::*;

fn parse(text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    parse_with(&Mooncake, text, options)
}

fn parse_with(adapter: &dyn Adapter, text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    let mut sink = CollectSink::default();
    let ctx = ParseContext { source_file: "traces/conv.jsonl", options: &options, modified: None, sidecars: None };
    let report = adapter.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

/// The row every test starts from: what the adapter fills for any line of `traces/conv.jsonl`.
fn base(request_id: &str, line: u64) -> RequestRow {
    RequestRow {
        request_id: request_id.into(),
        source: "mooncake".into(),
        status: Status::Unknown,
        source_file: Some("traces/conv.jsonl".into()),
        source_line: Some(line),
        ..RequestRow::default()
    }
}

fn details(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, serde_json::Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

const MS: i64 = 1_000_000;

#[test]
fn maps_the_readme_example_row() {
    // The example row of the Mooncake README, hash_ids written out.
    let ids: Vec<u64> = (46..=57).chain([2353, 2354]).collect();
    let line = format!(r#"{{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": {ids:?}}}"#);
    let (sink, report) = parse(&line, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(
        report,
        ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: 1,
            details: Default::default()
        }
    );
    let expected = RequestRow {
        request_id: "conv:1".into(),
        source: "mooncake".into(),
        arrival_time: Some(27_482_000_000),
        input_tokens: Some(6955),
        output_tokens: Some(52),
        prefix_hashes: Some(ids),
        block_size: Some(512),
        status: Status::Unknown,
        source_file: Some("traces/conv.jsonl".into()),
        source_line: Some(1),
        ..RequestRow::default()
    };
    assert_eq!(sink.requests, [expected]);
}

#[test]
fn start_shifts_arrivals_and_ids_are_kept() {
    let options = ParseOptions { start_ns: 1_700_000_000_000_000_000, ..ParseOptions::default() };
    let text = r#"{"request_id":"d2","session_id":"delta-session","timestamp":10,"delay":5,"input_length":8,"output_length":4,"hash_ids":[202]}"#;
    let (sink, _) = parse(text, options);
    assert_eq!(sink.diagnostics, []);
    let row = &sink.requests[0];
    assert_eq!(row.request_id, "d2");
    assert_eq!(row.session_id.as_deref(), Some("delta-session"));
    assert_eq!(row.arrival_time, Some(1_700_000_000_010_000_000));
}

#[test]
fn a_block_size_given_reads_hash_ids_at_that_size_and_a_header_still_wins() {
    // 40 tokens at 16 per block: ceil(40 / 16) = 3 ids, which at the default 512 would be inconsistent.
    let line = r#"{"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [5, 6, 7]}"#;
    let (sink, _) = parse(line, ParseOptions { block_size: Some(16), ..ParseOptions::default() });
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests[0].block_size, Some(16));
    let (sink, _) = parse(line, ParseOptions::default());
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!(sink.requests[0].block_size, Some(512));
    let header = r#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"global"}"#;
    let row = r#"{"request_id":"r","session_id":"s","input_length":4,"output_length":1,"hash_ids":[1],"not_before_ms":0,"dependencies":[]}"#;
    let (sink, _) =
        parse(&format!("{header}\n{row}"), ParseOptions { block_size: Some(16), ..ParseOptions::default() });
    assert_eq!(sink.requests[0].block_size, Some(4));
}

#[test]
fn bad_lines_become_diagnostics_with_line_numbers() {
    let text = [
        r#"{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}"#,
        r#"{"timestamp": 0, "input_length": "#,
        "",
        r#"{"schema":"dynamo.agentic_mooncake","version":2}"#,
        r#"{"timestamp": 3000, "input_length": 600, "output_length": 5, "hash_ids": [0]}"#,
        r#"{"timestamp": 1, "input_length": 5000000000, "output_length": "many", "hash_ids": []}"#,
        r#"{"timestamp": 1e300, "input_length": 1, "output_length": 1}"#,
        r#"{"timestamp": 1, "input_length": 5000000000, "output_length": 3}"#,
    ]
    .join("\n");
    let (sink, report) = parse(&text, ParseOptions::default());
    assert_eq!(report.lines, 8);
    let found: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
    assert_eq!(
        found,
        [
            (2, "malformed-json"),
            (4, "missing-field"),
            (5, "inconsistent"),
            (6, "malformed-json"),
            (7, "invalid-value"),
            (8, "invalid-value"),
        ]
    );
    assert_eq!(
        sink.diagnostics[2].message,
        "`hash_ids` has 1 blocks but input_length 600 spans 2 blocks of 512 tokens"
    );
    assert_eq!(sink.diagnostics[4].message, "`timestamp` is out of the representable range");
    assert_eq!(sink.diagnostics[5].message, "`input_length` exceeds 4294967295 tokens");
    // Line 5 is kept despite its inconsistency, line 7 without an arrival, line 8 without input tokens.
    let kept: Vec<(u64, Option<i64>)> =
        sink.requests.iter().map(|r| (r.source_line.unwrap(), r.arrival_time)).collect();
    assert_eq!(kept, [(1, Some(0)), (5, Some(3_000_000_000)), (7, None), (8, Some(1_000_000))]);
    assert_eq!(sink.requests[3].input_tokens, None);
    assert_eq!(sink.requests[3].output_tokens, Some(3));
}

#[test]
fn detects_mooncake_but_not_ragpulse_or_csv() {
    let mooncake = br#"{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2"#;
    assert_eq!(Mooncake.detect(mooncake), Some(Confidence::High));
    let dynamo = br#"{"request_id":"m1","timestamp":0,"input_length":32,"output_length":4,"hash_ids":[101]}"#;
    assert_eq!(Mooncake.detect(dynamo), Some(Confidence::High));
    let ragpulse = br#"{"timestamp": "0", "input_length": 10, "output_length": 2, "hash_ids": {"sys_prompt": [1]}}"#;
    assert_eq!(Mooncake.detect(ragpulse), None);
    assert_eq!(Mooncake.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
    assert_eq!(Mooncake.detect(b""), None);
}

#[test]
fn session_turns_count_from_zero_and_delays_follow_the_previous_turn() {
    // NVIDIA srt-slurm's trace_replay_sample.jsonl: the second turn has a delay and no timestamp.
    let text = r#"{"session_id":"test-sess-001","input_length":1200,"output_length":50,"hash_ids":[0,1,2],"timestamp":0.0,"group_id":0}
{"session_id":"test-sess-001","input_length":512,"output_length":30,"hash_ids":[3],"delay":100.0}
{"session_id":"test-sess-002","input_length":1500,"output_length":40,"hash_ids":[4,5,6],"timestamp":0.5,"group_id":1}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version, None);
    assert_eq!(report.details, details(&[("arrivals_derived", 1.into()), ("sessions", 2.into())]));
    let session = |name: &str| Some(String::from(name));
    let expected = [
        RequestRow {
            session_id: session("test-sess-001"),
            turn: Some(0),
            arrival_time: Some(0),
            input_tokens: Some(1200),
            output_tokens: Some(50),
            prefix_hashes: Some(vec![0, 1, 2]),
            block_size: Some(512),
            ..base("conv:1", 1)
        },
        RequestRow {
            session_id: session("test-sess-001"),
            turn: Some(1),
            arrival_time: Some(100 * MS),
            input_tokens: Some(512),
            output_tokens: Some(30),
            prefix_hashes: Some(vec![3]),
            block_size: Some(512),
            ..base("conv:2", 2)
        },
        RequestRow {
            session_id: session("test-sess-002"),
            turn: Some(0),
            arrival_time: Some(500_000),
            input_tokens: Some(1500),
            output_tokens: Some(40),
            prefix_hashes: Some(vec![4, 5, 6]),
            block_size: Some(512),
            ..base("conv:3", 3)
        },
    ];
    assert_eq!(sink.requests, expected);
}

#[test]
fn delta_turns_accumulate_the_previous_prompt_and_output() {
    // Dynamo's mooncake-delta.jsonl: 16 prompt + 4 output + 8 new tokens = 28 (Dynamo's own replay test says 28).
    let text = r#"{"request_id":"d1","session_id":"delta-session","timestamp":0,"input_length":16,"output_length":4,"hash_ids":[201]}
{"request_id":"d2","session_id":"delta-session","timestamp":10,"delay":5,"input_length":8,"output_length":4,"hash_ids":[202]}
{"request_id":"d3","session_id":"delta-session","input_length":600,"output_length":1,"hash_ids":[203,204],"delay":2.5}
{"request_id":"lone","input_length":3,"output_length":1,"hash_ids":[205],"timestamp":1}"#;
    let (sink, report) = parse_with(&MooncakeDelta, text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("mooncake-delta"));
    assert_eq!(
        report.details,
        details(&[("arrivals_derived", 1.into()), ("delta_hash_ids_dropped", 2.into()), ("sessions", 1.into())])
    );
    let got: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.turn, r.arrival_time, r.input_tokens, r.prefix_hashes.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("d1", Some(0), Some(0), Some(16), Some(vec![201])),
            ("d2", Some(1), Some(10 * MS), Some(28), None),
            // 28 + 4 + 600; no timestamp, so 10 ms + 2.5 ms.
            ("d3", Some(2), Some(12_500_000), Some(632), None),
            ("lone", None, Some(MS), Some(3), Some(vec![205])),
        ]
    );
    assert!(sink.requests.iter().all(|r| r.source == "mooncake-delta"));
    // The same file read as plain Mooncake keeps each row's own length.
    let (plain, report) = parse(text, ParseOptions::default());
    assert_eq!(report.format_version, None);
    assert_eq!(plain.requests[1].input_tokens, Some(8));
    assert_eq!(plain.requests[1].prefix_hashes, Some(vec![202]));
}

#[test]
fn delta_context_is_unknown_after_a_turn_without_output() {
    let text = r#"{"session_id":"s","timestamp":0,"input_length":5,"hash_ids":[1]}
{"session_id":"s","timestamp":1,"input_length":2,"output_length":1}"#;
    let (sink, report) = parse_with(&MooncakeDelta, text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests[1].input_tokens, None);
    assert_eq!(report.details["delta_context_unknown"], 1);
}

/// The scoped form of hash id `id` in play `play`, as the module documentation defines it.
fn scoped(play: &str, id: u64) -> u64 {
    xxh3_64_with_seed(&id.to_le_bytes(), xxh3_64(play.as_bytes()))
}

#[test]
fn agentic_v2_rows_follow_their_dependencies() {
    // Dynamo's agentic-mooncake.jsonl fixture.
    let text = r#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"local","source":{"format":"e2e-fixture","digest":"agentic-v1"}}
{"request_id":"agent-root","play_id":"agent-play","session_id":"root","model":"tiny-model","input_length":4,"output_length":2,"hash_ids":[301],"not_before_ms":0,"dependencies":[]}
{"request_id":"agent-child","play_id":"agent-play","session_id":"child","model":"tiny-model","input_length":4,"output_length":2,"hash_ids":[302],"not_before_ms":0,"dependencies":[{"request_id":"agent-root","trigger":"dispatch","delay_ms":5,"relation":"spawn"}]}
{"request_id":"agent-join","play_id":"agent-play","session_id":"root","model":"tiny-model","input_length":4,"output_length":2,"hash_ids":[303],"not_before_ms":0,"dependencies":[{"request_id":"agent-root","trigger":"completion","delay_ms":1,"relation":"sequence"},{"request_id":"agent-child","trigger":"completion","delay_ms":1,"relation":"join"}]}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, 4);
    assert_eq!(report.format_version.as_deref(), Some("agentic_mooncake-v2"));
    assert_eq!(
        report.details,
        details(&[
            ("arrivals_derived", 2.into()),
            ("dependencies", 3.into()),
            ("dependency_relations", serde_json::json!({"join": 1, "sequence": 1, "spawn": 1})),
            ("dependency_triggers", serde_json::json!({"completion": 2, "dispatch": 1})),
            ("header", serde_json::json!({"block_size": 4, "hash_id_scope": "local", "version": 2})),
            ("sessions", 2.into()),
        ])
    );
    let row = |id: &str, line, session: &str, turn, arrival, hash| RequestRow {
        model: Some("tiny-model".into()),
        session_id: Some(session.into()),
        turn: Some(turn),
        arrival_time: Some(arrival),
        input_tokens: Some(4),
        output_tokens: Some(2),
        prefix_hashes: Some(vec![scoped("agent-play", hash)]),
        block_size: Some(4),
        workload_class: Some(WorkloadClass::Agent),
        ..base(id, line)
    };
    let expected = [
        row("agent-root", 2, "root", 0, 0, 301),
        // Dispatched 5 ms after the root was.
        row("agent-child", 3, "child", 0, 5 * MS, 302),
        // 1 ms after the later of the two completions, taken as their arrivals (no recorded service time).
        row("agent-join", 4, "root", 1, 6 * MS, 303),
    ];
    assert_eq!(sink.requests, expected);
}

#[test]
fn local_hash_ids_collide_only_within_a_play() {
    let text = r#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":2,"hash_id_scope":"local"}
{"request_id":"a","play_id":"p1","session_id":"s","model":"m","input_length":3,"output_length":1,"hash_ids":[7,8],"not_before_ms":0,"recorded_api_time_ms":40}
{"request_id":"b","play_id":"p1","session_id":"s","model":"m","input_length":3,"output_length":1,"hash_ids":[7,9],"not_before_ms":2,"dependencies":[{"request_id":"a","trigger":"completion","delay_ms":10,"relation":"sequence"}]}
{"request_id":"c","play_id":"p2","session_id":"s","model":"m","input_length":3,"output_length":1,"hash_ids":[7,8],"not_before_ms":100,"dependencies":[{"request_id":"gone","trigger":"dispatch","delay_ms":0,"relation":"replay_barrier"}]}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    let hashes: Vec<_> = sink.requests.iter().map(|r| r.prefix_hashes.clone().unwrap()).collect();
    assert_eq!(hashes[0], [scoped("p1", 7), scoped("p1", 8)]);
    assert_eq!(hashes[0][0], hashes[1][0], "a shared first block within play p1");
    assert_ne!(hashes[0][0], hashes[2][0], "the same id in play p2 is another block");
    assert_ne!(hashes[0][0], 7);
    // b: a's arrival (0) + a's recorded 40 ms + 10 ms; c: its dependency is unknown, so not_before_ms.
    let arrivals: Vec<_> = sink.requests.iter().map(|r| r.arrival_time).collect();
    assert_eq!(arrivals, [Some(0), Some(50 * MS), Some(100 * MS)]);
    assert_eq!(sink.requests[0].e2e_s, Some(0.04));
    assert_eq!(report.details["dependencies_unresolved"], 1);
    assert_eq!(report.details["dependency_relations"], serde_json::json!({"replay_barrier": 1, "sequence": 1}));
    assert_eq!(report.details["header"]["block_size"], 2);
}

#[test]
fn header_problems_are_diagnosed_and_defaults_apply() {
    let text = r#"{"schema":"dynamo.agentic_mooncake","version":3,"block_size":0}
{"request_id":"r","play_id":"p","session_id":"s","model":"m","input_length":600,"output_length":1,"hash_ids":[1,2],"dependencies":[{"request_id":"x","trigger":"later","delay_ms":-1}]}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    let found: Vec<(u64, &str, &str)> =
        sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect();
    assert_eq!(
        found,
        [
            (1, "inconsistent", "header `version` is not 2; rows are read as version 2"),
            (1, "invalid-value", "header `block_size` is zero or too large; 512 is used"),
            (1, "missing-field", "missing field `hash_id_scope` in the header; hash ids are kept unscoped"),
            (2, "missing-field", "missing field `not_before_ms`"),
        ]
    );
    let row = &sink.requests[0];
    assert_eq!((row.prefix_hashes.as_deref(), row.block_size, row.arrival_time), (Some(&[1, 2][..]), Some(512), None));
    assert_eq!(report.details["dependency_triggers"], serde_json::json!({"other": 1}), "never the value itself");
    assert_eq!(report.details["dependency_relations"], serde_json::json!({"missing": 1}));
}

#[test]
fn legacy_agentic_rows_wait_for_requests_and_tools() {
    let text = r#"{"request_id":"a1","session_id":"s","input_length":10,"output_length":3,"hash_ids":[1],"timestamp":100}
{"request_id":"a2","session_id":"s","input_length":20,"output_length":4,"hash_ids":[1],"wait_for":["a1"],"delay":5,"tool_wait_ms":250,"tool_events":[{"tool_call_id":"t","tool_class":"bash","started_at_unix_ms":1,"ended_at_unix_ms":2,"duration_ms":1,"status":"succeeded"}]}
{"request_id":"a3","input_length":5,"output_length":1,"hash_ids":[9],"wait_for":["nope"],"created_time":400}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("agentic_mooncake"));
    assert_eq!(
        report.details,
        details(&[
            ("arrivals_derived", 1.into()),
            ("dependencies_unresolved", 1.into()),
            ("sessions", 1.into()),
            ("wait_for", 2.into()),
        ])
    );
    let expected = [
        RequestRow {
            session_id: Some("s".into()),
            turn: Some(0),
            arrival_time: Some(100 * MS),
            input_tokens: Some(10),
            output_tokens: Some(3),
            prefix_hashes: Some(vec![1]),
            block_size: Some(512),
            ..base("a1", 1)
        },
        RequestRow {
            session_id: Some("s".into()),
            turn: Some(1),
            // a1's arrival + delay 5 ms + tool wait 250 ms.
            arrival_time: Some(355 * MS),
            input_tokens: Some(20),
            output_tokens: Some(4),
            prefix_hashes: Some(vec![1]),
            block_size: Some(512),
            tool_calls: Some(1),
            workload_class: Some(WorkloadClass::Agent),
            ..base("a2", 2)
        },
        RequestRow {
            // The request it waits for is unknown: its own timestamp (`created_time`) is used.
            arrival_time: Some(400 * MS),
            input_tokens: Some(5),
            output_tokens: Some(1),
            prefix_hashes: Some(vec![9]),
            block_size: Some(512),
            workload_class: Some(WorkloadClass::Agent),
            ..base("a3", 3)
        },
    ];
    assert_eq!(sink.requests, expected);
}

#[test]
fn applied_compute_sessions_expand_into_turns() {
    // Dynamo's applied-compute-agentic.jsonl fixture.
    let text = r#"{"num_turns":2,"input_prompt_length":16,"assistant_response_length":[4,4],"tool_call_output_length":[8,8],"tool_call_latency":[0.01,0.02],"final_assistant_response_length":4}"#;
    let options = ParseOptions { start_ns: 1_000 * MS, ..ParseOptions::default() };
    let (sink, report) = parse(text, options);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("applied_compute_agentic"));
    assert_eq!(report.details, details(&[("sessions", 1.into()), ("tool_calls", 2.into())]));
    let turn = |k: u32, arrival_ms: i64, input, tools| RequestRow {
        session_id: Some("conv:1".into()),
        turn: Some(k),
        arrival_time: Some((1_000 + arrival_ms) * MS),
        input_tokens: Some(input),
        output_tokens: Some(4),
        tool_calls: Some(tools),
        workload_class: Some(WorkloadClass::Agent),
        ..base(&format!("conv:1:{k}"), 1)
    };
    // Prompts: 16; 16 + 4 + 8; 28 + 4 + 8. Arrivals: start, +10 ms, +20 ms more.
    assert_eq!(sink.requests, [turn(0, 0, 16, 1), turn(1, 10, 28, 1), turn(2, 30, 40, 0)]);
}

#[test]
fn applied_compute_problems_skip_the_session() {
    let text = [
        r#"{"num_turns":1,"input_prompt_length":5,"assistant_response_length":[1],"tool_call_output_length":[2],"tool_call_latency":[0.5],"final_assistant_response_length":3}"#,
        r#"{"num_turns":2,"input_prompt_length":5,"assistant_response_length":[1],"tool_call_output_length":[2,2],"tool_call_latency":[0,0],"final_assistant_response_length":3}"#,
        r#"{"input_prompt_length":5,"assistant_response_length":[],"final_assistant_response_length":3}"#,
        r#"{"num_turns":0,"input_prompt_length":5,"assistant_response_length":[],"final_assistant_response_length":3}"#,
        r#"{"num_turns":1,"input_prompt_length":5,"assistant_response_length":[1],"tool_call_output_length":[2],"tool_call_latency":[-1],"final_assistant_response_length":3}"#,
        r#"{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[0]}"#,
        r#"{"num_turns":0,"input_prompt_length":5,"assistant_response_length":[],"tool_call_output_length":[],"tool_call_latency":[],"final_assistant_response_length":3}"#,
    ]
    .join("\n");
    let (sink, _) = parse(&text, ParseOptions::default());
    let found: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
    assert_eq!(
        found,
        [(2, "inconsistent"), (3, "missing-field"), (4, "missing-field"), (5, "invalid-value"), (6, "missing-field")]
    );
    assert_eq!(
        sink.diagnostics[0].message,
        "`assistant_response_length` has 1 entries but num_turns is 2; the session is skipped"
    );
    assert_eq!(sink.diagnostics[1].message, "missing field `num_turns`");
    assert_eq!(sink.diagnostics[2].message, "missing field `tool_call_output_length`");
    let kept: Vec<(u64, Option<u32>, Option<u32>)> =
        sink.requests.iter().map(|r| (r.source_line.unwrap(), r.turn, r.input_tokens)).collect();
    // Line 1: 5, then 5 + 1 + 2; line 7: a session with no tool call is just its final turn.
    assert_eq!(kept, [(1, Some(0), Some(5)), (1, Some(1), Some(8)), (7, Some(0), Some(5))]);
    assert_eq!(sink.requests[1].arrival_time, Some(500 * MS));
}

#[test]
fn output_token_ids_are_counted_never_kept() {
    let text = r#"{"timestamp":0,"input_length":1,"output_token_ids":[5,6,7],"hash_ids":[0],"priority":2,"policy_class":"gold"}"#;
    let (sink, report) = parse(text, ParseOptions::default());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(sink.requests[0].output_tokens, Some(3));
    assert_eq!(
        report.details,
        details(&[("output_lengths_from_token_ids", 1.into()), ("rows_with_priority", 1.into())])
    );
}

#[test]
fn user_text_never_reaches_rows_details_or_diagnostics() {
    let text = [
        r#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"local","source":{"format":"CANARY-1","digest":"CANARY-2"}}"#,
        r#"{"request_id":"r","play_id":"p","session_id":"s","model":"m","input_length":4,"output_length":1,"hash_ids":[1],"not_before_ms":0,"policy_class":"CANARY-3","dependencies":[{"request_id":"x","trigger":"CANARY-4","relation":"CANARY-5","delay_ms":0}],"text_input":"CANARY-6","messages":[{"role":"user","content":"CANARY-7"}]}"#,
        r#"{"request_id":"q","play_id":"p","session_id":"s","model":"m","input_length":"CANARY-8","output_length":1}"#,
    ]
    .join("\n");
    let (sink, report) = parse(&text, ParseOptions::default());
    let everything = format!("{:?}{:?}{:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!everything.contains("CANARY"), "{everything}");
    assert_eq!(sink.requests.len(), 1);
    assert_eq!(sink.diagnostics.len(), 1);
}

#[test]
fn too_many_sessions_forget_the_least_recent_with_one_diagnostic() {
    use std::fmt::Write;
    let mut text = String::new();
    for i in 0..=MAX_SESSIONS {
        writeln!(text, r#"{{"session_id":"s{i}","timestamp":0,"input_length":1,"output_length":1}}"#).unwrap();
    }
    writeln!(text, r#"{{"session_id":"s0","timestamp":0,"input_length":1,"output_length":1}}"#).unwrap();
    let (sink, report) = parse(&text, ParseOptions::default());
    let found: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
    assert_eq!(found, [(MAX_SESSIONS as u64 + 1, "inconsistent")]);
    assert_eq!(
        sink.diagnostics[0].message,
        "more than 100000 sessions open: the least recently used are forgotten (a later turn of one restarts at turn 0)"
    );
    assert_eq!(sink.requests.last().unwrap().turn, Some(0), "s0 was forgotten and starts over");
    assert_eq!(report.details["sessions_evicted"], 2);
    assert_eq!(report.details["sessions"], MAX_SESSIONS as u64 + 2);
}

#[test]
fn detects_every_variant_and_nothing_else() {
    let cases: [(&[u8], Option<Confidence>); 9] = [
        (br#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"local"}"#, Some(Confidence::High)),
        (br#"{"num_turns":2,"input_prompt_length":16,"assistant_response_length":[4,4],"tool_call_output_length":[8,8]"#, Some(Confidence::High)),
        (br#"{"request_id":"a","play_id":"p","session_id":"s","model":"m","input_length":4,"output_length":2,"hash_ids":[1],"not_before_ms":0"#, Some(Confidence::High)),
        (br#"{"request_id":"a","input_length":4,"output_length":2,"hash_ids":[1],"wait_for":["b"]}"#, Some(Confidence::High)),
        (br#"{"session_id":"test-sess-001","input_length":1200,"output_length":50,"hash_ids":[0,1,2],"timestamp":0.0,"group_id":0}"#, Some(Confidence::High)),
        (br#"{"session_id":"x","input_length":1200,"output_length":50,"hash_ids":[0,1,2]}"#, Some(Confidence::Low)),
        (br#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":110}"#, None),
        (br#"{"session_id": "chat_1", "turns": [{"text": "What is machine learning?"}]}"#, None),
        (br#"{"request_id":"x","input_tokens":10,"output_tokens":2,"ttft_ms":3}"#, None),
    ];
    for (head, expected) in cases {
        assert_eq!(Mooncake.detect(head), expected, "{}", String::from_utf8_lossy(head));
        assert_eq!(MooncakeDelta.detect(head), None);
    }
}
