//! infertrace adapters for SGLang's outputs.
//!
//! - [`SglangLog`] (`sglang-log`): scheduler and tokenizer text logs, 0.3 to 0.5.23 — the envelope, the
//!   `Prefill batch` / `Decode batch` statistics of every generation (and the pre-0.3 `new fill batch` lines), and
//!   the request logs (`in=`/`out=`, `Receive:`/`Finish:` in both quoting styles, the 0.5.7+ JSON form).
//!
//!   `Req Time Stats` lines join the request's row by `rid`.
//! - [`SglangRequestMetrics`] (`sglang-request-metrics`): the per-request JSON files of `--export-metrics-to-file`.
//! - [`SglangMetrics`] (`sglang-metrics`): Prometheus `/metrics` scrapes.
//! - [`SglangKvEvents`] (`sglang-kv-events`): KV-cache events, msgpack or JSON lines.
//! - [`SglangBench`] (`sglang-bench`): `bench_serving` result JSONL.
//!
//! As in the vLLM crate, version differences are data: a batch line is a head and a list of `key: value` fields,
//! and the fields of every generation map onto canonical metrics through one table, so a release that reorders,
//! renames within the table, or drops fields needs no new code. [`generate`] writes synthetic inputs.

mod bench;
pub mod generate;
mod kv_events;
pub(crate) mod log;
mod prometheus;
mod request_metrics;

pub use bench::SglangBench;
pub use kv_events::SglangKvEvents;
pub use log::SglangLog;
pub use prometheus::SglangMetrics;
pub use request_metrics::SglangRequestMetrics;
