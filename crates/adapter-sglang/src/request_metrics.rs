//! `sglang-request-metrics`: the hourly `sglang-request-metrics-YYYYmmdd_HH.log` files of `--export-metrics-to-file`
//! (0.5.6+, `FileRequestMetricsExporter`): one JSON object per finished request,
//! `{"request_parameters": "<json.dumps of the GenerateReqInput fields>", **out["meta_info"]}`.
//!
//! With `--enable-metrics`, `meta_info` carries the timestamp block (`request_received_ts`,
//! `response_sent_to_client_ts`/`request_finished_ts`, `queue_time`), which makes this the best per-request
//! source SGLang has. `request_parameters` is a JSON string; only `rid`, `received_time` and `max_new_tokens` are read
//! from it — the text and token ids it may hold are never kept.

use std::io::BufRead;

use infertrace_adapter::parallel::map_json_lines;
use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::log::requests::meta_from_json;

/// The SGLang request-metrics file adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct SglangRequestMetrics;

impl SglangRequestMetrics {
    /// Format id.
    pub const ID: &'static str = "sglang-request-metrics";
}

impl Adapter for SglangRequestMetrics {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "SGLang --export-metrics-to-file request records (0.5.6+): one JSON object per finished request"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let first = text.lines().next().unwrap_or_default();
        (first.starts_with('{') && first.contains("\"request_parameters\"")).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        map_json_lines(&mut lines, sink, |line_no, Parsed(row), sink| {
            let Some(mut row) = row else {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "a record without `id` or `rid`",
                ));
                return Ok(());
            };
            row.source_file = Some(ctx.source_file.to_owned());
            row.source_line = Some(line_no);
            sink.request(*row)
        })?;
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Utc,
            year: None,
            lines: lines.lines_read(),
            details: Default::default(),
        })
    }
}

/// A record's request row, without its source file and line, or `None` when it names no request (no `id`, no
/// `rid`). Made by the thread that reads the line, so the JSON values are built and dropped there, and the fold
/// only writes the row.
struct Parsed(Option<Box<RequestRow>>);

impl<'de> Deserialize<'de> for Parsed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let record = Value::deserialize(deserializer)?;
        Ok(Parsed(row(&record).map(Box::new)))
    }
}

/// The row of one record (`request_parameters` is a JSON object serialized into a string).
fn row(record: &Value) -> Option<RequestRow> {
    let parameters: Option<Value> =
        record.get("request_parameters").and_then(Value::as_str).and_then(|s| serde_json::from_str(s).ok());
    let param = |key: &str| parameters.as_ref().and_then(|p| p.get(key));
    let meta = meta_from_json(record);
    let id = meta.id.clone().or_else(|| param("rid").and_then(Value::as_str).map(str::to_owned))?;
    let arrival =
        meta.received_ts.or_else(|| param("received_time").and_then(Value::as_f64)).and_then(seconds_to_nanos);
    let completion =
        meta.finished_ts.and_then(seconds_to_nanos).or_else(|| Some(arrival? + seconds_to_nanos(meta.e2e_latency?)?));
    Some(RequestRow {
        request_id: id,
        source: SglangRequestMetrics::ID.to_owned(),
        arrival_time: arrival,
        completion_time: completion,
        queue_s: meta.queue_time,
        e2e_s: meta.e2e_latency,
        input_tokens: meta.prompt_tokens,
        cached_tokens: meta.cached_tokens,
        cached_tokens_gpu: meta.cached_device,
        cached_tokens_cpu: meta.cached_host,
        cached_tokens_disk: meta.cached_storage,
        output_tokens: meta.completion_tokens,
        reasoning_tokens: meta.reasoning_tokens,
        max_tokens: param("sampling_params")
            .and_then(|s| s.get("max_new_tokens"))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        status: match meta.finish_reason.as_deref() {
            Some("abort") => Status::Aborted,
            Some(_) => Status::Ok,
            None => Status::Unknown,
        },
        finish_reason: meta.finish_reason,
        http_status: meta.status_code,
        ..RequestRow::default()
    })
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    #[test]
    fn records_with_and_without_the_timestamp_block() {
        let text = r#"{"request_parameters": "{\"rid\": \"r1\", \"text\": \"CANARY prompt\", \"sampling_params\": {\"max_new_tokens\": 50}}", "id": "r1", "finish_reason": {"type": "stop", "matched": 151645}, "prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 64, "cached_tokens_details": {"device": 48, "host": 16}, "reasoning_tokens": 5, "e2e_latency": 1.25, "request_received_ts": 1766581535.5, "response_sent_to_client_ts": 1766581536.75, "queue_time": 0.05}
{"request_parameters": "{\"rid\": \"r2\"}", "finish_reason": {"type": "abort", "status_code": 503}, "prompt_tokens": 7, "completion_tokens": 0, "e2e_latency": 0.1}
{"request_parameters": "#;
        let options = ParseOptions::default();
        let ctx = ParseContext {
            source_file: "sglang-request-metrics-20251224_13.log",
            options: &options,
            modified: None,
            sidecars: None,
        };
        let mut sink = CollectSink::default();
        let report = SglangRequestMetrics.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        assert_eq!(report.lines, 3);
        assert_eq!(sink.diagnostics.len(), 1);
        assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MalformedJson);
        let r1 = &sink.requests[0];
        assert_eq!((r1.request_id.as_str(), r1.status, r1.max_tokens), ("r1", Status::Ok, Some(50)));
        assert_eq!(
            (r1.arrival_time, r1.completion_time),
            (Some(1_766_581_535_500_000_000), Some(1_766_581_536_750_000_000))
        );
        assert_eq!(
            (r1.cached_tokens, r1.cached_tokens_gpu, r1.cached_tokens_cpu, r1.reasoning_tokens),
            (Some(64), Some(48), Some(16), Some(5))
        );
        assert_eq!((r1.queue_s, r1.e2e_s), (Some(0.05), Some(1.25)));
        let r2 = &sink.requests[1];
        assert_eq!(
            (r2.request_id.as_str(), r2.status, r2.http_status, r2.arrival_time),
            ("r2", Status::Aborted, Some(503), None)
        );
        assert!(!format!("{:?}", sink.requests).contains("CANARY"));
    }
}
