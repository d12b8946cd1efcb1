use infertrace_adapter::{CollectSink, ParseOptions};

use super::*;

fn parse_with(text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    let mut sink = CollectSink::default();
    let ctx = ParseContext { source_file: "burst/BurstGPT_3.csv", options: &options, modified: None, sidecars: None };
    let report = BurstGpt.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str) -> (CollectSink, ParseReport) {
    parse_with(text, ParseOptions::default())
}

const S: i64 = 1_000_000_000;

#[test]
fn first_rows_of_the_1x_trace() {
    let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                5,ChatGPT,472,18,490,Conversation log\n\
                45,ChatGPT,1087,230,1317,Conversation log\n\
                118,GPT-4,417,276,693,Conversation log\n";
    let (sink, report) = parse(text);
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("1.x"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert_eq!(report.lines, 4);
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.request_id.as_str(), r.model.as_deref(), r.arrival_time, r.input_tokens, r.output_tokens))
        .collect();
    assert_eq!(
        rows,
        [
            ("BurstGPT_3:2", Some("ChatGPT"), Some(5 * S), Some(472), Some(18)),
            ("BurstGPT_3:3", Some("ChatGPT"), Some(45 * S), Some(1087), Some(230)),
            ("BurstGPT_3:4", Some("GPT-4"), Some(118 * S), Some(417), Some(276)),
        ]
    );
    assert!(sink.requests.iter().all(|r| r.status == Status::Ok
        && r.workload_class == Some(WorkloadClass::Chat)
        && r.session_id.is_none()
        && r.e2e_s.is_none()
        && r.ttft_s.is_none()));
    let expected = serde_json::json!({
        "failures": 0, "log_types": {"Conversation log": 3}, "models": {"ChatGPT": 2, "GPT-4": 1},
        "timestamps_decreasing": 0
    });
    assert_eq!(serde_json::to_value(&report.details).unwrap(), expected);
}

#[test]
fn the_2_0_form_has_sessions_and_elapsed_time_from_the_start_option() {
    let text = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n\
                19440110.0,1722ac82-0a46-4bf0-aa08-89794e7a2b3f,43,GPT-4,906,446,1352,Conversation log\r\n\
                19440161.5,1722ac82-0a46-4bf0-aa08-89794e7a2b3f,2,ChatGPT,36,29,65,Conversation log\r\n\
                19440192.0,,8,GPT-4,1779,0,1779,API log\r\n";
    // 2024-01-01T00:00:00Z is 19,723 days after the epoch.
    let start = 19_723 * 86_400 * S;
    let (sink, report) = parse_with(text, ParseOptions { start_ns: start, ..ParseOptions::default() });
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("2.0"));
    let r = &sink.requests;
    assert_eq!(r[0].arrival_time, Some(start + 19_440_110 * S));
    assert_eq!(r[0].completion_time, Some(start + 19_440_153 * S), "arrival + 43 s");
    assert_eq!(r[0].e2e_s, Some(43.0));
    assert_eq!(r[0].ttft_s, None, "Elapsed time is end to end, not a first-token time");
    assert_eq!(r[1].arrival_time, Some(start + 19_440_161 * S + S / 2));
    let sessions: Vec<_> = r.iter().map(|r| (r.session_id.as_deref(), r.turn)).collect();
    assert_eq!(
        sessions,
        [
            (Some("1722ac82-0a46-4bf0-aa08-89794e7a2b3f"), Some(0)),
            (Some("1722ac82-0a46-4bf0-aa08-89794e7a2b3f"), Some(1)),
            (None, None),
        ]
    );
    // The API row with no response tokens is a failure, and has no workload class.
    assert_eq!((r[2].status, r[2].error.as_deref()), (Status::Error, Some("no response tokens")));
    assert_eq!(r[2].workload_class, None);
    assert_eq!(r[2].output_tokens, Some(0));
    assert_eq!(report.details["failures"], 1);
    assert_eq!(report.details["sessions"], 1);
    assert_eq!(report.details["log_types"], serde_json::json!({"API log": 1, "Conversation log": 2}));
}

