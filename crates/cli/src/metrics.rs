//! `infertrace metrics`: open datasets, compute with the engine, render a terminal report or JSON.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use infertrace_engine::energy::JOULES_PER_KWH;
use infertrace_engine::format::{count, dollars, percent, quantity, rate, seconds, significant};
use infertrace_engine::{
    Cost, CostProfile, Difference, Distribution, Energy, EnergySource, GroupBy, GroupMetrics, Latency, Metrics,
    MetricsOptions, SampleSummary, compute_dirs,
};
use infertrace_query::QueryOptions;
use infertrace_schema::SourceKind;

use crate::summary::render_table;

/// Opens every dataset of `paths` and computes the metrics of their rows taken together, with the query engine's
/// defaults.
pub fn metrics(paths: &[PathBuf], options: &MetricsOptions) -> Result<Metrics> {
    metrics_with(paths, options, &QueryOptions::default())
}

/// Computes the metrics of the rows of every dataset of `paths` taken together, streaming them through the query
/// engine as `query` allows (memory budget, spill directory, threads).
pub fn metrics_with(paths: &[PathBuf], options: &MetricsOptions, query: &QueryOptions) -> Result<Metrics> {
    compute_dirs(paths, options, query).map_err(|e| crate::stream::engine_error(e, query, "compute the metrics"))
}

/// Reads and checks the cost profile at `path` (TOML; see `infertrace_engine::cost`).
pub fn read_cost_profile(path: &Path) -> Result<CostProfile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read cost profile {}", path.display()))?;
    let profile: CostProfile = toml::from_str(&text).map_err(|e| {
        let (line, message) = infertrace_model::toml_error(&text, &e);
        anyhow::anyhow!("invalid cost profile {}: line {line}: {message}", path.display())
    })?;
    profile.validate().map_err(|e| anyhow::anyhow!("invalid cost profile {}: {e}", path.display()))?;
    Ok(profile)
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
    // Broken down by source, each says what its rows are when they are not all measured.
    let kinds: BTreeSet<SourceKind> = match metrics.by {
        Some(GroupBy::Source) => metrics.groups.keys().map(|source| SourceKind::of(source)).collect(),
        _ => BTreeSet::new(),
    };
    let all = match kinds.len() {
        0 | 1 => "all requests".to_owned(),
        _ => {
            let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            format!("all requests ({} taken together; each source below)", kinds.join(" and "))
        }
    };
    out.push_str(&render_group(&all, &metrics.overall));
    if let Some(energy) = &metrics.energy {
        out.push('\n');
        render_energy(&mut out, energy);
    }
    if let Some(by) = metrics.by {
        for (key, group) in &metrics.groups {
            out.push('\n');
            let title = match SourceKind::of(key) {
                SourceKind::Measured if kinds.len() <= 1 => format!("{} = {key}", by.column()),
                kind => format!("{} = {key} ({})", by.column(), kind.as_str()),
            };
            out.push_str(&render_group(&title, group));
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
    let classes: Vec<String> = g
        .workload
        .iter()
        .filter(|(_, n)| n.stored + n.inferred > 0)
        .map(|(class, n)| match (n.stored, n.inferred) {
            (stored, 0) => format!("{class} {}", count(stored)),
            (0, inferred) => format!("{class} {} (inferred)", count(inferred)),
            (stored, inferred) => format!("{class} {} ({} inferred)", count(stored + inferred), count(inferred)),
        })
        .collect();
    if !classes.is_empty() {
        writeln!(out, "workload: {}", classes.join(", ")).unwrap();
    }
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
    if let Some(cost) = &g.cost {
        render_cost(&mut out, cost);
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

fn render_cost(out: &mut String, c: &Cost) {
    let mut parts = Vec::new();
    for (name, value) in [
        ("accelerators", c.accelerator_dollars),
        ("storage", c.storage_dollars),
        ("I/O", c.io_dollars),
        ("energy", c.energy_dollars),
        ("tokens", c.token_dollars),
    ] {
        if value.is_some() {
            parts.push(format!("{name} {}", dollars(value)));
        }
    }
    let mut line = format!("cost: {}", dollars(c.total_dollars));
    if let Some(hours) = c.hours {
        write!(line, " over {} h", quantity(Some(hours))).unwrap();
    }
    if c.share.is_some_and(|s| s < 1.0) {
        write!(line, " ({} of the fleet)", percent(c.share)).unwrap();
    }
    if !parts.is_empty() {
        write!(line, ": {}", parts.join(", ")).unwrap();
    }
    if let Some(kwh) = c.energy_kwh {
        let from = match c.energy_from {
            Some(EnergySource::Measured) => "measured",
            _ => "nameplate",
        };
        write!(line, "; {} kWh ({from})", significant(kwh, "")).unwrap();
    }
    writeln!(out, "{line}").unwrap();
    let outcome = if c.outcome_known { "" } else { "; outcomes unknown, every request counted" };
    writeln!(
        out,
        "per successful answer: {} ({} answers{outcome})",
        dollars(c.per_successful_answer),
        count(c.successful_answers)
    )
    .unwrap();
    writeln!(
        out,
        "tokens per $: {} raw, {} effective ({} of raw), {} answer tokens; per kWh: {} raw, {} effective",
        quantity(c.raw_tokens_per_dollar),
        quantity(c.effective_tokens_per_dollar),
        percent(c.effective_fraction),
        quantity(c.effective_answer_tokens_per_dollar),
        quantity(c.raw_tokens_per_kwh),
        quantity(c.effective_tokens_per_kwh)
    )
    .unwrap();
    if c.api_equivalent_dollars.is_some() {
        writeln!(out, "at the profile's per-token prices: {}", dollars(c.api_equivalent_dollars)).unwrap();
    }
}

/// The measured energy: the total and tokens per kWh, then a table of the instances.
fn render_energy(out: &mut String, energy: &Energy) {
    let per_kwh = match energy.tokens_per_kwh {
        Some(tokens) => {
            format!(
                "per kWh: {} tokens, {} output tokens",
                quantity(Some(tokens)),
                quantity(energy.output_tokens_per_kwh)
            )
        }
        None => "no request tokens counted".to_owned(),
    };
    writeln!(
        out,
        "== energy (measured) ==\n{} kWh over {} instances; {per_kwh}",
        significant(energy.kwh, ""),
        count(energy.instances.len() as u64)
    )
    .unwrap();
    let rows: Vec<Vec<String>> = energy
        .instances
        .iter()
        .map(|i| {
            vec![
                i.instance.clone(),
                i.source.clone(),
                i.how(),
                format!("{} kWh", significant(i.joules / JOULES_PER_KWH, "")),
                seconds(i.span_s),
                i.mean_power_w.map_or("-".to_owned(), |w| format!("{} W", significant(w, ""))),
                count(i.samples),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&render_table(&["instance", "source", "from", "energy", "span", "mean power", "samples"], &rows, 1));
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
