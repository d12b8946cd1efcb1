//! The figures of `infertrace metrics`: the types of the JSON object, computed by [`compute_over`](crate::compute_over).

use std::collections::BTreeMap;

use infertrace_schema::{CacheTier, Status, WorkloadClass};
use serde::Serialize;

use crate::cost::{Cost, CostProfile};
use crate::energy::Energy;
use crate::slo::{Latency, Slo};
use crate::stats::{Distribution, SampleSummary};
use crate::workload::ClassCount;

/// Version of the JSON object [`Metrics`] serializes to; bumped when a field changes meaning or is removed.
pub const METRICS_VERSION: u32 = 1;

/// Key of rows whose grouping column is null.
pub const NULL_GROUP: &str = "(none)";

/// A column of `requests` that `--by` groups on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// `source`.
    Source,
    /// `model`.
    Model,
    /// `instance`.
    Instance,
    /// `workload_class`, inferred where null ([`crate::workload`]): keys `agent`, `agent (inferred)`, ….
    WorkloadClass,
    /// `session_id`.
    SessionId,
    /// `status`.
    Status,
}

impl GroupBy {
    /// Every grouping column.
    pub const ALL: &'static [GroupBy] = &[
        GroupBy::Source,
        GroupBy::Model,
        GroupBy::Instance,
        GroupBy::WorkloadClass,
        GroupBy::SessionId,
        GroupBy::Status,
    ];

    /// The column name.
    pub const fn column(self) -> &'static str {
        use infertrace_schema::request;
        match self {
            GroupBy::Source => request::SOURCE,
            GroupBy::Model => request::MODEL,
            GroupBy::Instance => request::INSTANCE,
            GroupBy::WorkloadClass => request::WORKLOAD_CLASS,
            GroupBy::SessionId => request::SESSION_ID,
            GroupBy::Status => request::STATUS,
        }
    }

    /// The column named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|g| g.column() == text)
    }
}

/// What to compute.
#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    /// Bounds for goodput; goodput is omitted when empty.
    pub slo: Slo,
    /// Column to break every figure down by.
    pub by: Option<GroupBy>,
    /// What serving costs; cost figures are null without it.
    pub cost: Option<CostProfile>,
}

/// Everything `infertrace metrics` reports; serializes to the object of `schemas/metrics.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// [`METRICS_VERSION`].
    pub metrics_version: u32,
    /// How quantiles are computed: `linear` (see [`crate::stats`]).
    pub quantile_method: &'static str,
    /// SLO bounds in seconds, by duration name (`ttft`, …); empty when none was given.
    pub slo: BTreeMap<Latency, f64>,
    /// Grouping column, or null; `source` without one asked for when the rows mix kinds of source.
    pub by: Option<GroupBy>,
    /// Figures over every row.
    pub overall: GroupMetrics,
    /// Figures per value of `by` (null values under [`NULL_GROUP`]), sorted by key; empty without `by`.
    pub groups: BTreeMap<String, GroupMetrics>,
    /// The energy the instances drew, measured from their power or energy samples ([`crate::energy`]); null
    /// without such samples.
    pub energy: Option<Energy>,
}

/// The figures of one set of rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMetrics {
    /// Request rows.
    pub requests: u64,
    /// Rows per `status` value; every value of the vocabulary is present.
    pub status: BTreeMap<Status, u64>,
    /// `ok` rows over rows whose status is known (not `unknown`); null when none is known.
    pub success_rate: Option<f64>,
    /// Distribution of each duration over the rows where it is present, whatever their status.
    pub latency: BTreeMap<Latency, Distribution>,
    /// Rates over the span of these rows.
    pub throughput: Throughput,
    /// Requests meeting every SLO; null when no SLO was given.
    pub goodput: Option<Goodput>,
    /// Prefix-cache hits as recorded, and the reuse the prompts' block hashes allow.
    pub cache: Cache,
    /// Reasoning depth.
    pub reasoning: Reasoning,
    /// Where request time goes: queue, prefill and decode as fractions of end-to-end time.
    pub time_split: TimeSplit,
    /// TTFT against the number of requests in flight when each request arrived, in power-of-two buckets.
    pub ttft_under_load: Vec<LoadBucket>,
    /// Engine samples per instance (null instance under [`NULL_GROUP`]).
    pub engine: BTreeMap<String, InstanceSamples>,
    /// Rows per workload class, as recorded or inferred ([`crate::workload`]); every class is listed.
    pub workload: BTreeMap<WorkloadClass, ClassCount>,
    /// Cost, energy and efficiency ([`crate::cost`]); null without a cost profile.
    pub cost: Option<Cost>,
}

