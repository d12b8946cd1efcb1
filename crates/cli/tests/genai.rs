//! Application and gateway traces (`otel-genai`, `litellm-spend`, `openai-usage`) end to end, on the real examples
//! of `testdata/genai/` (sources in testdata/README.md). Every expected value was read by hand from those files:
//! span trees, token attributes, times.

mod common;

use std::fs;
use std::process::{Command, Output};

use infertrace_schema::{Dataset, RequestRow, Status, Table as _, WorkloadClass};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn rows(dataset: &std::path::Path) -> Vec<RequestRow> {
    RequestRow::from_batch(&Dataset::open(dataset).unwrap().requests).unwrap()
}

fn by_id<'a>(rows: &'a [RequestRow], id: &str) -> &'a RequestRow {
    rows.iter().find(|r| r.request_id == id).unwrap_or_else(|| panic!("no row {id}"))
}

/// `(session, turn, tool calls, class, input, cached, output, reasoning)` of a row.
type Facts<'a> = (
    Option<&'a str>,
    Option<u32>,
    Option<u32>,
    Option<WorkloadClass>,
    Option<u32>,
    Option<u32>,
    Option<u32>,
    Option<u32>,
);

fn facts(row: &RequestRow) -> Facts<'_> {
    (
        row.session_id.as_deref(),
        row.turn,
        row.tool_calls,
        row.workload_class,
        row.input_tokens,
        row.cached_tokens,
        row.output_tokens,
        row.reasoning_tokens,
    )
}

