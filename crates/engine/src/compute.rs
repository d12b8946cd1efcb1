//! The figures of `infertrace metrics`, computed from request rows and engine samples.

use std::collections::{BTreeMap, HashSet};

use infertrace_schema::{CacheTier, Dataset, RequestRow, Status};
use serde::Serialize;

use crate::read::{self, Sample};
use crate::slo::{Latency, Slo};
use crate::stats::{Distribution, QUANTILE_METHOD, SampleSummary};

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
    /// `workload_class`, as stored (never inferred).
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

    fn key(self, row: &RequestRow) -> Option<String> {
        match self {
            GroupBy::Source => Some(row.source.clone()),
            GroupBy::Model => row.model.clone(),
            GroupBy::Instance => row.instance.clone(),
            GroupBy::WorkloadClass => row.workload_class.map(|c| c.as_str().to_owned()),
            GroupBy::SessionId => row.session_id.clone(),
            GroupBy::Status => Some(row.status.as_str().to_owned()),
        }
    }

    /// The samples attributable to group `key`: only `source` and `instance` exist in `samples`.
    fn sample_key(self, sample: &Sample) -> Option<Option<String>> {
        match self {
            GroupBy::Source => Some(Some(sample.source.clone())),
            GroupBy::Instance => Some(sample.instance.clone()),
            _ => None,
        }
    }
}

/// What to compute.
#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    /// Bounds for goodput; goodput is omitted when empty.
    pub slo: Slo,
    /// Column to break every figure down by.
    pub by: Option<GroupBy>,
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
    /// Grouping column, or null.
    pub by: Option<GroupBy>,
    /// Figures over every row.
    pub overall: GroupMetrics,
    /// Figures per value of `by` (null values under [`NULL_GROUP`]), sorted by key; empty without `by`.
    pub groups: BTreeMap<String, GroupMetrics>,
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
    /// From the earliest to the latest instant of any row (arrival to completion); null when under two instants.
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

/// The hit rate of an unbounded prefix cache replaying `prefix_hashes` in arrival order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reuse {
    /// Rows having `prefix_hashes` and `block_size`.
    pub requests: u64,
    /// Blocks over those rows.
    pub blocks: u64,
    /// Blocks whose hash an earlier block (of any earlier row, or earlier in the row) had.
    pub hit_blocks: u64,
    /// Σ blocks × `block_size`.
    pub tokens: u64,
    /// Σ hit blocks × `block_size`.
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

/// Computes every figure over the rows of all `datasets` taken together.
pub fn compute(datasets: &[Dataset], options: &MetricsOptions) -> Metrics {
    let rows: Vec<RequestRow> = datasets.iter().flat_map(read::requests).collect();
    let samples: Vec<Sample> = datasets.iter().flat_map(read::samples).collect();
    let all: Vec<&RequestRow> = rows.iter().collect();
    let all_samples: Vec<&Sample> = samples.iter().collect();
    let overall = group_metrics(&all, &all_samples, &options.slo);
    let mut groups = BTreeMap::new();
    if let Some(by) = options.by {
        let mut keyed: BTreeMap<String, Vec<&RequestRow>> = BTreeMap::new();
        for row in &rows {
            keyed.entry(by.key(row).unwrap_or_else(|| NULL_GROUP.to_owned())).or_default().push(row);
        }
        for (key, members) in keyed {
            let group_samples: Vec<&Sample> = samples
                .iter()
                .filter(|s| by.sample_key(s).is_some_and(|k| k.as_deref().unwrap_or(NULL_GROUP) == key))
                .collect();
            groups.insert(key, group_metrics(&members, &group_samples, &options.slo));
        }
    }
    Metrics {
        metrics_version: METRICS_VERSION,
        quantile_method: QUANTILE_METHOD,
        slo: options.slo.bounds.clone(),
        by: options.by,
        overall,
        groups,
    }
}

fn latency(row: &RequestRow, which: Latency) -> Option<f64> {
    let value = match which {
        Latency::Ttft => row.ttft_s,
        Latency::Tpot => row.tpot_s,
        Latency::E2e => row.e2e_s,
        Latency::Queue => row.queue_s,
        Latency::Prefill => row.prefill_s,
        Latency::Decode => row.decode_s,
        Latency::KvTransfer => row.kv_transfer_s,
    };
    value.filter(|v| v.is_finite())
}

