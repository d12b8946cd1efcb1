//! `aiperf`: what NVIDIA AIPerf (the benchmark client of Dynamo) writes into its artifact directory: the per-request
//! records of `profile_export.jsonl` (one row each), their raw variant `profile_export_raw.jsonl`, and the run
//! summaries `profile_export_aiperf.json` / `.csv` (no rows: their numbers go to the manifest's `details`).
//!
//! # Per-request records (`MetricRecordInfo`), one JSON object each
//!
//! ```text
//! {"metadata": {…}, "metrics": {<tag>: {"value": <number | list>, "unit": "<display unit>"}, …},
//!  "trace_data"?: {…, "response_status_code", …}, "error": null | {"code", "type", "message", …}}
//! pre-0.1.1 (Oct 2025)  metadata x_request_id, x_correlation_id, conversation_id, turn_index, timestamp_ns,
//!                       worker_id, record_processor_id, credit_phase; tags ttft, ttst; per-record request_count,
//!                       min_request_timestamp, max_response_timestamp (ns); failures error_request_count
//! 0.1.1-0.2             + session_num, request_start_ns, request_ack_ns, request_end_ns, benchmark_phase,
//!                       was_cancelled, cancellation_time_ns (timestamp_ns and credit_phase gone); tags
//!                       time_to_first_token, time_to_second_token, …; failures error_isl
//! 0.13+                 + credit_issued_ns, source_trace_id/outer_idx/inner_idx/kind, phase_index/name/kind,
//!                       profiling_index, context_overflow_skip, agent_depth, parent_correlation_id,
//!                       root_correlation_id (later request_num, credit_received_ns, clock_offset_ns); `error`
//!                       may be omitted instead of null
//! raw (--export-level raw)  {"metadata", "start_perf_ns", "payload", "status", "responses": [{"perf_ns", …}],
//!                       "error"}: no metrics
//! ```
//!
//! AIPerf writes one record per line; its documentation shows them pretty-printed, one object over many lines.
//! Both are read: a line that is only `{` opens a multi-line record, which ends where its braces balance (strings
//! and escapes respected) and may be at most 16 MiB, or where an unindented `{` starts the next one (a cut
//! record); any other line is one record. So a cut record costs itself only, never the rest of the file. Each record is deserialized key by key: `payload`, `responses` contents,
//! `trace_data` (but its status code), error messages and list-valued metrics (`inter_chunk_latency`) are skipped
//! unread, so memory follows the largest record, not the file.
//!
//! Mapping (metric values are in display units and `unit` is authoritative: `ns`, `us`, `ms`, `sec` are converted
//! by unit, a time metric with another unit is an `invalid-value` diagnostic):
//! - `request_id` = `metadata.x_request_id` (the `X-Request-ID` header AIPerf sends, which Dynamo logs as
//!   `x_request_id`, so client rows join server rows); else a `metadata.request_id` (hand-made files such as
//!   NVIDIA srt-slurm's fixtures); else `<file stem>:<line>`. `details.ids_from_request_id` / `ids_from_line` count
//!   the fallbacks.
//! - `arrival_time` = `request_start_ns` (`timestamp_ns` before 0.1.1), wall-clock ns at send.
//! - `first_token_time` = arrival + `time_to_first_token` (`ttft`); `ttft_s` = that metric.
//! - `last_token_time` = arrival + `request_latency` (AIPerf measures it to the last response on a monotonic clock);
//!   `e2e_s` = `request_latency`, as AIPerf reports it.
//! - `completion_time` = `request_end_ns` (wall clock when the record ended: on failure, the error), else the
//!   pre-0.1.1 `max_response_timestamp`, else arrival + `request_latency`. It can be a few ms after
//!   `last_token_time` because the two come from different clocks.
//! - `tpot_s` = `inter_token_latency` (AIPerf's `(request_latency − ttft) / (osl − 1)`); the per-chunk
//!   `inter_chunk_latency` list is not stored.
//! - `input_tokens` = `input_sequence_length`, else `usage_prompt_tokens`, else `error_isl` (failed requests);
//!   `output_tokens` = `output_sequence_length` (reasoning included), else `usage_completion_tokens`;
//!   `reasoning_tokens` = `reasoning_token_count`, else `usage_reasoning_tokens`; `cached_tokens` =
//!   `usage_prompt_cache_read_tokens` (what the server reported as cached).
//! - `session_id` = `x_correlation_id` (AIPerf: "this session's stable key, same on every turn": one live
//!   conversation, whose turns `turn_index` counts), else `conversation_id` (the dataset's template conversation,
//!   which several live sessions may replay); `turn` = `turn_index`. Agentic runs (0.13+) also write
//!   `agent_depth`, `parent_correlation_id` and `root_correlation_id` (the session tree); the schema has no column for
//!   the tree, so a request that belongs to one (depth ≥ 1, a parent, or a root other than its own session) gets
//!   `workload_class` `agent`, and `details.agentic` counts such requests, the sub-agent ones and the deepest level.
//!   A root session whose root id is its own session id is not marked: that it has children shows only later.
//!   Integer metadata (times, `turn_index`, `agent_depth`) written otherwise than as a JSON integer is an
//!   `invalid-value` diagnostic and left empty.
//! - Outcome: `error` null or absent is `ok`; `was_cancelled`, an error of type `RequestCancellationError` or code
//!   499 (client closed) is `aborted`; an error type containing `Timeout` is `timeout`; any other error is
//!   `error`. `http_status` = `error.code`, else `trace_data.response_status_code`, else the raw record's
//!   `status`. The `error` column is the error `type` (an exception class name), only when it looks like one
//!   (letters, digits, `_`, `.`; at most 128 characters); the message is never read, it can quote the request.
//! - Warmup records (`benchmark_phase` / `credit_phase` `warmup`) are kept as rows: the server served them and
//!   they warmed its caches, so server-side traces and replays need them. Rows cannot say their phase, so
//!   `details.warmup_records` counts them and `details.phases` counts records per phase (`profiling`, `warmup`,
//!   `other`). AIPerf's own statistics exclude them.
//! - Not used: `request_ack_ns` and `credit_issued_ns` (no column), `worker_id` (AIPerf's own worker, not a server
//!   instance), `session_num`, `source_*`, `phase_*`.
//! - Raw records: `first_token_time` / `last_token_time` are the first and last response, converted to wall time
//!   as `request_start_ns + (perf_ns − start_perf_ns)`. The first SSE message can carry only the role, so this
//!   first-token time can be early. Raw files repeat the requests of `profile_export.jsonl`: normalize one of the
//!   two per run, or the ids appear twice. `trace_data.response_chunks` are transport reads, not tokens (AIPerf's
//!   own description), so they are not used for token times; the metrics are better.
//! - A metric written without `unit` (NVIDIA srt-slurm's hand-minimised fixtures) is read in AIPerf's display unit
//!   for its tag: `ms` for latencies, `ns` for timestamps, tokens for counts; each record where a time unit was
//!   assumed gets one `inconsistent` diagnostic naming the tags. A tag written twice in one record (the AIPerf docs
//!   example repeats `time_to_first_token`) keeps its first value, with an `inconsistent` diagnostic.
//!
//! `format_version` is the newest record generation in the file (`pre-0.1.1`, `0.1.1-0.2`, `0.13+`, with ` raw`
//! for raw records), from the metadata keys.
//!
//! # Summaries
//!
//! ```text
//! JSON pre-0.2   {"records": {<tag>: {tag, unit, header, avg, min, max, p1…p99, std, count}}, "input_config",
//!                "was_cancelled", "error_summary", "start_time", "end_time"}   (every stat, null when N/A)
//! JSON 0.2+      {"schema_version", "aiperf_version", "benchmark_id", <tag>: {unit, avg, min, max, p1…p99, std,
//!                count, sum} (absent when N/A), …, "input_config", "telemetry_data", "run_info", "error_summary",
//!                "start_time", "end_time", "was_cancelled", "warmup_metrics" (1.4)}
//! CSV            Metric,avg,min,max,p1,p5,p25,p50,p75,p90,p95,p99,std        (early)
//!                Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std (0.13)
//!                "<Header> (<unit>)",<numbers>…   blank line   Metric,Value   "<Header> (<unit>)",<number>
//! ```
//!
//! They write no rows. `details.summary` maps each metric to `{unit, avg, min, max, p50, p90, p95, p99, std,
//! count, sum}` (those present; display units as written); scalars of the `Metric,Value` section and derived
//! metrics have `avg` only, as in the JSON. JSON keys are AIPerf's tags; CSV labels are lower-cased with `_` for
//! every run of other characters (`Time to First Token (ms)` → `time_to_first_token`, unit `ms`), which equals the
//! tag for most metrics (not for `Minimum Request Timestamp`, tag `min_request_timestamp`). `details.warmup_summary`
//! holds the 1.4+ `warmup_metrics`, `details.run` the provenance scalars (`schema_version`, `aiperf_version`,
//! `benchmark_id`, `start_time`, `end_time`, `was_cancelled`, `is_complete`) and `details.errors` the
//! `error_summary` as `{code, type, count}` (never the message). `input_config`, `run_info` (its `cli_command` can
//! hold prompts) and `telemetry_data` are skipped unread. The JSON is read as a stream and keeps only these numbers;
//! a CSV section with another header (GPU telemetry) is one `unrecognized-line` diagnostic and
//! `details.skipped_csv_rows` counts its rows. Keys and units are kept only if they look like AIPerf's (short,
//! ASCII), so a foreign file cannot carry text into the manifest.
//!
//! `parse` reads the same head as `detect` to choose: a first JSON key `records`, `schema_version`,
//! `aiperf_version` or `benchmark_id` (or `aiperf_version` anywhere in the head) is a summary JSON, a first line
//! `Metric,…` a summary CSV, anything else records (so each foreign line is a diagnostic of its own).
//!
//! Detection: a JSON object whose first key is `metadata` and whose head holds an AIPerf metadata key; a JSON
//! object with `schema_version` and `aiperf_version`, or whose first key is `records` holding `tag` and `header`;
//! a CSV whose first line starts `Metric,avg,min,max,sum,p1,` or `Metric,avg,min,max,p1,p5,` (GenAI-Perf's CSV
//! has `p99` fifth and is not claimed), or `Metric,Value` with an AIPerf unit `(requests/sec)`.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read};

