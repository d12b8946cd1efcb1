//! `dynamo-request-trace`: the per-request records Dynamo's frontend writes with `DYN_REQUEST_TRACE` (1.6.x),
//! `dynamo.request.trace.v1`, as JSONL segments `<prefix>.NNNNNN.jsonl.gz` (or plain JSONL).
//!
//! ```text
//! {"schema": "dynamo.request.trace.v1", "event_type": "request_end", "event_time_unix_ms": u64,
//!  "event_source"?: "dynamo"|"harness", "agent_context"?: {"session_id", "parent_session_id"?, …},
//!  "request": {"request_id", "x_request_id"?, "model"?, "input_tokens"?, "output_tokens"?, "cached_tokens"?,
//!              "request_received_ms"?, "prefill_wait_time_ms"?, "prefill_time_ms"?, "ttft_ms"?, "total_time_ms"?,
//!              "avg_itl_ms"?, "kv_hit_rate"?, "kv_transfer_estimated_latency_ms"?, "queue_depth"?,
//!              "worker"?: {"prefill_worker_id", "prefill_dp_rank", "decode_worker_id", "decode_dp_rank"},
//!              "replay"?: {"trace_block_size", "input_length", "input_sequence_hashes": [u64]},
//!              "finish_reason_metadata"?: {"finish_reason", …}}}
//! event_type   request_end | request_payload | tool_start | tool_end | tool_error   (Option fields omitted)
//! ```
//!
//! One `requests` row per `request_end`:
//! - `request_id` is the client's `x_request_id` when the record has one (AIPerf sends it as `X-Request-ID`, so
//!   client and server rows of one run join on it), else Dynamo's own `request_id`.
//! - Times: `arrival_time` = `request_received_ms`; `scheduled_time` = arrival + `prefill_wait_time_ms` (router
//!   dispatch), `queue_s` = that wait; `prefill_s` = `prefill_time_ms`; `completion_time` = arrival +
//!   `total_time_ms`, `e2e_s` = `total_time_ms`.
//! - **TTFT on disaggregated serving.** Dynamo's `ttft_ms` is the first token *as first observed*, which on a
//!   disaggregated request is the prefill worker's, before the KV cache reaches the decode worker. So
//!   `prefill_end_time` = arrival + `ttft_ms` (the prefill worker's first token), `kv_transfer_s` =
//!   `kv_transfer_estimated_latency_ms` (decode first token − prefill completion, an upper bound), and the
//!   client-visible TTFT is `ttft_s` = `ttft_ms` + `kv_transfer_estimated_latency_ms`, with `first_token_time` =
//!   arrival + `ttft_s` (NVIDIA's srt-slurm measured this sum within +1.4 ms p50 of AIPerf's client TTFT on 557
//!   requests, against +127 ms for `ttft_ms` alone). Without a transfer estimate (aggregated serving) `ttft_s` is
//!   `ttft_ms`. `tpot_s` is recomputed from the client-visible TTFT, `(e2e − ttft) / (output − 1)`, because
//!   `avg_itl_ms` absorbs the KV transfer too.
//! - `prefill_instance` / `decode_instance`: the worker id, then `/dp<rank>` when the record gives a dp rank.
//! - `prefix_hashes` / `block_size`: the replay block hashes (u64, read exactly) and `trace_block_size`.
//! - `session_id` from `agent_context` (then `workload_class` is `agent`); `status` from
//!   `finish_reason_metadata.finish_reason` (`cancelled`/`abort` → aborted, `error` → error, any other → ok),
//!   `unknown` without one (context-free rows carry none).
//!
//! `kv_hit_rate` (effective overlap blocks / ISL blocks at routing) becomes a `cache_events` row of kind `lookup`
//! at the dispatch time, for the prefill worker (the one whose cache was matched): `blocks` = the ISL blocks (the
//! number of replay hashes, else ⌈input tokens / block size⌉), `hit_blocks` = rate × blocks, rounded. Without a
//! block count the rate cannot be placed and is counted in `details.kv_hit_rate_without_blocks`.
//!
//! `request_payload` records (request and response bodies) are never read; tool events carry no request. Both are
//! counted by `event_type` in `details.records`. Lines that are not trace records are `not-a-record` diagnostics.

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::parallel::map_json_lines;
use infertrace_adapter::time::millis_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
};
use infertrace_schema::{CacheEvent, CacheEventKind, ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use serde::Deserialize;

/// The Dynamo request-trace adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamoRequestTrace;

impl DynamoRequestTrace {
    /// Format id.
    pub const ID: &'static str = "dynamo-request-trace";
}

const SCHEMA: &str = "dynamo.request.trace.v1";

/// One record, reading only what reaches a row: `payload` and `tool` are skipped unread (unknown fields are).
#[derive(Debug, Deserialize)]
struct Record {
    schema: Option<String>,
    event_type: Option<String>,
    agent_context: Option<AgentContext>,
    request: Option<Metrics>,
}

#[derive(Debug, Deserialize)]
struct AgentContext {
    session_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Metrics {
    request_id: Option<String>,
    x_request_id: Option<String>,
    model: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    request_received_ms: Option<u64>,
    prefill_wait_time_ms: Option<f64>,
    prefill_time_ms: Option<f64>,
    ttft_ms: Option<f64>,
    total_time_ms: Option<f64>,
    kv_hit_rate: Option<f64>,
    kv_transfer_estimated_latency_ms: Option<f64>,
    worker: Option<Workers>,
    replay: Option<Replay>,
    finish_reason_metadata: Option<FinishReason>,
}

#[derive(Debug, Deserialize)]
struct Workers {
    prefill_worker_id: Option<u64>,
    prefill_dp_rank: Option<u32>,
    decode_worker_id: Option<u64>,
    decode_dp_rank: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct Replay {
    trace_block_size: Option<u32>,
    input_length: Option<u64>,
    #[serde(default)]
    input_sequence_hashes: Vec<u64>,
}

#[derive(Debug, Deserialize)]
struct FinishReason {
    finish_reason: Option<String>,
}

/// A worker as an `instance`: its id, then `/dp<rank>` when known.
pub(crate) fn worker_instance(worker_id: u64, dp_rank: Option<u32>) -> String {
    match dp_rank {
        Some(rank) => format!("{worker_id}/dp{rank}"),
        None => worker_id.to_string(),
    }
}

impl Adapter for DynamoRequestTrace {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "Dynamo request trace (dynamo.request.trace.v1 JSONL, DYN_REQUEST_TRACE): one row per request"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        (text.trim_start().starts_with('{') && text.contains(SCHEMA)).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut records: BTreeMap<String, u64> = BTreeMap::new();
        let mut without_blocks = 0u64;
        map_json_lines(&mut lines, sink, |line_no, record: Record, sink| {
            let event = record.event_type.as_deref().unwrap_or_default();
            let known = ["request_end", "request_payload", "tool_start", "tool_end", "tool_error"].contains(&event);
            // Payload records are written before the schema key existed on them (the replay fixtures show one).
            if !known || (record.schema.as_deref() != Some(SCHEMA) && event != "request_payload") {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::NotARecord,
                    "not a dynamo.request.trace.v1 record",
                ));
                return Ok(());
            }
            *records.entry(event.to_owned()).or_default() += 1;
            if event != "request_end" {
                return Ok(());
            }
            let Some(metrics) = record.request else {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "request_end without `request`",
                ));
                return Ok(());
            };
            let session = record.agent_context.and_then(|a| a.session_id);
            if !request_end(metrics, session, line_no, ctx, sink, &mut without_blocks)? {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "request_end without `request_id` or `x_request_id`",
                ));
            }
            Ok::<_, DatasetError>(())
        })?;
        let mut details = BTreeMap::new();
        details.insert("records".to_owned(), serde_json::json!(records));
        if without_blocks > 0 {
            details.insert("kv_hit_rate_without_blocks".to_owned(), without_blocks.into());
        }
        Ok(ParseReport {
            format_version: Some("v1".to_owned()),
            clock_domain: ClockDomain::Utc,
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}

fn ms(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v / 1e3)
}