fn group_metrics(rows: &[&RequestRow], samples: &[&Sample], slo: &Slo) -> GroupMetrics {
    let requests = rows.len() as u64;
    let mut status: BTreeMap<Status, u64> = Status::ALL.iter().map(|&s| (s, 0)).collect();
    for row in rows {
        *status.entry(row.status).or_default() += 1;
    }
    let known = requests - status[&Status::Unknown];
    let success_rate = ratio(status[&Status::Ok], known);
    let distributions = Latency::ALL
        .iter()
        .map(|&l| (l, Distribution::of(rows.iter().filter_map(|r| latency(r, l)).collect())))
        .collect();
    let throughput = throughput(rows);
    let goodput = (!slo.is_empty()).then(|| {
        let good = rows
            .iter()
            .filter(|r| {
                r.status == Status::Ok
                    && slo.bounds.iter().all(|(&l, &bound)| latency(r, l).is_some_and(|v| v <= bound))
            })
            .count() as u64;
        Goodput {
            requests: good,
            fraction: ratio(good, requests),
            requests_per_s: throughput.span_s.map(|s| good as f64 / s),
        }
    });
    GroupMetrics {
        requests,
        status,
        success_rate,
        latency: distributions,
        throughput,
        goodput,
        cache: cache(rows),
        reasoning: reasoning(rows),
        time_split: time_split(rows),
        ttft_under_load: ttft_under_load(rows),
        engine: engine(samples),
    }
}