use infertrace_adapter::json::Scalar;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, HEAD_BYTES, Head, LineReader, ParseContext, ParseError,
    ParseReport, Sink, json, utf8_line,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

/// The AIPerf export adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Aiperf;

impl Aiperf {
    /// Format id.
    pub const ID: &'static str = "aiperf";
}

/// Metadata keys of every record generation that other JSONL formats do not write.
const METADATA_SIGNATURE: &[&str] =
    &["\"x_request_id\"", "\"x_correlation_id\"", "\"record_processor_id\"", "\"benchmark_phase\"", "\"credit_phase\""];

/// First keys of a record (`MetricRecordInfo` and `RawRecordInfo` serialize `metadata` first; the others in case a
/// tool rewrote the record).
const RECORD_FIRST_KEYS: &[&str] = &["metadata", "metrics", "error", "trace_data"];

/// First keys of a summary JSON: the pre-0.2 `records` object, then 0.2+ provenance.
const SUMMARY_FIRST_KEYS: &[&str] = &["records", "schema_version", "aiperf_version", "benchmark_id"];

/// Starts of AIPerf's summary CSV header: 0.13 (`sum` fourth) and the early layout (`p1` fourth, `p5` fifth).
const CSV_HEADERS: &[&str] = &["Metric,avg,min,max,sum,p1,", "Metric,avg,min,max,p1,p5,"];

/// The longest multi-line record kept.
const MAX_RECORD_BYTES: usize = 16 << 20;

/// Statistics kept from each summary metric.
const KEPT_STATS: &[&str] = &["avg", "min", "max", "p50", "p90", "p95", "p99", "std", "count", "sum"];

/// Every statistic a summary may have (the CSV header must name only these).
const ALL_STATS: &[&str] =
    &["avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std", "count"];

/// Top-level scalars of the summary JSON copied to `details.run`.
const RUN_KEYS: &[&str] =
    &["schema_version", "aiperf_version", "benchmark_id", "start_time", "end_time", "was_cancelled", "is_complete"];

impl Adapter for Aiperf {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "AIPerf profile_export.jsonl per-request records (pre-0.1.1 to 0.13+, raw too) and summaries (JSON, CSV)"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if text.starts_with('{') {
            return match first_key(text) {
                Some("metadata") if METADATA_SIGNATURE.iter().any(|k| text.contains(k)) => Some(Confidence::High),
                Some("metadata") => Some(Confidence::Low),
                Some("records") if text.contains("\"tag\"") && text.contains("\"header\"") => Some(Confidence::High),
                _ if text.contains("\"schema_version\"") && text.contains("\"aiperf_version\"") => {
                    Some(Confidence::High)
                }
                _ => None,
            };
        }
        let first = text.lines().next().unwrap_or_default();
        let stats = CSV_HEADERS.iter().any(|h| first.starts_with(h));
        let values = first.trim_end() == "Metric,Value" && text.contains("(requests/sec)");
        (stats || values).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut head = Vec::with_capacity(HEAD_BYTES);
        Read::take(&mut *input, HEAD_BYTES as u64).read_to_end(&mut head)?;
        let kind = Kind::of(&head);
        let mut input = io::Cursor::new(head).chain(input);
        match kind {
            Kind::Records => parse_records(&mut input, ctx, sink),
            Kind::SummaryJson => parse_summary_json(&mut input, sink),
            Kind::SummaryCsv => parse_summary_csv(&mut input, sink),
        }
    }
}

/// Which of AIPerf's files an input is, from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Records,
    SummaryJson,
    SummaryCsv,
}

impl Kind {
    fn of(head: &[u8]) -> Kind {
        let text = String::from_utf8_lossy(head);
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if text.starts_with('{') {
            match first_key(text) {
                Some(key) if RECORD_FIRST_KEYS.contains(&key) => Kind::Records,
                Some(key) if SUMMARY_FIRST_KEYS.contains(&key) || text.contains("\"aiperf_version\"") => {
                    Kind::SummaryJson
                }
                // Anything else is read as records, so that each foreign line is a diagnostic of its own.
                _ => Kind::Records,
            }
        } else if text.starts_with("Metric,") {
            Kind::SummaryCsv
        } else {
            Kind::Records
        }
    }
}

/// The first key of the JSON object `text` starts with (escapes are not decoded: keys of interest have none).
fn first_key(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('{')?.trim_start().strip_prefix('"')?;
    rest.find('"').map(|end| &rest[..end])
}

// ---------------------------------------------------------------------------------------------------------------
// Per-request records
// ---------------------------------------------------------------------------------------------------------------

/// The record generation, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Generation {
    Pre0_1_1,
    V0_1_1,
    V0_13,
}

impl Generation {
    fn name(self, raw: bool) -> String {
        let name = match self {
            Generation::Pre0_1_1 => "pre-0.1.1",
            Generation::V0_1_1 => "0.1.1-0.2",
            Generation::V0_13 => "0.13+",
        };
        if raw { format!("{name} raw") } else { name.to_owned() }
    }

    fn of(metadata: &Map<String, Value>) -> Generation {
        const V0_13_KEYS: &[&str] = &[
            "credit_issued_ns",
            "credit_received_ns",
            "source_trace_id",
            "source_kind",
            "phase_index",
            "phase_name",
            "phase_kind",
            "profiling_index",
            "context_overflow_skip",
            "agent_depth",
            "parent_correlation_id",
            "root_correlation_id",
            "request_num",
            "clock_offset_ns",
        ];
        if metadata.contains_key("timestamp_ns") || metadata.contains_key("credit_phase") {
            Generation::Pre0_1_1
        } else if V0_13_KEYS.iter().any(|k| metadata.contains_key(*k)) {
            Generation::V0_13
        } else {
            Generation::V0_1_1
        }
    }
}

/// What a metric measures, which decides its assumed unit and how it is converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measure {
    /// A duration in a time unit (`ms` when unstated).
    Duration,
    /// An instant in nanoseconds since the epoch.
    Instant,
    /// A token count.
    Tokens,
}

/// The metric tags this adapter reads, with their aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Ttft,
    RequestLatency,
    InterTokenLatency,
    InputLength,
    OutputLength,
    ReasoningCount,
    UsagePrompt,
    UsageCompletion,
    UsageReasoning,
    CacheRead,
    ErrorIsl,
    MaxResponseTimestamp,
}

