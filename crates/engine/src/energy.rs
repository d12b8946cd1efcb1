//! Energy the machines drew, as measured by their own counters: per accelerator, from the increase of
//! `gpu_energy_joules_total` where it was sampled at least twice, else from `gpu_power_w` integrated over time; per
//! host, the increase of `cpu_energy_joules_total` (the CPU packages' RAPL counters) where node_exporter could read
//! them. Nothing else a host draws (fans, memory, NICs, PSU losses) is measured.
//!
//! - **Counter**: the increase is the sum of the differences of consecutive samples in time order; a sample below
//!   the one before is a reset (the driver reloaded, the counter restarted from zero) and adds its own value, as
//!   Prometheus's `increase()` counts it.
//! - **Power**: the trapezoid rule over consecutive samples, `Σ (pₖ + pₖ₊₁) / 2 × (tₖ₊₁ − tₖ)`; a gap between
//!   two samples (a scrape missed, an exporter restarted) is bridged by the straight line between them.
//!
//! Samples at one instant are taken in input order. An instance with a single sample has no measured energy.
//! The figures cover each instance's own sampled span; tokens per kWh divide the tokens of every request row by
//! the energy of every instance.

use std::collections::BTreeMap;

use datafusion::arrow::array::AsArray as _;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::prelude::SessionContext;
use futures::StreamExt as _;
use infertrace_query::{QueryError, datafusion};
use infertrace_schema::metrics as sample_metrics;
use serde::Serialize;

use crate::compute::NULL_GROUP;
use crate::query::SAMPLES;

/// Joules in a kilowatt-hour.
pub const JOULES_PER_KWH: f64 = 3.6e6;

/// How an instance's energy was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyFrom {
    /// The increase of the energy counter (`gpu_energy_joules_total`).
    Counter,
    /// Power samples (`gpu_power_w`) integrated over time.
    Power,
}

/// The measured energy of every instance with power or energy samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Energy {
    /// Per instance, by source and instance name.
    pub instances: Vec<InstanceEnergy>,
    /// Σ joules of the instances, in kWh.
    pub kwh: f64,
    /// Σ(`input_tokens` + `output_tokens`) of every request row per kWh; null when no token is counted or the
    /// energy is 0.
    pub tokens_per_kwh: Option<f64>,
    /// Σ`output_tokens` per kWh.
    pub output_tokens_per_kwh: Option<f64>,
}

/// The measured energy of one instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceEnergy {
    /// `samples.source` ('' when null).
    pub source: String,
    /// `samples.instance` ([`NULL_GROUP`] when null).
    pub instance: String,
    /// The sample metric it was measured from: `gpu_energy_joules_total`, `gpu_power_w` or
    /// `cpu_energy_joules_total`.
    pub metric: &'static str,
    /// How it was measured.
    pub from: EnergyFrom,
    /// Energy, J.
    pub joules: f64,
    /// From the first to the last sample used, s.
    pub span_s: f64,
    /// `joules / span_s`; null when the span is 0.
    pub mean_power_w: Option<f64>,
    /// Samples used.
    pub samples: u64,
    /// Counter resets seen (0 for power).
    pub resets: u64,
}

impl InstanceEnergy {
    /// How it was measured, for people: `gpu_energy_joules_total increase`, `gpu_power_w integrated`.
    pub fn how(&self) -> String {
        match self.from {
            EnergyFrom::Counter => format!("{} increase", self.metric),
            EnergyFrom::Power => format!("{} integrated", self.metric),
        }
    }
}

/// The walk of one instance's samples of one metric, in time order.
#[derive(Debug, Clone, Copy)]
struct Walk {
    first: i64,
    last: (i64, f64),
    joules: f64,
    samples: u64,
    resets: u64,
}

impl Walk {
    fn new(t: i64, v: f64) -> Self {
        Self { first: t, last: (t, v), joules: 0.0, samples: 1, resets: 0 }
    }

    /// The next sample of a counter.
    fn count(&mut self, t: i64, v: f64) {
        if v >= self.last.1 {
            self.joules += v - self.last.1;
        } else {
            self.joules += v;
            self.resets += 1;
        }
        self.last = (t, v);
        self.samples += 1;
    }

    /// The next sample of power.
    fn integrate(&mut self, t: i64, v: f64) {
        self.joules += (self.last.1 + v) / 2.0 * ((t - self.last.0) as f64 / 1e9);
        self.last = (t, v);
        self.samples += 1;
    }