fn time_split(rows: &[&RequestRow]) -> TimeSplit {
    let (mut requests, mut queue, mut prefill, mut decode, mut e2e) = (0u64, 0.0, 0.0, 0.0, 0.0);
    for row in rows {
        let parts = [Latency::Queue, Latency::Prefill, Latency::Decode, Latency::E2e].map(|l| latency(row, l));
        if let [Some(q), Some(p), Some(d), Some(e)] = parts {
            requests += 1;
            (queue, prefill, decode, e2e) = (queue + q, prefill + p, decode + d, e2e + e);
        }
    }
    let share = |part: f64| (requests > 0 && e2e > 0.0).then(|| part / e2e);
    TimeSplit { requests, queue: share(queue), prefill: share(prefill), decode: share(decode) }
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

fn ttft_under_load(rows: &[&RequestRow]) -> Vec<LoadBucket> {
    let end = |r: &RequestRow| {
        r.completion_time.or_else(|| Some(r.arrival_time? + (latency(r, Latency::E2e)? * 1e9).round() as i64))
    };
    let spans: Vec<(i64, i64)> =
        rows.iter().filter_map(|r| Some((r.arrival_time?, end(r)?))).filter(|(a, c)| c >= a).collect();
    let mut arrivals: Vec<i64> = spans.iter().map(|s| s.0).collect();
    let mut completions: Vec<i64> = spans.iter().map(|s| s.1).collect();
    arrivals.sort_unstable();
    completions.sort_unstable();
    let mut buckets: BTreeMap<(u64, u64), Vec<f64>> = BTreeMap::new();
    for row in rows {
        let (Some(t), Some(ttft)) = (row.arrival_time, latency(row, Latency::Ttft)) else { continue };
        // Requests with a_j ≤ t < c_j, the row itself excluded when it is one of them.
        let started = arrivals.partition_point(|&a| a <= t) as u64;
        let ended = completions.partition_point(|&c| c <= t) as u64;
        let own = u64::from(end(row).is_some_and(|c| c > t));
        let in_flight = started.saturating_sub(ended).saturating_sub(own);
        buckets.entry(load_bucket(in_flight)).or_default().push(ttft);
    }
    buckets
        .into_iter()
        .map(|((in_flight_min, in_flight_max), values)| LoadBucket {
            in_flight_min,
            in_flight_max,
            ttft: Distribution::of(values),
        })
        .collect()
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

fn throughput(rows: &[&RequestRow]) -> Throughput {
    let instants = rows.iter().flat_map(|r| {
        [
            r.arrival_time,
            r.scheduled_time,
            r.first_token_time,
            r.prefill_end_time,
            r.decode_start_time,
            r.last_token_time,
            r.completion_time,
        ]
        .into_iter()
        .flatten()
    });
    let (min, max) = instants.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let span_s = (max > min).then(|| (max as f64 - min as f64) / 1e9);
    let input_tokens = rows.iter().filter_map(|r| r.input_tokens).map(u64::from).sum();
    let output_tokens = rows.iter().filter_map(|r| r.output_tokens).map(u64::from).sum();
    let per_s = |n: u64| span_s.map(|s| n as f64 / s);
    Throughput {
        span_s,
        requests_per_s: per_s(rows.len() as u64),
        input_tokens,
        output_tokens,
        input_tokens_per_s: per_s(input_tokens),
        output_tokens_per_s: per_s(output_tokens),
    }
}

fn hit_rate(rows: &[&RequestRow], cached: impl Fn(&RequestRow) -> Option<u32>) -> HitRate {
    let mut rate = HitRate::default();
    for row in rows {
        if let (Some(input), Some(cached)) = (row.input_tokens, cached(row)) {
            rate.requests += 1;
            rate.input_tokens += u64::from(input);
            rate.cached_tokens += u64::from(cached);
        }
    }
    rate.hit_rate = ratio(rate.cached_tokens, rate.input_tokens);
    rate
}

fn cache(rows: &[&RequestRow]) -> Cache {
    let tiers = CacheTier::ALL
        .iter()
        .map(|&tier| {
            let column = move |r: &RequestRow| match tier {
                CacheTier::Gpu => r.cached_tokens_gpu,
                CacheTier::Cpu => r.cached_tokens_cpu,
                CacheTier::Disk => r.cached_tokens_disk,
                CacheTier::Remote => r.cached_tokens_remote,
            };
            (tier, hit_rate(rows, column))
        })
        .collect();
    Cache { total: hit_rate(rows, |r| r.cached_tokens), tiers, reuse: reuse(rows) }
}

/// Replays the rows in arrival order (rows without an arrival last, ties in input order) through an unbounded
/// cache of block hashes.
fn reuse(rows: &[&RequestRow]) -> Reuse {
    let mut order: Vec<&RequestRow> = rows.to_vec();
    order.sort_by_key(|r| (r.arrival_time.is_none(), r.arrival_time));
    let mut seen = HashSet::new();
    let mut reuse = Reuse::default();
    for row in order {
        let (Some(hashes), Some(block_size)) = (&row.prefix_hashes, row.block_size) else { continue };
        reuse.requests += 1;
        for &hash in hashes {
            reuse.blocks += 1;
            reuse.tokens += u64::from(block_size);
            if !seen.insert(hash) {
                reuse.hit_blocks += 1;
                reuse.hit_tokens += u64::from(block_size);
            }
        }
    }
    reuse.hit_rate = ratio(reuse.hit_tokens, reuse.tokens);
    reuse
}

fn reasoning(rows: &[&RequestRow]) -> Reasoning {
    let mut depth = Reasoning::default();
    for row in rows {
        if let (Some(reasoning), Some(output)) = (row.reasoning_tokens, row.output_tokens) {
            depth.requests += 1;
            depth.reasoning_tokens += u64::from(reasoning);
            depth.answer_tokens += u64::from(output.saturating_sub(reasoning));
        }
    }
    depth.multiplier = ratio(depth.reasoning_tokens, depth.answer_tokens);
    depth
}

fn engine(samples: &[&Sample]) -> BTreeMap<String, InstanceSamples> {
    // (time, value) points per instance and metric.
    type Series = Vec<(i64, f64)>;
    let mut values: BTreeMap<String, BTreeMap<&str, Series>> = BTreeMap::new();
    for sample in samples {
        let instance = sample.instance.clone().unwrap_or_else(|| NULL_GROUP.to_owned());
        values.entry(instance).or_default().entry(sample.metric).or_default().push((sample.time, sample.value));
    }
    values
        .into_iter()
        .map(|(instance, mut metrics)| {
            let mut take = |name| SampleSummary::of(metrics.remove(name).unwrap_or_default());
            let summary = InstanceSamples {
                kv_cache_usage: take(infertrace_schema::metrics::KV_CACHE_USAGE),
                requests_waiting: take(infertrace_schema::metrics::REQUESTS_WAITING),
            };
            (instance, summary)
        })
        .collect()
}