#[test]
fn agent_sessions_tool_loops_and_reasoning_from_real_framework_spans() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("otel");
    let report = common::run(&[common::testdata().join("genai/otel")], &out);
    let formats: Vec<&str> = report.manifest.inputs.iter().map(|i| i.format.as_str()).collect();
    assert_eq!(formats, ["otel-genai"; 5]);
    let rows = rows(&out);
    assert_eq!(rows.len(), 12);
    let agent = Some(WorkloadClass::Agent);

    // any-agent (mozilla-ai): invoke_agent around call_llm (269→16), execute_tool get_current_time, call_llm
    // (359→14), execute_tool write_file, call_llm (392→46); no conversation id, so the trace id is the session.
    let session = Some("4bedea77bb33b9c5f280371eae21ea97");
    assert_eq!(
        facts(by_id(&rows, "8100d9dbee1f3e47")),
        (session, Some(0), Some(1), agent, Some(269), None, Some(16), None)
    );
    assert_eq!(
        facts(by_id(&rows, "1b1e636a0d314482")),
        (session, Some(1), Some(1), agent, Some(359), None, Some(14), None)
    );
    assert_eq!(
        facts(by_id(&rows, "975e0660433b7a8b")),
        (session, Some(2), Some(0), agent, Some(392), None, Some(46), None)
    );
    let first = by_id(&rows, "8100d9dbee1f3e47");
    // startTimeUnixNano 1758026593210770000, endTimeUnixNano 1758026593449611000.
    assert_eq!(
        (first.arrival_time, first.completion_time),
        (Some(1_758_026_593_210_770_000), Some(1_758_026_593_449_611_000))
    );
    assert_eq!(first.e2e_s, Some(0.238_841));
    assert_eq!(first.model.as_deref(), Some("mistral/mistral-small-latest"));

    // Microsoft Agent Framework: the conversation id is recorded on the second chat span only (the first
    // response's id, as the Responses API chains them); both calls of the agent get it.
    let conversation = Some("resp_0e32bda5b6259ecd00694279e271348194a818447145cd1763");
    let (a, b) = (
        by_id(&rows, "resp_0e32bda5b6259ecd00694279e271348194a818447145cd1763"),
        by_id(&rows, "resp_0e32bda5b6259ecd00694279e49fe48194b26952c13124bd05"),
    );
    assert_eq!(facts(a), (conversation, Some(0), Some(1), agent, Some(77), None, Some(86), None));
    assert_eq!(facts(b), (conversation, Some(1), Some(0), agent, Some(216), None, Some(20), None));
    // 09:37:37.260 → 09:37:40.549 and 09:37:40.555 → 09:37:41.620; the response model, and the literal "Unknown"
    // the framework writes as server.address.
    assert_eq!((a.e2e_s, b.e2e_s), (Some(3.289), Some(1.065)));
    assert_eq!((a.model.as_deref(), a.instance.as_deref()), (Some("gpt-5-mini-2025-08-07"), Some("Unknown")));

    // OpenAI Agents SDK through OpenInference: AGENT spans, two LLM spans with cached and reasoning tokens
    // recorded (0), a TOOL span between them. The root ends with its child agent span and is exported first.
    let session = Some("fee618f96dc31e0ca38b2f7b26eb8b29");
    let zero = Some(0);
    assert_eq!(
        facts(by_id(&rows, "98870087af69bf06")),
        (session, Some(0), Some(1), agent, Some(55), zero, Some(15), zero)
    );
    assert_eq!(
        facts(by_id(&rows, "90d94774e8e3724d")),
        (session, Some(1), Some(0), agent, Some(85), zero, Some(29), zero)
    );
    assert_eq!(by_id(&rows, "98870087af69bf06").model.as_deref(), Some("gpt-4.1-2025-04-14"));

    // pydantic-ai on Gemini: one chat, 40 in, 159 out of which 121 thinking tokens (gen_ai.usage.details.thoughts_tokens).
    let gemini = by_id(&rows, "r4FLad_IHojq1e8Pt6i7GA");
    assert_eq!(facts(gemini), (None, None, None, None, Some(40), None, Some(159), Some(121)));
    assert_eq!(gemini.instance.as_deref(), Some("generativelanguage.googleapis.com"));
    // The Vercel AI SDK (v6, captured by OpenInference's tests): the provider calls `….doGenerate`/`….doStream`
    // are the requests, not their `ai.generateText`/`ai.streamText` wrappers nor the embedding. The stream's first
    // chunk is its `ai.stream.firstChunk` event: 1770132001025056459 − 1770132000598000000 ns.
    let vercel: Vec<(&str, Option<u32>, Option<u32>)> = rows
        .iter()
        .filter(|r| r.source_file.as_deref().is_some_and(|f| f.ends_with("vercel-ai-sdk-v6.otlp.jsonl")))
        .map(|r| (r.request_id.as_str(), r.input_tokens, r.output_tokens))
        .collect();
    assert_eq!(
        vercel,
        [
            ("resp_0269f3aed1fd415900698212189ed88190b8bb13919d420b02", Some(14), Some(20)),
            ("resp_0056c25ba5cb2bd9006982121a510c81a1a31c11ddcf1abc73", Some(50), Some(9)),
            ("resp_03f2d825c7fc910c006982121d24948190b48cdbf3f4373dfe", Some(63), Some(156)),
            ("resp_07aff6ffa00269d50069821220f35c819dbbabe49b6cc82791", Some(15), Some(112)),
        ]
    );
    let stream = by_id(&rows, "resp_07aff6ffa00269d50069821220f35c819dbbabe49b6cc82791");
    assert_eq!((stream.ttft_s, stream.cached_tokens, stream.reasoning_tokens), (Some(0.427_056_459), Some(0), Some(0)));
    // `gen_ai.response.model` (the dated model that answered) over `gen_ai.request.model` and `ai.model.id`.
    assert_eq!(stream.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
    assert!(rows.iter().all(|r| r.status == Status::Ok && r.source == "otel-genai"));

    // metrics: R = Σ reasoning / Σ (output − reasoning) over rows recording both:
    // 121 / (15 + 29 + 38 + 112) = 121 / 194.
    let output = infertrace(&["metrics", out.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metrics: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let overall = &metrics["overall"];
    assert_eq!(overall["reasoning"]["requests"], 4);
    assert_eq!(
        (overall["reasoning"]["reasoning_tokens"].as_u64(), overall["reasoning"]["answer_tokens"].as_u64()),
        (Some(121), Some(194))
    );
    assert!((overall["reasoning"]["multiplier"].as_f64().unwrap() - 121.0 / 194.0).abs() < 1e-12);
    // Seven calls recorded as agent; the Gemini chat and the four Vercel calls are inferred chat.
    assert_eq!(overall["workload"]["agent"], serde_json::json!({"stored": 7, "inferred": 0}));
    assert_eq!(overall["workload"]["chat"], serde_json::json!({"stored": 0, "inferred": 5}));

    let output = infertrace(&["metrics", out.to_str().unwrap(), "--json", "--by", "session_id"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metrics: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let groups = metrics["groups"].as_object().unwrap();
    let sizes: Vec<(&str, u64)> = groups.iter().map(|(k, g)| (k.as_str(), g["requests"].as_u64().unwrap())).collect();
    assert_eq!(
        sizes,
        [
            ("(none)", 5),
            ("4bedea77bb33b9c5f280371eae21ea97", 3),
            ("fee618f96dc31e0ca38b2f7b26eb8b29", 2),
            ("resp_0e32bda5b6259ecd00694279e271348194a818447145cd1763", 2)
        ]
    );
    assert_eq!(groups["fee618f96dc31e0ca38b2f7b26eb8b29"]["reasoning"]["multiplier"], 0.0);
}

#[test]
fn openai_responses_of_every_shape_carry_their_usage() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("usage");
    common::run(&[common::testdata().join("genai/openai-usage/openai-api-examples.jsonl")], &out);
    let rows = rows(&out);
    assert_eq!(rows.len(), 8);
    // Chat Completions, the API reference's default example: 19 prompt (0 cached), 10 completion (0 reasoning).
    let chat = by_id(&rows, "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT");
    assert_eq!(
        (chat.input_tokens, chat.cached_tokens, chat.output_tokens, chat.reasoning_tokens),
        (Some(19), Some(0), Some(10), Some(0))
    );
    assert_eq!(
        (chat.arrival_time, chat.finish_reason.as_deref(), chat.tool_calls),
        (Some(1_741_569_952_000_000_000), Some("stop"), Some(0))
    );
    // Responses API with reasoning: 81 in, 1035 out of which 832 reasoning; created_at 1741477868, completed_at +1 s.
    let reasoning = by_id(&rows, "resp_67ccd7eca01881908ff0b5146584e408072912b2993db808");
    assert_eq!(
        (reasoning.input_tokens, reasoning.output_tokens, reasoning.reasoning_tokens),
        (Some(81), Some(1035), Some(832))
    );
    assert_eq!((reasoning.arrival_time, reasoning.e2e_s), (Some(1_741_477_868_000_000_000), Some(1.0)));
    // Responses API with a function_call output item: one tool call.
    let function = by_id(&rows, "resp_67ca09c5efe0819096d0511c92b8c890096610f474011cc0");
    assert_eq!((function.input_tokens, function.output_tokens, function.tool_calls), (Some(291), Some(23), Some(1)));
    // A Batch API output line: the body's id and usage, the line's HTTP status.
    let batch = by_id(&rows, "chatcmpl-9758Iw");
    assert_eq!((batch.input_tokens, batch.output_tokens, batch.http_status), (Some(24), Some(15), Some(200)));
    // Legacy completions: usage without details, finish reason length.
    let legacy = by_id(&rows, "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7");
    assert_eq!(
        (legacy.input_tokens, legacy.output_tokens, legacy.finish_reason.as_deref()),
        (Some(5), Some(7), Some("length"))
    );
    // openai-python's recorded responses (September 2024): reasoning recorded as 0, no prompt details.
    let recorded = by_id(&rows, "chatcmpl-ABfvbtVnTu5DeC4EFnRYj8mtfOM99");
    assert_eq!(
        (recorded.input_tokens, recorded.cached_tokens, recorded.output_tokens, recorded.reasoning_tokens),
        (Some(79), None, Some(14), Some(0))
    );
}

#[test]
fn litellm_spend_rows_payloads_and_csv_exports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("litellm");
    common::run(&[common::testdata().join("genai/litellm")], &out);
    let rows = rows(&out);
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.source == "litellm-spend" && r.status == Status::Ok));
    let in_file =
        |file: &'static str| rows.iter().filter(move |r| r.source_file.as_deref().is_some_and(|f| f.ends_with(file)));
    // LiteLLM 1.74.0's standard logging payload: float Unix seconds 1796683760.634816 → .69183 (read to the µs),
    // usage with 1024 cached and 256 reasoning tokens, api_base http://127.0.0.1:41715/v1, trace id as session.
    let payload: Vec<&RequestRow> = in_file("litellm-1.74.0-standard-logging.jsonl").collect();
    let p = payload[0];
    assert_eq!(
        (p.request_id.as_str(), p.session_id.as_deref(), p.turn),
        ("chatcmpl-demo-0001", Some("trace-abc"), Some(0))
    );
    assert_eq!(
        (p.input_tokens, p.cached_tokens, p.output_tokens, p.reasoning_tokens),
        (Some(1200), Some(1024), Some(300), Some(256))
    );
    assert_eq!((p.arrival_time, p.completion_time), (Some(1_796_683_760_634_816_000), Some(1_796_683_760_691_830_000)));
    assert_eq!(
        (p.ttft_s, p.instance.as_deref(), p.model.as_deref()),
        (Some(0.057_014), Some("127.0.0.1:41715"), Some("o3-mini"))
    );
    // The same call as a row of the table, exported as CSV by psql: milliseconds, counts from metadata.usage_object.
    let csv: Vec<&RequestRow> = in_file("spend-logs.csv").collect();
    assert_eq!(csv.len(), 2);
    let demo = csv.iter().find(|r| r.request_id == "chatcmpl-demo-0001").unwrap();
    assert_eq!(
        (demo.cached_tokens, demo.reasoning_tokens, demo.session_id.as_deref()),
        (Some(1024), Some(256), Some("trace-abc"))
    );
    // 2026-12-07 22:49:20.635 → 22:49:20.692 UTC.
    assert_eq!((demo.arrival_time, demo.e2e_s), (Some(1_796_683_760_635_000_000), Some(0.057)));
    // LiteLLM's own test fixture of a spend-log row (GCS Pub/Sub body): 10 in, 20 out, session 1234567890,
    // "2025-01-24 09:20:46.847371" → "…46.851954".
    let fixture: Vec<&RequestRow> = in_file("spend-logs-payload.json").collect();
    let f = fixture[0];
    assert_eq!(
        (f.request_id.as_str(), f.session_id.as_deref()),
        ("chatcmpl-2283081b-dc89-41f6-93e6-d4f914774027", Some("1234567890"))
    );
    assert_eq!(
        (f.input_tokens, f.output_tokens, f.cached_tokens, f.e2e_s),
        (Some(10), Some(20), None, Some(0.004_583))
    );
    assert_eq!(f.arrival_time, Some(1_737_710_446_847_371_000));
}

