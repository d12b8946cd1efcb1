//! The few points a chart of a trace needs, computed by queries over datasets on disk: a duration's empirical CDF
//! at some ranks, its p50 and p95 per time bin, and the engine samples per instance, whole or as the maximum of
//! each time bin. Memory holds the points, not the rows, whatever the size of the trace.
//!
//! The rows are those of the metrics ([`compute_over`](crate::compute_over)): durations filled from their instants
//! where null and kept only when finite; samples of [`SAMPLE_METRICS`] whose value is finite.

use datafusion::arrow::array::{Array as _, AsArray as _};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use futures::StreamExt as _;
use infertrace_query::{Datasets, QueryError, datafusion};
use infertrace_schema::{EngineSample, RequestRow, Table as _, metrics as sample_metrics};

use crate::compute::NULL_GROUP;
use crate::query::{ROWS, SAMPLE_COLUMNS, SAMPLES, collect, distributions, rows_sql, run};
use crate::slo::Latency;

/// Sample metrics the charts draw: KV-cache usage and queue depth, then what the accelerators drew and moved
/// (power, device memory in use, PCIe and NVLink bytes per second).
pub const SAMPLE_METRICS: &[&str] = &[
    sample_metrics::KV_CACHE_USAGE,
    sample_metrics::REQUESTS_WAITING,
    sample_metrics::GPU_POWER_W,
    sample_metrics::GPU_MEMORY_USED_BYTES,
    sample_metrics::PCIE_TX_BYTES_PER_S,
    sample_metrics::PCIE_RX_BYTES_PER_S,
    sample_metrics::NVLINK_TX_BYTES_PER_S,
    sample_metrics::NVLINK_RX_BYTES_PER_S,
];

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesOptions {
    /// The durations whose CDF is drawn.
    pub cdfs: Vec<Latency>,
    /// Most points of a CDF: see [`cdf_ranks`].
    pub cdf_points: usize,
    /// The durations drawn over time.
    pub over_time: Vec<Latency>,
    /// Time bins over the span of the arrivals.
    pub time_bins: usize,
    /// Most points of a sample series; a longer one is reduced to the maximum of this many time bins.
    pub sample_points: usize,
    /// Most instances per sample metric (the most sampled).
    pub max_instances: usize,
}

/// The points of every chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// Per duration of [`SeriesOptions::cdfs`], in that order.
    pub cdfs: Vec<(Latency, Cdf)>,
    /// The first and the last arrival; `None` when no row has one.
    pub arrivals: Option<Timeline>,
    /// Per duration of [`SeriesOptions::over_time`]: `(bin, p50, p95)` of the requests that arrived in each
    /// non-empty time bin, in bin order.
    pub over_time: Vec<(Latency, Vec<BinQuantiles>)>,
    /// The first and the last sample (of every metric drawn); `None` without samples.
    pub sampled: Option<Timeline>,
    /// Per metric of [`SAMPLE_METRICS`], in that order.
    pub samples: Vec<(&'static str, SampleSeries)>,
    /// Samples of [`SAMPLE_METRICS`] with a finite value.
    pub sample_count: u64,
    /// The sources of the requests and of those samples (a null source is '').
    pub sources: Names,
    /// The models of the requests.
    pub models: Names,
}

/// `(bin, p50, p95)` of the values of one time bin.
pub type BinQuantiles = (usize, f64, f64);

/// The first few of a set of names, and how many there are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Names {
    /// The first [`NAMED`] in byte order.
    pub first: Vec<String>,
    /// How many there are.
    pub count: u64,
}

/// Names a [`Names`] lists.
pub const NAMED: usize = 5;

/// A duration's sorted values at the ranks of [`cdf_ranks`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cdf {
    /// Values (rows having the duration).
    pub count: u64,
    /// `(rank, value)`, ranks ascending; the first is the minimum and the last the maximum.
    pub points: Vec<(usize, f64)>,
}

/// One sample metric per instance.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SampleSeries {
    /// Instances having the metric (a null instance is [`NULL_GROUP`]).
    pub instances: usize,
    /// The most sampled instances (equal counts in name order), each with its points in time order (ties in
    /// input order) and whether they are reduced to bin maxima.
    pub drawn: Vec<DrawnInstance>,
}

