//! `vllm-otlp`: vLLM's OpenTelemetry request spans exported as OTLP/JSON, one export request per line (the OTel
//! Collector `file` exporter) or one pretty-printed document, read through the shared OTLP reader
//! ([`infertrace_adapter::otlp`], which also reads protobuf files when the format is chosen). Other spans,
//! an application's or an agent framework's GenAI spans, are `otel-genai`'s.
//!
//! vLLM (0.5.3+ V0, 0.10.2+ V1) emits one `llm_request` SERVER span per finished request: `startTimeUnixNano` is the
//! wall-clock arrival, `endTimeUnixNano` the moment the final output was processed, and the attributes carry the
//! old GenAI semantic-convention names (`vllm/tracing.py`):
//!
//! ```text
//! gen_ai.request.id                    str    (0.14+: the external id, without the -xxxxxxxx suffix)
//! gen_ai.response.model                str    (V0 only)
//! gen_ai.request.max_tokens / .n / .temperature / .top_p   (V1: omitted when falsy)
//! gen_ai.usage.prompt_tokens / .completion_tokens          (newer semconv: gen_ai.usage.input_tokens / .output_tokens)
//! gen_ai.latency.time_in_queue / .time_to_first_token / .e2e                       seconds
//! gen_ai.latency.time_in_model_prefill / .time_in_model_decode (V1)                seconds
//! ```
//!
//! Each span becomes one request row with its instants rebuilt from the arrival and the latencies
//! (`scheduled = arrival + queue`, `first token = arrival + ttft`, `prefill end = scheduled + prefill`). V1 measures
//! queue and prefill on the engine's monotonic clock and the rest on the front end's wall clock, so they can
//! disagree by a little; the latencies are written as reported. The JSON shape follows the OTLP specification; no
//! real vLLM export is public, so the reference marks it UNCONFIRMED.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::otlp::{self, AnyValue, Export, Number, Span};
use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, ParseContext, ParseError, ParseReport, Sink,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status};

/// The OTLP/JSON trace adapter for vLLM request spans.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmOtlp;

impl VllmOtlp {
    /// Format id.
    pub const ID: &'static str = "vllm-otlp";
}

impl Adapter for VllmOtlp {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM OpenTelemetry llm_request spans as OTLP/JSON (collector file exporter, one export per line)"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        // Other spans (an application's, an agent framework's) are `otel-genai`'s.
        (text.trim_start().starts_with('{') && text.contains("\"resourceSpans\"") && text.contains("llm_request"))
            .then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut skipped_spans = 0u64;
        let lines = otlp::read_exports(input, sink, &mut |export, line, sink| {
            skipped_spans += self.export(export, line, ctx, sink)?;
            Ok(())
        })?;
        let mut details = BTreeMap::new();
        if skipped_spans > 0 {
            details.insert("spans_not_llm_request".to_owned(), serde_json::Value::from(skipped_spans));
        }
        Ok(ParseReport { format_version: None, clock_domain: ClockDomain::Utc, year: None, lines, details })
    }
}

impl VllmOtlp {
    /// Writes the `llm_request` spans of one export; returns how many other spans it held.
    fn export(
        &self,
        export: &Export<'_>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<u64, DatasetError> {
        let mut others = 0;
        for resource in &export.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| otlp::attribute(&r.attributes, "service.name"))
                .and_then(|v| v.string_value.as_deref())
                .filter(|name| *name != "unknown_service");
            for span in resource.scope_spans.iter().flat_map(|s| &s.spans) {
                if span.name != "llm_request" {
                    others += 1;
                    continue;
                }
                match request_row(span, service, line, ctx) {
                    Some(row) => sink.request(row)?,
                    None => sink.diagnostic(Diagnostic::new(
                        line,
                        DiagnosticKind::MissingField,
                        "an llm_request span without gen_ai.request.id",
                    )),
                }
            }
        }
        Ok(others)
    }
}