#[test]
fn a_gateway_log_merges_with_the_engine_log_on_the_response_id() {
    let dir = tempfile::tempdir().unwrap();
    // vLLM 0.8.5 lines (`logger.py:39`, `engine.py:310`-style `Added request` and the finished line are not
    // needed): the request id is the chat completion's id, as vLLM's OpenAI server makes it.
    let log = "INFO 01-24 09:20:46 [logger.py:39] Received request chatcmpl-demo-0001: prompt: 'x', params: SamplingParams(n=1, max_tokens=512), prompt_token_ids: [1, 2, 3], lora_request: None, prompt_adapter_request: None.\n";
    let log_path = dir.path().join("vllm.log");
    fs::write(&log_path, log).unwrap();
    let (server, gateway, merged) = (dir.path().join("server"), dir.path().join("gateway"), dir.path().join("merged"));
    let parse = infertrace_adapter::ParseOptions { year: Some(2026), ..Default::default() };
    common::run_with(&[log_path], &server, parse);
    common::run(&[common::testdata().join("genai/litellm/litellm-1.74.0-standard-logging.jsonl")], &gateway);
    let output =
        infertrace(&["merge", server.to_str().unwrap(), gateway.to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let dataset = Dataset::open(&merged).unwrap();
    assert_eq!(dataset.manifest.merge.as_ref().unwrap().matched_by_id, 1);
    let rows = RequestRow::from_batch(&dataset.requests).unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.source, "litellm-spend+vllm-log");
    // The application's session, turn and reasoning tokens; the engine's max_tokens and prompt length agree or
    // fill in: vLLM saw 3 prompt token ids, the gateway reports 1200, and token counts are server first.
    assert_eq!((row.session_id.as_deref(), row.turn, row.reasoning_tokens), (Some("trace-abc"), Some(0), Some(256)));
    assert_eq!((row.max_tokens, row.input_tokens), (Some(512), Some(3)));
    // The gateway is client-side: its arrival (2026-12-07T22:49:20.634816Z) wins over the log's.
    assert_eq!(row.arrival_time, Some(1_796_683_760_634_816_000));
}
