//! `infertrace metrics`: open datasets, compute with the engine, render a terminal report or JSON.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use infertrace_engine::format::{count, percent, rate, seconds, significant};
use infertrace_engine::{
    Difference, Distribution, GroupMetrics, Latency, Metrics, MetricsOptions, SampleSummary, compute,
};
use infertrace_schema::Dataset;

use crate::summary::render_table;

/// Opens every dataset of `paths` and computes the metrics of their rows taken together.
pub fn metrics(paths: &[PathBuf], options: &MetricsOptions) -> Result<Metrics> {
    Ok(compute(&open_datasets(paths)?, options))
}

/// Opens every dataset of `paths`; the error names the first that cannot be read.
pub fn open_datasets(paths: &[PathBuf]) -> Result<Vec<Dataset>> {
    paths
        .iter()
        .map(|path| Dataset::open(path).with_context(|| format!("cannot read dataset {}", path.display())))
        .collect()
}

/// The metrics as pretty JSON with a final newline (the object of `schemas/metrics.schema.json`).
pub fn metrics_json(metrics: &Metrics) -> String {
    let mut text = serde_json::to_string_pretty(metrics).expect("metrics always serialize");
    text.push('\n');
    text
}

/// A comparison as pretty JSON with a final newline: an array of `{path, a, b, delta, relative}`.
pub fn compare_json(rows: &[Difference]) -> String {
    let mut text = serde_json::to_string_pretty(rows).expect("differences always serialize");
    text.push('\n');
    text
}

/// A comparison as a table: figure, A, B, B − A, and the relative change in percent.
pub fn render_compare(rows: &[Difference]) -> String {
    if rows.is_empty() {
        return "no figure differs\n".to_owned();
    }
    let number = |v: Option<f64>| {
        v.map_or_else(|| "-".to_owned(), |v| format!("{v:.6}").trim_end_matches('0').trim_end_matches('.').to_owned())
    };
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|d| {
            vec![
                d.path.clone(),
                number(d.a),
                number(d.b),
                number(d.delta),
                d.relative.map_or_else(|| "-".to_owned(), |r| format!("{:+.1}%", r * 100.0)),
            ]
        })
        .collect();
    render_table(&["figure", "A", "B", "B - A", "change"], &table, 1)
}

/// The metrics as readable text: the overall figures, then each group's.
pub fn render_metrics(metrics: &Metrics) -> String {
    let mut out = String::new();
    if !metrics.slo.is_empty() {
        let bounds: Vec<String> =
            metrics.slo.iter().map(|(latency, bound)| format!("{latency} ≤ {}", seconds(*bound))).collect();
        writeln!(out, "slo: {}", bounds.join(", ")).unwrap();
    }
    writeln!(out, "quantiles: linear interpolation between closest ranks").unwrap();
    out.push('\n');
    out.push_str(&render_group("all requests", &metrics.overall));
    if let Some(by) = metrics.by {
        for (key, group) in &metrics.groups {
            out.push('\n');
            out.push_str(&render_group(&format!("{} = {key}", by.column()), group));
        }
    }
    out
}