    fn instance(&self, source: &str, instance: &str, metric: &'static str) -> InstanceEnergy {
        let span_s = (self.last.0 - self.first) as f64 / 1e9;
        InstanceEnergy {
            source: source.to_owned(),
            instance: instance.to_owned(),
            metric,
            from: if metric == sample_metrics::GPU_POWER_W { EnergyFrom::Power } else { EnergyFrom::Counter },
            joules: self.joules,
            span_s,
            mean_power_w: (span_s > 0.0).then(|| self.joules / span_s),
            samples: self.samples,
            resets: self.resets,
        }
    }
}

/// The measured energy of the samples registered as [`SAMPLES`], with `tokens` and `output_tokens` the sums over
/// every request row; `None` when no instance has two power or energy samples.
pub(crate) async fn measure(
    context: &SessionContext,
    tokens: u64,
    output_tokens: u64,
) -> Result<Option<Energy>, QueryError> {
    let (gpu, power, cpu) =
        (sample_metrics::GPU_ENERGY_JOULES_TOTAL, sample_metrics::GPU_POWER_W, sample_metrics::CPU_ENERGY_JOULES_TOTAL);
    let query = format!(
        "SELECT coalesce(CAST(source AS VARCHAR), '') AS s, coalesce(CAST(instance AS VARCHAR), '{NULL_GROUP}') AS i, \
         CAST(metric AS VARCHAR) AS m, arrow_cast(time, 'Int64') AS t, value AS v FROM {SAMPLES} \
         WHERE CAST(metric AS VARCHAR) IN ('{gpu}', '{power}', '{cpu}') AND abs(value) < CAST('inf' AS DOUBLE) \
         AND time IS NOT NULL ORDER BY s, i, m, t, ordinal"
    );
    // Per (source, instance), the walk of each of the three metrics, in the order of `metrics`; the sort hands
    // each walk's samples in a run, so only the current run's key is held as text.
    let metrics = [gpu, power, cpu];
    let mut walks: BTreeMap<(String, String), [Option<Walk>; 3]> = BTreeMap::new();
    let mut current: Option<((String, String), usize, Walk)> = None;
    let mut stream = context.sql(&query).await?.execute_stream().await?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let text = |i: usize| cast(batch.column(i), &DataType::Utf8);
        let (sources, instances, names) = (text(0)?, text(1)?, text(2)?);
        let (sources, instances, names) =
            (sources.as_string::<i32>(), instances.as_string::<i32>(), names.as_string::<i32>());
        let (times, values) = (cast(batch.column(3), &DataType::Int64)?, cast(batch.column(4), &DataType::Float64)?);
        let (times, values) = (times.as_primitive::<Int64Type>(), values.as_primitive::<Float64Type>());
        for row in 0..batch.num_rows() {
            let (t, v) = (times.value(row), values.value(row));
            let metric = metrics.iter().position(|m| *m == names.value(row)).expect("the query selects these");
            match &mut current {
                Some(((s, i), m, walk))
                    if (s.as_str(), i.as_str(), *m) == (sources.value(row), instances.value(row), metric) =>
                {
                    if metrics[metric] == power { walk.integrate(t, v) } else { walk.count(t, v) }
                }
                _ => {
                    if let Some((key, m, walk)) = current.take() {
                        walks.entry(key).or_default()[m] = Some(walk);
                    }
                    let key = (sources.value(row).to_owned(), instances.value(row).to_owned());
                    current = Some((key, metric, Walk::new(t, v)));
                }
            }
        }
    }
    if let Some((key, m, walk)) = current {
        walks.entry(key).or_default()[m] = Some(walk);
    }
    // Per instance, the accelerator's counter where it was sampled twice, else its power; and the CPUs' counter.
    let mut instances: Vec<InstanceEnergy> = Vec::new();
    for ((source, instance), [counter, watts, cpus]) in &walks {
        let used = |walk: &Option<Walk>, metric: &'static str| {
            walk.filter(|w| w.samples > 1).map(|w| w.instance(source, instance, metric))
        };
        instances.extend(used(counter, gpu).or_else(|| used(watts, power)));
        instances.extend(used(cpus, cpu));
    }
    if instances.is_empty() {
        return Ok(None);
    }
    let kwh = instances.iter().map(|i| i.joules).sum::<f64>() / JOULES_PER_KWH;
    let per = |n: u64| (kwh > 0.0 && n > 0).then(|| n as f64 / kwh);
    Ok(Some(Energy { instances, kwh, tokens_per_kwh: per(tokens), output_tokens_per_kwh: per(output_tokens) }))
}
