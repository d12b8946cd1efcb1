use infertrace_adapter::{CollectSink, DiagnosticKind, ParseOptions};
use infertrace_schema::{ClockDomain, Status, WorkloadClass};
use serde_json::json;

use super::*;

fn parse_with(text: &str, source_file: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    let mut sink = CollectSink::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let report = TraceLab.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str) -> (CollectSink, ParseReport) {
    parse_with(text, "tracelab/trace.jsonl", ParseOptions::default())
}

fn found(sink: &CollectSink) -> Vec<(u64, &str, &str)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect()
}

const MS: i64 = 1_000_000;
const SECOND: i64 = 1_000 * MS;
/// 2026-06-01T00:00:00Z and 2026-03-21T00:00:00Z as Unix seconds.
const JUNE_1: i64 = 1_780_272_000;
const MARCH_21: i64 = 1_774_051_200;

fn at(day: i64, h: i64, m: i64, s: i64, ms: i64) -> i64 {
    (day + h * 3600 + m * 60 + s) * SECOND + ms * MS
}

// Lines 1, 2 and 11 of `example_sessions/sanitized/round_trace.jsonl`, verbatim.
const CLAUDE_0: &str = r#"{"provider":"claude","project":"project_4c7b8a1b","session_id":"claude:92ee5b8a-429c-e80b-5db6-5381512f4697","round_index":0,"round_id":"msg_3e0cf83dc2523801f59077fd","model":"claude-opus-4-8","input_tokens_total":32272,"prefix_tokens":27217,"newly_append_tokens":5055,"claude_uncached_input_tokens":2892,"claude_cache_creation_input_tokens":2163,"claude_cache_read_input_tokens":27217,"output_tokens":931,"reasoning_output_tokens":null,"timing_events":[{"event_type":"user_message","timestamp":"2026-06-01T05:40:20.151Z","source":"user.message","content_chars":146},{"event_type":"reasoning","timestamp":"2026-06-01T05:40:29.420Z","source":"assistant.content.thinking","content_chars":0},{"event_type":"text","timestamp":"2026-06-01T05:40:29.887Z","source":"assistant.content.text","content_chars":116},{"event_type":"tool_call","timestamp":"2026-06-01T05:40:30.836Z","source":"assistant.content.tool_use","tool_call_id":"toolu_2a5ccaf03cb1cdbd5fe2bf","tool_name":"Bash","tool_index":0},{"event_type":"tool_call","timestamp":"2026-06-01T05:40:31.647Z","source":"assistant.content.tool_use","tool_call_id":"toolu_fa282ca228ccfde5098ce6","tool_name":"WebSearch","tool_index":1}],"tools":[{"tool_index":0,"tool_name":"Bash","tool_call_id":"toolu_2a5ccaf03cb1cdbd5fe2bf","emitted_at":"2026-06-01T05:40:30.836Z","input_chars":168,"result_chars":231,"tool_wall_latency_ms":860,"tool_internal_latency_ms":null,"is_error":false,"result_at":"2026-06-01T05:40:31.696Z"},{"tool_index":1,"tool_name":"WebSearch","tool_call_id":"toolu_fa282ca228ccfde5098ce6","emitted_at":"2026-06-01T05:40:31.647Z","input_chars":91,"result_chars":4893,"tool_wall_latency_ms":19291,"tool_internal_latency_ms":19287,"is_error":false,"result_at":"2026-06-01T05:40:50.938Z"}],"current_input_event_count":1,"current_user_message_count":1,"current_tool_result_count":0,"current_user_message_chars":146,"current_tool_result_chars":0,"current_input_chars":146,"first_input_event_type":"user_message","store":".claude","trace_key":"claude:claude:92ee5b8a-429c-e80b-5db6-5381512f4697:msg_3e0cf83dc2523801f59077fd"}"#;
const CLAUDE_1: &str = r#"{"provider":"claude","project":"project_4c7b8a1b","session_id":"claude:92ee5b8a-429c-e80b-5db6-5381512f4697","round_index":1,"round_id":"msg_8d1986c8b1e483eb421ec3b2","model":"claude-opus-4-8","input_tokens_total":35740,"prefix_tokens":29380,"newly_append_tokens":6360,"claude_uncached_input_tokens":2,"claude_cache_creation_input_tokens":6358,"claude_cache_read_input_tokens":29380,"output_tokens":1016,"reasoning_output_tokens":null,"timing_events":[{"event_type":"tool_result","timestamp":"2026-06-01T05:40:31.696Z","source":"user.content.tool_result","tool_call_id":"toolu_2a5ccaf03cb1cdbd5fe2bf","result_chars":231,"is_error":false},{"event_type":"tool_result","timestamp":"2026-06-01T05:40:50.938Z","source":"user.content.tool_result","tool_call_id":"toolu_fa282ca228ccfde5098ce6","result_chars":4893,"is_error":false},{"event_type":"reasoning","timestamp":"2026-06-01T05:41:03.669Z","source":"assistant.content.thinking","content_chars":0},{"event_type":"text","timestamp":"2026-06-01T05:41:04.609Z","source":"assistant.content.text","content_chars":98},{"event_type":"tool_call","timestamp":"2026-06-01T05:41:04.862Z","source":"assistant.content.tool_use","tool_call_id":"toolu_10af38353e0d28d6e5a90a","tool_name":"WebSearch","tool_index":0}],"tools":[{"tool_index":0,"tool_name":"WebSearch","tool_call_id":"toolu_10af38353e0d28d6e5a90a","emitted_at":"2026-06-01T05:41:04.862Z","input_chars":113,"result_chars":4157,"tool_wall_latency_ms":12688,"tool_internal_latency_ms":12684,"is_error":false,"result_at":"2026-06-01T05:41:17.550Z"}],"current_input_event_count":2,"current_user_message_count":0,"current_tool_result_count":2,"current_user_message_chars":0,"current_tool_result_chars":5124,"current_input_chars":5124,"first_input_event_type":"tool_result","store":".claude","trace_key":"claude:claude:92ee5b8a-429c-e80b-5db6-5381512f4697:msg_8d1986c8b1e483eb421ec3b2"}"#;
const CODEX_0: &str = r#"{"provider":"codex","session_id":"codex:a611041f-625d-6fad-5e59-845850dc6543","round_index":0,"round_id":"491f65ac-7464-29f5-68e0-92f973978ce5:0","turn_id":"491f65ac-7464-29f5-68e0-92f973978ce5","model":"gpt-5.4","input_tokens_total":9324,"prefix_tokens":6912,"newly_append_tokens":2412,"claude_uncached_input_tokens":null,"claude_cache_creation_input_tokens":null,"claude_cache_read_input_tokens":null,"output_tokens":444,"reasoning_output_tokens":199,"timing_events":[{"event_type":"user_message","timestamp":"2026-03-21T10:05:59.328Z","source":"event_msg.user_message","content_chars":92},{"event_type":"reasoning","timestamp":"2026-03-21T10:06:02.939Z","source":"response_item.reasoning"},{"event_type":"text","timestamp":"2026-03-21T10:06:05.480Z","source":"response_item.message","content_chars":203},{"event_type":"tool_call","timestamp":"2026-03-21T10:06:05.480Z","source":"response_item.function_call","tool_call_id":"call_TNKdeGZEKVcjCBzY90Itpufn","tool_name":"exec_command","tool_index":0},{"event_type":"tool_call","timestamp":"2026-03-21T10:06:05.527Z","source":"response_item.function_call","tool_call_id":"call_gyrzBUDynrEQslTWyt5d1rGs","tool_name":"exec_command","tool_index":1},{"event_type":"tool_call","timestamp":"2026-03-21T10:06:05.528Z","source":"response_item.function_call","tool_call_id":"call_4SWtrDimyaI4SuYWB1iMmRku","tool_name":"exec_command","tool_index":2},{"event_type":"usage_report","timestamp":"2026-03-21T10:06:05.542Z","source":"event_msg.token_count"}],"tools":[{"tool_index":0,"tool_name":"exec_command","tool_call_id":"call_TNKdeGZEKVcjCBzY90Itpufn","emitted_at":"2026-03-21T10:06:05.480Z","result_at":"2026-03-21T10:06:05.547Z","input_chars":90,"result_chars":122,"tool_wall_latency_ms":67,"tool_internal_latency_ms":0,"is_error":false},{"tool_index":1,"tool_name":"exec_command","tool_call_id":"call_gyrzBUDynrEQslTWyt5d1rGs","emitted_at":"2026-03-21T10:06:05.527Z","result_at":"2026-03-21T10:06:05.606Z","input_chars":142,"result_chars":102,"tool_wall_latency_ms":79,"tool_internal_latency_ms":0,"is_error":true},{"tool_index":2,"tool_name":"exec_command","tool_call_id":"call_4SWtrDimyaI4SuYWB1iMmRku","emitted_at":"2026-03-21T10:06:05.528Z","result_at":"2026-03-21T10:06:06.704Z","input_chars":148,"result_chars":113,"tool_wall_latency_ms":1176,"tool_internal_latency_ms":1002,"is_error":null}],"current_input_event_count":1,"current_user_message_count":1,"current_tool_result_count":0,"current_user_message_chars":92,"current_tool_result_chars":0,"current_input_chars":92,"first_input_event_type":"user_message","store":".codex","trace_key":"codex:codex:a611041f-625d-6fad-5e59-845850dc6543:491f65ac-7464-29f5-68e0-92f973978ce5:0"}"#;

