//! infertrace adapters for NVIDIA Dynamo and the benchmark clients that drive it.
//!
//! - [`DynamoRequestTrace`] (`dynamo-request-trace`): `dynamo.request.trace.v1` JSONL, one row per request.
//! - [`DynamoLog`] (`dynamo-log`): Dynamo logs, readable text and JSONL (≤0.3 SDK to 1.6): request lifecycles to
//!   `requests`, router decisions to `cache_events` lookups.
//! - [`DynamoKvEvents`] (`dynamo-kv-events`): router KV events and the legacy hit-rate event.
//! - [`DynamoMetrics`] (`dynamo-metrics`): Prometheus scrapes of the frontend, router, component and KVBM metrics.
//! - [`Aiperf`] (`aiperf`): AIPerf `profile_export.jsonl` per-request records, every schema generation.
//! - [`GenaiPerf`] (`genai-perf`): GenAI-Perf / perf_analyzer `profile_export.json`.
//!
//! Worker and instance ids are unsigned 64-bit and never pass through `f64`.

mod aiperf;
pub mod generate;
mod genai_perf;
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