#[test]
fn bad_records_are_counted_and_good_fields_kept() {
    let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                5,ChatGPT,472,18,490,Conversation log\n\
                4,ChatGPT,-1,18,17,Conversation log\n\
                6,ChatGPT,10\n\
                x,ChatGPT,y,z,0,API log\n\
                \n\
                7,GPT-4,10,5,99,Batch log\n\
                8,\"GPT-4,10,5\n";
    let (sink, report) = parse(text);
    let found: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect();
    assert_eq!(
        found,
        [
            (3, "invalid-value", "Request tokens is not a token count"),
            (4, "malformed-csv", "3 fields, expected 6"),
            (5, "unrecognized-line", "no usable Timestamp, Request tokens or Response tokens"),
            (7, "inconsistent", "Total tokens differs from Request tokens + Response tokens"),
            (8, "malformed-csv", "a quoted field is not closed"),
        ]
    );
    let kept: Vec<_> = sink.requests.iter().map(|r| (r.source_line, r.input_tokens, r.workload_class)).collect();
    assert_eq!(
        kept,
        [
            (Some(2), Some(472), Some(WorkloadClass::Chat)),
            (Some(3), None, Some(WorkloadClass::Chat)),
            (Some(7), Some(10), None)
        ]
    );
    assert_eq!(report.details["timestamps_decreasing"], 1, "4 s after 5 s");
    assert_eq!(report.details["log_types"], serde_json::json!({"Conversation log": 2, "other": 1}));
    assert_eq!(report.lines, 8);
}

#[test]
fn a_headerless_file_is_read_in_the_1x_order_with_a_diagnostic() {
    let (sink, report) = parse("5,ChatGPT,472,18,490,Conversation log\n");
    assert_eq!(sink.diagnostics.len(), 1);
    assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MissingField);
    assert_eq!(sink.requests[0].input_tokens, Some(472));
    assert_eq!(report.format_version.as_deref(), Some("1.x"));
}

#[test]
fn sessions_past_the_cap_are_forgotten_least_recently_used_first() {
    let mut state = State::new("x");
    state.sessions = Sessions::new(2);
    let keys: Vec<Key> = ["a", "b", "a", "c", "b", "a"].iter().map(|id| state.digest.key(id)).collect();
    let mut sink = CollectSink::default();
    let turns: Vec<u32> = (10..).zip(keys).map(|(line, key)| state.next_turn(key, line, &mut sink)).collect();
    // "c" evicts "b" (least recently used), so "b" restarts; "b" then evicts "a", which restarts too.
    assert_eq!(turns, [0, 0, 1, 0, 0, 0]);
    assert_eq!((state.sessions.started, state.sessions.evicted), (5, 3));
    // Three evictions, one diagnostic: at the first, line 13 ("c").
    assert_eq!(sink.diagnostics.len(), 1);
    let diagnostic = &sink.diagnostics[0];
    assert_eq!((diagnostic.line, diagnostic.kind), (13, DiagnosticKind::Inconsistent));
    assert_eq!(
        diagnostic.message,
        "more than 2 sessions open: the least recently used are forgotten (a later turn of one restarts at turn 0)"
    );
    let details = state.details();
    assert_eq!((&details["sessions"], &details["sessions_evicted"]), (&5.into(), &3.into()));
}

#[test]
fn canary_values_never_reach_rows_or_diagnostics() {
    let canary = "CANARY-prompt-text";
    let text = format!(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         {canary},s,{canary},ChatGPT,{canary},3,{canary},{canary}\n"
    );
    let (sink, report) = parse(&text);
    assert_eq!(sink.requests.len(), 1);
    assert!(!format!("{:?}", sink.requests).contains(canary));
    assert!(!format!("{:?}", sink.diagnostics).contains(canary));
    assert!(!serde_json::to_string(&report.details).unwrap().contains(canary));
    assert_eq!(sink.diagnostics.len(), 4, "{:?}", sink.diagnostics);
}

#[test]
fn detects_by_header_and_leaves_azure_alone() {
    assert_eq!(
        BurstGpt.detect(b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT"),
        Some(Confidence::High)
    );
    assert_eq!(
        BurstGpt.detect(
            b"\xef\xbb\xbfTimestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n"
        ),
        Some(Confidence::High)
    );
    assert_eq!(BurstGpt.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
    assert_eq!(BurstGpt.detect(b"t,prompt_throughput,gen_throughput\n"), None);
    assert_eq!(BurstGpt.detect(br#"{"Timestamp": 1}"#), None);
}

#[test]
fn a_record_needs_every_column_the_header_names() {
    // 1.x: Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type.
    assert_eq!(Columns::V1.width(), 6);
    // The 2.0 header, with Log Type last (index 7).
    let header = [
        "Timestamp",
        "Session ID",
        "Elapsed time",
        "Model",
        "Request tokens",
        "Response tokens",
        "Total tokens",
        "Log Type",
    ];
    assert_eq!(Columns::from_header(&header).map(Columns::width), Some(8));
    // Only the required columns, the widest of them not last in the header.
    let header = ["Response tokens", "x", "Request tokens", "Timestamp", "y"];
    assert_eq!(Columns::from_header(&header).map(Columns::width), Some(4));
}
