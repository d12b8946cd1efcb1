//! infertrace adapters for vLLM's outputs.
//!
//! - [`VllmLog`] (`vllm-log`): server and engine text logs of every release from 0.2.7 to 0.33.
//! - [`VllmBench`] (`vllm-bench`): `benchmark_serving.py` / `vllm bench serve` results and console summaries.
//! - [`VllmMetrics`] (`vllm-metrics`): Prometheus `/metrics` scrapes.
//! - [`VllmOtlp`] (`vllm-otlp`): OpenTelemetry `llm_request` spans as OTLP/JSON.
//! - [`VllmKvEvents`] (`vllm-kv-events`): KV-cache events, msgpack payloads or JSON lines.
//!
//! The ground truth is the reference's literal format strings per release; each parser carries the strings it
//! implements in its doc comment, named by the first release that wrote them. Version differences are data (regex
//! alternatives and field tables), not branches on a version number, so a release that writes an already-known
//! shape needs no new code. [`generate`] writes synthetic logs of any size in every generation, for tests and
//! benchmarks.
//!

mod bench;
pub mod generate;
mod kv_events;
mod log;
mod otlp;
mod prometheus;

pub use bench::VllmBench;
pub use kv_events::VllmKvEvents;
pub use log::VllmLog;
pub use otlp::VllmOtlp;
pub use prometheus::VllmMetrics;