#[test]
fn claude_and_codex_rounds() {
    let (sink, report) = parse(&format!("{CLAUDE_0}\n{CLAUDE_1}\n{CODEX_0}\n"));
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("round-trace"));
    assert_eq!(report.clock_domain, ClockDomain::Utc);
    let r = &sink.requests[0];
    assert_eq!(r.request_id, "msg_3e0cf83dc2523801f59077fd");
    assert_eq!(r.source, "tracelab");
    assert_eq!(r.session_id.as_deref(), Some("claude:92ee5b8a-429c-e80b-5db6-5381512f4697"));
    assert_eq!((r.turn, r.model.as_deref()), (Some(0), Some("claude-opus-4-8")));
    assert_eq!(
        (r.input_tokens, r.cached_tokens, r.output_tokens, r.reasoning_tokens),
        (Some(32272), Some(27217), Some(931), None)
    );
    assert_eq!(r.tool_calls, Some(2));
    // The user message, then the last model output (the second tool call).
    assert_eq!(r.arrival_time, Some(at(JUNE_1, 5, 40, 20, 151)));
    assert_eq!(r.completion_time, Some(at(JUNE_1, 5, 40, 31, 647)));
    assert_eq!(r.first_token_time, None);
    assert_eq!((r.workload_class, r.status), (Some(WorkloadClass::Agent), Status::Unknown));
    // Round 1 starts at its later tool result (05:40:50.938), not the first (05:40:31.696).
    let r = &sink.requests[1];
    assert_eq!(r.turn, Some(1));
    assert_eq!(r.arrival_time, Some(at(JUNE_1, 5, 40, 50, 938)));
    assert_eq!(r.completion_time, Some(at(JUNE_1, 5, 41, 4, 862)));
    assert_eq!((r.input_tokens, r.cached_tokens, r.tool_calls), (Some(35740), Some(29380), Some(1)));
    let r = &sink.requests[2];
    assert_eq!(r.request_id, "491f65ac-7464-29f5-68e0-92f973978ce5:0");
    assert_eq!((r.model.as_deref(), r.input_tokens, r.cached_tokens), (Some("gpt-5.4"), Some(9324), Some(6912)));
    assert_eq!((r.output_tokens, r.reasoning_tokens, r.tool_calls), (Some(444), Some(199), Some(3)));
    // The usage report (10:06:05.542) is not model output.
    assert_eq!(r.arrival_time, Some(at(MARCH_21, 10, 5, 59, 328)));
    assert_eq!(r.completion_time, Some(at(MARCH_21, 10, 6, 5, 528)));
    assert_eq!(
        serde_json::to_value(&report.details).unwrap(),
        json!({
            "sessions": 2,
            "providers": {"claude": 2, "codex": 1},
            "tool_calls": 6,
            "tool_errors": 1,
            "cache_creation_tokens": 2163 + 6358,
        })
    );
}