/// One instance's series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DrawnInstance {
    /// Its name ([`NULL_GROUP`] when null).
    pub instance: String,
    /// `(time, value)`: every sample, or the maximum of each non-empty bin at the bin's start.
    pub points: Vec<(i64, f64)>,
    /// Whether the points are bin maxima.
    pub reduced: bool,
}

/// Where a time axis starts and how long it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// The earliest instant (UTC ns).
    pub origin: i64,
    /// From `origin` to the latest instant, in ns.
    pub span: i64,
}

impl Timeline {
    /// Bin (of `bins` equal ones over the span) that holds `t`; the span's end falls into the last bin.
    /// The queries of this module compute the same in SQL, with the same floating-point operations.
    pub fn bin(&self, t: i64, bins: usize) -> usize {
        if self.span <= 0 {
            return 0;
        }
        let position = (t.saturating_sub(self.origin)) as f64 / self.span as f64;
        ((position * bins as f64).floor().max(0.0) as usize).min(bins - 1)
    }

    /// [`bin`](Self::bin) of the column `t` as SQL, with the same floating-point operations in the same order.
    fn bin_sql(&self, t: &str, bins: usize) -> String {
        if self.span <= 0 {
            return "0".to_owned();
        }
        format!(
            "CAST(least(greatest(floor(CAST({t} - ({origin}) AS DOUBLE) / CAST({span} AS DOUBLE) \
             * CAST({bins} AS DOUBLE)), 0.0), CAST({last} AS DOUBLE)) AS BIGINT)",
            origin = self.origin,
            span = self.span,
            last = bins - 1
        )
    }

    /// The instant a bin starts at, of `bins` over the span (rounded to the nanosecond).
    pub fn bin_start(&self, bin: usize, bins: usize) -> i64 {
        let width = self.span as f64 / bins as f64;
        self.origin + (bin as f64 * width).round() as i64
    }
}

/// The ranks drawn of `n` sorted values: all of them up to `max`, else `max` ranks evenly spaced from the first
/// to the last, `round(i (n − 1) / (max − 1))`.
pub fn cdf_ranks(n: usize, max: usize) -> Vec<usize> {
    if n <= max || max < 2 {
        return (0..n).collect();
    }
    let (last, intervals) = (n as u128 - 1, max as u128 - 1);
    (0..max as u128).map(|i| ((2 * i * last + intervals) / (2 * intervals)) as usize).collect()
}

