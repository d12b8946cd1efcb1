//! The three tables of a canonical dataset.

use std::sync::Arc;

use crate::kind::{Dict, F64, Time, U16, U32, U64, U64List, Utf8};
use crate::table::{cell, field_type, nullable, read_cell, table};
use crate::vocab::{CacheEventKind, CacheTier, Status, WorkloadClass};

table! {
    /// One row per request: timing, token counts, cache reuse, placement and outcome.
    table "requests", row RequestRow, builder RequestsBuilder, module request;

    /// Request id with framework-internal suffixes stripped, so one request joins across sources.
    /// Sources without ids get `<file stem>:<line>`.
    request_id / REQUEST_ID: Utf8, required, "";
    /// Format id of the adapter that produced the row (`mooncake`, `azure-llm`, …), or a name of its own where a
    /// format holds rows of different kinds: measured and simulated rows never share a source
    /// (`llmservingsim-vllm`, `llmservingsim-sim`, `llmservingsim-workload`; `replay` for `infertrace replay`,
    /// `servegen-synth` for `infertrace synth`). What each is: the vocabulary `requests.source (kind)`.
    source / SOURCE: Dict<String>, required, "";
    /// Which source each column of a merged row came from (`infertrace merge`), as `column=source` pairs joined by
    /// `;` in column order; null for rows seen by one source only, whose columns all come from `source`.
    column_sources / COLUMN_SOURCES: Dict<String>, optional, "";
    /// Served model name as the source spells it.
    model / MODEL: Dict<String>, optional, "";
    /// Conversation or agent session the request belongs to.
    session_id / SESSION_ID: Utf8, optional, "";
    /// Position of the request in its session, from 0.
    turn / TURN: U32, optional, "";
    /// Engine instance (worker, rank group or host) that served the request.
    instance / INSTANCE: Dict<String>, optional, "";
    /// Prefill instance under prefill/decode disaggregation.
    prefill_instance / PREFILL_INSTANCE: Dict<String>, optional, "";
    /// Decode instance under prefill/decode disaggregation.
    decode_instance / DECODE_INSTANCE: Dict<String>, optional, "";
    /// When the request reached the server (for public traces, the arrival they record).
    arrival_time / ARRIVAL_TIME: Time, optional, "";
    /// When the scheduler first admitted the request into a batch.
    scheduled_time / SCHEDULED_TIME: Time, optional, "";
    /// When the first output token was produced.
    first_token_time / FIRST_TOKEN_TIME: Time, optional, "";
    /// When prefill finished (differs from `first_token_time` under disaggregation).
    prefill_end_time / PREFILL_END_TIME: Time, optional, "";
    /// When decoding started (on the decode instance under disaggregation).
    decode_start_time / DECODE_START_TIME: Time, optional, "";
    /// When the last output token was produced.
    last_token_time / LAST_TOKEN_TIME: Time, optional, "";
    /// When the response was complete (sent or logged as finished).
    completion_time / COMPLETION_TIME: Time, optional, "";
    /// Time waiting before being scheduled: `scheduled_time - arrival_time`.
    queue_s / QUEUE_S: F64, optional, "s";
    /// Prefill compute time: `prefill_end_time` (else `first_token_time`) minus `scheduled_time`.
    prefill_s / PREFILL_S: F64, optional, "s";
    /// Time to first token: `first_token_time - arrival_time`.
    ttft_s / TTFT_S: F64, optional, "s";
    /// Mean time per output token after the first: `(last_token_time - first_token_time) / (output_tokens - 1)`.
    tpot_s / TPOT_S: F64, optional, "s";
    /// Decode time: `last_token_time` minus `decode_start_time` (else `first_token_time`).
    decode_s / DECODE_S: F64, optional, "s";
    /// End-to-end latency: `completion_time` (else `last_token_time`) minus `arrival_time`.
    e2e_s / E2E_S: F64, optional, "s";
    /// Time spent moving KV state from the prefill to the decode instance.
    kv_transfer_s / KV_TRANSFER_S: F64, optional, "s";
    /// Bytes of KV state moved from the prefill to the decode instance.
    kv_transfer_bytes / KV_TRANSFER_BYTES: U64, optional, "bytes";
    /// Prompt tokens.
    input_tokens / INPUT_TOKENS: U32, optional, "tokens";
    /// Prompt tokens served from any cache tier instead of being recomputed.
    cached_tokens / CACHED_TOKENS: U32, optional, "tokens";
    /// Prompt tokens served from accelerator memory.
    cached_tokens_gpu / CACHED_TOKENS_GPU: U32, optional, "tokens";
    /// Prompt tokens served from host DRAM.
    cached_tokens_cpu / CACHED_TOKENS_CPU: U32, optional, "tokens";
    /// Prompt tokens served from local disk or flash.
    cached_tokens_disk / CACHED_TOKENS_DISK: U32, optional, "tokens";
    /// Prompt tokens served from a remote or shared store.
    cached_tokens_remote / CACHED_TOKENS_REMOTE: U32, optional, "tokens";
    /// All generated tokens, hidden reasoning included.
    output_tokens / OUTPUT_TOKENS: U32, optional, "tokens";
    /// Hidden reasoning tokens, a subset of `output_tokens`.
    reasoning_tokens / REASONING_TOKENS: U32, optional, "tokens";
    /// Output limit the client asked for.
    max_tokens / MAX_TOKENS: U32, optional, "tokens";
    /// Chained block hashes of the prompt: hash `i` covers blocks `0..=i`, so equal hashes mean a reusable prefix.
    prefix_hashes / PREFIX_HASHES: U64List, optional, "";
    /// Tokens per block of `prefix_hashes`.
    block_size / BLOCK_SIZE: U32, optional, "tokens";
    /// Documents retrieved into the prompt (RAG).
    retrieved_docs / RETRIEVED_DOCS: U32, optional, "";
    /// Tool calls made by or for the request (agents).
    tool_calls / TOOL_CALLS: U32, optional, "";
    /// Traffic class: `chat`, `rag`, `agent` or `batch`.
    workload_class / WORKLOAD_CLASS: Dict<WorkloadClass>, optional, "";
    /// Outcome: `ok`, `error`, `aborted`, `timeout` or `unknown` (the source does not say).
    status / STATUS: Dict<Status>, required, "";
    /// Why generation stopped, as the source spells it (`stop`, `length`, `abort`, …).
    finish_reason / FINISH_REASON: Dict<String>, optional, "";
    /// HTTP status of the response.
    http_status / HTTP_STATUS: U16, optional, "";
    /// Error kind or message of a failed request, never prompt text.
    error / ERROR: Utf8, optional, "";
    /// Input file the row came from, as given on the command line (never an absolute path of the machine).
    source_file / SOURCE_FILE: Dict<String>, optional, "";
    /// Line of `source_file` (1-based) that completed the row.
    source_line / SOURCE_LINE: U64, optional, "";
}

