//! The report's charts, each built from rows, samples or metrics into one `<svg>` (or a "no data" panel).

use infertrace_engine::format::{count, percent, seconds, significant};
use infertrace_engine::series::{self, Cdf, SampleSeries, SeriesOptions};
use infertrace_engine::{Distribution, GroupMetrics, HitRate, Latency};
use infertrace_schema::CacheTier;

use crate::svg::{Axis, Chart, Series, no_data, steps, truncate};

/// Colours of the series, chosen to stay distinct on screen and in print.
pub(crate) const BLUE: &str = "#1f77b4";
pub(crate) const ORANGE: &str = "#ff7f0e";
pub(crate) const GREEN: &str = "#2ca02c";
pub(crate) const RED: &str = "#d62728";
pub(crate) const PURPLE: &str = "#9467bd";
pub(crate) const BROWN: &str = "#8c564b";
pub(crate) const PINK: &str = "#e377c2";
pub(crate) const CYAN: &str = "#17becf";
pub(crate) const GREY: &str = "#7f7f7f";
/// One colour per drawn instance.
const INSTANCE_COLOURS: [&str; MAX_INSTANCES] = [BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, CYAN];

/// Most points of a CDF line: the values at this many evenly spaced ranks (min and max always among them).
pub(crate) const CDF_POINTS: usize = 512;
/// Time bins of the latency-over-time charts.
pub(crate) const TIME_BINS: usize = 60;
/// Most points of a sample series; longer series are reduced to the maximum of this many time bins.
pub(crate) const SAMPLE_POINTS: usize = 600;
/// Most instances drawn in a sample chart (the most sampled).
pub(crate) const MAX_INSTANCES: usize = 8;

/// The durations that get a CDF, with their colours.
pub(crate) const CDFS: [(Latency, &str); 4] =
    [(Latency::Ttft, BLUE), (Latency::Tpot, ORANGE), (Latency::E2e, GREEN), (Latency::Queue, PURPLE)];
/// The durations drawn over time, with their colours.
pub(crate) const OVER_TIME: [(Latency, &str); 2] = [(Latency::Ttft, BLUE), (Latency::E2e, GREEN)];

/// What the engine computes for these charts.
pub(crate) fn series_options() -> SeriesOptions {
    SeriesOptions {
        cdfs: CDFS.iter().map(|c| c.0).collect(),
        cdf_points: CDF_POINTS,
        over_time: OVER_TIME.iter().map(|c| c.0).collect(),
        time_bins: TIME_BINS,
        sample_points: SAMPLE_POINTS,
        max_instances: MAX_INSTANCES,
    }
}

/// The display name of a duration: `TTFT`, `TPOT`, `E2E`, `queue`.
fn name(latency: Latency) -> &'static str {
    match latency {
        Latency::Ttft => "TTFT",
        Latency::Tpot => "TPOT",
        Latency::E2e => "E2E latency",
        Latency::Queue => "queue time",
        Latency::Prefill => "prefill time",
        Latency::Decode => "decode time",
        Latency::KvTransfer => "KV transfer time",
    }
}

/// A unit for durations up to `max` seconds: (seconds per unit, name).
pub(crate) fn duration_unit(max: f64) -> (f64, &'static str) {
    if max >= 1.0 {
        (1.0, "s")
    } else if max >= 1e-3 {
        (1e-3, "ms")
    } else {
        (1e-6, "µs")
    }
}

/// The empirical CDF of one duration: a step line through (value at rank r, (r + 1) / n) at the ranks the engine
/// read ([`series::cdf_ranks`]), with the p50 and p99 of `distribution` marked.
pub(crate) fn cdf(cdf: &Cdf, which: Latency, colour: &'static str, distribution: &Distribution) -> String {
    let title = format!("{} CDF", name(which));
    let (Some(&(_, min)), Some(&(_, max))) = (cdf.points.first(), cdf.points.last()) else {
        return no_data(&title, &format!("no request has {}", which.column()));
    };
    let n = cdf.count as f64;
    let (unit, unit_name) = duration_unit(max.abs().max(min.abs()));
    let mut points = vec![(min / unit, 0.0)];
    points.extend(cdf.points.iter().map(|&(r, value)| (value / unit, (r + 1) as f64 / n * 100.0)));
    let x = Axis::numeric(min.min(0.0) / unit, max / unit, 6, &format!("{} ({unit_name})", which.column()));
    let y = Axis::numeric(0.0, 100.0, 5, "requests ≤ x (%)");
    let note = format!("{} requests; dashed: p50 and p99", count(cdf.count));
    let mut chart = Chart::new(&title, Some(note), x, y, vec![Series::new(which.column(), colour)]);
    chart.line(&steps(&points), colour, false);
    for (row, (label, value)) in [("p50", distribution.p50), ("p99", distribution.p99)].into_iter().enumerate() {
        if let Some(value) = value {
            chart.marker(value / unit, "#444", &format!("{label} {}", seconds(value)), row);
        }
    }
    chart.finish()
}