/// Queue, prefill and decode time as fractions of end-to-end time, over the rows that have all four durations
/// (`Σqueue / Σe2e`, …); what the three leave is transfer, network and client time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TimeSplit {
    /// Rows having `queue_s`, `prefill_s`, `decode_s` and `e2e_s`.
    pub requests: u64,
    /// Σqueue_s / Σe2e_s; null without rows or when Σe2e_s is 0.
    pub queue: Option<f64>,
    /// Σprefill_s / Σe2e_s.
    pub prefill: Option<f64>,
    /// Σdecode_s / Σe2e_s.
    pub decode: Option<f64>,
}

/// The TTFT of the requests that arrived while `in_flight_min..=in_flight_max` other requests were in flight.
///
/// A request is in flight from its arrival until its completion (`completion_time`, else arrival + `e2e_s`); rows
/// without both are not counted as load. Buckets are 0, 1, 2–3, 4–7, … (powers of two); only non-empty ones are
/// listed, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadBucket {
    /// Fewest requests in flight in this bucket.
    pub in_flight_min: u64,
    /// Most requests in flight in this bucket.
    pub in_flight_max: u64,
    /// TTFT of the requests (with an arrival and a TTFT) that arrived under that load.
    pub ttft: Distribution,
}

/// Rates over the trace span.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Throughput {
    /// From the earliest to the latest instant of any row (arrival to completion); null when under two instants, or
    /// when the rows are on two clocks (`crate::clocks`).
    pub span_s: Option<f64>,
    /// Rows per second of span.
    pub requests_per_s: Option<f64>,
    /// Σ`input_tokens` (null counts nothing).
    pub input_tokens: u64,
    /// Σ`output_tokens`.
    pub output_tokens: u64,
    /// `input_tokens` per second of span.
    pub input_tokens_per_s: Option<f64>,
    /// `output_tokens` per second of span.
    pub output_tokens_per_s: Option<f64>,
}

/// Requests that succeeded within every SLO.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Goodput {
    /// Rows with status `ok` and every bounded duration present and ≤ its bound.
    pub requests: u64,
    /// `requests` over all rows.
    pub fraction: Option<f64>,
    /// `requests` per second of span.
    pub requests_per_s: Option<f64>,
}

/// Token-weighted hit rate of one cached-tokens column.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HitRate {
    /// Rows having both the cached-tokens column and `input_tokens`.
    pub requests: u64,
    /// Σ`input_tokens` over those rows.
    pub input_tokens: u64,
    /// Σ cached tokens over those rows.
    pub cached_tokens: u64,
    /// `cached_tokens / input_tokens`; null when no input token is counted.
    pub hit_rate: Option<f64>,
}

/// Cache figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cache {
    /// From `cached_tokens`.
    #[serde(flatten)]
    pub total: HitRate,
    /// From `cached_tokens_gpu`, `_cpu`, `_disk` and `_remote`; every tier is present.
    pub tiers: BTreeMap<CacheTier, HitRate>,
    /// Reuse an unbounded cache would find in `prefix_hashes`.
    pub reuse: Reuse,
}

/// The hit rate of an unbounded prefix cache replaying `prefix_hashes` in arrival order: the one definition of
/// `schemas/metrics.schema.json` (`cache.reuse`), which `cache-sim` and `mrc` share.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reuse {
    /// Rows having `prefix_hashes` and `block_size`.
    pub requests: u64,
    /// Blocks over those rows.
    pub blocks: u64,
    /// Blocks whose hash an earlier block (of any earlier row, or earlier in the row) had.
    pub hit_blocks: u64,
    /// Σ`input_tokens` of those rows (blocks × `block_size` where null).
    pub tokens: u64,
    /// Σ min(hit blocks × `block_size`, `input_tokens`) over those rows.
    pub hit_tokens: u64,
    /// `hit_tokens / tokens`; null when no token is counted.
    pub hit_rate: Option<f64>,
}

/// Reasoning depth multiplier.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reasoning {
    /// Rows having both `reasoning_tokens` and `output_tokens`.
    pub requests: u64,
    /// Σ`reasoning_tokens` over those rows.
    pub reasoning_tokens: u64,
    /// Σ(`output_tokens` − `reasoning_tokens`) over those rows (a row with more reasoning than output counts 0).
    pub answer_tokens: u64,
    /// `reasoning_tokens / answer_tokens`; null when no answer token is counted.
    pub multiplier: Option<f64>,
}

/// Engine samples of one instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InstanceSamples {
    /// `kv_cache_usage` (fraction 0..1).
    pub kv_cache_usage: SampleSummary,
    /// `requests_waiting` (queue depth).
    pub requests_waiting: SampleSummary,
}

/// The power-of-two bucket of a load: 0 → (0, 0), 1 → (1, 1), 2–3 → (2, 3), 4–7 → (4, 7), …
pub(crate) fn load_bucket(in_flight: u64) -> (u64, u64) {
    match in_flight {
        0 => (0, 0),
        n => {
            let low = 1u64 << n.ilog2();
            (low, low.saturating_mul(2) - 1)
        }
    }
}