fn count(value: Option<u64>) -> Option<u32> {
    value.and_then(|n| u32::try_from(n).ok())
}

/// Writes the row (and the lookup) of one `request_end`; `false` when it names no request.
fn request_end(
    m: Metrics,
    session_id: Option<String>,
    line: u64,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
    without_blocks: &mut u64,
) -> Result<bool, DatasetError> {
    let Some(request_id) = m.x_request_id.clone().filter(|s| !s.is_empty()).or(m.request_id.clone()) else {
        return Ok(false);
    };
    // Milliseconds past 2262 overflow nanoseconds (a time logged in microseconds, a corrupted digit): no arrival.
    let arrival = m.request_received_ms.and_then(|t| i64::try_from(t).ok()?.checked_mul(1_000_000));
    if m.request_received_ms.is_some() && arrival.is_none() {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            "request_received_ms is past the year 2262 (not milliseconds?); the request's times were left null",
        ));
    }
    let at = |offset_s: Option<f64>| arrival?.checked_add(millis_to_nanos(offset_s? * 1e3)?);
    let transfer_s = ms(m.kv_transfer_estimated_latency_ms);
    let prefill_ttft_s = ms(m.ttft_ms);
    let ttft_s = match (prefill_ttft_s, transfer_s) {
        (Some(ttft), Some(transfer)) => Some(ttft + transfer),
        (ttft, _) => ttft,
    };
    let e2e_s = ms(m.total_time_ms);
    let output_tokens = count(m.output_tokens);
    let tpot_s = match (e2e_s, ttft_s, output_tokens) {
        (Some(e2e), Some(ttft), Some(out)) if out > 1 && e2e >= ttft => Some((e2e - ttft) / f64::from(out - 1)),
        _ => None,
    };
    let queue_s = ms(m.prefill_wait_time_ms);
    let workers = m.worker.as_ref();
    let prefill_instance = workers.and_then(|w| Some(worker_instance(w.prefill_worker_id?, w.prefill_dp_rank)));
    let decode_instance = workers.and_then(|w| Some(worker_instance(w.decode_worker_id?, w.decode_dp_rank)));
    let replay = m.replay.as_ref();
    let block_size = replay.and_then(|r| r.trace_block_size).filter(|&b| b > 0);
    let hashes = replay.map(|r| r.input_sequence_hashes.clone()).filter(|h| !h.is_empty());
    let input_tokens = count(m.input_tokens.or(replay.and_then(|r| r.input_length)));
    let status = match m.finish_reason_metadata.and_then(|f| f.finish_reason).as_deref() {
        Some("cancelled" | "canceled" | "abort" | "aborted") => Status::Aborted,
        Some("error") => Status::Error,
        Some(_) => Status::Ok,
        None => Status::Unknown,
    };
    if let Some(rate) = m.kv_hit_rate.filter(|r| r.is_finite() && (0.0..=1.0).contains(r)) {
        let blocks = hashes.as_ref().map(|h| h.len() as u64).or_else(|| {
            let tokens = u64::from(input_tokens?);
            Some(tokens.div_ceil(u64::from(block_size?)))
        });
        match blocks.and_then(|b| u32::try_from(b).ok()) {
            Some(blocks) => sink.cache_event(CacheEvent {
                time: at(queue_s.or(Some(0.0))),
                source: DynamoRequestTrace::ID.into(),
                instance: prefill_instance.as_deref().or(decode_instance.as_deref()).map(Into::into),
                event: CacheEventKind::Lookup,
                request_id: Some(request_id.clone()),
                blocks: Some(blocks),
                hit_blocks: Some((rate * f64::from(blocks)).round() as u32),
                source_file: Some(ctx.source_file.into()),
                source_line: Some(line),
                ..CacheEvent::default()
            })?,
            None => *without_blocks += 1,
        }
    }
    sink.request(RequestRow {
        request_id,
        source: DynamoRequestTrace::ID.to_owned(),
        model: m.model,
        workload_class: session_id.is_some().then_some(WorkloadClass::Agent),
        session_id,
        prefill_instance,
        decode_instance,
        arrival_time: arrival,
        scheduled_time: at(queue_s),
        prefill_end_time: at(prefill_ttft_s),
        first_token_time: at(ttft_s),
        completion_time: at(e2e_s),
        queue_s,
        prefill_s: ms(m.prefill_time_ms),
        ttft_s,
        tpot_s,
        e2e_s,
        kv_transfer_s: transfer_s,
        input_tokens,
        cached_tokens: count(m.cached_tokens),
        output_tokens,
        prefix_hashes: hashes,
        block_size,
        status,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext {
            source_file: "dynamo-request-trace.000000.jsonl",
            options: &options,
            modified: None,
            sidecars: None,
        };
        let mut sink = CollectSink::default();
        let report = DynamoRequestTrace.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn a_disaggregated_row_gets_the_client_visible_ttft() {
        let text = r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1767225600900,"event_source":"dynamo","agent_context":{"session_id":"s1"},"request":{"request_id":"6ec6a2f0-0000-4000-8000-000000000001","x_request_id":"aiperf-7","model":"m","input_tokens":1000,"output_tokens":11,"cached_tokens":512,"request_received_ms":1767225600000,"prefill_wait_time_ms":5.0,"prefill_time_ms":95.0,"ttft_ms":100.0,"total_time_ms":900.0,"avg_itl_ms":80.0,"kv_hit_rate":0.5,"kv_transfer_estimated_latency_ms":100.0,"worker":{"prefill_worker_id":7587888160958627596,"prefill_dp_rank":0,"decode_worker_id":18446744073709551615,"decode_dp_rank":1},"replay":{"trace_block_size":256,"input_length":1000,"input_sequence_hashes":[18446744073709551615,9007199254740993,3,4]},"finish_reason_metadata":{"finish_reason":"stop"}},"payload":{"request":{"messages":[{"content":"CANARY prompt"}]}}}"#;
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        let [r] = &sink.requests[..] else { panic!() };
        let t0 = 1_767_225_600_000_000_000i64;
        assert_eq!((r.request_id.as_str(), r.session_id.as_deref()), ("aiperf-7", Some("s1")));
        assert_eq!((r.arrival_time, r.scheduled_time), (Some(t0), Some(t0 + 5_000_000)));
        // Prefill worker's first token at +100 ms; the client sees it 100 ms of transfer later.
        assert_eq!((r.prefill_end_time, r.first_token_time), (Some(t0 + 100_000_000), Some(t0 + 200_000_000)));
        assert_eq!((r.ttft_s, r.kv_transfer_s, r.e2e_s), (Some(0.2), Some(0.1), Some(0.9)));
        // (0.9 - 0.2) / 10 output gaps
        assert_eq!(r.tpot_s, Some((0.9 - 0.2) / 10.0));
        assert_eq!(r.completion_time, Some(t0 + 900_000_000));
        assert_eq!(
            (r.prefill_instance.as_deref(), r.decode_instance.as_deref()),
            (Some("7587888160958627596/dp0"), Some("18446744073709551615/dp1"))
        );
        assert_eq!(r.prefix_hashes.as_deref(), Some(&[u64::MAX, 9_007_199_254_740_993, 3, 4][..]));
        assert_eq!((r.block_size, r.cached_tokens, r.status), (Some(256), Some(512), Status::Ok));
        assert_eq!(r.workload_class, Some(WorkloadClass::Agent));
        let [lookup] = &sink.cache_events[..] else { panic!() };
        assert_eq!(
            (lookup.event, lookup.blocks, lookup.hit_blocks, lookup.time, lookup.instance.as_deref()),
            (CacheEventKind::Lookup, Some(4), Some(2), Some(t0 + 5_000_000), Some("7587888160958627596/dp0"))
        );
        assert_eq!(report.details["records"], serde_json::json!({"request_end": 1}));
        assert!(!format!("{:?}", sink.requests).contains("CANARY"));
    }

    #[test]
    fn replay_fixture_rows_and_tolerated_lines() {
        let text = concat!(
            r#"{"event_type":"request_payload","request_id":"standard-1"}"#,
            "\n",
            r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1010,"request":{"request_id":"standard-1","output_tokens":2,"request_received_ms":1000,"total_time_ms":10,"kv_hit_rate":0.5,"replay":{"trace_block_size":4,"input_length":4,"input_sequence_hashes":[401]}}}"#,
            "\n",
            r#"{"schema":"dynamo.request.trace.v1","event_type":"tool_end","event_time_unix_ms":115,"tool":{"tool_call_id":"t"}}"#,
            "\n",
            r#"{"schema":"other","event_type":"request_end"}"#,
            "\n",
            r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","request":{"ttft_ms":1.0}}"#,
            "\n",
            "{\"schema\":\n"
        );
        let (sink, report) = parse(text);
        let [r] = &sink.requests[..] else { panic!() };
        assert_eq!(
            (r.request_id.as_str(), r.arrival_time, r.completion_time),
            ("standard-1", Some(1_000_000_000), Some(1_010_000_000))
        );
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.e2e_s, r.ttft_s, r.tpot_s),
            (Some(4), Some(2), Some(0.01), None, None)
        );
        assert_eq!((r.status, r.workload_class), (Status::Unknown, None));
        // One block, half a block hit: rounds to one (0.5 rounds away from zero).
        assert_eq!(sink.cache_events[0].hit_blocks, Some(1));
        let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(
            kinds,
            [(4, DiagnosticKind::NotARecord), (5, DiagnosticKind::MissingField), (6, DiagnosticKind::MalformedJson)]
        );
        assert_eq!(
            report.details["records"],
            serde_json::json!({"request_end": 2, "request_payload": 1, "tool_end": 1})
        );
    }
}
