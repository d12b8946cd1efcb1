//! No content of a call reaches a row or a report: a canary in every position where each format carries prompts,
//! completions, messages, tool arguments and results, or error texts (as attributes, events, nested objects and
//! JSON text), for OTLP/JSON and OTLP protobuf alike. `crates/cli/tests/privacy.rs` does the same through the
//! binary on the real examples of `testdata/genai/`.

use infertrace_adapter::otlp::proto;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
use infertrace_adapter_genai::{LitellmSpend, OpenaiUsage, OtelGenai};
use prost::Message as _;

const CANARY: &str = "CANARY-51d0";

/// Every row, diagnostic and detail of a parse, printed.
fn everything(adapter: &dyn Adapter, bytes: &[u8]) -> (usize, String) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "input", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink.requests.len(), format!("{:?}\n{:?}\n{:?}", sink.requests, sink.diagnostics, report.details))
}

/// Span attributes that carry content, in every generation of the conventions and in OpenInference and the
/// Vercel AI SDK.
const CONTENT_KEYS: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.content",
    "ai.prompt.messages",
    "ai.response.text",
    "exception.message",
];

#[test]
fn otel_spans_keep_no_content_in_json_or_protobuf() {
    let kv = |key: &str, value: &str| proto::KeyValue {
        key: key.to_owned(),
        value: Some(proto::AnyValue { value: Some(proto::Value::StringValue(value.to_owned())) }),
    };
    let text = format!("{CANARY} said {CANARY}");
    let mut attributes: Vec<proto::KeyValue> = CONTENT_KEYS.iter().map(|k| kv(k, &text)).collect();
    attributes.push(kv("gen_ai.operation.name", "chat"));
    attributes.push(kv("error.type", &text));
    attributes.push(proto::KeyValue {
        key: "gen_ai.usage.input_tokens".into(),
        value: Some(proto::AnyValue { value: Some(proto::Value::IntValue(12)) }),
    });
    let events =
        ["gen_ai.user.message", "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.client.inference.operation.details"]
            .iter()
            .map(|name| proto::Event {
                time_unix_nano: 1_700_000_000_500_000_000,
                name: (*name).to_owned(),
                attributes: ["content", "message", "gen_ai.prompt", "gen_ai.input.messages"]
                    .iter()
                    .map(|k| kv(k, &text))
                    .collect(),
            })
            .collect();
    let tool = proto::Span {
        trace_id: vec![7; 16],
        span_id: vec![2; 8],
        parent_span_id: vec![1; 8],
        name: "execute_tool search".into(),
        start_time_unix_nano: 1_700_000_001_000_000_000,
        end_time_unix_nano: 1_700_000_001_100_000_000,
        attributes: vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.call.arguments", &text),
            kv("gen_ai.tool.call.result", &text),
        ],
        events: Vec::new(),
        status: None,
    };
    let call = proto::Span {
        trace_id: vec![7; 16],
        span_id: vec![1; 8],
        parent_span_id: Vec::new(),
        name: "chat m".into(),
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: 1_700_000_002_000_000_000,
        attributes,
        events,
        status: Some(proto::Status { code: 2 }),
    };
    let export = proto::ExportTraceServiceRequest {
        resource_spans: vec![proto::ResourceSpans {
            resource: Some(proto::Resource { attributes: vec![kv("service.name", &text)] }),
            scope_spans: vec![proto::ScopeSpans { spans: vec![tool, call] }],
            instrumentation_library_spans: Vec::new(),
        }],
    };
    let bytes = export.encode_to_vec();
    let mut framed = u32::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    let (rows, printed) = everything(&OtelGenai, &framed);
    assert_eq!(rows, 1);
    assert!(printed.contains("input_tokens: Some(12)") && printed.contains("error: Some(\"error\")"), "{printed}");
    assert!(!printed.contains("CANARY"), "{printed}");

    // The same export as OTLP/JSON, written by hand with the same positions.
    let attr = |k: &str| format!(r#"{{"key":"{k}","value":{{"stringValue":"{text}"}}}}"#);
    let content: Vec<String> = CONTENT_KEYS.iter().map(|k| attr(k)).collect();
    let events: Vec<String> = ["gen_ai.user.message", "gen_ai.choice"]
        .iter()
        .map(|n| {
            format!(
                r#"{{"name":"{n}","timeUnixNano":"1700000000500000000","attributes":[{},{}]}}"#,
                attr("content"),
                attr("message")
            )
        })
        .collect();
    let json = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{}]}},"scopeSpans":[{{"spans":[{{"traceId":"07070707070707070707070707070707","spanId":"0101010101010101","name":"chat m","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000002000000000","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}},{},{}],"events":[{}],"status":{{"code":2,"message":"{text}"}}}}]}}]}}]}}"#,
        attr("service.name"),
        content.join(","),
        attr("error.type"),
        events.join(",")
    );
    let (rows, printed) = everything(&OtelGenai, json.as_bytes());
    assert_eq!(rows, 1);
    assert!(!printed.contains("CANARY"), "{printed}");
}

#[test]
fn gateway_logs_keep_no_content() {
    let t = format!("{CANARY} said {CANARY}");
    // A spend-log row with every text column filled (metadata's MCP call and error, the stored request and
    // response), as an object and with its JSON columns as text.
    let metadata = serde_json::json!({
        "usage_object": {"prompt_tokens": 9, "completion_tokens": 4},
        "mcp_tool_call_metadata": {"name": "search", "arguments": {"q": t}, "result": t},
        "error_information": {"error_class": t, "error_message": t, "traceback": t, "error_code": "500"},
        "spend_logs_metadata": {"note": t},
    });
    let response = serde_json::json!({"choices": [{"message": {"content": t, "reasoning_content": t}}], "usage": {"prompt_tokens": 9}});
    let row = serde_json::json!({
        "request_id": "r1", "call_type": "acompletion", "startTime": "2025-01-24 09:20:46.847", "endTime": "2025-01-24 09:20:47",
        "prompt_tokens": 9, "completion_tokens": 4, "status": "failure", "metadata": metadata, "messages": [{"role": "user", "content": t}],
        "response": response, "proxy_server_request": {"messages": [{"content": t}]}, "error_str": t, "requester_ip_address": "10.0.0.1",
    });
    let mut as_text = row.clone();
    for key in ["metadata", "response", "proxy_server_request", "messages"] {
        as_text[key] = serde_json::Value::String(as_text[key].to_string());
    }
    let lines = format!("{row}\n{as_text}\n");
    let (rows, printed) = everything(&LitellmSpend, lines.as_bytes());
    assert_eq!(rows, 2);
    assert!(printed.contains("input_tokens: Some(9)") && printed.contains("http_status: Some(500)"), "{printed}");
    assert!(!printed.contains("CANARY"), "{printed}");

    // OpenAI responses: message content, tool call arguments, reasoning summaries, output text, error messages,
    // a batch line's error.
    let lines = [
        serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"finish_reason": "tool_calls", "message": {"content": t, "tool_calls": [{"function": {"name": "f", "arguments": t}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        serde_json::json!({"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "failed",
            "error": {"code": "server_error", "message": t}, "instructions": t,
            "output": [{"type": "reasoning", "summary": [{"text": t}]}, {"type": "message", "content": [{"type": "output_text", "text": t}]}],
            "usage": {"input_tokens": 3, "output_tokens": 2}}),
        serde_json::json!({"id": "batch_req_1", "custom_id": t, "response": null, "error": {"code": "request_timeout", "message": t}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let (rows, printed) = everything(&OpenaiUsage, text.as_bytes());
    assert_eq!(rows, 3);
    assert!(printed.contains("tool_calls: Some(1)") && printed.contains("\"server_error\""), "{printed}");
    assert!(!printed.contains("CANARY"), "{printed}");
}
