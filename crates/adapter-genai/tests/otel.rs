//! `otel-genai` on its own: protobuf files read as their JSON, calls inside calls, traces that never end.

use infertrace_adapter::otlp::proto;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
use infertrace_adapter_genai::OtelGenai;
use infertrace_schema::{RequestRow, WorkloadClass};
use prost::Message as _;
use serde_json::Value;

fn parse(bytes: &[u8]) -> (Vec<RequestRow>, CollectSink, infertrace_adapter::ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "spans", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = OtelGenai.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (std::mem::take(&mut sink.requests), sink, report)
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap()).collect()
}

fn any(value: &Value) -> proto::AnyValue {
    let v = if let Some(s) = value.get("stringValue") {
        proto::Value::StringValue(s.as_str().unwrap().to_owned())
    } else if let Some(n) = value.get("intValue") {
        proto::Value::IntValue(n.as_str().map_or_else(|| n.as_i64().unwrap(), |s| s.parse().unwrap()))
    } else if let Some(x) = value.get("doubleValue") {
        proto::Value::DoubleValue(x.as_f64().unwrap())
    } else if let Some(b) = value.get("boolValue") {
        proto::Value::BoolValue(b.as_bool().unwrap())
    } else {
        let values = value["arrayValue"]["values"].as_array().unwrap().iter().map(any).collect();
        proto::Value::ArrayValue(proto::ArrayValue { values })
    };
    proto::AnyValue { value: Some(v) }
}

fn attributes(list: &Value) -> Vec<proto::KeyValue> {
    let list = list.as_array().map(Vec::as_slice).unwrap_or_default();
    list.iter()
        .map(|kv| proto::KeyValue { key: kv["key"].as_str().unwrap().to_owned(), value: Some(any(&kv["value"])) })
        .collect()
}

fn nanos(v: &Value) -> u64 {
    v.as_str().map_or_else(|| v.as_u64().unwrap_or(0), |s| s.parse().unwrap())
}

/// The OTLP/JSON export `line` as protobuf, as a collector's `format: proto` would have written it.
fn to_proto(line: &str) -> proto::ExportTraceServiceRequest {
    let export: Value = serde_json::from_str(line).unwrap();
    let resource_spans = export["resourceSpans"].as_array().unwrap().iter().map(|r| proto::ResourceSpans {
        resource: Some(proto::Resource { attributes: attributes(&r["resource"]["attributes"]) }),
        scope_spans: r["scopeSpans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| proto::ScopeSpans {
                spans: s["spans"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|span| proto::Span {
                        trace_id: hex(span["traceId"].as_str().unwrap()),
                        span_id: hex(span["spanId"].as_str().unwrap()),
                        parent_span_id: hex(span["parentSpanId"].as_str().unwrap_or("")),
                        name: span["name"].as_str().unwrap().to_owned(),
                        start_time_unix_nano: nanos(&span["startTimeUnixNano"]),
                        end_time_unix_nano: nanos(&span["endTimeUnixNano"]),
                        attributes: attributes(&span["attributes"]),
                        events: Vec::new(),
                        status: None,
                    })
                    .collect(),
            })
            .collect(),
        instrumentation_library_spans: Vec::new(),
    });
    proto::ExportTraceServiceRequest { resource_spans: resource_spans.collect() }
}

#[test]
fn a_protobuf_file_gives_the_rows_of_its_json() {
    for name in [
        "microsoft-agent-framework.otlp.jsonl",
        "openai-agents-openinference.otlp.jsonl",
        "any-agent-openai.otlp.jsonl",
    ] {
        let json = std::fs::read_to_string(format!("../../testdata/genai/otel/{name}")).unwrap();
        let mut framed = Vec::new();
        for line in json.lines() {
            let bytes = to_proto(line).encode_to_vec();
            framed.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes());
            framed.extend_from_slice(&bytes);
        }
        assert!(OtelGenai.detect(&framed[..framed.len().min(4096)]).is_some(), "{name}: detected");
        let (from_json, sink, _) = parse(json.as_bytes());
        assert_eq!(sink.diagnostics, [], "{name}");
        let (from_proto, sink, _) = parse(&framed);
        assert_eq!(sink.diagnostics, [], "{name}");
        assert!(!from_json.is_empty());
        // Line numbers are message positions, as JSON lines are one message each.
        assert_eq!(from_proto, from_json, "{name}");
    }
}