impl Tag {
    const ALL: [Tag; 12] = [
        Tag::Ttft,
        Tag::RequestLatency,
        Tag::InterTokenLatency,
        Tag::InputLength,
        Tag::OutputLength,
        Tag::ReasoningCount,
        Tag::UsagePrompt,
        Tag::UsageCompletion,
        Tag::UsageReasoning,
        Tag::CacheRead,
        Tag::ErrorIsl,
        Tag::MaxResponseTimestamp,
    ];

    fn parse(tag: &str) -> Option<Tag> {
        Some(match tag {
            "time_to_first_token" | "ttft" => Tag::Ttft,
            "request_latency" => Tag::RequestLatency,
            "inter_token_latency" => Tag::InterTokenLatency,
            "input_sequence_length" => Tag::InputLength,
            "output_sequence_length" => Tag::OutputLength,
            "reasoning_token_count" => Tag::ReasoningCount,
            "usage_prompt_tokens" => Tag::UsagePrompt,
            "usage_completion_tokens" => Tag::UsageCompletion,
            "usage_reasoning_tokens" => Tag::UsageReasoning,
            "usage_prompt_cache_read_tokens" => Tag::CacheRead,
            "error_isl" => Tag::ErrorIsl,
            "max_response_timestamp" => Tag::MaxResponseTimestamp,
            _ => return None,
        })
    }

    /// The current spelling, for diagnostics.
    fn name(self) -> &'static str {
        match self {
            Tag::Ttft => "time_to_first_token",
            Tag::RequestLatency => "request_latency",
            Tag::InterTokenLatency => "inter_token_latency",
            Tag::InputLength => "input_sequence_length",
            Tag::OutputLength => "output_sequence_length",
            Tag::ReasoningCount => "reasoning_token_count",
            Tag::UsagePrompt => "usage_prompt_tokens",
            Tag::UsageCompletion => "usage_completion_tokens",
            Tag::UsageReasoning => "usage_reasoning_tokens",
            Tag::CacheRead => "usage_prompt_cache_read_tokens",
            Tag::ErrorIsl => "error_isl",
            Tag::MaxResponseTimestamp => "max_response_timestamp",
        }
    }

    fn measure(self) -> Measure {
        match self {
            Tag::Ttft | Tag::RequestLatency | Tag::InterTokenLatency => Measure::Duration,
            Tag::MaxResponseTimestamp => Measure::Instant,
            _ => Measure::Tokens,
        }
    }

    fn index(self) -> usize {
        Tag::ALL.iter().position(|&t| t == self).unwrap_or_default()
    }
}

/// One metric as written: `{"value": …, "unit": …}`, or a bare number. Lists and objects are skipped unread.
#[derive(Debug, Default)]
struct MetricValue {
    value: Option<Value>,
    unit: Option<Value>,
    /// The value was present but not a number (a list, a string).
    not_a_number: bool,
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MetricValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a metric value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<MetricValue, A::Error> {
                let mut metric = MetricValue::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        // The tags read are scalars; a list or an object under one is not a number.
                        "value" => match map.next_value::<Option<Value>>()? {
                            Some(v) if v.is_number() => metric.value = Some(v),
                            Some(_) => metric.not_a_number = true,
                            None => {}
                        },
                        "unit" => metric.unit = map.next_value::<Scalar>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(metric)
            }
            fn visit_u64<E>(self, v: u64) -> Result<MetricValue, E> {
                Ok(MetricValue { value: Some(Value::from(v)), ..MetricValue::default() })
            }
            fn visit_i64<E>(self, v: i64) -> Result<MetricValue, E> {
                Ok(MetricValue { value: Some(Value::from(v)), ..MetricValue::default() })
            }
            fn visit_f64<E>(self, v: f64) -> Result<MetricValue, E> {
                Ok(MetricValue { value: Some(Value::from(v)), ..MetricValue::default() })
            }
            fn visit_unit<E>(self) -> Result<MetricValue, E> {
                Ok(MetricValue::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<MetricValue, E> {
                Ok(MetricValue { not_a_number: true, ..MetricValue::default() })
            }
            fn visit_bool<E>(self, _: bool) -> Result<MetricValue, E> {
                Ok(MetricValue { not_a_number: true, ..MetricValue::default() })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<MetricValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MetricValue::default())
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The metrics this adapter reads, by [`Tag`], and the tags written twice.
#[derive(Debug, Default)]
struct Metrics {
    values: [Option<MetricValue>; Tag::ALL.len()],
    duplicates: Vec<Tag>,
}

impl Metrics {
    fn get(&self, tag: Tag) -> Option<&MetricValue> {
        self.values.get(tag.index()).and_then(Option::as_ref)
    }
}

impl<'de> Deserialize<'de> for Metrics {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Metrics;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of metrics")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Metrics, A::Error> {
                let mut metrics = Metrics::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let Some(tag) = Tag::parse(&key) else {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    let value = map.next_value::<MetricValue>()?;
                    match metrics.values.get_mut(tag.index()) {
                        Some(slot @ None) => *slot = Some(value),
                        _ => metrics.duplicates.push(tag),
                    }
                }
                Ok(metrics)
            }
            fn visit_unit<E>(self) -> Result<Metrics, E> {
                Ok(Metrics::default())
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `ErrorDetails`, without its message.
#[derive(Debug, Default, Deserialize)]
struct ErrorDetails {
    code: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
}

/// `trace_data`, of which only the response status is read.
#[derive(Debug, Default, Deserialize)]
struct TraceData {
    response_status_code: Option<Value>,
}

/// The first and last `perf_ns` of a raw record's `responses`, read without keeping the list.
#[derive(Debug, Default)]
struct Responses {
    first: Option<i64>,
    last: Option<i64>,
}

impl<'de> Deserialize<'de> for Responses {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Response {
            perf_ns: Option<i64>,
        }
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Responses;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of responses")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Responses, A::Error> {
                let mut responses = Responses::default();
                while let Some(response) = seq.next_element::<Option<Response>>()? {
                    if let Some(t) = response.and_then(|r| r.perf_ns) {
                        responses.first.get_or_insert(t);
                        responses.last = Some(t);
                    }
                }
                Ok(responses)
            }
            fn visit_unit<E>(self) -> Result<Responses, E> {
                Ok(Responses::default())
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One record, read key by key.
#[derive(Debug, Default)]
struct Record {
    metadata: Option<Map<String, Value>>,
    metrics: Option<Metrics>,
    error: Option<ErrorDetails>,
    trace_data: Option<TraceData>,
    /// Raw records only.
    start_perf_ns: Option<i64>,
    responses: Option<Responses>,
    status: Option<Value>,
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Record;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an AIPerf record object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
                let mut r = Record::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "metadata" => r.metadata = map.next_value()?,
                        "metrics" => r.metrics = map.next_value()?,
                        "error" => r.error = map.next_value()?,
                        "trace_data" => r.trace_data = map.next_value()?,
                        "start_perf_ns" => r.start_perf_ns = map.next_value::<Scalar>()?.0.and_then(|v| v.as_i64()),
                        "responses" => r.responses = map.next_value()?,
                        "status" => r.status = map.next_value::<Scalar>()?.0,
                        // `payload`, headers and anything newer: skipped unread.
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(r)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// Facts about the whole records file, for `details`.
#[derive(Debug, Default)]
struct RecordStats {
    generation: Option<(Generation, bool)>,
    phases: BTreeMap<&'static str, u64>,
    ids_from_request_id: u64,
    ids_from_line: u64,
    subagent_requests: u64,
    agentic_requests: u64,
    max_agent_depth: u64,
}

impl RecordStats {
    fn details(self) -> BTreeMap<String, Value> {
        let mut details = BTreeMap::new();
        let count = |n: u64| Value::from(n);
        if !self.phases.is_empty() {
            details.insert("warmup_records".to_owned(), count(self.phases.get("warmup").copied().unwrap_or(0)));
            let phases: Map<String, Value> = self.phases.iter().map(|(k, &v)| ((*k).to_owned(), count(v))).collect();
            details.insert("phases".to_owned(), Value::Object(phases));
        }
        if self.ids_from_request_id > 0 {
            details.insert("ids_from_request_id".to_owned(), count(self.ids_from_request_id));
        }
        if self.ids_from_line > 0 {
            details.insert("ids_from_line".to_owned(), count(self.ids_from_line));
        }
        if self.agentic_requests > 0 {
            let mut agentic = Map::new();
            agentic.insert("requests".to_owned(), count(self.agentic_requests));
            agentic.insert("subagent_requests".to_owned(), count(self.subagent_requests));
            agentic.insert("max_agent_depth".to_owned(), count(self.max_agent_depth));
            details.insert("agentic".to_owned(), Value::Object(agentic));
        }
        details
    }
}

/// A record spread over several lines, being collected until its braces balance.
#[derive(Debug)]
struct Pending {
    first_line: u64,
    text: String,
    depth: i64,
    in_string: bool,
    escaped: bool,
    too_long: bool,
    /// A line of it was not UTF-8 (already reported).
    broken: bool,
}

impl Pending {
    fn new(first_line: u64) -> Self {
        Self {
            first_line,
            text: String::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            too_long: false,
            broken: false,
        }
    }

    /// Adds a line; returns whether the record is complete.
    fn push(&mut self, line: &str) -> bool {
        for b in line.bytes() {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => self.depth -= 1,
                    _ => {}
                }
            }
        }
        if !self.too_long && self.text.len() + line.len() < MAX_RECORD_BYTES {
            self.text.push_str(line);
            self.text.push('\n');
        } else {
            self.too_long = true;
            self.text = String::new();
        }
        self.depth <= 0
    }
}

fn parse_records(
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut stats = RecordStats::default();
    let stem = ctx.source_stem().to_owned();
    let mut pending: Option<Pending> = None;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let text = utf8_line(line_no, bytes, sink);
        // Pretty-printed records indent everything inside them: an unindented `{` while one is open starts the
        // next record, so a record cut short costs only itself.
        if bytes.first() == Some(&b'{')
            && let Some(p) = pending.take_if(|p| p.depth > 0)
            && !p.broken
        {
            sink.diagnostic(Diagnostic::new(
                p.first_line,
                DiagnosticKind::MalformedRecord,
                "a multi-line record is cut short by the next record",
            ));
        }
        if let Some(p) = pending.as_mut() {
            let complete = match text {
                Some(line) => p.push(line),
                None => {
                    p.broken = true;
                    p.push(&String::from_utf8_lossy(bytes))
                }
            };
            if complete && let Some(p) = pending.take() {
                if p.too_long {
                    sink.diagnostic(Diagnostic::new(
                        p.first_line,
                        DiagnosticKind::MalformedRecord,
                        format!("a multi-line record longer than {} MiB is skipped", MAX_RECORD_BYTES >> 20),
                    ));
                } else if !p.broken {
                    record(&p.text, p.first_line, line_no, &stem, ctx, &mut stats, sink)?;
                }
            }
            continue;
        }
        let Some(line) = text else { continue };
        match line.trim() {
            "" => {}
            "{" => {
                let mut p = Pending::new(line_no);
                p.push(line);
                pending = Some(p);
            }
            _ => record(line, line_no, line_no, &stem, ctx, &mut stats, sink)?,
        }
    }
    if let Some(p) = pending.filter(|p| !p.broken) {
        sink.diagnostic(Diagnostic::new(
            p.first_line,
            DiagnosticKind::MalformedRecord,
            "a multi-line record ends with the input before its closing brace",
        ));
    }
    let format_version = stats.generation.map(|(g, raw)| g.name(raw));
    Ok(ParseReport {
        format_version,
        clock_domain: ClockDomain::Utc,
        year: None,
        lines: lines.lines_read(),
        details: stats.details(),
    })
}

/// An integer field of `metadata`: `Ok(None)` when absent or null, `Err(())` when of another type.
fn metadata_int(metadata: &Map<String, Value>, key: &str) -> Result<Option<i64>, ()> {
    match metadata.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or(()),
    }
}

/// How many of a time unit, as AIPerf spells them, make a second.
fn per_second(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e9),
        "us" | "µs" => Some(1e6),
        "ms" => Some(1e3),
        "sec" | "s" => Some(1.0),
        _ => None,
    }
}