/// Computes the series of `options` over the rows of all `datasets`. It registers the same tables and views as
/// [`compute_over`](crate::compute_over) (names starting `infertrace_`).
pub async fn series_over(datasets: &Datasets, options: &SeriesOptions) -> Result<Series, QueryError> {
    let context = datasets.context();
    datasets.register_ordered::<EngineSample>(SAMPLES, SAMPLE_COLUMNS)?;
    run(context, &format!("CREATE OR REPLACE VIEW {ROWS} AS {}", rows_sql(RequestRow::NAME, false))).await?;
    let mut series = Series::default();

    // Counts of every duration and the span of the arrivals, in one scan.
    let counts: Vec<String> = options.cdfs.iter().map(|l| format!("count({})", l.name())).collect();
    let batches = collect(
        context,
        &format!("SELECT min(a), max(a), {} FROM {ROWS}", [counts, vec!["0".into()]].concat().join(", ")),
    )
    .await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0);
    let number = |c: usize| -> Result<Option<i64>, QueryError> {
        let Some(batch) = batch else { return Ok(None) };
        let column = cast(batch.column(c), &DataType::Int64)?;
        let column = column.as_primitive::<Int64Type>();
        Ok(column.is_valid(0).then(|| column.value(0)))
    };
    if let (Some(first), Some(last)) = (number(0)?, number(1)?) {
        series.arrivals = Some(Timeline { origin: first, span: last.saturating_sub(first) });
    }
    for (i, &latency) in options.cdfs.iter().enumerate() {
        let count = number(2 + i)?.unwrap_or(0).max(0) as u64;
        series.cdfs.push((latency, cdf(context, latency, count, options.cdf_points).await?));
    }

    for &latency in &options.over_time {
        let points = match series.arrivals {
            Some(timeline) => binned(context, latency, &timeline, options.time_bins).await?,
            None => Vec::new(),
        };
        series.over_time.push((latency, points));
    }

    let metrics = SAMPLE_METRICS.iter().map(|m| format!("'{m}'")).collect::<Vec<_>>().join(", ");
    let drawn = format!("metric IN ({metrics}) AND time IS NOT NULL AND abs(value) < CAST('inf' AS DOUBLE)");
    let span = collect(
        context,
        &format!("SELECT arrow_cast(min(time), 'Int64'), arrow_cast(max(time), 'Int64') FROM {SAMPLES} WHERE {drawn}"),
    )
    .await?;
    if let Some(batch) = span.iter().find(|b| b.num_rows() > 0) {
        let (lo, hi) = (batch.column(0).as_primitive::<Int64Type>(), batch.column(1).as_primitive::<Int64Type>());
        if lo.is_valid(0) && hi.is_valid(0) {
            series.sampled = Some(Timeline { origin: lo.value(0), span: hi.value(0).saturating_sub(lo.value(0)) });
        }
    }
    series.sample_count =
        crate::query::single_count(context, &format!("SELECT count(*) FROM {SAMPLES} WHERE {drawn}")).await?;
    let source = |table: &str| format!("SELECT coalesce(CAST(source AS VARCHAR), '') AS name FROM {table}");
    series.sources =
        names(context, &format!("{} UNION ALL {} WHERE {drawn}", source(RequestRow::NAME), source(SAMPLES))).await?;
    series.models = names(
        context,
        &format!("SELECT CAST(model AS VARCHAR) AS name FROM {} WHERE model IS NOT NULL", RequestRow::NAME),
    )
    .await?;
    for &metric in SAMPLE_METRICS {
        let samples = match series.sampled {
            Some(timeline) => sample_series(context, metric, &drawn, &timeline, options).await?,
            None => SampleSeries::default(),
        };
        series.samples.push((metric, samples));
    }
    Ok(series)
}

/// The distinct values of column `name` of `source`: the first [`NAMED`] and their count.
async fn names(context: &datafusion::prelude::SessionContext, source: &str) -> Result<Names, QueryError> {
    let count = crate::query::single_count(context, &format!("SELECT count(DISTINCT name) FROM ({source})")).await?;
    let mut first = Vec::new();
    for batch in collect(context, &format!("SELECT DISTINCT name FROM ({source}) ORDER BY name LIMIT {NAMED}")).await? {
        let column = cast(batch.column(0), &DataType::Utf8)?;
        first.extend(column.as_string::<i32>().iter().flatten().map(str::to_owned));
    }
    Ok(Names { first, count })
}

/// The `count` values of `latency` in ascending order, at the ranks of [`cdf_ranks`].
async fn cdf(
    context: &datafusion::prelude::SessionContext,
    latency: Latency,
    count: u64,
    points: usize,
) -> Result<Cdf, QueryError> {
    let mut ranks = cdf_ranks(count as usize, points).into_iter().peekable();
    let mut out = Cdf { count, points: Vec::new() };
    if count == 0 {
        return Ok(out);
    }
    let column = latency.name();
    let sorted = format!("SELECT {column} FROM {ROWS} WHERE {column} IS NOT NULL ORDER BY {column}");
    let mut stream = context.sql(&sorted).await?.execute_stream().await?;
    let mut seen = 0;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let values = batch.column(0).as_primitive::<Float64Type>();
        let end = seen + batch.num_rows();
        while let Some(&rank) = ranks.peek().filter(|&&r| r < end) {
            out.points.push((rank, values.value(rank - seen)));
            ranks.next();
        }
        seen = end;
    }
    if seen as u64 != count {
        return Err(datafusion::error::DataFusionError::Internal(format!(
            "{count} values of {column} counted, {seen} sorted"
        ))
        .into());
    }
    Ok(out)
}

