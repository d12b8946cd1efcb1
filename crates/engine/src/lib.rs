//! Metrics over canonical infertrace datasets: what `infertrace metrics` reports.
//!
//! [`compute_over`] reads the `requests` and `samples` tables of one or more datasets (taken together, as one
//! trace, through [`infertrace_query::Datasets`]) and returns [`Metrics`], a plain value that serializes to the
//! stable JSON object described by `schemas/metrics.schema.json`. Maps are `BTreeMap`s and groups are sorted by
//! key, so the same datasets always give byte-identical output. It streams: sums are aggregations, quantiles and
//! orders come from sorts that spill to disk, so memory does not grow with the number of rows (see its module,
//! `query.rs`, for how each figure is computed).
//!
//! Key decision: every figure is exact and defined on the rows alone, with the method stated here, so that two
//! runs of infertrace, or infertrace and a notebook, agree to the last digit:
//!
//! - **Durations.** `ttft_s`, `tpot_s`, `e2e_s`, `queue_s`, `prefill_s`, `decode_s` and `kv_transfer_s` as stored,
//!   and where null, derived from the row's instants exactly as `normalize` does
//!   ([`RequestRow::fill_durations`](infertrace_schema::RequestRow::fill_durations)).
//!   Each distribution is over the rows where the value is present, whatever their status.
//! - **Quantiles** (`p50`, `p90`, `p95`, `p99`) interpolate linearly between closest ranks of the sorted values
//!   (numpy's default, Hyndman–Fan type 7; see [`stats`]); `mean` is arithmetic; `max` is the largest value.
//! - **Status.** `status` counts rows per value; `success_rate` is `ok` rows over rows whose status is not
//!   `unknown` (null when no row's outcome is known: most public traces).
//! - **Throughput.** The span runs from the earliest to the latest instant of any row (arrival, scheduling,
//!   tokens, completion); requests/s counts every row, tokens/s sums `input_tokens` and `output_tokens` where
//!   present. Each group has the span of its own rows. Datasets from different periods are one trace with a gap.
//! - **Goodput.** A row meets an SLO only if its status is `ok` and the bounded duration is present and ≤ the
//!   bound; a missing value does not meet it. `goodput.requests` meet every given SLO; `fraction` divides by all
//!   rows, `requests_per_s` by the span.
//! - **Cache hit rate.** Token-weighted: Σ`cached_tokens` / Σ`input_tokens` over rows having both, and likewise
//!   per tier with `cached_tokens_gpu`, `_cpu`, `_disk` and `_remote`.
//! - **Reuse.** The hit rate an unbounded prefix cache would reach on `prefix_hashes`, as `cache-sim` and `mrc`
//!   define it (`schemas/metrics.schema.json`, `cache.reuse`): rows are replayed in arrival order (rows without an
//!   arrival last, ties in input order), a block hits if its hash was seen before (in an earlier row or earlier in
//!   the same row), a row's hit tokens are min(hit blocks × `block_size`, `input_tokens`), and the rate divides
//!   their sum by Σ`input_tokens` (blocks × `block_size` where null). Within a group, only the group's rows are
//!   replayed. Every block but the first sight of each hash hits, so the misses are the distinct hashes, each
//!   weighing the block size of the row that saw it first.
//! - **Reasoning depth multiplier** R = Σ`reasoning_tokens` / Σ(`output_tokens` − `reasoning_tokens`) over rows
//!   having both (a row with more reasoning than output tokens adds 0 to the denominator); null when the
//!   denominator is 0.
//! - **Time split.** Σ`queue_s`, Σ`prefill_s` and Σ`decode_s` over Σ`e2e_s`, on the rows having all four, each
//!   summed in whole nanoseconds (exactly, whatever the order); the remainder is transfer, network and client time.
//! - **TTFT under load.** For each row with an arrival and a TTFT, the number of *other* requests in flight at its
//!   arrival (arrival ≤ t < completion, completion = `completion_time` or arrival + `e2e_s`; rows without both are
//!   nobody's load), bucketed 0, 1, 2–3, 4–7, … (powers of two); each non-empty bucket gets the TTFT distribution.
//! - **Comparison** ([`compare`]): every number of two [`Metrics`] objects paired by its JSON path, with B − A and
//!   (B − A) / |A|.
//! - **Engine samples.** `kv_cache_usage` and `requests_waiting` from `samples`, per instance: count, mean over
//!   samples, mean over time (each sample holds until the next), p95 and max.
//! - **Workload class.** Stored, or inferred where null by the rules of [`workload`] (agent, rag, batch, chat);
//!   `workload` counts rows per class, stored and inferred apart.
//! - **Groups** (`--by`): rows are grouped on `source`, `model`, `instance`, `workload_class`, `session_id` or
//!   `status` as stored, null under `(none)`; `workload_class` groups use the inferred class where none is stored,
//!   under keys marked ` (inferred)` (`agent (inferred)`), so recorded and guessed classes never mix. Samples carry
//!   only `source` and `instance`, so groups on other columns have no engine figures (the overall object has them
//!   all).
//!
//! # JSON fields
//!
//! The top-level object has `metrics_version` ([`METRICS_VERSION`]), `quantile_method` (`linear`), `slo`
//! (bounds in seconds by duration name: `ttft`, `tpot`, `e2e`, `queue`, `prefill`, `decode`, `kv_transfer`),
//! `by` (the grouping column or null), `overall` and `groups` (one object per group key, empty without `by`).
//! Each group object ([`GroupMetrics`]) has:
//!
//! - `requests`: rows; `status`: rows per status (all five values); `success_rate`.
//! - `latency`: per duration name, `{count, mean, p50, p90, p95, p99, max}` in seconds.
//! - `throughput`: `{span_s, requests_per_s, input_tokens, output_tokens, input_tokens_per_s,
//!   output_tokens_per_s}`.
//! - `goodput`: `{requests, fraction, requests_per_s}`, or null when no SLO was given.
//! - `cache`: `{requests, input_tokens, cached_tokens, hit_rate}` overall, `tiers` (`gpu`, `cpu`, `disk`,
//!   `remote`, each of the same shape), and `reuse`: `{requests, blocks, hit_blocks, tokens, hit_tokens,
//!   hit_rate}`.
//! - `reasoning`: `{requests, reasoning_tokens, answer_tokens, multiplier}`.
//! - `time_split`: `{requests, queue, prefill, decode}` (fractions of e2e).
//! - `ttft_under_load`: a list of `{in_flight_min, in_flight_max, ttft}` (a latency distribution), non-empty
//!   buckets in order.
//! - `engine`: per instance, `kv_cache_usage` and `requests_waiting`, each `{count, mean, time_weighted_mean,
//!   p95, max}`.
//! - `workload`: per class (`chat`, `rag`, `agent`, `batch`), `{stored, inferred}` row counts.
//!
//! A figure that cannot be computed (no values, zero denominator, empty span) is null, never 0 or NaN.
//!
//! [`merge`](mod@merge) joins the rows several sources wrote about one run; its module documentation states the
//! matching and precedence rules.
//!
//! This crate deliberately does not print or read paths: the CLI opens datasets and renders ([`mod@format`] is how
//! figures are written, shared by the terminal tables and the HTML report of `infertrace-report`).

mod clocks;
mod compare;
mod compute;
pub mod cost;
mod distinct;
pub mod energy;
pub mod format;
pub mod merge;
mod query;
pub mod series;
pub mod slo;
pub mod stats;
pub mod workload;

pub use compare::{Difference, compare};
pub use compute::{
    Cache, Goodput, GroupBy, GroupMetrics, HitRate, InstanceSamples, LoadBucket, METRICS_VERSION, Metrics,
    MetricsOptions, NULL_GROUP, Reasoning, Reuse, Throughput, TimeSplit,
};
pub use cost::{Cost, CostError, CostProfile, EnergySource};
pub use energy::{Energy, EnergyFrom, InstanceEnergy};
pub use merge::{MergeError, MergeKey, MergeOptions, MergePlan, Merged, combine, merge, plan};
pub use query::{compute_dirs, compute_over, rows_in_input_order};
pub use slo::{Latency, Slo, SloError};
pub use stats::{Distribution, SampleSummary};

#[cfg(test)]
mod cost_tests;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod tests;