/// A record's metrics converted: durations and instants in nanoseconds, token counts.
#[derive(Debug, Default)]
struct Converted {
    nanos: [Option<i64>; Tag::ALL.len()],
    /// Durations in seconds, divided from the written value (not from rounded nanoseconds).
    seconds: [Option<f64>; Tag::ALL.len()],
    tokens: [Option<u32>; Tag::ALL.len()],
    assumed_units: Vec<&'static str>,
}

impl Converted {
    fn nanos(&self, tag: Tag) -> Option<i64> {
        self.nanos.get(tag.index()).copied().flatten()
    }
    fn seconds(&self, tag: Tag) -> Option<f64> {
        self.seconds.get(tag.index()).copied().flatten()
    }
    fn tokens(&self, tag: Tag) -> Option<u32> {
        self.tokens.get(tag.index()).copied().flatten()
    }
}

fn convert(metrics: &Metrics, line: u64, sink: &mut dyn Sink) -> Converted {
    let mut out = Converted::default();
    for tag in Tag::ALL {
        let Some(metric) = metrics.get(tag) else { continue };
        let invalid = |sink: &mut dyn Sink, what: &str| {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("metric `{}` {what}", tag.name()),
            ));
        };
        if metric.not_a_number {
            invalid(sink, "is not a number");
            continue;
        }
        let Some(value) = &metric.value else { continue };
        let unit = match &metric.unit {
            None => None,
            Some(Value::String(unit)) => Some(unit.as_str()),
            Some(_) => {
                invalid(sink, "has a unit that is not a string");
                continue;
            }
        };
        match tag.measure() {
            Measure::Tokens => {
                let tokens = value
                    .as_u64()
                    .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64));
                match tokens.and_then(|n| u32::try_from(n).ok()) {
                    Some(n) => out.tokens[tag.index()] = Some(n),
                    None => invalid(sink, "is not a token count"),
                }
            }
            Measure::Duration | Measure::Instant => {
                let assumed = if tag.measure() == Measure::Duration { "ms" } else { "ns" };
                let divisor = match unit {
                    Some(unit) => per_second(unit),
                    None => {
                        out.assumed_units.push(tag.name());
                        per_second(assumed)
                    }
                };
                let Some(divisor) = divisor else {
                    invalid(sink, "has a unit that is not a time unit");
                    continue;
                };
                // Whole nanoseconds stay exact (timestamps exceed f64's 53 bits).
                let exact = unit.unwrap_or(assumed) == "ns";
                let nanos = match value.as_i64() {
                    Some(n) if exact => Some(n),
                    _ => value
                        .as_f64()
                        .map(|v| (v * (1e9 / divisor)).round())
                        .filter(|ns| ns.is_finite() && *ns >= i64::MIN as f64 && *ns < i64::MAX as f64)
                        .map(|ns| ns as i64),
                };
                match nanos {
                    Some(n) if tag.measure() == Measure::Instant || n >= 0 => {
                        out.nanos[tag.index()] = Some(n);
                        out.seconds[tag.index()] = value.as_f64().map(|v| v / divisor);
                    }
                    _ => invalid(sink, "is out of range"),
                }
            }
        }
    }
    out
}

/// An exception class name (`RequestCancellationError`, `aiohttp.ClientError`), or `None` for anything else.
fn exception_name(text: &str) -> Option<&str> {
    let ok = !text.is_empty()
        && text.len() <= 128
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    ok.then_some(text)
}

