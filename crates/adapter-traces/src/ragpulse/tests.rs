use infertrace_adapter::{CollectSink, ParseOptions};
use serde_json::json;

use super::*;

fn parse_with(text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    let mut sink = CollectSink::default();
    let ctx = ParseContext { source_file: "ragpulse/0_trace.jsonl", options: &options, modified: None, sidecars: None };
    let report = RagPulse.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str) -> (CollectSink, ParseReport) {
    parse_with(text, ParseOptions::default())
}

fn found(sink: &CollectSink) -> Vec<(u64, &str, &str)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect()
}

const SECOND: i64 = 1_000_000_000;

// The first two lines of `data/0_trace.jsonl`, verbatim.
const LINE_1: &str = r#"{"timestamp": "82", "input_length": 3112, "output_length": 192, "hash_ids": {"sys_prompt": [8302, 14332, 15199], "passages_ids": [7398, 7370, 7098, 6967, 7405, 7298], "history": [15200], "web_search": [], "user_input": [26923]}, "session_id": "1757476916095-afhwfadnh5ew"}"#;
const LINE_2: &str = r#"{"timestamp": "93", "input_length": 3167, "output_length": 86, "hash_ids": {"sys_prompt": [8302, 14332, 15198], "passages_ids": [6124, 7392, 7393, 7374, 8016, 5443], "history": [15200], "web_search": [], "user_input": [26922]}, "session_id": "1757476927914-jvmj2r9c8b5g"}"#;

/// `h = xxh3_64([component] ++ id as 8 little-endian bytes, seed previous)`, written out for the test.
fn link(previous: u64, component: u8, id: u64) -> u64 {
    let mut bytes = vec![component];
    bytes.extend_from_slice(&id.to_le_bytes());
    xxh3_64_with_seed(&bytes, previous)
}