/// Where a time axis starts and how long it runs: from the first arrival to the last (the latency charts), or
/// from the first sample to the last (the sample charts; engine clocks need not match the requests').
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Timeline {
    /// The earliest instant (UTC ns).
    pub(crate) origin: i64,
    /// From `origin` to the latest instant, in ns.
    pub(crate) span: i64,
    /// What the instants are: `arrival` or `sample`.
    pub(crate) of: &'static str,
}

impl Timeline {
    /// The engine's timeline of instants that are `of`.
    pub(crate) fn new(timeline: series::Timeline, of: &'static str) -> Self {
        Self { origin: timeline.origin, span: timeline.span, of }
    }

    /// Seconds per unit of the time axis and its name: s up to 20 minutes, min up to 20 hours, else h.
    pub(crate) fn unit(&self) -> (f64, &'static str) {
        let span_s = self.span as f64 / 1e9;
        if span_s <= 1200.0 {
            (1.0, "s")
        } else if span_s <= 72_000.0 {
            (60.0, "min")
        } else {
            (3600.0, "h")
        }
    }

    /// `t` on the time axis (in [`unit`](Self::unit)s since the origin).
    fn at(&self, t: i64) -> f64 {
        (t.saturating_sub(self.origin)) as f64 / 1e9 / self.unit().0
    }

    fn axis(&self) -> Axis {
        let (unit, unit_name) = self.unit();
        let label = format!("time since the first {} ({unit_name})", self.of);
        Axis::numeric(0.0, self.span as f64 / 1e9 / unit, 6, &label)
    }
}

/// Lines through runs of consecutive bins (a gap where a bin is empty); a run of one bin is a dot.
fn draw_runs(chart: &mut Chart, points: &[(usize, f64, f64)], colour: &'static str, dashed: bool) {
    let mut run: Vec<(f64, f64)> = Vec::new();
    let flush = |run: &mut Vec<(f64, f64)>, chart: &mut Chart| {
        match run.as_slice() {
            [] => {}
            [(x, y)] => chart.dot(*x, *y, colour),
            _ => chart.line(run, colour, dashed),
        }
        run.clear();
    };
    let mut previous = None;
    for &(bin, x, y) in points {
        if previous.is_some_and(|p: usize| p + 1 != bin) {
            flush(&mut run, chart);
        }
        run.push((x, y));
        previous = Some(bin);
    }
    flush(&mut run, chart);
}

/// `which` over time: the p50 and p95 of each time bin (`binned`, from the engine), at the bin's centre.
pub(crate) fn over_time(
    binned: &[(usize, f64, f64)],
    timeline: Option<&Timeline>,
    which: Latency,
    colour: &'static str,
) -> String {
    let title = format!("{} over time", name(which));
    let (Some(timeline), false) = (timeline, binned.is_empty()) else {
        return no_data(&title, &format!("no request has both arrival_time and {}", which.column()));
    };
    let max = binned.iter().map(|b| b.2).fold(0.0, f64::max);
    let (unit, unit_name) = duration_unit(max);
    let (time_unit, _) = timeline.unit();
    let bin_width = timeline.span as f64 / 1e9 / TIME_BINS as f64;
    let centre = |bin: usize| (bin as f64 + 0.5) * bin_width / time_unit;
    let note = if timeline.span > 0 {
        format!("p50 and p95 of the requests arriving in each of {TIME_BINS} bins of {}", seconds(bin_width))
    } else {
        "p50 and p95 of the requests (all arrived at one instant)".to_owned()
    };
    let x = timeline.axis();
    let y = Axis::numeric(0.0, max / unit, 5, &format!("{} ({unit_name})", which.column()));
    let legend = vec![Series::new("p50", colour), Series::dashed("p95", colour)];
    let mut chart = Chart::new(&title, Some(note), x, y, legend);
    let at = |pick: fn(&(usize, f64, f64)) -> f64| -> Vec<(usize, f64, f64)> {
        binned.iter().map(|b| (b.0, if timeline.span > 0 { centre(b.0) } else { 0.0 }, pick(b) / unit)).collect()
    };
    draw_runs(&mut chart, &at(|b| b.1), colour, false);
    draw_runs(&mut chart, &at(|b| b.2), colour, true);
    chart.finish()
}

