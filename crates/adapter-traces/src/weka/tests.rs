use infertrace_adapter::{CollectSink, ParseOptions};

use super::*;

const SECOND: i64 = 1_000_000_000;

/// An input, the (line, kind) of its diagnostics, and its number of rows.
type Case = (&'static str, &'static [(u64, &'static str)], usize);

fn parse_with(text: &str, source_file: &str, start_ns: i64) -> (CollectSink, ParseReport) {
    let options = ParseOptions { start_ns, ..ParseOptions::default() };
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = WekaTrace.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str) -> (CollectSink, ParseReport) {
    parse_with(text, "traces/tr.json", 0)
}

fn kinds(sink: &CollectSink) -> Vec<(u64, &'static str)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect()
}

/// The chained hashes of `ids` under `seed`, spelled out from the documented formula.
fn chained(ids: &[u64], seed: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut h = seed;
    for id in ids {
        h = xxh3_64_with_seed(&id.to_le_bytes(), h);
        out.push(h);
    }
    out
}

/// A trace with one call, a sub-agent of two calls, and a last call; `totals` agree with the calls.
const TRACE: &str = r#"{"id":"tr","models":["m","h"],"block_size":4,"hash_id_scope":"local","tool_tokens":10,"system_tokens":2,
"requests":[
{"t":0.0,"type":"n","model":"m","in":9,"out":3,"hash_ids":[1,2],"input_types":["text"],"output_types":["tool_use"],"stop":"tool_use","api_time":2.5,"think_time":0.0},
{"t":10.0,"type":"subagent","agent_id":"agent_001","subagent_type":"Explore","duration_ms":7000,"total_tokens":23,"tool_use_count":2,"status":"completed","requests":[
  {"t":0.0,"type":"n","model":"h","in":8,"out":1,"hash_ids":[1,5],"stop":"tool_use","api_time":1.0,"think_time":0.0},
  {"t":4.5,"type":"s","model":"h","in":12,"out":2,"hash_ids":[1,5,6],"stop":"end_turn","api_time":2.0,"ttft":0.5,"think_time":2.0}],
 "models":["h"],"tool_tokens":7,"system_tokens":1},
{"t":30.0,"type":"s","model":"m","in":13,"out":4,"hash_ids":[1,2,3],"stop":"","api_time":3.0,"ttft":1.25,"think_time":5.5}],
"totals":{"parent_tokens":{"input":22,"output":7},"subagent_tokens":{"input":20,"output":3},"combined_tokens":{"input":42,"output":10},"subagent_count":1}}
"#;

#[test]
fn calls_become_rows_and_sub_agents_sessions_of_their_own() {
    let (sink, report) = parse_with(TRACE, "traces/tr.json", 1_000 * SECOND);
    assert_eq!(kinds(&sink), []);
    assert_eq!(report.format_version.as_deref(), Some("v1"));
    assert_eq!(report.lines, 9);
    // (request id, session, turn, arrival s after start, in, out, ttft, e2e, finish reason, source line)
    type Expected = (&'static str, &'static str, u32, i64, u32, u32, Option<f64>, f64, Option<&'static str>, u64);
    let expected: [Expected; 4] = [
        ("tr:0", "tr", 0, 0, 9, 3, None, 2.5, Some("tool_use"), 3),
        ("tr/agent_001:0", "tr/agent_001", 0, 10 * SECOND, 8, 1, None, 1.0, Some("tool_use"), 5),
        ("tr/agent_001:1", "tr/agent_001", 1, 14 * SECOND + SECOND / 2, 12, 2, Some(0.5), 2.0, Some("end_turn"), 6),
        ("tr:1", "tr", 1, 30 * SECOND, 13, 4, Some(1.25), 3.0, None, 8),
    ];
    assert_eq!(sink.requests.len(), expected.len());
    for (row, (id, session, turn, arrival, input, output, ttft, e2e, finish, line)) in
        sink.requests.iter().zip(expected)
    {
        assert_eq!(row.request_id, id);
        assert_eq!(row.source, "weka-trace");
        assert_eq!(row.session_id.as_deref(), Some(session), "{id}");
        assert_eq!(row.turn, Some(turn), "{id}");
        assert_eq!(row.arrival_time, Some(1_000 * SECOND + arrival), "{id}");
        assert_eq!((row.input_tokens, row.output_tokens), (Some(input), Some(output)), "{id}");
        assert_eq!((row.ttft_s, row.e2e_s), (ttft, Some(e2e)), "{id}");
        assert_eq!(row.finish_reason.as_deref(), finish, "{id}");
        assert_eq!(row.source_line, Some(line), "{id}");
        assert_eq!(row.workload_class, Some(WorkloadClass::Agent));
        assert_eq!(row.status, Status::Unknown);
        assert_eq!(row.block_size, Some(4));
        assert_eq!(row.source_file.as_deref(), Some("traces/tr.json"));
    }
    assert_eq!(sink.requests[0].model.as_deref(), Some("m"));
    assert_eq!(sink.requests[1].model.as_deref(), Some("h"));

    let seed = xxh3_64(b"tr");
    let hashes: Vec<&Vec<u64>> = sink.requests.iter().map(|r| r.prefix_hashes.as_ref().unwrap()).collect();
    assert_eq!(*hashes[0], chained(&[1, 2], seed));
    assert_eq!(*hashes[1], chained(&[1, 5], seed));
    assert_eq!(*hashes[2], chained(&[1, 5, 6], seed));
    assert_eq!(*hashes[3], chained(&[1, 2, 3], seed));
    // Shared leading ids give shared hashes, within the trace and across its sub-agents.
    assert_eq!(hashes[0][0], hashes[1][0]);
    assert_eq!(hashes[3][..2], hashes[0][..]);
    assert_ne!(hashes[1][1], hashes[0][1]);
    // The first hash is what the Mooncake adapter stores for a local id under `play_id` = the trace id.
    assert_eq!(hashes[0][0], xxh3_64_with_seed(&1u64.to_le_bytes(), xxh3_64(b"tr")));

    let d = &report.details;
    assert_eq!(d["trace_id"], "tr");
    assert_eq!(d["block_size"], 4);
    assert_eq!(d["hash_id_scope"], "local");
    assert_eq!(d["models"], serde_json::json!(["m", "h"]));
    assert_eq!((d["tool_tokens"].as_u64(), d["system_tokens"].as_u64()), (Some(10), Some(2)));
    assert_eq!(d["requests"], 4);
    assert_eq!(d["streaming_requests"], 2);
    assert_eq!(d["subagents"], 1);
    assert_eq!(d["subagent_requests"], 2);
    assert_eq!(d["subagent_tool_uses"], 2);
    assert_eq!(d["subagent_types"], serde_json::json!({"Explore": 1}));
    assert_eq!(d["subagent_statuses"], serde_json::json!({"completed": 1}));
    assert_eq!(d["stop_reasons"], serde_json::json!({"empty": 1, "end_turn": 1, "tool_use": 2}));
    assert_eq!(d["think_time_s"], serde_json::json!({"count": 4, "sum": 7.5, "max": 5.5}));
    assert_eq!(d["totals"]["subagent_count"], 1);
}

#[test]
fn local_scopes_never_collide_and_global_ones_share() {
    let one = r#"{"id":"a","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"type":"n","in":128,"out":1,"hash_ids":[1,2]}]}"#;
    let two = one.replace(r#""id":"a""#, r#""id":"b""#);
    let hashes = |text: &str| parse(text).0.requests[0].prefix_hashes.clone().unwrap();
    let (a, b) = (hashes(one), hashes(&two));
    assert!(a.iter().all(|h| !b.contains(h)), "equal ids of two local traces must not give equal hashes");

    let global = |text: &str| text.replace("local", "global");
    let (ga, gb) = (hashes(&global(one)), hashes(&global(&two)));
    assert_eq!(ga, gb);
    assert_eq!(ga, chained(&[1, 2], 0));
    let (sink, report) = parse(&global(one));
    assert_eq!(report.details["hash_id_scope"], "global");
    assert_eq!(kinds(&sink), []);
}

#[test]
fn the_documented_earlier_form_is_v0_and_read_as_local() {
    // kv-cache-tester's docs/trace_replay_tester.md example: no `hash_id_scope`, no timings.
    let text = r#"{
  "id": "f64a8d4c-12d",
  "models": ["claude-sonnet-4-20250514"],
  "block_size": 64,
  "tool_tokens": 11899,
  "system_tokens": 2926,
  "requests": [
    {
      "t": 0.0,
      "type": "s",
      "model": "claude-sonnet-4-20250514",
      "in": 130,
      "out": 86,
      "hash_ids": [1, 2],
      "input_types": ["text"],
      "output_types": ["text"],
      "stop": ""
    }
  ]
}"#;
    let (sink, report) = parse(text);
    assert_eq!(kinds(&sink), []);
    assert_eq!(report.format_version.as_deref(), Some("v0"));
    assert_eq!(report.lines, 20);
    let row = &sink.requests[0];
    assert_eq!(row.request_id, "f64a8d4c-12d:0");
    assert_eq!(row.source_line, Some(18));
    assert_eq!((row.ttft_s, row.e2e_s, row.finish_reason.as_deref()), (None, None, None));
    assert_eq!(row.prefix_hashes, Some(chained(&[1, 2], xxh3_64(b"f64a8d4c-12d"))));
    assert_eq!(report.details["hash_id_scope"], "local");
}

#[test]
fn requests_before_the_header_use_the_file_stem_and_defaults() {
    let text = r#"{"requests":[{"t":1,"type":"n","in":70,"out":1,"hash_ids":[9]}],"id":"other","block_size":64,"hash_id_scope":"global"}"#;
    let (sink, _) = parse(text);
    let row = &sink.requests[0];
    assert_eq!(row.session_id.as_deref(), Some("tr"), "the file stem of traces/tr.json");
    assert_eq!(row.block_size, Some(64));
    assert_eq!(row.prefix_hashes, Some(chained(&[9], xxh3_64(b"tr"))));
    let messages: Vec<&str> = sink.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`id` follows `requests` and differs from the value the rows used",
            "`hash_id_scope` follows `requests` and differs from the value the rows used",
        ]
    );
    // The same values after `requests` are no news.
    let same = r#"{"requests":[],"id":"tr","block_size":64,"hash_id_scope":"local"}"#;
    assert_eq!(kinds(&parse(same).0), []);
}

#[test]
fn a_sub_agent_without_usable_id_or_time_is_named_by_position() {
    let text = r#"{"id":"tr","hash_id_scope":"local","requests":[
{"type":"subagent","requests":[{"t":0,"type":"n","in":1,"out":1}],"agent_id":"late","t":5},
{"t":9,"type":"subagent","agent_id":"agent_002","requests":[{"t":1,"type":"n","in":1,"out":1}]},
{"t":9,"type":"subagent","agent_id":"agent_003","status":"async_launched"}]}"#;
    let (sink, report) = parse(text);
    let rows: Vec<(&str, Option<i64>)> =
        sink.requests.iter().map(|r| (r.request_id.as_str(), r.arrival_time)).collect();
    assert_eq!(rows, [("tr/subagent-1:0", None), ("tr/agent_002:0", Some(10 * SECOND))]);
    assert_eq!(kinds(&sink), [(2, "inconsistent"), (2, "inconsistent"), (4, "missing-field")]);
    assert_eq!(report.details["subagents"], 3);
    assert_eq!(report.details["subagent_statuses"], serde_json::json!({"async_launched": 1, "missing": 2}));
}