#[test]
fn contradicting_counts_and_bad_events_are_reported() {
    let text = r#"{"provider":"claude","session_id":"s","round_index":0,"input_tokens_total":100,"prefix_tokens":60,"newly_append_tokens":30,"claude_uncached_input_tokens":1,"claude_cache_creation_input_tokens":2,"claude_cache_read_input_tokens":50,"output_tokens":5,"timing_events":[{"event_type":"user_message","timestamp":"yesterday"},{"event_type":"text","timestamp":"2026-06-01T00:00:01.000Z"}]}
{"provider":"codex","session_id":"t","prefix_tokens":10,"newly_append_tokens":5,"output_tokens":5,"reasoning_output_tokens":6,"timing_events":[{"event_type":"tool_call","timestamp":"2026-06-01T00:00:01Z"},{"event_type":"tool_call","timestamp":"2026-06-01T00:00:02Z"}]}
{"provider":"codex","session_id":"t","output_tokens":5}
{"provider":"codex","round_index":"one"}
"#;
    let (sink, report) = parse(text);
    assert_eq!(
        found(&sink),
        [
            (1, "inconsistent", "`input_tokens_total` is not `prefix_tokens` + `newly_append_tokens`"),
            (1, "inconsistent", "`claude_cache_read_input_tokens` is not `prefix_tokens`"),
            (1, "inconsistent", "Claude's uncached, cache-creation and cache-read tokens do not add up to the total"),
            (1, "invalid-value", "a `timing_events` entry has no ISO-8601 `timestamp`; it is left out of the span"),
            (2, "inconsistent", "`reasoning_output_tokens` exceeds `output_tokens`"),
            (3, "missing-field", "missing field `input_tokens_total`"),
            (4, "malformed-json", "a field has the wrong type or an out-of-range value (column 39)"),
        ]
    );
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.input_tokens, r.tool_calls, r.arrival_time, r.completion_time))
        .collect();
    assert_eq!(
        rows,
        [
            ("trace:1", Some(100), Some(0), None, Some(JUNE_1 * SECOND + SECOND)),
            // No tools list: the tool-call events are counted. No input event: no arrival.
            ("trace:2", Some(15), Some(2), None, Some(JUNE_1 * SECOND + 2 * SECOND)),
            ("trace:3", None, None, None, None),
        ]
    );
    assert_eq!(report.details["rows_without_span"], json!(3));
    assert_eq!(report.details["sessions"], json!(2));
}