/// An engine sample metric over time, one step line per instance (at most [`MAX_INSTANCES`], the most sampled;
/// series longer than [`SAMPLE_POINTS`] reduced by the engine to each time bin's maximum).
pub(crate) fn samples_over_time(samples: &SampleSeries, timeline: Option<&Timeline>, metric: &str) -> String {
    let (title, unit, scale, least) = sample_chart(metric);
    let Some(timeline) = timeline.filter(|_| !samples.drawn.is_empty()) else {
        return no_data(title, &format!("no {metric} samples"));
    };
    let total = samples.instances;
    let reduced = samples.drawn.iter().any(|d| d.reduced);
    let drawn: Vec<(&str, &[(i64, f64)])> =
        samples.drawn.iter().map(|d| (d.instance.as_str(), d.points.as_slice())).collect();
    let max = drawn.iter().flat_map(|(_, p)| p.iter().map(|p| p.1 * scale)).fold(0.0, f64::max);
    let y = Axis::numeric(0.0, max.max(least), 5, unit);
    let mut notes = Vec::new();
    if total > drawn.len() {
        notes.push(format!("the {} most sampled of {total} instances; {} omitted", drawn.len(), total - drawn.len()));
    }
    if reduced {
        notes.push(format!("long series: maximum of each of {SAMPLE_POINTS} time bins"));
    }
    if let [(instance, _)] = drawn.as_slice() {
        notes.push(format!("instance {}", truncate(instance, 40)));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let legend: Vec<Series> = drawn
        .iter()
        .zip(INSTANCE_COLOURS)
        .map(|((instance, _), colour)| Series::new(&truncate(instance, 28), colour))
        .collect();
    let mut chart = Chart::new(title, note, timeline.axis(), y, legend);
    for ((_, points), colour) in drawn.iter().zip(INSTANCE_COLOURS) {
        let line: Vec<(f64, f64)> = points.iter().map(|&(t, v)| (timeline.at(t), v * scale)).collect();
        if line.len() == 1 {
            chart.dot(line[0].0, line[0].1, colour);
        } else {
            chart.line(&steps(&line), colour, false);
        }
    }
    chart.finish()
}

/// The title, axis label, scale from the canonical unit and least top of the axis of a drawn sample metric.
fn sample_chart(metric: &str) -> (&'static str, &'static str, f64, f64) {
    use infertrace_schema::metrics as m;
    const MB: f64 = 1e-6;
    match metric {
        m::KV_CACHE_USAGE => ("KV-cache usage over time", "KV-cache blocks in use (%)", 100.0, 100.0),
        m::REQUESTS_WAITING => ("Queue depth over time", "requests waiting", 1.0, 1.0),
        m::GPU_POWER_W => ("Accelerator power over time", "power (W)", 1.0, 1.0),
        m::GPU_MEMORY_USED_BYTES => {
            ("Device memory (HBM) in use over time", "in use (GiB)", 1.0 / 1_073_741_824.0, 1.0)
        }
        m::PCIE_TX_BYTES_PER_S => ("PCIe sent over time", "sent (MB/s)", MB, 1.0),
        m::PCIE_RX_BYTES_PER_S => ("PCIe received over time", "received (MB/s)", MB, 1.0),
        m::NVLINK_TX_BYTES_PER_S => ("NVLink sent over time", "sent (MB/s)", MB, 1.0),
        m::NVLINK_RX_BYTES_PER_S => ("NVLink received over time", "received (MB/s)", MB, 1.0),
        _ => ("Samples over time", "value", 1.0, 1.0),
    }
}

/// Compact token counts: `9,999`, `12.3k`, `4.56M`, `7.89G`.
pub(crate) fn compact(n: u64) -> String {
    match n {
        0..10_000 => count(n),
        10_000..1_000_000 => significant(n as f64 / 1e3, "k"),
        1_000_000..1_000_000_000 => significant(n as f64 / 1e6, "M"),
        _ => significant(n as f64 / 1e9, "G"),
    }
}

/// Token-weighted hit rate per tier as bars, and the reuse an unbounded prefix cache would find, labelled with
/// the rate and cached / counted tokens.
pub(crate) fn cache_tiers(group: &GroupMetrics) -> String {
    let title = "Cache hit rate per tier";
    let cache = &group.cache;
    let tier = |t: CacheTier| cache.tiers.get(&t).cloned().unwrap_or_default();
    let from_rate = |r: HitRate| (r.hit_rate, r.cached_tokens, r.input_tokens);
    let bars = [
        ("all tiers", from_rate(cache.total.clone()), BLUE),
        ("gpu", from_rate(tier(CacheTier::Gpu)), GREEN),
        ("cpu", from_rate(tier(CacheTier::Cpu)), ORANGE),
        ("disk", from_rate(tier(CacheTier::Disk)), BROWN),
        ("remote", from_rate(tier(CacheTier::Remote)), PURPLE),
        ("prefix reuse\n(unbounded)", (cache.reuse.hit_rate, cache.reuse.hit_tokens, cache.reuse.tokens), GREY),
    ];
    if bars.iter().all(|b| b.1.0.is_none()) {
        return no_data(title, "no request has cached-token counts, or prefix hashes with a block size");
    }
    let names: Vec<String> = bars.iter().map(|b| b.0.to_owned()).collect();
    let x = Axis::categories(&names, "");
    let y = Axis::numeric(0.0, 100.0, 5, "prompt tokens served from cache (%)");
    let note = "labels: hit rate, cached / counted prompt tokens".to_owned();
    let mut chart = Chart::new(title, Some(note), x, y, Vec::new());
    for (i, (_, (rate, cached, tokens), colour)) in bars.into_iter().enumerate() {
        let centre = i as f64 + 0.5;
        let Some(rate) = rate else {
            chart.label(centre, 0.0, -6.0, "middle", "n/a");
            continue;
        };
        chart.bar(i as f64 + 0.2, i as f64 + 0.8, rate * 100.0, colour);
        // Above the bar, or inside its top when there is no room above.
        let (top, first, second) = if rate > 0.8 { (rate * 100.0, 14.0, 26.0) } else { (rate * 100.0, -18.0, -6.0) };
        chart.label(centre, top, first, "middle", &percent(Some(rate)));
        chart.label(centre, top, second, "middle", &format!("{}/{}", compact(cached), compact(tokens)));
    }
    chart.finish()
}

/// TTFT by load: per bucket of requests in flight at arrival, the p50 and p95 bars, with the count under the
/// bucket's name.
pub(crate) fn ttft_under_load(group: &GroupMetrics) -> String {
    let title = "TTFT under load";
    let buckets = &group.ttft_under_load;
    if buckets.is_empty() {
        return no_data(title, "no request has arrival_time, ttft_s and a completion (time or e2e_s)");
    }
    let max = buckets.iter().filter_map(|b| b.ttft.p95).fold(0.0, f64::max);
    let (unit, unit_name) = duration_unit(max);
    let many = buckets.len() > 8;
    let names: Vec<String> = buckets
        .iter()
        .map(|b| {
            let bucket = match (b.in_flight_min, b.in_flight_max) {
                (low, high) if low == high => low.to_string(),
                (low, _) if many => format!("{low}+"),
                (low, high) => format!("{low}–{high}"),
            };
            format!("{bucket}\nn={}", compact(b.ttft.count))
        })
        .collect();
    let label = if many {
        "other requests in flight at arrival (bucket 4+ holds 4–7, 8+ holds 8–15, …)"
    } else {
        "other requests in flight at arrival"
    };
    let x = Axis::categories(&names, label);
    let y = Axis::numeric(0.0, max / unit, 5, &format!("ttft_s ({unit_name})"));
    let legend = vec![Series::new("p50", BLUE), Series::new("p95", ORANGE)];
    let mut chart = Chart::new(title, None, x, y, legend);
    for (i, bucket) in buckets.iter().enumerate() {
        let i = i as f64;
        if let (Some(p50), Some(p95)) = (bucket.ttft.p50, bucket.ttft.p95) {
            chart.bar(i + 0.15, i + 0.5, p50 / unit, BLUE);
            chart.bar(i + 0.5, i + 0.85, p95 / unit, ORANGE);
        }
    }
    chart.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn timelines_pick_their_unit_by_span() {
        assert_eq!(Timeline { origin: 100 * S, span: 60 * S, of: "arrival" }.unit(), (1.0, "s"));
        assert_eq!(Timeline { origin: 0, span: 1200 * S, of: "arrival" }.unit(), (1.0, "s"));
        assert_eq!(Timeline { origin: 0, span: 3600 * S, of: "arrival" }.unit(), (60.0, "min"));
        assert_eq!(Timeline { origin: 0, span: 86_400 * S, of: "arrival" }.unit(), (3600.0, "h"));
        // 90 s after an origin of 30 s, on a 2-hour axis in minutes: 1.5.
        assert_eq!(Timeline { origin: 30 * S, span: 7200 * S, of: "sample" }.at(120 * S), 1.5);
    }

    #[test]
    fn compact_counts() {
        assert_eq!(compact(9_999), "9,999");
        assert_eq!(compact(12_345), "12.3k");
        assert_eq!(compact(4_560_000), "4.56M");
        assert_eq!(compact(7_890_000_000), "7.89G");
    }
}
