//! infertrace adapters for NVIDIA Dynamo and the benchmark clients that drive it.
//!
//! - [`DynamoRequestTrace`] (`dynamo-request-trace`): `dynamo.request.trace.v1` JSONL, one row per request.
//! - [`DynamoLog`] (`dynamo-log`): Dynamo logs, readable text and JSONL (≤0.3 SDK to 1.6): request lifecycles to
//!   `requests`, router decisions to `cache_events` lookups.
//! - [`DynamoKvEvents`] (`dynamo-kv-events`): router KV events and the legacy hit-rate event.
//! - [`DynamoMetrics`] (`dynamo-metrics`): Prometheus scrapes of the frontend, worker component, KV-stats and KVBM
//!   metrics.
//! - [`Aiperf`] (`aiperf`): AIPerf `profile_export.jsonl` per-request records, every schema generation (raw records
//!   too), and the `profile_export_aiperf.json` / `.csv` summaries (manifest details, no rows).
//! - [`GenaiPerf`] (`genai-perf`): GenAI-Perf / perf_analyzer `profile_export.json` (one row per request) and the
//!   GenAI-Perf summary JSON and CSV.
//!
//! Worker and instance ids are unsigned 64-bit and never pass through `f64`.

mod aiperf;
mod genai_perf;
pub mod generate;
mod kv_events;
mod log;
mod prometheus;
mod request_trace;

pub use aiperf::Aiperf;
pub use genai_perf::GenaiPerf;
pub use kv_events::DynamoKvEvents;
pub use log::DynamoLog;
pub use prometheus::DynamoMetrics;
pub use request_trace::DynamoRequestTrace;

/// Splits one CSV record of the summary exports (Python's `csv` quoting, RFC 4180: `"…"` with `""` for a quote).
/// `None` for an unclosed quote. Line by line rather than with the csv crate, so that diagnostics keep the file's line
/// numbers (the summaries' records never span lines).
pub(crate) fn csv_record(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}