table! {
    /// Engine and resource time series in long format: one row per metric per instant.
    /// The metric vocabulary is in `schemas/metrics.json`.
    table "samples", row EngineSample, builder SamplesBuilder, module sample;

    /// When the value was observed.
    time / TIME: Time, required, "";
    /// Format id of the adapter that produced the row.
    source / SOURCE: Dict<Arc<str>>, required, "";
    /// Engine instance the value belongs to.
    instance / INSTANCE: Dict<Arc<str>>, optional, "";
    /// Canonical metric name (see `schemas/metrics.json`).
    metric / METRIC: Dict<Arc<str>>, required, "";
    /// The value, in the metric's unit.
    value / VALUE: F64, required, "";
    /// Input file the row came from, as given on the command line.
    source_file / SOURCE_FILE: Dict<Arc<str>>, optional, "";
    /// Line of `source_file` (1-based).
    source_line / SOURCE_LINE: U64, optional, "";
}

impl SamplesBuilder {
    /// Appends one row per `(metric, value)` of `values`, each `row` with its metric and value replaced: what
    /// appending those rows one by one gives. The columns the rows share are appended once as a run, and the metric
    /// names, static text, are matched by address (a log line's 5 to 10 samples each cost the writer's thread seven
    /// column appends and four dictionary look-ups before). The row is taken apart field by field, so that a column
    /// added to the table cannot be left out here.
    pub fn append_values(&mut self, row: &EngineSample, values: &[(&'static str, f64)]) {
        use crate::kind::ColumnKind;
        let EngineSample { time, source, instance, metric: _, value: _, source_file, source_line } = row;
        let n = values.len();
        Time::append_n(&mut self.time, Some(time), n);
        Dict::<Arc<str>>::append_n(&mut self.source, Some(source), n);
        Dict::<Arc<str>>::append_n(&mut self.instance, instance.as_ref(), n);
        for &(metric, value) in values {
            self.metric.push_static(metric);
            F64::append(&mut self.value, Some(&value));
        }
        Dict::<Arc<str>>::append_n(&mut self.source_file, source_file.as_ref(), n);
        U64::append_n(&mut self.source_line, source_line.as_ref(), n);
        self.rows += n;
    }
}

table! {
    /// KV-cache block events per tier: stores, removals, clears and lookups.
    table "cache_events", row CacheEvent, builder CacheEventsBuilder, module cache_event;

    /// When the event happened.
    time / TIME: Time, optional, "";
    /// Format id of the adapter that produced the row.
    source / SOURCE: Dict<Arc<str>>, required, "";
    /// Engine instance whose cache changed.
    instance / INSTANCE: Dict<Arc<str>>, optional, "";
    /// Cache tier: `gpu`, `cpu`, `disk` or `remote`.
    tier / TIER: Dict<CacheTier>, optional, "";
    /// What happened: `stored`, `removed`, `cleared` or `lookup`.
    event / EVENT: Dict<CacheEventKind>, required, "";
    /// Request that caused the event, when known.
    request_id / REQUEST_ID: Utf8, optional, "";
    /// Hash of the (last) block concerned.
    block_hash / BLOCK_HASH: U64, optional, "";
    /// Hash of the block before it in the chain.
    parent_hash / PARENT_HASH: U64, optional, "";
    /// Blocks concerned (looked up, stored or removed).
    blocks / BLOCKS: U32, optional, "";
    /// Blocks found, for lookups.
    hit_blocks / HIT_BLOCKS: U32, optional, "";
    /// Tokens concerned.
    tokens / TOKENS: U32, optional, "tokens";
    /// Bytes concerned.
    bytes / BYTES: U64, optional, "bytes";
    /// Time the operation took (retrieval latency for lookups and loads).
    latency_s / LATENCY_S: F64, optional, "s";
    /// Input file the row came from, as given on the command line.
    source_file / SOURCE_FILE: Dict<Arc<str>>, optional, "";
    /// Line of `source_file` (1-based).
    source_line / SOURCE_LINE: U64, optional, "";
}

/// Durations that [`RequestRow::fill_durations`] could not fill because their end came before their start.
pub type NegativeDurations = Vec<&'static str>;

impl RequestRow {
    /// Fills every duration column that is still null and whose two instants are known.
    ///
    /// Durations the source gave are kept. A duration whose end precedes its start is left null and its name
    /// returned, so the caller can report the inconsistency instead of writing a negative latency.
    pub fn fill_durations(&mut self) -> NegativeDurations {
        fn span(start: Option<i64>, end: Option<i64>) -> Option<i64> {
            end?.checked_sub(start?)
        }
        let mut negative = Vec::new();
        let mut fill = |slot: &mut Option<f64>, name: &'static str, nanos: Option<i64>| {
            if slot.is_some() {
                return;
            }
            match nanos {
                Some(n) if n < 0 => negative.push(name),
                Some(n) => *slot = Some(n as f64 / 1e9),
                None => {}
            }
        };
        let first_token = self.first_token_time;
        fill(&mut self.queue_s, request::QUEUE_S, span(self.arrival_time, self.scheduled_time));
        fill(&mut self.prefill_s, request::PREFILL_S, span(self.scheduled_time, self.prefill_end_time.or(first_token)));
        fill(&mut self.ttft_s, request::TTFT_S, span(self.arrival_time, first_token));
        fill(&mut self.decode_s, request::DECODE_S, span(self.decode_start_time.or(first_token), self.last_token_time));
        fill(&mut self.e2e_s, request::E2E_S, span(self.arrival_time, self.completion_time.or(self.last_token_time)));
        if self.tpot_s.is_none()
            && let (Some(n), Some(tokens)) =
                (span(first_token, self.last_token_time), self.output_tokens.filter(|&t| t >= 2))
        {
            if n < 0 {
                negative.push(request::TPOT_S);
            } else {
                self.tpot_s = Some(n as f64 / 1e9 / f64::from(tokens - 1));
            }
        }
        negative
    }
}