#[test]
fn replay_rows_of_the_multi_session_example() {
    // The header and first five rows of `replay/examples/multi_session_large.csv`, verbatim.
    let text = "session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms\n\
                0,117,0,0,2318,200,300\n0,117,1,2518,348,131,154\n0,117,2,2997,812,104,0\n\
                1,393,0,0,861,107,273\n1,393,1,968,358,318,77\n";
    let start = 1_700_000_000 * SECOND;
    let (sink, report) =
        parse_with(text, "multi_session_large.csv", ParseOptions { start_ns: start, ..ParseOptions::default() });
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("replay-csv"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| {
            (
                r.request_id.as_str(),
                r.turn,
                r.arrival_time.map(|t| (t - start) / MS),
                r.input_tokens,
                r.cached_tokens,
                r.output_tokens,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("0_round_000000", Some(0), Some(117), Some(2318), Some(0), Some(200)),
            // 117 ms + the 300 ms tool wait after round 0; the prompt is 2518 + 348.
            ("0_round_000001", Some(1), Some(417), Some(2866), Some(2518), Some(131)),
            ("0_round_000002", Some(2), Some(571), Some(3809), Some(2997), Some(104)),
            ("1_round_000000", Some(0), Some(393), Some(861), Some(0), Some(107)),
            ("1_round_000001", Some(1), Some(666), Some(1326), Some(968), Some(318)),
        ]
    );
    assert!(sink.requests.iter().all(|r| r.workload_class == Some(WorkloadClass::Agent)));
    assert_eq!(
        serde_json::to_value(&report.details).unwrap(),
        json!({"sessions": 2, "arrivals_derived": 3, "compactions": 0, "session_column": "session_id"})
    );
}

#[test]
fn replay_canonical_form_compaction_and_bad_records() {
    let text = "id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n\
                7,100,10,2.5,0,1000.25,0\n\
                7,50,10,2.5,1,0,20\n\
                8,x,10,5,0,0,0\n\
                8,1,2\n\
                ,1,1,0,0,0,0\n";
    let (sink, report) = parse_with(text, "coding_trace.csv", ParseOptions::default());
    assert_eq!(
        found(&sink),
        [
            (4, "invalid-value", "not a non-negative number: `input_len`"),
            (5, "malformed-csv", "3 fields, expected at least 7"),
            (6, "missing-field", "empty session id"),
        ]
    );
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.arrival_time, r.input_tokens, r.cached_tokens))
        .collect();
    assert_eq!(
        rows,
        [
            ("7_round_000000", Some(2_500_000), Some(100), Some(0)),
            // 2.5 ms + 1000.25 ms; a prefix of 20 after a context of 110 is a compaction.
            ("7_round_000001", Some(1_002_750_000), Some(70), Some(20)),
            ("8_round_000000", Some(5 * MS), None, Some(0)),
            ("coding_trace:6", Some(0), Some(1), Some(0)),
        ]
    );
    assert_eq!(report.details["compactions"], json!(1));
    assert_eq!(report.details["session_column"], json!("id"));
}