#[test]
fn unusable_values_are_diagnostics_and_the_rest_of_the_call_is_kept() {
    let cases: &[Case] = &[
        // (call object, diagnostics, rows)
        (r#"{"t":0,"type":"n","in":"x","out":1}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"n","out":1}"#, &[(1, "missing-field")], 1),
        (r#"{"type":"n","in":1,"out":1}"#, &[(1, "missing-field")], 1),
        (r#"{"t":"soon","type":"n","in":1,"out":1}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":1e300,"type":"n","in":1,"out":1}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"n","in":5000000000,"out":1}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"n","in":1,"out":1,"api_time":-1}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"s","in":1,"out":1,"api_time":1,"ttft":2}"#, &[(1, "inconsistent")], 1),
        (r#"{"t":0,"type":"n","in":1,"out":1,"hash_ids":[1,"x"]}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"n","in":1,"out":1,"hash_ids":{"a":1}}"#, &[(1, "invalid-value")], 1),
        (r#"{"t":0,"type":"n","in":256,"out":1,"hash_ids":[1]}"#, &[(1, "inconsistent")], 1),
        (r#"{"t":0,"type":"n","in":200,"out":1,"hash_ids":[1,2,3,4,5]}"#, &[(1, "inconsistent")], 1),
        (r#"{"t":0,"type":"n","in":200,"out":1,"hash_ids":[1,2],"extra":{"deep":[1]}}"#, &[(1, "inconsistent")], 1),
        (r#"{"t":0,"type":"x","in":1,"out":1}"#, &[(1, "malformed-record")], 0),
        (r#"{"t":0,"in":1,"out":1}"#, &[(1, "missing-field")], 1),
        (r#"{"t":0}"#, &[(1, "malformed-record")], 0),
        (r#"[1,2]"#, &[(1, "not-a-record")], 0),
        (r#"7"#, &[(1, "not-a-record")], 0),
    ];
    for (call, expected, rows) in cases {
        let text = format!(r#"{{"id":"tr","block_size":64,"hash_id_scope":"local","requests":[{call}]}}"#);
        let (sink, _) = parse(&text);
        assert_eq!(kinds(&sink), *expected, "{call}");
        assert_eq!(sink.requests.len(), *rows, "{call}");
    }
    // A floor-length (full blocks only) and a ceil-length hash list are both accepted.
    for ids in ["[1,2,3]", "[1,2,3,4]"] {
        let text = format!(r#"{{"id":"tr","requests":[{{"t":0,"type":"n","in":200,"out":1,"hash_ids":{ids}}}]}}"#);
        assert_eq!(kinds(&parse(&text).0), [], "{ids}");
    }
}

#[test]
fn documents_that_are_not_traces_are_reported_once() {
    let cases: &[Case] = &[
        ("", &[], 0),
        ("  \n\n", &[], 0),
        ("{}", &[(1, "missing-field")], 0),
        (r#"{"id":"tr","requests":{"a":1}}"#, &[(1, "malformed-record")], 0),
        ("[]", &[(1, "not-a-record")], 0),
        ("\"text\"", &[(1, "not-a-record")], 0),
        // Cut short after the first call: its row is kept.
        (r#"{"id":"tr","requests":[{"t":0,"type":"n","in":1,"out":1},{"t":1,"ty"#, &[(1, "malformed-json")], 1),
        ("{\"id\":\"tr\",\"requests\":[]}\n{\"id\":\"tr2\"}", &[(2, "malformed-json")], 0),
        ("\u{feff}{\"id\":\"tr\",\"requests\":[]}", &[], 0),
    ];
    for (text, expected, rows) in cases {
        let (sink, _) = parse(text);
        assert_eq!(kinds(&sink), *expected, "{text:?}");
        assert_eq!(sink.requests.len(), *rows, "{text:?}");
    }
    let (sink, _) = parse("{\"id\":\"tr\",\"requests\":[]}\n{\"id\":\"tr2\"}");
    assert_eq!(sink.diagnostics[0].message, "content after the JSON document is ignored");
}

#[test]
fn totals_that_disagree_with_the_calls_are_reported() {
    let text = r#"{"id":"tr","requests":[{"t":0,"type":"n","in":5,"out":2}],
"totals":{"parent_tokens":{"input":6,"output":2},"subagent_tokens":{"input":0,"output":0},"subagent_count":1}}"#;
    let (sink, _) = parse(text);
    let messages: Vec<&str> = sink.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "totals.parent_tokens.input is 6 but the calls sum to 5",
            "totals.subagent_count is 1 but 0 sub-agents were read",
        ]
    );
    assert!(sink.diagnostics.iter().all(|d| d.kind == DiagnosticKind::Inconsistent && d.line == 2));
}

#[test]
fn user_text_never_reaches_rows_diagnostics_or_details() {
    const CANARY: &str = "CANARY-secret-prompt";
    let text = TRACE
        .replace(r#""stop":"tool_use""#, &format!(r#""stop":"{CANARY}""#))
        .replace(r#""subagent_type":"Explore""#, &format!(r#""subagent_type":"{CANARY}""#))
        .replace(r#""status":"completed""#, &format!(r#""status":"{CANARY}""#))
        .replace(r#""input_types":["text"]"#, &format!(r#""input_types":["{CANARY}"],"prompt":"{CANARY}""#))
        .replace(r#""in":12,"#, &format!(r#""in":"{CANARY}","#))
        .replace(r#""hash_ids":[1,2,3]"#, &format!(r#""hash_ids":[1,"{CANARY}",3]"#))
        .replace(r#""totals":{"#, &format!(r#""totals":{{"note":"{CANARY}","#))
        .replace(r#""models":["m","h"]"#, &format!(r#""models":["m",{{"x":"{CANARY}"}}]"#));
    let (sink, report) = parse(&text);
    assert!(!sink.diagnostics.is_empty());
    let everything = format!("{:?}{:?}{:?}", sink.requests, sink.diagnostics, report.details);
    assert!(!everything.contains("CANARY"), "{everything}");
}

#[test]
fn detection_claims_weka_documents_only() {
    let cases: &[(&str, Option<Confidence>)] = &[
        (TRACE, Some(Confidence::High)),
        (r#"{"id":"x","block_size":64,"tool_tokens":1,"requests":[]}"#, Some(Confidence::High)),
        (r#"{"requests":[{"t":0,"type":"n","in":5,"out":1,"hash_ids":[]}]}"#, Some(Confidence::Low)),
        ("\u{feff}  {\"block_size\": 64, \"hash_id_scope\": \"local\", \"requests\": [", Some(Confidence::High)),
        (r#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}"#, None),
        (
            r#"{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"local","source":{}}
{"request_id":"a","requests":1}"#,
            None,
        ),
        (r#"{"experiments":[{"requests":[]}]}"#, None),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", None),
        ("", None),
    ];
    for (head, expected) in cases {
        assert_eq!(WekaTrace.detect(head.as_bytes()), *expected, "{head}");
    }
    let mut generated = Vec::new();
    generate::write_weka(&mut generated, "g", 3, 1, 2, 1).unwrap();
    assert_eq!(WekaTrace.detect(&generated[..generated.len().min(4096)]), Some(Confidence::High));
}
