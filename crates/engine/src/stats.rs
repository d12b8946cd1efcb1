//! Exact distribution summaries.
//!
//! Quantiles use linear interpolation between closest ranks (numpy's default, Hyndman–Fan type 7): over the `n`
//! sorted values `x[0..n]`, quantile `q` is at position `h = (n - 1) q`, and the result is
//! `x[⌊h⌋] + (h - ⌊h⌋) (x[⌊h⌋ + 1] - x[⌊h⌋])`. One value gives that value for every quantile.

use serde::Serialize;

/// Name of the quantile method, as recorded in the JSON output.
pub const QUANTILE_METHOD: &str = "linear";

/// Count, mean, quantiles and maximum of one measured duration.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Values summarised (rows where the value is present).
    pub count: u64,
    /// Arithmetic mean; null when `count` is 0.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
}

impl Distribution {
    /// Summarises `values` (any order; NaNs must not occur).
    pub fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        let q = |p| quantile(&values, p);
        Self {
            count: values.len() as u64,
            mean: mean(&values),
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            max: values.last().copied(),
        }
    }
}

/// Count, means, 95th percentile and maximum of one sampled engine metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SampleSummary {
    /// Samples summarised.
    pub count: u64,
    /// Mean over samples.
    pub mean: Option<f64>,
    /// Mean over time: each sample holds until the next one, `Σ vₖ (tₖ₊₁ − tₖ) / (t_last − t_first)` with the
    /// samples in time order (the last sample closes the span and weighs nothing); null when the samples span no
    /// time. Scrapes taken at irregular intervals (bursts while a run is busy) bias `mean`, not this.
    pub time_weighted_mean: Option<f64>,
    /// 95th percentile (over samples).
    pub p95: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
}

impl SampleSummary {
    /// Summarises the `(time in ns, value)` points of one series, in any order (ties keep their order).
    pub fn of(mut points: Vec<(i64, f64)>) -> Self {
        points.sort_by_key(|p| p.0);
        let span = match (points.first(), points.last()) {
            (Some(first), Some(last)) if last.0 > first.0 => Some((last.0 - first.0) as f64),
            _ => None,
        };
        let time_weighted_mean =
            span.map(|span| points.windows(2).map(|w| w[0].1 * (w[1].0 - w[0].0) as f64).sum::<f64>() / span);
        let mut values: Vec<f64> = points.into_iter().map(|p| p.1).collect();
        values.sort_by(f64::total_cmp);
        Self {
            count: values.len() as u64,
            mean: mean(&values),
            time_weighted_mean,
            p95: quantile(&values, 0.95),
            max: values.last().copied(),
        }
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Quantile `p` (0..=1) of `sorted` by linear interpolation; `None` when empty.
pub fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let h = last as f64 * p;
    let lower = h.floor() as usize;
    let upper = (lower + 1).min(last);
    Some(sorted[lower] + (h - lower as f64) * (sorted[upper] - sorted[lower]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 10.0];
        // h = 4 p: p50 → x[2]; p90 → 3.6 → 4 + 0.6 × 6; p95 → 3.8; p99 → 3.96.
        assert_eq!(quantile(&sorted, 0.5), Some(3.0));
        assert!((quantile(&sorted, 0.9).unwrap() - 7.6).abs() < 1e-12);
        assert!((quantile(&sorted, 0.95).unwrap() - 8.8).abs() < 1e-12);
        assert!((quantile(&sorted, 0.99).unwrap() - 9.76).abs() < 1e-12);
        assert_eq!(quantile(&sorted, 1.0), Some(10.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        // Even count: the median is the mean of the middle two.
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
    }

    #[test]
    fn time_weighted_mean_holds_each_sample_until_the_next() {
        // 0.2 for 1 s, 0.8 for 3 s, then the last point: (0.2 + 2.4) / 4 = 0.65; the plain mean is 1.5 / 3 = 0.5.
        let s = SampleSummary::of(vec![(4_000_000_000, 0.5), (0, 0.2), (1_000_000_000, 0.8)]);
        assert_eq!(s.count, 3);
        assert!((s.mean.unwrap() - 0.5).abs() < 1e-12);
        assert!((s.time_weighted_mean.unwrap() - 0.65).abs() < 1e-12);
        assert_eq!(s.max, Some(0.8));
        // All at one instant: no span, no time-weighted mean.
        assert_eq!(SampleSummary::of(vec![(7, 1.0), (7, 3.0)]).time_weighted_mean, None);
        assert_eq!(SampleSummary::of(vec![]), SampleSummary::default());
    }

    #[test]
    fn distributions_sort_their_input() {
        let d = Distribution::of(vec![4.0, 1.0, 10.0, 3.0, 2.0]);
        assert_eq!(d.count, 5);
        assert_eq!(d.mean, Some(4.0));
        assert_eq!(d.p50, Some(3.0));
        assert_eq!(d.max, Some(10.0));
        assert_eq!(Distribution::of(vec![]), Distribution::default());
    }
}