#[test]
fn replay_sessions_past_the_cap_are_forgotten_with_one_diagnostic() {
    use std::fmt::Write;
    // 100,001 sessions of one round each (s0 is then the least recently used and forgotten), then s0 again: its
    // second round no longer follows its first's arrival plus wait (1 s + 5 s), and takes its own (2 s).
    let mut text = String::from("id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n");
    for i in 0..=100_000 {
        writeln!(text, "s{i},10,1,1000,0,5000,0").unwrap();
    }
    text.push_str("s0,10,1,2000,1,0,11\n");
    let (sink, report) = parse_with(&text, "replay.csv", ParseOptions::default());
    assert_eq!(
        found(&sink),
        [(
            100_002,
            "inconsistent",
            "more than 100000 sessions open: the least recently used are forgotten (a later round of one arrives at \
             its own arrival_time)"
        )]
    );
    assert_eq!(sink.requests.last().unwrap().arrival_time, Some(2000 * MS));
    assert_eq!(report.details["sessions"], json!(100_002));
    assert_eq!(report.details["sessions_evicted"], json!(2));
}

#[test]
fn a_headerless_replay_file_is_read_in_the_documented_order() {
    let (sink, _) = parse_with("s,0,0,10,2,0\n", "x.csv", ParseOptions::default());
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MissingField);
    assert_eq!((sink.requests[0].input_tokens, sink.requests[0].arrival_time), (Some(10), Some(0)));
}

#[test]
fn user_text_never_reaches_rows_or_diagnostics() {
    let canary = "CANARY-please-refactor-my-secret-module";
    let text = format!(
        r#"{{"provider":"claude","session_id":"s","round_index":0,"input_tokens_total":3,"prefix_tokens":1,"newly_append_tokens":2,"output_tokens":1,"content":"{canary}","timing_events":[{{"event_type":"user_message","timestamp":"{canary}","text":"{canary}"}}],"tools":[{{"tool_name":"Bash","input":{{"command":"{canary}"}},"is_error":false}}]}}
{{"provider":"{canary}","output_tokens":"{canary}"}}
"#
    );
    let (sink, report) = parse(&text);
    assert_eq!((sink.requests.len(), sink.diagnostics.len()), (1, 2));
    assert!(!format!("{sink:?}{report:?}").contains("CANARY"), "{sink:?}");
    let csv = format!("session_id,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms\ns,0,{canary},1,1,0\n");
    let (sink, report) = parse_with(&csv, "x.csv", ParseOptions::default());
    assert_eq!(sink.diagnostics.len(), 1);
    assert!(!format!("{sink:?}{report:?}").contains("CANARY"));
}

#[test]
fn detects_rounds_and_replay_headers_only() {
    assert_eq!(TraceLab.detect(CLAUDE_0.as_bytes()), Some(Confidence::High));
    assert_eq!(TraceLab.detect(&CODEX_0.as_bytes()[..400]), Some(Confidence::High));
    for header in [
        "session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms\n0,117,0",
        "session_id,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms\r\n",
        "id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n",
    ] {
        assert_eq!(TraceLab.detect(header.as_bytes()), Some(Confidence::High), "{header}");
    }
    assert_eq!(TraceLab.detect(b"session_id,round_idx,input_len,output_len\n"), None);
    assert_eq!(TraceLab.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
    assert_eq!(TraceLab.detect(br#"{"timestamp": 27482, "input_length": 6955, "hash_ids": [46]}"#), None);
}