/// Per time bin of the arrivals, the p50 and p95 of `latency` over the requests that arrived in it.
async fn binned(
    context: &datafusion::prelude::SessionContext,
    latency: Latency,
    timeline: &Timeline,
    bins: usize,
) -> Result<Vec<BinQuantiles>, QueryError> {
    let source = format!(
        "SELECT CAST({bin} AS VARCHAR) AS k0, {column} AS v FROM {ROWS} WHERE a IS NOT NULL",
        bin = timeline.bin_sql("a", bins),
        column = latency.name()
    );
    let ranked = distributions(context, &source, 1, &[0.5, 0.95], None).await?;
    let mut points: Vec<BinQuantiles> = ranked
        .into_iter()
        .filter_map(|(key, walk)| {
            let bin = key.first()?.parse().ok()?;
            let q = walk.quantiles();
            Some((bin, q[0]?, q[1]?))
        })
        .collect();
    points.sort_by_key(|p| p.0);
    Ok(points)
}

/// One metric per instance: the most sampled instances, whole or reduced to bin maxima.
async fn sample_series(
    context: &datafusion::prelude::SessionContext,
    metric: &str,
    drawn: &str,
    timeline: &Timeline,
    options: &SeriesOptions,
) -> Result<SampleSeries, QueryError> {
    let instance = format!("coalesce(CAST(instance AS VARCHAR), '{NULL_GROUP}')");
    let of = format!("{drawn} AND metric = '{metric}'");
    let mut counts: Vec<(String, u64)> = Vec::new();
    for batch in collect(context, &format!("SELECT {instance}, count(*) FROM {SAMPLES} WHERE {of} GROUP BY 1")).await? {
        let names = cast(batch.column(0), &DataType::Utf8)?;
        let n = cast(batch.column(1), &DataType::Int64)?;
        let (names, n) = (names.as_string::<i32>(), n.as_primitive::<Int64Type>());
        counts.extend((0..batch.num_rows()).map(|i| (names.value(i).to_owned(), n.value(i).max(0) as u64)));
    }
    // Most samples first; equal counts in name order.
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut series = SampleSeries { instances: counts.len(), drawn: Vec::new() };
    for (name, n) in counts.into_iter().take(options.max_instances) {
        let quoted = name.replace('\'', "''");
        let reduced = n as usize > options.sample_points;
        let query = if reduced {
            format!(
                "SELECT {bin} AS bin, max(value) FROM {SAMPLES} WHERE {of} AND {instance} = '{quoted}' \
                 GROUP BY 1 ORDER BY 1",
                bin = timeline.bin_sql("arrow_cast(time, 'Int64')", options.sample_points)
            )
        } else {
            format!(
                "SELECT arrow_cast(time, 'Int64'), value FROM {SAMPLES} WHERE {of} AND {instance} = '{quoted}' \
                 ORDER BY time, ordinal"
            )
        };
        let mut points = Vec::new();
        for batch in collect(context, &query).await? {
            let (at, values) =
                (batch.column(0).as_primitive::<Int64Type>(), batch.column(1).as_primitive::<Float64Type>());
            for i in 0..batch.num_rows() {
                let t =
                    if reduced { timeline.bin_start(at.value(i) as usize, options.sample_points) } else { at.value(i) };
                points.push((t, values.value(i)));
            }
        }
        series.drawn.push(DrawnInstance { instance: name, points, reduced });
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use infertrace_query::{QueryOptions, Session};
    use infertrace_schema::{EngineSample, RequestRow, metrics};

    use super::*;
    use crate::tests::{S, write};

    fn options() -> SeriesOptions {
        SeriesOptions {
            cdfs: vec![Latency::Ttft, Latency::Tpot],
            cdf_points: 3,
            over_time: vec![Latency::Ttft],
            time_bins: 60,
            sample_points: 600,
            max_instances: 2,
        }
    }

    fn series(requests: &[RequestRow], samples: &[EngineSample], options: &SeriesOptions) -> Series {
        let dir = tempfile::tempdir().unwrap();
        let dataset = write(&dir.path().join("ds"), requests, samples);
        let session = Session::open(&[dataset], &QueryOptions::default()).unwrap();
        session.block_on(series_over(session.datasets(), options)).unwrap()
    }

    #[test]
    fn cdf_ranks_keep_the_ends_and_space_evenly() {
        assert_eq!(cdf_ranks(3, 512), [0, 1, 2]);
        assert_eq!(cdf_ranks(0, 512), Vec::<usize>::new());
        // 11 values at 3 points: ranks 0, round(10 / 2) = 5, 10.
        assert_eq!(cdf_ranks(11, 3), [0, 5, 10]);
        // 10 values at 4 points: i × 9 / 3 = 0, 3, 6, 9.
        assert_eq!(cdf_ranks(10, 4), [0, 3, 6, 9]);
        // 1000 values at 512 points: i = 1 → round(999 / 511) = round(1.955) = 2; i = 511 → 999.
        let ranks = cdf_ranks(1000, 512);
        assert_eq!(ranks.len(), 512);
        assert_eq!(&ranks[..3], [0, 2, 4]);
        assert_eq!(ranks[511], 999);
    }

    #[test]
    fn timelines_bin_from_the_first_instant() {
        let timeline = Timeline { origin: 100 * S, span: 60 * S };
        // 60 bins of 1 s: t = 100 s → 0, 100.5 s → 0, 130 s → 30, the end (160 s) → the last bin.
        assert_eq!(timeline.bin(100 * S, 60), 0);
        assert_eq!(timeline.bin(100 * S + S / 2, 60), 0);
        assert_eq!(timeline.bin(130 * S, 60), 30);
        assert_eq!(timeline.bin(160 * S, 60), 59);
        assert_eq!(Timeline { origin: 5, span: 0 }.bin(5, 60), 0);
        // Bin 7 of 600 over 600 s starts at 7 s.
        assert_eq!(Timeline { origin: S, span: 600 * S }.bin_start(7, 600), 8 * S);
    }

    #[test]
    fn cdfs_read_the_values_at_their_ranks_and_bins_take_quantiles_of_their_arrivals() {
        let row = |arrival_s: i64, ttft: f64| RequestRow {
            source: "b".into(),
            model: Some("m".into()),
            arrival_time: Some(arrival_s * S),
            ttft_s: Some(ttft),
            ..RequestRow::default()
        };
        // Span 0..60 s, 60 bins of 1 s. Bin 0: 1, 2, 3, 4, 10 → p50 3, p95 at h = 3.8: 4 + 0.8 × 6 = 8.8.
        // Bin 59: the last arrival alone (60 s falls in the last bin). A row without arrival counts in the CDF
        // only; an infinite TTFT nowhere.
        let mut rows = vec![row(0, 3.0), row(0, 1.0), row(0, 10.0), row(0, 2.0), row(0, 4.0), row(60, 0.5)];
        rows.push(RequestRow { arrival_time: None, ..row(0, 7.0) });
        rows.push(row(30, f64::INFINITY));
        let series = series(&rows, &[], &options());
        assert_eq!(series.arrivals, Some(Timeline { origin: 0, span: 60 * S }));
        // TTFT sorted: 0.5 1 2 3 4 7 10; 7 values at 3 points: ranks 0, 3, 6.
        let (latency, ttft) = &series.cdfs[0];
        assert_eq!(*latency, Latency::Ttft);
        assert_eq!(*ttft, Cdf { count: 7, points: vec![(0, 0.5), (3, 3.0), (6, 10.0)] });
        assert_eq!(series.cdfs[1], (Latency::Tpot, Cdf::default()));
        let bins = &series.over_time[0].1;
        assert_eq!(bins.len(), 2);
        assert_eq!((bins[0].0, bins[0].1), (0, 3.0));
        assert!((bins[0].2 - 8.8).abs() < 1e-12);
        assert_eq!(bins[1], (59, 0.5, 0.5));
        // No samples: no sample timeline, one source and one model.
        assert_eq!(series.sampled, None);
        assert_eq!(series.sources, Names { first: vec!["b".into()], count: 1 });
        assert_eq!(series.models, Names { first: vec!["m".into()], count: 1 });
    }

    #[test]
    fn sample_series_keep_the_most_sampled_instances_and_each_bins_maximum() {
        let sample = |t: i64, instance: Option<&str>, metric: &str, value: f64| EngineSample {
            time: t,
            source: format!("src-{}", instance.unwrap_or("none")).into(),
            instance: instance.map(Into::into),
            metric: metric.into(),
            value,
            ..EngineSample::default()
        };
        // `long`: 1,200 KV samples, one every 0.5 s from 0 to 599.5 s, values 0, 1, 2, …; the timeline runs
        // to 600 s (the queue sample), so bin 0 of 600 holds samples 0 and 1, its maximum 1.
        let mut samples: Vec<EngineSample> =
            (0..1200).map(|i| sample(i * S / 2, Some("long"), metrics::KV_CACHE_USAGE, i as f64)).collect();
        // `short` (3 samples, the second two at one instant: input order kept) and a null instance (2), and
        // `tiny` (1): with 2 instances drawn, `tiny` is left out.
        samples.push(sample(5 * S, Some("short"), metrics::KV_CACHE_USAGE, 0.1));
        samples.push(sample(7 * S, Some("short"), metrics::KV_CACHE_USAGE, 0.3));
        samples.push(sample(7 * S, Some("short"), metrics::KV_CACHE_USAGE, 0.2));
        samples.push(sample(S, None, metrics::KV_CACHE_USAGE, 0.5));
        samples.push(sample(2 * S, None, metrics::KV_CACHE_USAGE, f64::NAN));
        samples.push(sample(3 * S, None, metrics::KV_CACHE_USAGE, 0.6));
        samples.push(sample(4 * S, Some("tiny"), metrics::KV_CACHE_USAGE, 0.9));
        samples.push(sample(600 * S, Some("q"), metrics::REQUESTS_WAITING, 4.0));
        // Another metric is not drawn and does not stretch the timeline.
        samples.push(sample(900 * S, Some("q"), "gpu_utilization", 0.3));
        let series = series(&[], &samples, &options());
        assert_eq!(series.arrivals, None);
        assert_eq!(series.sampled, Some(Timeline { origin: 0, span: 600 * S }));
        // 1,200 + 3 + 2 (the NaN is not counted) + 1 + 1.
        assert_eq!(series.sample_count, 1207);
        let (metric, kv) = &series.samples[0];
        assert_eq!(*metric, metrics::KV_CACHE_USAGE);
        assert_eq!(kv.instances, 4);
        assert_eq!(kv.drawn.len(), 2);
        let long = &kv.drawn[0];
        assert_eq!((long.instance.as_str(), long.reduced, long.points.len()), ("long", true, 600));
        assert_eq!(long.points[0], (0, 1.0));
        assert_eq!(long.points[1], (S, 3.0));
        assert_eq!(long.points[599], (599 * S, 1199.0));
        let short = &kv.drawn[1];
        assert_eq!(short.instance, "short");
        assert_eq!(short.points, [(5 * S, 0.1), (7 * S, 0.3), (7 * S, 0.2)]);
        assert!(!short.reduced);
        let (_, queue) = &series.samples[1];
        assert_eq!(queue.drawn, [DrawnInstance { instance: "q".into(), points: vec![(600 * S, 4.0)], reduced: false }]);
        // Every other drawn metric is there, without instances.
        let drawn: Vec<&str> = series.samples.iter().map(|(metric, _)| *metric).collect();
        assert_eq!(drawn, SAMPLE_METRICS);
        assert!(series.samples[2..].iter().all(|(_, s)| s.instances == 0 && s.drawn.is_empty()));
        // Sources of the drawn metrics' samples, in byte order; the utilization sample's is the same `src-q`.
        assert_eq!(series.sources.count, 5);
        assert_eq!(series.sources.first, ["src-long", "src-none", "src-q", "src-short", "src-tiny"]);
        assert_eq!(series.models, Names::default());
    }
}