/// Writes the row of one record spanning lines `first..=last`.
fn record(
    text: &str,
    first: u64,
    last: u64,
    stem: &str,
    ctx: &ParseContext<'_>,
    stats: &mut RecordStats,
    sink: &mut dyn Sink,
) -> Result<(), DatasetError> {
    let record: Record = match serde_json::from_str(text) {
        Ok(record) => record,
        Err(e) => {
            let line = first + (e.line() as u64).saturating_sub(1);
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedJson, json::error_message(&e)));
            return Ok(());
        }
    };
    let Some(metadata) = &record.metadata else {
        let kind = if record.metrics.is_some() { DiagnosticKind::MissingField } else { DiagnosticKind::NotARecord };
        sink.diagnostic(Diagnostic::new(first, kind, "a JSON object without `metadata` is not an AIPerf record"));
        return Ok(());
    };
    let raw = record.responses.is_some() || record.start_perf_ns.is_some();
    let generation = Generation::of(metadata);
    stats.generation = stats.generation.max(Some((generation, raw)));

    let str_field = |key: &str| metadata.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    let mut int_field = |key: &str| match metadata_int(metadata, key) {
        Ok(v) => v,
        Err(()) => {
            sink.diagnostic(Diagnostic::new(
                first,
                DiagnosticKind::InvalidValue,
                format!("`metadata.{key}` is not an integer"),
            ));
            None
        }
    };
    let arrival = int_field("request_start_ns").or_else(|| int_field("timestamp_ns"));
    let end = int_field("request_end_ns");
    let turn = int_field("turn_index").and_then(|t| u32::try_from(t).ok());
    let depth = int_field("agent_depth");

    let request_id = if let Some(id) = str_field("x_request_id") {
        id.to_owned()
    } else if let Some(id) = str_field("request_id") {
        stats.ids_from_request_id += 1;
        id.to_owned()
    } else {
        stats.ids_from_line += 1;
        infertrace_adapter::line_id(stem, last)
    };
    let session = str_field("x_correlation_id").or_else(|| str_field("conversation_id"));
    let parent = str_field("parent_correlation_id");
    let root = str_field("root_correlation_id");
    let agentic = depth.is_some_and(|d| d >= 1) || parent.is_some() || root.is_some_and(|r| Some(r) != session);
    if agentic {
        stats.agentic_requests += 1;
        if depth.is_some_and(|d| d >= 1) || parent.is_some() {
            stats.subagent_requests += 1;
        }
        stats.max_agent_depth = stats.max_agent_depth.max(depth.and_then(|d| u64::try_from(d).ok()).unwrap_or(0));
    }
    let phase = match str_field("benchmark_phase").or_else(|| str_field("credit_phase")) {
        Some("warmup") => Some("warmup"),
        Some("profiling") => Some("profiling"),
        Some(_) => Some("other"),
        None => None,
    };
    if let Some(phase) = phase {
        *stats.phases.entry(phase).or_default() += 1;
    }

    let metrics = record.metrics.unwrap_or_default();
    for &tag in &metrics.duplicates {
        sink.diagnostic(Diagnostic::new(
            first,
            DiagnosticKind::Inconsistent,
            format!("metric `{}` is written twice: the first value is kept", tag.name()),
        ));
    }
    let m = convert(&metrics, first, sink);
    if !m.assumed_units.is_empty() {
        sink.diagnostic(Diagnostic::new(
            first,
            DiagnosticKind::Inconsistent,
            format!("metrics without `unit` read in AIPerf's display unit: {}", m.assumed_units.join(", ")),
        ));
    }

    let error = record.error.as_ref();
    let code = error.and_then(|e| e.code.as_ref()).and_then(Value::as_u64);
    let kind = error.and_then(|e| e.kind.as_ref()).and_then(Value::as_str);
    let error_name = kind.and_then(exception_name).map(str::to_owned);
    if kind.is_some() && error_name.is_none() {
        sink.diagnostic(Diagnostic::new(
            first,
            DiagnosticKind::InvalidValue,
            "`error.type` is not an exception name and is not copied",
        ));
    }
    let cancelled = metadata.get("was_cancelled").and_then(Value::as_bool) == Some(true)
        || kind == Some("RequestCancellationError")
        || (error.is_some() && code == Some(499));
    let status = if cancelled {
        Status::Aborted
    } else if error.is_none() {
        Status::Ok
    } else if kind.is_some_and(|k| k.contains("Timeout")) {
        Status::Timeout
    } else {
        Status::Error
    };
    let http_status = code
        .or_else(|| record.trace_data.as_ref().and_then(|t| t.response_status_code.as_ref()).and_then(Value::as_u64))
        .or_else(|| record.status.as_ref().and_then(Value::as_u64))
        .and_then(|c| u16::try_from(c).ok());

    let after = |offset: Option<i64>| arrival?.checked_add(offset?);
    let (first_token, last_token) = match (&record.responses, record.start_perf_ns) {
        (Some(responses), Some(start_perf)) => (
            after(responses.first.and_then(|t| t.checked_sub(start_perf))),
            after(responses.last.and_then(|t| t.checked_sub(start_perf))),
        ),
        _ => (
            after(m.nanos(Tag::Ttft)),
            m.nanos(Tag::MaxResponseTimestamp).or_else(|| after(m.nanos(Tag::RequestLatency))),
        ),
    };
    let completion = end.or(m.nanos(Tag::MaxResponseTimestamp)).or_else(|| after(m.nanos(Tag::RequestLatency)));

    sink.request(RequestRow {
        request_id,
        source: Aiperf::ID.to_owned(),
        session_id: session.map(str::to_owned),
        turn,
        arrival_time: arrival,
        first_token_time: first_token,
        last_token_time: last_token,
        completion_time: completion,
        ttft_s: m.seconds(Tag::Ttft),
        tpot_s: m.seconds(Tag::InterTokenLatency),
        e2e_s: m.seconds(Tag::RequestLatency),
        input_tokens: m.tokens(Tag::InputLength).or(m.tokens(Tag::UsagePrompt)).or(m.tokens(Tag::ErrorIsl)),
        cached_tokens: m.tokens(Tag::CacheRead),
        output_tokens: m.tokens(Tag::OutputLength).or(m.tokens(Tag::UsageCompletion)),
        reasoning_tokens: m.tokens(Tag::ReasoningCount).or(m.tokens(Tag::UsageReasoning)),
        workload_class: agentic.then_some(WorkloadClass::Agent),
        status,
        http_status,
        error: error_name,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(last),
        ..RequestRow::default()
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------------------------------

/// A metric key or CSV label slug worth copying: short, lower-case ASCII, digits and `_`.
fn is_metric_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= 80 && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A unit worth copying (`ms`, `tokens/sec/user`, `%`).
fn is_unit(unit: &str) -> bool {
    !unit.is_empty() && unit.len() <= 32 && unit.bytes().all(|b| b.is_ascii_alphanumeric() || b"/%_ .-".contains(&b))
}

/// One summary metric block: its unit and kept statistics. Nested values are skipped unread.
#[derive(Debug, Default)]
struct Block(Map<String, Value>);

impl Block {
    /// The block if it is a metric: a unit and at least one statistic.
    fn metric(self) -> Option<Map<String, Value>> {
        let unit = self.0.get("unit").and_then(Value::as_str).is_some_and(is_unit);
        (unit && self.0.len() > 1).then_some(self.0)
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Block;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
                let mut block = Map::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let keep = key == "unit" || KEPT_STATS.contains(&key.as_ref());
                    match map.next_value::<Scalar>()?.0 {
                        Some(v @ Value::String(_)) if keep && key == "unit" => {
                            block.insert(key.into_owned(), v);
                        }
                        Some(v @ Value::Number(_)) if keep && key != "unit" => {
                            block.insert(key.into_owned(), v);
                        }
                        _ => {}
                    }
                }
                Ok(Block(block))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Block, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Block::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Block, E> {
                Ok(Block::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Block, E> {
                Ok(Block::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Block, E> {
                Ok(Block::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Block, E> {
                Ok(Block::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Block, E> {
                Ok(Block::default())
            }
            fn visit_unit<E>(self) -> Result<Block, E> {
                Ok(Block::default())
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// An object of metric blocks (`records` before 0.2, `warmup_metrics` in 1.4+).
#[derive(Debug, Default)]
struct Blocks(Map<String, Value>);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let blocks = Option::<BTreeMap<String, Block>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(Blocks(
            blocks
                .into_iter()
                .filter(|(k, _)| is_metric_key(k))
                .filter_map(|(k, b)| Some((k, Value::Object(b.metric()?))))
                .collect(),
        ))
    }
}

/// One `error_summary` entry, without the message.
#[derive(Debug, Deserialize)]
struct ErrorCount {
    error_details: Option<ErrorDetails>,
    count: Option<Value>,
}

/// The summary JSON, read key by key.
#[derive(Debug, Default)]
struct SummaryDoc {
    summary: Map<String, Value>,
    warmup: Map<String, Value>,
    run: Map<String, Value>,
    errors: Vec<Value>,
    pre_0_2: bool,
}

impl<'de> Deserialize<'de> for SummaryDoc {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SummaryDoc;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an AIPerf summary object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SummaryDoc, A::Error> {
                let mut doc = SummaryDoc::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "records" => {
                            doc.pre_0_2 = true;
                            doc.summary.extend(map.next_value::<Blocks>()?.0);
                        }
                        "warmup_metrics" => doc.warmup.extend(map.next_value::<Blocks>()?.0),
                        "error_summary" => {
                            let entries = map.next_value::<Option<Vec<Option<ErrorCount>>>>()?.unwrap_or_default();
                            doc.errors.extend(entries.into_iter().flatten().map(|e| {
                                let details = e.error_details.unwrap_or_default();
                                let mut entry = Map::new();
                                if let Some(code) = details.code.filter(Value::is_u64) {
                                    entry.insert("code".to_owned(), code);
                                }
                                if let Some(name) =
                                    details.kind.as_ref().and_then(Value::as_str).and_then(exception_name)
                                {
                                    entry.insert("type".to_owned(), Value::from(name));
                                }
                                if let Some(count) = e.count.filter(Value::is_u64) {
                                    entry.insert("count".to_owned(), count);
                                }
                                Value::Object(entry)
                            }));
                        }
                        // Configuration, reproducibility (with the command line) and GPU telemetry.
                        "input_config" | "run_info" | "telemetry_data" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        k if RUN_KEYS.contains(&k) => {
                            let value = map.next_value::<Scalar>()?.0.filter(|v| match v {
                                Value::String(s) => s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic()),
                                _ => true,
                            });
                            if let Some(value) = value {
                                doc.run.insert(key, value);
                            }
                        }
                        _ => {
                            let block = map.next_value::<Block>()?;
                            if is_metric_key(&key)
                                && let Some(metric) = block.metric()
                            {
                                doc.summary.insert(key, Value::Object(metric));
                            }
                        }
                    }
                }
                Ok(doc)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// Counts the lines of what passes through it.
#[derive(Debug)]
struct CountLines<R> {
    inner: R,
    newlines: u64,
    last: Option<u8>,
}

impl<R: Read> Read for CountLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(read) = buf.get(..n) {
            self.newlines += memchr::memchr_iter(b'\n', read).count() as u64;
            self.last = read.last().copied().or(self.last);
        }
        Ok(n)
    }
}

impl<R> CountLines<R> {
    fn lines(&self) -> u64 {
        self.newlines + u64::from(self.last.is_some_and(|b| b != b'\n'))
    }
}

fn parse_summary_json(input: &mut dyn BufRead, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let mut reader = CountLines { inner: input, newlines: 0, last: None };
    let result = serde_json::from_reader::<_, SummaryDoc>(&mut reader);
    // Count the lines after an error too.
    io::copy(&mut reader, &mut io::sink())?;
    let mut details = BTreeMap::new();
    let mut format_version = None;
    match result {
        Ok(doc) => {
            format_version = Some(match doc.run.get("schema_version").and_then(Value::as_str) {
                Some(v) if !doc.pre_0_2 => format!("summary-json {v}"),
                _ if doc.pre_0_2 => "summary-json pre-0.2".to_owned(),
                _ => "summary-json".to_owned(),
            });
            for (key, map) in [("summary", doc.summary), ("warmup_summary", doc.warmup), ("run", doc.run)] {
                if !map.is_empty() {
                    details.insert(key.to_owned(), Value::Object(map));
                }
            }
            if !doc.errors.is_empty() {
                details.insert("errors".to_owned(), Value::Array(doc.errors));
            }
        }
        Err(e) if e.is_io() => return Err(ParseError::Read(e.into())),
        Err(e) => {
            let line = (e.line() as u64).max(1);
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedJson, json::error_message(&e)));
        }
    }
    Ok(ParseReport { format_version, clock_domain: ClockDomain::Utc, year: None, lines: reader.lines(), details })
}

/// `Time to First Token (ms)` → (`time_to_first_token`, `Some("ms")`).
fn csv_label(label: &str) -> (String, Option<&str>) {
    let label = label.trim();
    let (name, unit) = match label.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((name, unit)) => (name, Some(unit)),
        None => (label, None),
    };
    let mut slug = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('_') {
            slug.push('_');
        }
    }
    (slug.trim_matches('_').to_owned(), unit)
}

/// A section of the summary CSV.
#[derive(Debug)]
enum Section {
    /// Between sections.
    None,
    /// Per-request statistics under these column names.
    Stats(Vec<String>),
    /// `Metric,Value`.
    Values,
    /// A section this adapter does not read.
    Skipped,
}

fn parse_summary_csv(input: &mut dyn BufRead, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut summary = Map::new();
    let mut section = Section::None;
    let mut skipped_rows = 0u64;
    let mut early = false;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            section = Section::None;
            continue;
        }
        let Some(fields) = crate::csv_record(line) else {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, "a quoted field is not closed"));
            continue;
        };
        match &section {
            Section::None => {
                let columns: Vec<&str> = fields.iter().map(|f| f.trim()).collect();
                section = match columns.as_slice() {
                    ["Metric", "Value"] => Section::Values,
                    ["Metric", stats @ ..] if !stats.is_empty() && stats.iter().all(|s| ALL_STATS.contains(s)) => {
                        early |= !stats.contains(&"sum");
                        Section::Stats(stats.iter().map(|s| (*s).to_owned()).collect())
                    }
                    ["Metric", ..] => {
                        sink.diagnostic(Diagnostic::new(
                            line_no,
                            DiagnosticKind::UnrecognizedLine,
                            "a CSV section with another header (such as GPU telemetry) is skipped",
                        ));
                        Section::Skipped
                    }
                    _ => {
                        sink.diagnostic(Diagnostic::new(
                            line_no,
                            DiagnosticKind::NotARecord,
                            "a line outside a `Metric,…` section",
                        ));
                        Section::None
                    }
                };
            }
            Section::Skipped => skipped_rows += 1,
            Section::Stats(columns) => {
                if fields.len() != columns.len() + 1 {
                    sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::MalformedCsv,
                        format!("{} fields where the header has {}", fields.len(), columns.len() + 1),
                    ));
                    continue;
                }
                let cells = columns.iter().zip(fields.iter().skip(1)).map(|(c, v)| (c.as_str(), v.as_str()));
                summary_row(&mut summary, &fields[0], cells, line_no, sink);
            }
            Section::Values => {
                let [label, value] = fields.as_slice() else {
                    sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::MalformedCsv,
                        format!("{} fields where `Metric,Value` has 2", fields.len()),
                    ));
                    continue;
                };
                summary_row(&mut summary, label, [("avg", value.as_str())].into_iter(), line_no, sink);
            }
        }
    }
    let mut details = BTreeMap::new();
    if !summary.is_empty() {
        details.insert("summary".to_owned(), Value::Object(summary));
    }
    if skipped_rows > 0 {
        details.insert("skipped_csv_rows".to_owned(), Value::from(skipped_rows));
    }
    Ok(ParseReport {
        format_version: Some(if early { "summary-csv early" } else { "summary-csv" }.to_owned()),
        clock_domain: ClockDomain::Utc,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

/// One CSV row into `summary`: the label's slug and unit, and the kept statistics among `cells`.
fn summary_row<'a>(
    summary: &mut Map<String, Value>,
    label: &str,
    cells: impl Iterator<Item = (&'a str, &'a str)>,
    line: u64,
    sink: &mut dyn Sink,
) {
    let (key, unit) = csv_label(label);
    if !is_metric_key(&key) || unit.is_some_and(|u| !is_unit(u)) {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, "the `Metric` label is not an AIPerf one"));
        return;
    }
    let mut block = Map::new();
    if let Some(unit) = unit {
        block.insert("unit".to_owned(), Value::from(unit));
    }
    for (column, cell) in cells {
        let cell = cell.trim();
        if cell.is_empty() || !KEPT_STATS.contains(&column) {
            continue;
        }
        match cell.parse::<f64>().ok().filter(|v| v.is_finite()).and_then(serde_json::Number::from_f64) {
            Some(n) => {
                block.insert(column.to_owned(), Value::Number(n));
            }
            None => sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("column `{column}` is not a number"),
            )),
        }
    }
    summary.insert(key, Value::Object(block));
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(source_file: &str, text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = Aiperf.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    fn kinds(sink: &CollectSink) -> Vec<(u64, DiagnosticKind)> {
        sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect()
    }

    #[test]
    fn v0_13_record_maps_every_column() {
        // start 1_760_000_000.000_000_000 s; ttft 250 ms; latency 1.5 s; end 1.502 s after start.
        let text = r#"{"metadata":{"session_num":3,"x_request_id":"req-1","x_correlation_id":"sess-1","conversation_id":"conv-1","turn_index":2,"credit_issued_ns":1759999999990000000,"request_start_ns":1760000000000000000,"request_ack_ns":1760000000100000000,"request_end_ns":1760000001502000000,"worker_id":"worker_1","record_processor_id":"rp_1","benchmark_phase":"profiling","phase_index":0,"was_cancelled":false,"agent_depth":0},"metrics":{"input_sequence_length":{"value":1000,"unit":"tokens"},"time_to_first_token":{"value":250.0,"unit":"ms"},"request_latency":{"value":1.5,"unit":"sec"},"inter_token_latency":{"value":5000.0,"unit":"us"},"output_sequence_length":{"value":251,"unit":"tokens"},"reasoning_token_count":{"value":50,"unit":"tokens"},"usage_prompt_cache_read_tokens":{"value":768,"unit":"tokens"},"inter_chunk_latency":{"value":[5.0,5.0],"unit":"ms"}},"trace_data":{"trace_type":"aiohttp","response_status_code":200,"response_chunks":[[1,2],[3,4]]},"error":null}"#;
        let (sink, report) = parse("profile_export.jsonl", text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("0.13+"));
        let [r] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
        assert_eq!((r.request_id.as_str(), r.session_id.as_deref(), r.turn), ("req-1", Some("sess-1"), Some(2)));
        assert_eq!(r.arrival_time, Some(1_760_000_000_000_000_000));
        assert_eq!(r.first_token_time, Some(1_760_000_000_250_000_000));
        assert_eq!(r.last_token_time, Some(1_760_000_001_500_000_000));
        assert_eq!(r.completion_time, Some(1_760_000_001_502_000_000));
        assert_eq!((r.ttft_s, r.e2e_s, r.tpot_s), (Some(0.25), Some(1.5), Some(0.005)));
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.reasoning_tokens, r.cached_tokens),
            (Some(1000), Some(251), Some(50), Some(768))
        );
        assert_eq!((r.status, r.http_status, r.error.as_deref()), (Status::Ok, Some(200), None));
        assert_eq!((r.workload_class, r.source_line), (None, Some(1)));
        assert_eq!(report.details["warmup_records"], 0);
        assert_eq!(report.details["phases"]["profiling"], 1);
    }

    #[test]
    fn outcomes_from_error_and_cancellation() {
        let md = |phase: &str, extra: &str| {
            format!(
                r#""metadata":{{"x_request_id":"r","request_start_ns":1,"request_end_ns":2,"benchmark_phase":"{phase}"{extra}}}"#
            )
        };
        let cases: &[(String, Status, Option<u16>, Option<&str>)] = &[
            (format!("{{{},\"metrics\":{{}}}}", md("profiling", "")), Status::Ok, None, None),
            (
                format!(
                    r#"{{{},"metrics":{{}},"error":{{"code":499,"type":"RequestCancellationError","message":"CANARY"}}}}"#,
                    md("profiling", r#","was_cancelled":true"#)
                ),
                Status::Aborted,
                Some(499),
                Some("RequestCancellationError"),
            ),
            (
                format!(
                    r#"{{{},"metrics":{{}},"error":{{"code":500,"type":"ServerError","message":"CANARY"}}}}"#,
                    md("warmup", "")
                ),
                Status::Error,
                Some(500),
                Some("ServerError"),
            ),
            (
                format!(r#"{{{},"metrics":{{}},"error":{{"type":"asyncio.TimeoutError"}}}}"#, md("profiling", "")),
                Status::Timeout,
                None,
                Some("asyncio.TimeoutError"),
            ),
            (
                format!(r#"{{{},"metrics":{{}},"error":{{"code":400,"type":"CANARY user text"}}}}"#, md("x", "")),
                Status::Error,
                Some(400),
                None,
            ),
        ];
        for (line, status, http, error) in cases {
            let (sink, _) = parse("p.jsonl", line);
            let r = &sink.requests[0];
            assert_eq!((r.status, r.http_status, r.error.as_deref()), (*status, *http, *error), "{line}");
            assert!(!format!("{:?} {:?}", sink.requests, sink.diagnostics).contains("CANARY"));
        }
        let all: String = cases.iter().map(|c| format!("{}\n", c.0)).collect();
        let (sink, report) = parse("p.jsonl", &all);
        assert_eq!(kinds(&sink), [(5, DiagnosticKind::InvalidValue)]);
        assert_eq!(report.details["warmup_records"], 1);
        assert_eq!(report.details["phases"], serde_json::json!({"profiling": 3, "warmup": 1, "other": 1}));
    }

    #[test]
    fn pre_0_1_1_record_uses_timestamp_ns_and_old_tags() {
        // ttft 3340.5 ms; latency 8214.202336 ms = max_response_timestamp − timestamp_ns.
        let text = r#"{"metadata":{"x_request_id":"a","x_correlation_id":"b","conversation_id":"c","turn_index":0,"timestamp_ns":1759522419158355424,"worker_id":"w","record_processor_id":"p","credit_phase":"profiling"},"metrics":{"input_sequence_length":{"value":550,"unit":"tokens"},"ttft":{"value":3340.5,"unit":"ms"},"request_count":{"value":1,"unit":"requests"},"request_latency":{"value":8214.202336,"unit":"ms"},"max_response_timestamp":{"value":1759522427372557760,"unit":"ns"},"output_sequence_length":{"value":193,"unit":"tokens"}},"error":null}"#;
        let (sink, report) = parse("p.jsonl", text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("pre-0.1.1"));
        let r = &sink.requests[0];
        assert_eq!(r.arrival_time, Some(1_759_522_419_158_355_424));
        assert_eq!(r.first_token_time, Some(1_759_522_422_498_855_424));
        assert_eq!(
            (r.last_token_time, r.completion_time),
            (Some(1_759_522_427_372_557_760), Some(1_759_522_427_372_557_760))
        );
        assert_eq!((r.input_tokens, r.output_tokens, r.ttft_s), (Some(550), Some(193), Some(3.3405)));
    }

    #[test]
    fn pretty_printed_records_and_broken_ones() {
        let text = concat!(
            "{\n  \"metadata\": {\"x_request_id\": \"p1\", \"request_start_ns\": 1000, \"benchmark_phase\": \"profiling\"},\n",
            "  \"metrics\": {\n",
            "    \"time_to_first_token\": {\"value\": 2, \"unit\": \"ms\"},\n",
            "    \"time_to_first_token\": {\"value\": 9, \"unit\": \"ms\"},\n",
            "    \"x\": {\"value\": \"}{\", \"unit\": \"ms\"}\n",
            "  },\n",
            "  \"error\": null\n",
            "}\n",
            "{\"metadata\": {\"x_request_id\": \"cut\"\n",
            "not json\n",
            "{\n",
            "  \"metadata\": {\n",
            "{\"metadata\": {\"x_request_id\": \"after a cut record\"}}\n",
            "{\n",
            "  \"metadata\": {\n",
        );
        let (sink, report) = parse("p.jsonl", text);
        assert_eq!(report.lines, 16);
        assert_eq!(sink.requests.len(), 2);
        assert_eq!(
            (sink.requests[1].request_id.as_str(), sink.requests[1].source_line),
            ("after a cut record", Some(14))
        );
        let r = &sink.requests[0];
        // The first of the two `time_to_first_token` is kept: 1000 ns + 2 ms.
        assert_eq!((r.request_id.as_str(), r.first_token_time, r.source_line), ("p1", Some(2_001_000), Some(9)));
        assert_eq!(
            kinds(&sink),
            [
                (1, DiagnosticKind::Inconsistent),
                (10, DiagnosticKind::MalformedJson),
                (11, DiagnosticKind::MalformedJson),
                (12, DiagnosticKind::MalformedRecord),
                (15, DiagnosticKind::MalformedRecord),
            ]
        );
    }

    #[test]
    fn values_without_unit_and_wrong_units() {
        let text = concat!(
            r#"{"metadata":{"request_id":"x","root_correlation_id":"tree","x_correlation_id":"child","parent_correlation_id":"main","agent_depth":1,"turn_index":0,"request_start_ns":1000000000},"metrics":{"time_to_first_token":{"value":100}}}"#,
            "\n",
            r#"{"metadata":{"x_correlation_id":"s"},"metrics":{"request_latency":{"value":1,"unit":"tokens"},"input_sequence_length":{"value":-3,"unit":"tokens"},"time_to_first_token":{"value":[1],"unit":"ms"},"output_sequence_length":"CANARY"}}"#,
            "\n",
            r#"{"no":"metadata"}"#,
            "\n",
        );
        let (sink, report) = parse("dir/fit.jsonl", text);
        let r = &sink.requests[0];
        assert_eq!((r.request_id.as_str(), r.session_id.as_deref()), ("x", Some("child")));
        assert_eq!(
            (r.first_token_time, r.ttft_s, r.workload_class),
            (Some(1_100_000_000), Some(0.1), Some(WorkloadClass::Agent))
        );
        let r = &sink.requests[1];
        assert_eq!((r.request_id.as_str(), r.e2e_s, r.input_tokens, r.output_tokens), ("fit:2", None, None, None));
        assert_eq!(
            kinds(&sink),
            [
                (1, DiagnosticKind::Inconsistent),
                (2, DiagnosticKind::InvalidValue),
                (2, DiagnosticKind::InvalidValue),
                (2, DiagnosticKind::InvalidValue),
                (2, DiagnosticKind::InvalidValue),
                (3, DiagnosticKind::NotARecord),
            ]
        );
        assert_eq!(report.details["ids_from_request_id"], 1);
        assert_eq!(report.details["ids_from_line"], 1);
        assert_eq!(
            report.details["agentic"],
            serde_json::json!({"requests": 1, "subagent_requests": 1, "max_agent_depth": 1})
        );
        assert!(!format!("{:?}", sink.diagnostics).contains("CANARY"));
    }

    #[test]
    fn raw_records_take_token_times_from_responses() {
        // start_perf 500; responses at perf 800 and 2500 → start + 300 ns and + 2000 ns.
        let text = r#"{"metadata":{"x_request_id":"raw1","request_start_ns":1000000,"request_end_ns":1003000,"benchmark_phase":"profiling","phase_index":0},"start_perf_ns":500,"payload":{"messages":[{"role":"user","content":"CANARY prompt"}]},"status":200,"responses":[{"perf_ns":800,"packets":[{"name":"data","value":"CANARY"}]},{"perf_ns":1500,"text":"x"},{"perf_ns":2500,"packets":[]}]}"#;
        let (sink, report) = parse("profile_export_raw.jsonl", text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("0.13+ raw"));
        let r = &sink.requests[0];
        assert_eq!(
            (r.first_token_time, r.last_token_time, r.completion_time, r.http_status),
            (Some(1_000_300), Some(1_002_000), Some(1_003_000), Some(200))
        );
        assert!(!format!("{:?}", sink.requests).contains("CANARY"));
    }

    #[test]
    fn summary_json_keeps_stats_and_run_scalars() {
        let text = r#"{
  "schema_version": "1.4",
  "aiperf_version": "0.13.0",
  "benchmark_id": "b1",
  "request_latency": {"unit": "ms", "avg": 10.5, "min": 1.0, "max": 20.0, "p1": 1.1, "p50": 10.0, "p99": 19.0, "std": 2.0, "count": 4, "sum": 42.0},
  "request_throughput": {"unit": "requests/sec", "avg": 1.45},
  "input_config": {"endpoint": {"model_names": ["m"]}, "input": {"prompt": {"unit": "ms", "avg": 1}}},
  "run_info": {"cli_command": "aiperf profile CANARY"},
  "telemetry_data": {"endpoints": {}},
  "error_summary": [{"error_details": {"code": 500, "type": "ServerError", "message": "CANARY"}, "count": 3}],
  "warmup_metrics": {"request_latency": {"unit": "ms", "avg": 7.0}},
  "was_cancelled": false,
  "start_time": "2025-10-03T13:13:39.146443"
}
"#;
        assert_eq!(Aiperf.detect(text.as_bytes()), Some(Confidence::High));
        let (sink, report) = parse("profile_export_aiperf.json", text);
        assert_eq!((sink.diagnostics.len(), sink.requests.len(), report.lines), (0, 0, 14));
        assert_eq!(report.format_version.as_deref(), Some("summary-json 1.4"));
        assert_eq!(
            report.details["summary"],
            serde_json::json!({
                "request_latency": {"unit": "ms", "avg": 10.5, "min": 1.0, "max": 20.0, "p50": 10.0, "p99": 19.0,
                                    "std": 2.0, "count": 4, "sum": 42.0},
                "request_throughput": {"unit": "requests/sec", "avg": 1.45},
            })
        );
        assert_eq!(
            report.details["warmup_summary"],
            serde_json::json!({"request_latency": {"unit": "ms", "avg": 7.0}})
        );
        assert_eq!(report.details["errors"], serde_json::json!([{"code": 500, "type": "ServerError", "count": 3}]));
        assert_eq!(report.details["run"]["aiperf_version"], "0.13.0");
        assert_eq!(report.details["run"]["was_cancelled"], false);
        assert!(!format!("{:?}", report.details).contains("CANARY"));
    }

    #[test]
    fn summary_csv_both_sections_and_a_foreign_one() {
        let text = "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\nTime to First Token (ms),2.50,1.00,4.00,10.00,1.01,1.05,1.10,1.25,2.50,3.75,3.90,3.95,3.99,1.29\r\nRequest Latency (ms),x,1,2,3\r\n\r\nMetric,Value\r\nRequest Count,4.00\r\nRequest Throughput (requests/sec),1.50\r\n\r\nGPU,Power\r\n\r\nMetric,GPU,Power\r\n0,300\r\n1,310\r\n";
        assert_eq!(Aiperf.detect(text.as_bytes()), Some(Confidence::High));
        let (sink, report) = parse("profile_export_aiperf.csv", text);
        assert_eq!(
            kinds(&sink),
            [
                (3, DiagnosticKind::MalformedCsv),
                (9, DiagnosticKind::NotARecord),
                (11, DiagnosticKind::UnrecognizedLine)
            ]
        );
        assert_eq!(report.format_version.as_deref(), Some("summary-csv"));
        assert_eq!(
            report.details["summary"],
            serde_json::json!({
                "time_to_first_token": {"unit": "ms", "avg": 2.5, "min": 1.0, "max": 4.0, "sum": 10.0, "p50": 2.5,
                                        "p90": 3.9, "p95": 3.95, "p99": 3.99, "std": 1.29},
                "request_count": {"avg": 4.0},
                "request_throughput": {"unit": "requests/sec", "avg": 1.5},
            })
        );
        assert_eq!(report.details["skipped_csv_rows"], 2);
    }

    #[test]
    fn detection_claims_aiperf_files_only() {
        let cases: &[(&[u8], Option<Confidence>)] = &[
            (br#"{"metadata":{"session_num":0,"x_request_id":"a"},"metrics":{}}"#, Some(Confidence::High)),
            (b"{\n  \"metadata\": {\n    \"x_request_id\": \"a\"", Some(Confidence::High)),
            (br#"{"metadata":{"other":1}}"#, Some(Confidence::Low)),
            (
                b"{\n  \"records\": {\n    \"ttft\": {\n      \"tag\": \"ttft\",\n      \"header\": \"T\"",
                Some(Confidence::High),
            ),
            (b"{\n  \"schema_version\": \"1.4\",\n  \"aiperf_version\": \"0.13.0\"", Some(Confidence::High)),
            (b"Metric,avg,min,max,p1,p5,p25,p50,p75,p90,p95,p99,std\n", Some(Confidence::High)),
            (b"Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n", Some(Confidence::High)),
            (b"Metric,Value\nRequest Throughput (requests/sec),1.0\n", Some(Confidence::High)),
            // GenAI-Perf's CSV and outputs.json (response texts) are not AIPerf summaries or records.
            (b"Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1\r\n", None),
            (b"Metric,Value\r\nRequest Throughput (per sec),1.0\r\n", None),
            (b"{\"schema_version\": \"1.1\", \"data\": [{\"x_request_id\": \"a\"", None),
            (br#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}"#, None),
            (br#"{"request_id":"m1","timestamp":0,"input_length":32,"output_length":4,"hash_ids":[101]}"#, None),
        ];
        for (head, expected) in cases {
            assert_eq!(Aiperf.detect(head), *expected, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn csv_labels_become_tags() {
        assert_eq!(csv_label("Time to First Token (ms)"), ("time_to_first_token".to_owned(), Some("ms")));
        assert_eq!(
            csv_label("Output Token Throughput Per User (tokens/sec/user)"),
            ("output_token_throughput_per_user".to_owned(), Some("tokens/sec/user"))
        );
        assert_eq!(csv_label("Request Count"), ("request_count".to_owned(), None));
        assert_eq!(crate::csv_record(r#""a, ""b""",1"#), Some(vec![r#"a, "b""#.to_owned(), "1".to_owned()]));
        assert_eq!(crate::csv_record(r#""open,1"#), None);
    }
}