fn span(trace: &str, id: &str, parent: &str, name: &str, start: u64, attributes: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"{trace}","spanId":"{id}","parentSpanId":"{parent}","name":"{name}","startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{attributes}]}}]}}]}}]}}"#,
        start + 1000
    )
}

fn attr(key: &str, value: &str) -> String {
    if value.bytes().all(|b| b.is_ascii_digit()) {
        format!(r#"{{"key":"{key}","value":{{"intValue":"{value}"}}}}"#)
    } else {
        format!(r#"{{"key":"{key}","value":{{"stringValue":"{value}"}}}}"#)
    }
}

#[test]
fn a_call_inside_a_call_is_one_request_and_traces_without_root_are_written_at_the_end() {
    let chat =
        |tokens: &str| [attr("gen_ai.operation.name", "chat"), attr("gen_ai.usage.input_tokens", tokens)].join(",");
    let lines = [
        // Trace a: a framework's chat span (100 tokens) around the client library's (100 tokens), under an agent.
        span("aa", "02", "01", "chat inner", 10, &chat("100")),
        span("aa", "01", "00", "chat outer", 5, &chat("100")),
        // Trace b: its root never comes; a cached count above the input (counted apart) adds up.
        span(
            "bb",
            "12",
            "11",
            "chat m",
            20,
            &[chat("10"), attr("gen_ai.usage.cache_read.input_tokens", "50"), attr("error.type", "timeout")].join(","),
        ),
        span("aa", "00", "", "invoke_agent x", 1, &attr("gen_ai.operation.name", "invoke_agent")),
    ];
    let (rows, sink, report) = parse(lines.join("\n").as_bytes());
    assert_eq!(sink.diagnostics, []);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let inner = &rows[0];
    assert_eq!(
        (inner.request_id.as_str(), inner.input_tokens, inner.workload_class),
        ("02", Some(100), Some(WorkloadClass::Agent))
    );
    assert_eq!((inner.session_id.as_deref(), inner.turn, inner.tool_calls), (Some("aa"), Some(0), Some(0)));
    let lost = &rows[1];
    assert_eq!((lost.request_id.as_str(), lost.input_tokens, lost.cached_tokens), ("12", Some(60), Some(50)));
    assert_eq!((lost.session_id.as_deref(), lost.error.as_deref()), (None, Some("timeout")));
    assert_eq!(report.details["calls_enclosing_calls"], 1);
    assert_eq!(report.details["traces_without_root"], 1);
    assert_eq!(report.details["spans_by_operation"], serde_json::json!({"chat": 3, "invoke_agent": 1}));
}

#[test]
fn a_chain_of_twenty_thousand_calls_is_read_in_linear_steps() {
    // Each span the parent of the next, all calls: only the innermost is a request. Walking every ancestor of
    // every span would take 2 × 10^8 steps; the walk stops 256 levels up.
    let chat = [attr("gen_ai.operation.name", "chat"), attr("gen_ai.usage.input_tokens", "5")].join(",");
    let lines: Vec<String> = (0..20_000u64)
        .rev()
        .map(|i| {
            let parent = if i == 0 { String::new() } else { format!("{:016x}", i - 1) };
            span("cc", &format!("{i:016x}"), &parent, "chat m", 1_000 + i, &chat)
        })
        .collect();
    let (rows, sink, report) = parse(lines.join("\n").as_bytes());
    assert_eq!(sink.diagnostics, []);
    // Every call but the innermost has a call right below it: one request, 19,999 wrappers.
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].request_id, format!("{:016x}", 19_999));
    assert_eq!(report.details["calls_enclosing_calls"], 19_999);
    assert!(!report.details.contains_key("traces_without_root"));
}