fn render_group(title: &str, g: &GroupMetrics) -> String {
    let mut out = String::new();
    writeln!(out, "== {title} ==").unwrap();
    let statuses: Vec<String> =
        g.status.iter().filter(|(_, n)| **n > 0).map(|(s, n)| format!("{s} {}", count(*n))).collect();
    writeln!(
        out,
        "requests: {} ({}); success rate {}",
        count(g.requests),
        if statuses.is_empty() { "none".to_owned() } else { statuses.join(", ") },
        percent(g.success_rate)
    )
    .unwrap();
    let t = &g.throughput;
    writeln!(
        out,
        "throughput: {} requests/s, {} input tokens/s, {} output tokens/s over {}",
        rate(t.requests_per_s),
        rate(t.input_tokens_per_s),
        rate(t.output_tokens_per_s),
        t.span_s.map_or("no span".to_owned(), seconds)
    )
    .unwrap();
    if let Some(goodput) = &g.goodput {
        writeln!(
            out,
            "goodput: {} requests/s, {} of requests meet every SLO ({})",
            rate(goodput.requests_per_s),
            percent(goodput.fraction),
            count(goodput.requests)
        )
        .unwrap();
    }
    let cache = &g.cache;
    let mut hit = format!("cache hit rate: {}", percent(cache.total.hit_rate));
    if cache.total.requests > 0 {
        write!(hit, " of {} input tokens ({} requests)", count(cache.total.input_tokens), count(cache.total.requests))
            .unwrap();
    }
    let tiers: Vec<String> = cache
        .tiers
        .iter()
        .filter(|(_, rate)| rate.requests > 0)
        .map(|(tier, rate)| format!("{tier} {}", percent(rate.hit_rate)))
        .collect();
    if !tiers.is_empty() {
        write!(hit, "; {}", tiers.join(", ")).unwrap();
    }
    writeln!(out, "{hit}").unwrap();
    let reuse = &cache.reuse;
    if reuse.requests > 0 {
        writeln!(
            out,
            "prefix reuse (unbounded cache): {} of {} tokens ({} requests)",
            percent(reuse.hit_rate),
            count(reuse.tokens),
            count(reuse.requests)
        )
        .unwrap();
    }
    let depth = &g.reasoning;
    if depth.requests > 0 {
        writeln!(
            out,
            "reasoning depth R: {} ({} reasoning / {} answer tokens, {} requests)",
            depth.multiplier.map_or("-".to_owned(), |r| significant(r, "")),
            count(depth.reasoning_tokens),
            count(depth.answer_tokens),
            count(depth.requests)
        )
        .unwrap();
    }
    let split = &g.time_split;
    if split.requests > 0 {
        writeln!(
            out,
            "time split: queue {}, prefill {}, decode {} of e2e ({} requests)",
            percent(split.queue),
            percent(split.prefill),
            percent(split.decode),
            count(split.requests)
        )
        .unwrap();
    }
    let rows: Vec<Vec<String>> =
        g.latency.iter().filter(|(_, d)| d.count > 0).map(|(latency, d)| duration_row(*latency, d)).collect();
    if !rows.is_empty() {
        out.push('\n');
        out.push_str(&render_table(&["duration", "count", "mean", "p50", "p90", "p95", "p99", "max"], &rows, 1));
    }
    if !g.ttft_under_load.is_empty() {
        let rows: Vec<Vec<String>> = g
            .ttft_under_load
            .iter()
            .map(|b| {
                let mut row = duration_row(Latency::Ttft, &b.ttft);
                row[0] = match (b.in_flight_min, b.in_flight_max) {
                    (low, high) if low == high => low.to_string(),
                    (low, high) => format!("{low}-{high}"),
                };
                row
            })
            .collect();
        out.push('\n');
        out.push_str(&render_table(&["in flight", "count", "ttft mean", "p50", "p90", "p95", "p99", "max"], &rows, 1));
    }
    if !g.engine.is_empty() {
        let rows: Vec<Vec<String>> = g
            .engine
            .iter()
            .map(|(instance, s)| {
                let mut row = vec![instance.clone()];
                row.extend(sample_cells(&s.kv_cache_usage, |v| percent(Some(v))));
                row.extend(sample_cells(&s.requests_waiting, |v| significant(v, "")));
                row
            })
            .collect();
        let headers = ["instance", "kv usage n", "time mean", "p95", "max", "waiting n", "time mean", "p95", "max"];
        out.push('\n');
        out.push_str(&render_table(&headers, &rows, 1));
    }
    out
}

fn duration_row(latency: Latency, d: &Distribution) -> Vec<String> {
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), seconds);
    vec![
        latency.column().to_owned(),
        count(d.count),
        cell(d.mean),
        cell(d.p50),
        cell(d.p90),
        cell(d.p95),
        cell(d.p99),
        cell(d.max),
    ]
}

fn sample_cells(s: &SampleSummary, format: impl Fn(f64) -> String) -> [String; 4] {
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), &format);
    [count(s.count), cell(s.time_weighted_mean), cell(s.p95), cell(s.max)]
}