fn request_row(span: &Span<'_>, service: Option<&str>, line: u64, ctx: &ParseContext<'_>) -> Option<RequestRow> {
    let attr = |key: &str| span.attribute(key);
    let id = attr("gen_ai.request.id")?.string_value.as_deref()?.to_owned();
    let latency = |key: &str| attr(key).and_then(AnyValue::as_f64);
    let arrival = span.start_time_unix_nano.as_ref().and_then(Number::as_i64);
    let queue = latency("gen_ai.latency.time_in_queue");
    let ttft = latency("gen_ai.latency.time_to_first_token");
    let prefill = latency("gen_ai.latency.time_in_model_prefill");
    let scheduled = arrival.zip(queue.and_then(seconds_to_nanos)).map(|(a, q)| a + q);
    let error = span.is_error();
    Some(RequestRow {
        request_id: id,
        source: VllmOtlp::ID.to_owned(),
        model: attr("gen_ai.response.model").and_then(|v| v.string_value.as_deref()).map(str::to_owned),
        instance: service.map(str::to_owned),
        arrival_time: arrival,
        scheduled_time: scheduled,
        first_token_time: arrival.zip(ttft.and_then(seconds_to_nanos)).map(|(a, t)| a + t),
        prefill_end_time: scheduled.zip(prefill.and_then(seconds_to_nanos)).map(|(s, p)| s + p),
        completion_time: span.end_time_unix_nano.as_ref().and_then(Number::as_i64),
        queue_s: queue,
        prefill_s: prefill,
        ttft_s: ttft,
        decode_s: latency("gen_ai.latency.time_in_model_decode"),
        e2e_s: latency("gen_ai.latency.e2e"),
        input_tokens: attr("gen_ai.usage.prompt_tokens")
            .or_else(|| attr("gen_ai.usage.input_tokens"))
            .and_then(AnyValue::as_u32),
        output_tokens: attr("gen_ai.usage.completion_tokens")
            .or_else(|| attr("gen_ai.usage.output_tokens"))
            .and_then(AnyValue::as_u32),
        max_tokens: attr("gen_ai.request.max_tokens").and_then(AnyValue::as_u32),
        status: if error { Status::Error } else { Status::Ok },
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    })
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    /// The reference's OTLP/JSON example, on one line, plus a V0-style span and a non-request span.
    const EXPORT: &str = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"unknown_service"}}]},"scopeSpans":[{"scope":{"name":"vllm.llm_engine"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"","name":"llm_request","kind":2,"startTimeUnixNano":"1715432400123456789","endTimeUnixNano":"1715432402345678901","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"chatcmpl-a269fdcb7c6ce890"}},{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"42"}},{"key":"gen_ai.usage.completion_tokens","value":{"intValue":"128"}},{"key":"gen_ai.latency.time_in_queue","value":{"doubleValue":0.0123}},{"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.0852}},{"key":"gen_ai.latency.e2e","value":{"doubleValue":2.2222}},{"key":"gen_ai.latency.time_in_model_prefill","value":{"doubleValue":0.0701}},{"key":"gen_ai.latency.time_in_model_decode","value":{"doubleValue":2.1205}},{"key":"gen_ai.latency.time_in_model_inference","value":{"doubleValue":2.1906}},{"key":"gen_ai.request.max_tokens","value":{"intValue":"256"}},{"key":"gen_ai.request.n","value":{"intValue":"1"}}],"status":{}},{"name":"EngineCoreProc init","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[]}]}]},{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm-node-3"}}]},"scopeSpans":[{"spans":[{"name":"llm_request","startTimeUnixNano":1715432400000000000,"attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"cmpl-9-0"}},{"key":"gen_ai.response.model","value":{"stringValue":"meta-llama/Llama-3-8B"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":7}}],"status":{"code":2}}]}]}]}"#;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "traces.jsonl", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = VllmOtlp.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn spans_become_requests_with_rebuilt_instants() {
        let (sink, report) = parse(&format!("{EXPORT}\n{EXPORT}\n"));
        assert_eq!(sink.diagnostics, []);
        assert_eq!(sink.requests.len(), 4);
        assert_eq!(report.details["spans_not_llm_request"], serde_json::json!(2));
        let r = &sink.requests[0];
        let arrival = 1_715_432_400_123_456_789;
        assert_eq!(r.request_id, "chatcmpl-a269fdcb7c6ce890");
        assert_eq!(r.arrival_time, Some(arrival));
        assert_eq!(r.scheduled_time, Some(arrival + 12_300_000));
        assert_eq!(r.first_token_time, Some(arrival + 85_200_000));
        assert_eq!(r.prefill_end_time, Some(arrival + 12_300_000 + 70_100_000));
        assert_eq!(r.completion_time, Some(1_715_432_402_345_678_901));
        assert_eq!(
            (r.queue_s, r.ttft_s, r.prefill_s, r.decode_s, r.e2e_s),
            (Some(0.0123), Some(0.0852), Some(0.0701), Some(2.1205), Some(2.2222))
        );
        assert_eq!((r.input_tokens, r.output_tokens, r.max_tokens), (Some(42), Some(128), Some(256)));
        assert_eq!((r.status, r.instance.as_deref()), (Status::Ok, None), "unknown_service names no instance");
        let v0 = &sink.requests[1];
        assert_eq!((v0.request_id.as_str(), v0.status), ("cmpl-9-0", Status::Error));
        assert_eq!(
            (v0.model.as_deref(), v0.instance.as_deref(), v0.input_tokens),
            (Some("meta-llama/Llama-3-8B"), Some("vllm-node-3"), Some(7))
        );
        assert_eq!(v0.arrival_time, Some(1_715_432_400_000_000_000), "numbers are accepted where OTLP writes strings");
    }

    #[test]
    fn pretty_printed_documents_and_bad_lines() {
        let pretty = serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(EXPORT).unwrap()).unwrap();
        let (sink, _) = parse(&pretty);
        assert_eq!(sink.requests.len(), 2);
        let (sink, _) = parse("{\"resourceSpans\": [\n");
        assert_eq!(sink.diagnostics.len(), 1);
        let (sink, _) =
            parse(r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"llm_request","attributes":[]}]}]}]}"#);
        assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MissingField);
    }
}
