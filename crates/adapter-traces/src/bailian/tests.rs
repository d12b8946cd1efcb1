use infertrace_adapter::{CollectSink, ParseOptions};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::*;

const SECOND: i64 = 1_000_000_000;

/// An input, the (line, kind) of its diagnostics, and its number of rows.
type Case = (&'static str, &'static [(u64, &'static str)], usize);

fn parse_capped(text: &str, cap: usize, start_ns: i64) -> (CollectSink, ParseReport) {
    let options = ParseOptions { start_ns, ..ParseOptions::default() };
    let ctx =
        ParseContext { source_file: "qwen_traceA_blksz_16.jsonl", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let mut parser = Parser::new(&ctx, cap);
    let mut lines = LineReader::new(text.as_bytes());
    map_json_lines(&mut lines, &mut sink, |line_no, record: Record, sink| parser.record(line_no, record, sink))
        .unwrap();
    let details = parser.details();
    (sink, ParseReport { format_version: None, clock_domain: ClockDomain::Relative, year: None, lines: 0, details })
}

fn parse(text: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx =
        ParseContext { source_file: "qwen_traceA_blksz_16.jsonl", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = BailianTrace.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn kinds(sink: &CollectSink) -> Vec<(u64, &'static str)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect()
}

/// (request id, session, turn) of every row.
fn sessions(sink: &CollectSink) -> Vec<(&str, &str, u32)> {
    sink.requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.session_id.as_deref().unwrap_or("-"), r.turn.unwrap_or(u32::MAX)))
        .collect()
}

#[test]
fn rows_map_the_documented_fields() {
    // The README's record (its `hash_ids` shortened to a prompt of 40 tokens = 3 blocks, the last one partial).
    let text = r#"{"chat_id": 55, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 16, "output_length": 20, "type": "search", "turn": 1, "hash_ids": [1089]}
{"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 40, "output_length": 132, "type": "text", "turn": 2, "hash_ids": [1089, 1090, 1091]}
"#;
    let (sink, report) = parse_capped(text, 10, 100 * SECOND);
    assert_eq!(kinds(&sink), []);
    assert_eq!(sessions(&sink), [("55", "55", 0), ("159", "55", 1)]);
    let (root, follow_up) = (&sink.requests[0], &sink.requests[1]);
    assert_eq!(root.arrival_time, Some(101 * SECOND + SECOND / 2));
    assert_eq!(follow_up.arrival_time, Some(161 * SECOND + 114_000_000));
    assert_eq!((follow_up.input_tokens, follow_up.output_tokens), (Some(40), Some(132)));
    assert_eq!((root.workload_class, follow_up.workload_class), (Some(WorkloadClass::Rag), None));
    assert_eq!(follow_up.block_size, Some(16));
    let h0 = xxh3_64_with_seed(&1089u64.to_le_bytes(), 0);
    let h1 = xxh3_64_with_seed(&1090u64.to_le_bytes(), h0);
    let h2 = xxh3_64_with_seed(&1091u64.to_le_bytes(), h1);
    assert_eq!(follow_up.prefix_hashes, Some(vec![h0, h1, h2]));
    assert_eq!(root.prefix_hashes, Some(vec![h0]));
    assert_eq!(follow_up.source, "bailian-trace");
    assert_eq!(follow_up.status, Status::Unknown);
    assert_eq!((follow_up.model.as_deref(), follow_up.source_line), (None, Some(2)));
    assert_eq!(report.details["sessions"], 1);
    assert_eq!(report.details["request_types"], serde_json::json!({"search": 1, "text": 1}));
}

#[test]
fn sessions_follow_the_parent_chain() {
    let line = |chat: i64, parent: i64, turn: u64| {
        format!(
            r#"{{"chat_id": {chat}, "parent_chat_id": {parent}, "timestamp": 0.0, "input_length": 1, "output_length": 1, "type": "text", "turn": {turn}}}"#
        )
    };
    let text = [
        line(10, -1, 1),
        line(11, 10, 2),
        line(20, -1, 1),
        line(12, 11, 3),
        // Follow-ups of chat 5, which the file never shows: they share a session named after it.
        line(21, 5, 3),
        line(22, 5, 3),
        line(23, 21, 4),
        // Chat 30's follow-up comes first; chat 30 itself then joins the session it named.
        line(31, 30, 2),
        line(30, -1, 1),
        line(32, 30, 2),
    ]
    .join("\n");
    let (sink, report) = parse(&text);
    assert_eq!(kinds(&sink), []);
    assert_eq!(
        sessions(&sink),
        [
            ("10", "10", 0),
            ("11", "10", 1),
            ("20", "20", 0),
            ("12", "10", 2),
            ("21", "5", 2),
            ("22", "5", 2),
            ("23", "5", 3),
            ("31", "30", 1),
            ("30", "30", 0),
            ("32", "30", 1),
        ]
    );
    assert_eq!(report.details["sessions"], 4, "10, 20, 5 and 30");
    assert_eq!(report.details["parents_unseen"], 2, "5 and 30");
}

#[test]
fn contradictions_are_diagnostics_and_the_chain_wins() {
    let text = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": 1}
{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1, "turn": 5}
{"chat_id": 3, "parent_chat_id": 3, "timestamp": 2, "input_length": 1, "output_length": 1}
{"chat_id": 4, "parent_chat_id": -7, "timestamp": 2, "input_length": 1, "output_length": 1}
{"chat_id": 1, "parent_chat_id": -1, "timestamp": 3, "input_length": 1, "output_length": 1}
{"chat_id": 6, "parent_chat_id": 1, "timestamp": 4, "input_length": 33, "output_length": 1, "hash_ids": [1, 2]}
"#;
    let (sink, _) = parse(text);
    assert_eq!(
        kinds(&sink),
        [(2, "inconsistent"), (3, "invalid-value"), (4, "invalid-value"), (5, "inconsistent"), (6, "inconsistent")]
    );
    assert_eq!(
        sessions(&sink),
        [("1", "1", 0), ("2", "1", 1), ("3", "3", 0), ("4", "4", 0), ("1", "1", 0), ("6", "1", 1)]
    );
    assert_eq!(sink.requests[5].prefix_hashes.as_ref().map(Vec::len), Some(2), "kept despite the length");
}

#[test]
fn lines_without_the_required_fields_are_reported_and_yield_no_row() {
    let cases: &[Case] = &[
        (r#"{"parent_chat_id": -1, "timestamp": 0, "input_length": 1}"#, &[(1, "missing-field")], 0),
        (r#"{"chat_id": 1, "timestamp": 0, "output_length": 1}"#, &[(1, "missing-field")], 0),
        (r#"{"chat_id": 1, "input_length": 1}"#, &[(1, "missing-field")], 1),
        (r#"{"chat_id": 1, "timestamp": 1e300, "input_length": 1}"#, &[(1, "invalid-value")], 1),
        (r#"{"chat_id": 1, "timestamp": 0, "input_length": 5000000000}"#, &[(1, "invalid-value")], 1),
        (r#"{"chat_id": -1, "timestamp": 0, "input_length": 1}"#, &[(1, "malformed-json")], 0),
        (r#"{"chat_id": 1, "timestamp": 0, "input_length": 1, "hash_ids": [-3]}"#, &[(1, "malformed-json")], 0),
        (r#"{"chat_id": 1, "timestamp": "#, &[(1, "malformed-json")], 0),
        ("[1, 2]", &[(1, "malformed-json")], 0),
        ("", &[], 0),
        ("\n   \n", &[], 0),
    ];
    for (text, expected, rows) in cases {
        let (sink, _) = parse(text);
        assert_eq!(kinds(&sink), *expected, "{text}");
        assert_eq!(sink.requests.len(), *rows, "{text}");
    }
    // Invalid UTF-8 is a diagnostic of its own line.
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "t.jsonl", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let bytes = b"{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 1}\n\xff\n";
    BailianTrace.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    assert_eq!((kinds(&sink), sink.requests.len()), (vec![(2, "invalid-utf8")], 1));
}

#[test]
fn the_oldest_chats_are_forgotten_beyond_the_cap() {
    let text = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "turn": 1}
{"chat_id": 2, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "turn": 1}
{"chat_id": 3, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "turn": 1}
{"chat_id": 4, "parent_chat_id": 1, "timestamp": 0, "input_length": 1, "turn": 2}
{"chat_id": 5, "parent_chat_id": 3, "timestamp": 0, "input_length": 1, "turn": 2}
"#;
    let (sink, report) = parse_capped(text, 2, 0);
    // Chats 1 and 3 are forgotten before their follow-ups come: each follow-up starts a session named after its
    // parent, at the turn it writes.
    assert_eq!(sessions(&sink), [("1", "1", 0), ("2", "2", 0), ("3", "3", 0), ("4", "1", 1), ("5", "3", 1)]);
    assert_eq!(kinds(&sink), [(3, "inconsistent")], "reported once");
    // 1, then 2 and 3 to make room for the unseen parent 1 and for 4, then 1 and 4 for the unseen parent 3 and 5.
    assert_eq!(report.details["chats_forgotten"], 5);
    assert_eq!(report.details["parents_unseen"], 2);
}

#[test]
fn user_text_never_reaches_rows_diagnostics_or_details() {
    const CANARY: &str = "CANARY-secret-prompt";
    let text = format!(
        r#"{{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "type": "{CANARY}", "prompt": "{CANARY}"}}
{{"chat_id": 2, "parent_chat_id": 1, "timestamp": "{CANARY}", "input_length": 1}}
{{"chat_id": 3, "parent_chat_id": 1, "timestamp": 0, "input_length": 1, "hash_ids": ["{CANARY}"]}}
"#
    );
    let (sink, report) = parse(&text);
    assert_eq!(sink.requests.len(), 1);
    assert_eq!(sink.diagnostics.len(), 2);
    let everything = format!("{:?}{:?}{:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!everything.contains("CANARY"), "{everything}");
    assert_eq!(report.details["request_types"], serde_json::json!({"other": 1}));
}

#[test]
fn detection_claims_bailian_lines_only() {
    let cases: &[(&str, Option<Confidence>)] = &[
        (
            r#"{"chat_id": 0, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 502, "output_length": 1494, "type": "thinking", "turn": 1, "hash_ids": [0, 1]}"#,
            Some(Confidence::High),
        ),
        (r#"{"chat_id":159,"parent_chat_id":55,"timestamp":61.114,"input_length":521}"#, Some(Confidence::High)),
        (r#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}"#, None),
        (r#"{"id":"trace_0001","block_size":64,"requests":[]}"#, None),
        ("chat_id,parent_chat_id,input_length\n", None),
        ("", None),
    ];
    for (head, expected) in cases {
        assert_eq!(BailianTrace.detect(head.as_bytes()), *expected, "{head}");
    }
}