#[test]
fn first_rows_of_the_published_trace() {
    let (sink, report) = parse(&format!("{LINE_1}\n{LINE_2}\n\n"));
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("trace"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert_eq!(report.lines, 3, "the trailing blank line is read and skipped");
    let first = &sink.requests[0];
    assert_eq!(first.request_id, "0_trace:1");
    assert_eq!(first.source, "ragpulse");
    assert_eq!(first.session_id.as_deref(), Some("1757476916095-afhwfadnh5ew"));
    assert_eq!(first.turn, Some(0));
    assert_eq!(first.arrival_time, Some(82 * SECOND));
    assert_eq!((first.input_tokens, first.output_tokens), (Some(3112), Some(192)));
    assert_eq!(first.retrieved_docs, Some(6));
    assert_eq!(first.workload_class, Some(WorkloadClass::Rag));
    assert_eq!(first.status, Status::Unknown);
    assert_eq!(first.block_size, None, "chunks vary in length");
    // 3 system-prompt chunks, 6 passages, 1 history chunk, no web result, 1 question.
    let hashes = first.prefix_hashes.as_ref().unwrap();
    assert_eq!(hashes.len(), 11);
    let h0 = link(0, 0, 8302);
    let h1 = link(h0, 0, 14332);
    assert_eq!(hashes[..2], [h0, h1]);
    assert_eq!(hashes[3], link(hashes[2], 1, 7398), "the first passage follows the system prompt");
    assert_eq!(hashes[10], link(hashes[9], 4, 26923), "the question comes last");
    // The second row shares the first two system-prompt chunks, and nothing after them.
    let second = sink.requests[1].prefix_hashes.as_ref().unwrap();
    assert_eq!(second[..2], hashes[..2]);
    assert_ne!(second[2], hashes[2]);
    assert_ne!(second[7], hashes[7], "history chunk 15200 is the same, but not the prefix before it");
    assert_eq!(
        serde_json::to_value(&report.details).unwrap(),
        json!({
            "sessions": 2,
            "chunks": {"sys_prompt": 6, "passages": 12, "history": 2, "web_search": 0, "user_input": 2},
        })
    );
}

#[test]
fn turns_sessions_start_and_timestamp_regressions() {
    let text = r#"{"timestamp": "604453", "input_length": 10, "output_length": 1, "hash_ids": {"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": [1]}, "session_id": "a"}
{"timestamp": "0", "input_length": 11, "output_length": 2, "hash_ids": {"sys_prompt": [], "passages_ids": [5, 6], "history": [], "web_search": [7], "user_input": [2]}, "session_id": "b"}
{"timestamp": 27.5, "input_length": 12, "output_length": 3, "hash_ids": {"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": [3]}, "session_id": "a"}
"#;
    // --start 2025-09-10T04:00:00Z (12:00:00 at +08:00) is 1_757_476_800 s after the epoch.
    let start = 1_757_476_800 * SECOND;
    let (sink, report) = parse_with(text, ParseOptions { start_ns: start, ..ParseOptions::default() });
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> = sink.requests.iter().map(|r| (r.session_id.as_deref(), r.turn, r.arrival_time)).collect();
    assert_eq!(
        rows,
        [
            (Some("a"), Some(0), Some(start + 604_453 * SECOND)),
            (Some("b"), Some(0), Some(start)),
            (Some("a"), Some(1), Some(start + 27 * SECOND + SECOND / 2)),
        ]
    );
    assert_eq!(sink.requests[1].retrieved_docs, Some(2));
    assert_eq!(sink.requests[0].retrieved_docs, Some(0));
    assert_eq!(report.details["sessions"], json!(2));
    assert_eq!(report.details["timestamp_regressions"], json!(1), "604453 → 0; 0 → 27.5 rises again");
}

#[test]
fn maps_before_the_trace_give_the_token_split() {
    let text = r#"{"sys_prompt_id": 100, "token_length": 10}
{"passage_id": 1, "token_length": 20}
{"passage_id": 2, "token_length": 7}
{"history_id": 200, "token_length": 5}
{"user_input_id": 300, "token_length": 2}
{"web_search_id": 400, "token_length": 9}
{"timestamp": "1", "input_length": 40, "output_length": 3, "hash_ids": {"sys_prompt": [100], "passages_ids": [1], "history": [200], "web_search": [], "user_input": [300]}, "session_id": "s"}
{"timestamp": "2", "input_length": 50, "output_length": 3, "hash_ids": {"sys_prompt": [100], "passages_ids": [999], "history": [], "web_search": [], "user_input": [300]}, "session_id": "s"}
"#;
    let (sink, report) = parse(text);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("maps+trace"));
    assert_eq!(sink.requests.len(), 2, "map lines write no rows");
    assert_eq!(
        serde_json::to_value(&report.details).unwrap(),
        json!({
            "sessions": 1,
            "chunks": {"sys_prompt": 2, "passages": 2, "history": 1, "web_search": 0, "user_input": 2},
            "maps": {
                "sys_prompt": {"ids": 1, "tokens": 10},
                "passages": {"ids": 2, "tokens": 27},
                "history": {"ids": 1, "tokens": 5},
                "web_search": {"ids": 1, "tokens": 9},
                "user_input": {"ids": 1, "tokens": 2},
            },
            // Only the first row has every chunk's length: 10 + 20 + 5 + 2 = 37 of its 40 tokens.
            "component_tokens": {"sys_prompt": 10, "passages": 20, "history": 5, "web_search": 0, "user_input": 2},
            "tokens_outside_components": 3,
            "rows_with_component_lengths": 1,
            "rows_without_component_lengths": 1,
        })
    );
}

#[test]
fn a_map_file_alone_writes_details_only() {
    let text = "{\"passage_id\": 0, \"token_length\": 84}\n{\"passage_id\": 1, \"token_length\": 286}\n\n";
    let (sink, report) = parse(text);
    assert_eq!((sink.requests.len(), sink.diagnostics.len()), (0, 0));
    assert_eq!(report.format_version.as_deref(), Some("maps"));
    assert_eq!(report.details["maps"]["passages"], json!({"ids": 2, "tokens": 370}));
    assert!(!report.details.contains_key("sessions"));
}

#[test]
fn unusable_lines_are_counted_and_usable_fields_kept() {
    let text = r#"{"timestamp": "5", "input_length": 10, "hash_ids": {"sys_prompt": [1], "passages_ids": [2]}}
{"timestamp": "soon", "input_length": 10, "output_length": 1, "hash_ids": {"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": []}, "session_id": "x"}
{"hello": 1}
{"passage_id": 1, "history_id": 2, "token_length": 3}
{"passage_id": 1}
{"timestamp": "5", "input_length": 10
{"passage_id": 7, "token_length": 3}
{"passage_id": 7, "token_length": 4}
{"timestamp": "6", "input_length": 2, "output_length": 1, "hash_ids": {"sys_prompt": [], "passages_ids": [7], "history": [], "web_search": [], "user_input": []}, "session_id": "x"}
{"timestamp": "7", "input_length": 5000000000, "output_length": 1, "hash_ids": {"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": []}, "session_id": "x"}
"#;
    let (sink, report) = parse(text);
    assert_eq!(
        found(&sink),
        [
            (
                1,
                "missing-field",
                "missing field(s) `output_length`, `session_id`, `history`, `web_search`, `user_input`"
            ),
            (2, "invalid-value", "`timestamp` is not a number of seconds in range"),
            (
                3,
                "unrecognized-line",
                "neither a trace row (`timestamp`, `input_length`, `hash_ids`, …) nor a map row (`<component>_id`, \
                 `token_length`)"
            ),
            (4, "malformed-record", "a map row names ids of two components"),
            (5, "missing-field", "missing field `token_length`"),
            (6, "malformed-json", "JSON ends early at column 37"),
            (7, "inconsistent", "map rows after trace rows give lengths to later trace rows only"),
            (8, "inconsistent", "id listed again with another `token_length`; the first is kept"),
            (9, "inconsistent", "`input_length` is below the sum of its chunks' token lengths"),
            (10, "invalid-value", "`input_length` exceeds 4294967295 tokens"),
        ]
    );
    let kept: Vec<_> =
        sink.requests.iter().map(|r| (r.source_line, r.arrival_time.is_some(), r.input_tokens, r.turn)).collect();
    assert_eq!(
        kept,
        [
            (Some(1), true, Some(10), None),
            (Some(2), false, Some(10), Some(0)),
            (Some(9), true, Some(2), Some(1)),
            (Some(10), true, None, Some(2))
        ]
    );
    assert_eq!(sink.requests[0].retrieved_docs, Some(1));
    assert_eq!(report.format_version.as_deref(), Some("maps+trace"));
    assert_eq!(report.lines, 10);
}

#[test]
fn user_text_never_reaches_rows_or_diagnostics() {
    let canary = "CANARY-ask-about-scholarship-7f3a";
    let text = format!(
        r#"{{"timestamp": "1", "input_length": 3, "output_length": 1, "prompt": "{canary}", "hash_ids": {{"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": [1]}}, "session_id": "s"}}
{{"timestamp": "{canary}", "input_length": 3, "output_length": 1, "hash_ids": {{"sys_prompt": [], "passages_ids": [], "history": [], "web_search": [], "user_input": [1]}}, "session_id": "s"}}
{{"timestamp": "1", "input_length": "{canary}"}}
{{"passage_id": "{canary}", "token_length": 3}}
{{"timestamp": "1", "hash_ids": {{"user_input": ["{canary}"]}}}}
"#
    );
    let (sink, report) = parse(&text);
    assert_eq!(sink.requests.len(), 2);
    assert_eq!(sink.diagnostics.len(), 4);
    assert!(!format!("{sink:?}").contains("CANARY"), "{sink:?}");
    assert!(!format!("{report:?}").contains("CANARY"));
}

#[test]
fn detects_trace_and_map_lines_only() {
    assert_eq!(RagPulse.detect(LINE_1.as_bytes()), Some(Confidence::High));
    // The head may cut the first line short.
    assert_eq!(RagPulse.detect(&LINE_1.as_bytes()[..120]), Some(Confidence::High));
    for map in [
        r#"{"sys_prompt_id": 8302, "token_length": 512}"#,
        r#"{"passage_id": 0, "token_length": 84}"#,
        r#"{"history_id": 15200, "token_length": 11}"#,
        r#"{"user_input_id": 20632, "token_length": 9}"#,
        r#"{"web_search_id": 20110, "token_length": 512}"#,
    ] {
        assert_eq!(RagPulse.detect(format!("{map}\n").as_bytes()), Some(Confidence::High), "{map}");
    }
    // Mooncake: the same length keys, but a list of hash ids.
    let mooncake = r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}"#;
    assert_eq!(RagPulse.detect(mooncake.as_bytes()), None);
    assert_eq!(RagPulse.detect(b"{\"passage_id\": 0}\n"), None);
    assert_eq!(RagPulse.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
}
