//! The self-contained HTML efficiency report of `infertrace report`: one file with inline CSS and inline SVG
//! charts, readable on a 1280-px screen and printable, that loads nothing from anywhere.
//!
//! [`render`] takes a [`ReportInput`] — the [`Metrics`] the engine computed over the datasets and the [`Series`]
//! it computed for the charts ([`series_options`] says which) — and returns the HTML. Both are computed by queries
//! over the datasets, so a report of a hundred million requests holds a few thousand points. Figures in tables are
//! the engine's, written with [`infertrace_engine::format`] exactly as `infertrace metrics` writes them; the
//! charts are drawn from the rows and samples as follows:
//!
//! - **CDFs** of `ttft_s`, `tpot_s`, `e2e_s` and `queue_s` (one chart each): the rows where the value is present
//!   and finite, whatever their status, sorted; a step line through (value at rank r, (r + 1) / n) at every rank
//!   when n ≤ 512, else at 512 ranks evenly spaced from the smallest to the largest value
//!   (`round(i (n − 1) / 511)`). Dashed markers show the engine's p50 and p99.
//! - **Latency over time** (`ttft_s` and `e2e_s`): rows with an arrival time and the value, binned by arrival
//!   into 60 equal bins from the first arrival (of any row) to the last; per non-empty bin, the p50 and p95
//!   (linear interpolation, as the engine's quantiles) at the bin's centre. Empty bins leave a gap.
//! - **Time axes** count from the first arrival (latency charts) or from the first sample (sample charts: an
//!   engine's clock need not match the requests'), in s for spans up to 20 minutes, min up to 20 hours, else h.
//! - **KV-cache usage and queue depth over time**: the `kv_cache_usage` (drawn in %) and `requests_waiting`
//!   samples, one step line per instance (each sample holds until the next; a null instance is `(none)`); the 8
//!   instances with the most samples are drawn (ties by name) and the chart says how many are omitted. A series
//!   of more than 600 samples is reduced to the maximum of each of 600 equal bins of the samples' timeline, drawn
//!   at the bin's start, so that peaks stay visible.
//! - **Cache hit rate per tier**: the engine's token-weighted hit rates (all tiers, gpu, cpu, disk, remote) and
//!   its unbounded-cache reuse from `prefix_hashes`, as bars labelled with cached / counted tokens; `n/a` where
//!   no row has the column.
//! - **TTFT under load**: the engine's power-of-two buckets of other requests in flight at arrival, p50 and p95
//!   bars per bucket with the bucket's count.
//! - **Tables**: requests and status counts, success rate, throughput, goodput with its SLO, cache hit rate and
//!   reuse, reasoning multiplier R, time split, the latency table (count, mean, p50, p90, p95, p99, max) and
//!   the engine samples per instance.
//!
//! A chart whose columns the datasets lack is a panel saying `no data:` and why, never empty axes: most public
//! traces have no TTFT.
//!
//! Key decisions: the SVG is hand-built (the `svg` module) rather than drawn with a plotting crate, so that the same
//! input gives the same bytes (coordinates with one decimal, maps in `BTreeMap` order, no clock, no fonts
//! measured); every string from a dataset (source, model, instance, title) is HTML-escaped. The report reads
//! no text column but `source`, `model`, `instance`, `status` and `workload_class` (the last two through the
//! metrics), so no prompt, session or request id can reach it.
//!
//! This crate does not read files or print: the CLI opens the datasets and writes the file. With a cost profile
//! (`--cost`), [`cost_section`] adds the cost figures of the metrics as a table.

use std::fmt::Write as _;

use infertrace_engine::energy::JOULES_PER_KWH;
use infertrace_engine::format::{count, dollars, percent, quantity, rate, seconds, significant};
use infertrace_engine::series::{Names, Series, SeriesOptions};
use infertrace_engine::{Distribution, EnergySource, GroupMetrics, Metrics, NULL_GROUP, SampleSummary};

mod charts;
pub mod plot;
mod svg;

use charts::{CDFS, OVER_TIME, Timeline};

/// What a report is made of.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    /// The page's title and heading (the CLI uses the dataset paths as given).
    pub title: &'a str,
    /// The points of the charts, computed by the engine with [`series_options`] over the datasets.
    pub series: &'a Series,
    /// The metrics the engine computed over the same datasets (only `overall` is shown).
    pub metrics: &'a Metrics,
}

/// What the engine computes for the charts ([`infertrace_engine::series::series_over`]).
pub fn series_options() -> SeriesOptions {
    charts::series_options()
}

/// Number of `<svg>` charts (or "no data" panels) every report has; a dataset with accelerator telemetry adds one
/// per drawn resource metric that was sampled (power, device memory, PCIe and NVLink each way).
pub const CHARTS: usize = 10;

/// The sample charts every report has (KV-cache usage and queue depth), the first of
/// [`infertrace_engine::series::SAMPLE_METRICS`].
const ENGINE_CHARTS: usize = 2;

/// The report as one self-contained HTML document.
pub fn render(input: &ReportInput<'_>) -> String {
    let overall = &input.metrics.overall;
    let series = input.series;
    let arrivals = series.arrivals.map(|t| Timeline::new(t, "arrival"));
    let sampled = series.sampled.map(|t| Timeline::new(t, "sample"));
    let mut out = String::with_capacity(64 * 1024);
    let title = escape(input.title);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{title}</h1>\n"
    )
    .unwrap();
    writeln!(out, "<p class=\"meta\">{}</p>\n</header>", provenance(input, overall)).unwrap();

    section(&mut out, "summary", "Summary", |out| {
        out.push_str("<div class=\"tables\">\n");
        out.push_str(&summary_table(input.metrics));
        out.push_str(&latency_table(overall));
        out.push_str("</div>\n");
    });
    section(&mut out, "latency", "Latency distributions", |out| {
        out.push_str("<div class=\"charts\">\n");
        for (latency, colour) in CDFS {
            let cdf = series.cdfs.iter().find(|c| c.0 == latency).map(|c| c.1.clone()).unwrap_or_default();
            figure(out, &charts::cdf(&cdf, latency, colour, &overall.latency[&latency]));
        }
        out.push_str("</div>\n");
    });
    section(&mut out, "over-time", "Over time", |out| {
        out.push_str("<div class=\"charts\">\n");
        for (latency, colour) in OVER_TIME {
            let binned = series.over_time.iter().find(|b| b.0 == latency).map_or(&[][..], |b| b.1.as_slice());
            figure(out, &charts::over_time(binned, arrivals.as_ref(), latency, colour));
        }
        // KV-cache usage and queue depth always; what the accelerators drew and moved where it was sampled.
        for (i, (metric, samples)) in series.samples.iter().enumerate() {
            if i < ENGINE_CHARTS || samples.instances > 0 {
                figure(out, &charts::samples_over_time(samples, sampled.as_ref(), metric));
            }
        }
        out.push_str("</div>\n");
    });
    section(&mut out, "cache-load", "Cache and load", |out| {
        out.push_str("<div class=\"charts\">\n");
        figure(out, &charts::cache_tiers(overall));
        figure(out, &charts::ttft_under_load(overall));
        out.push_str("</div>\n");
    });
    section(&mut out, "engine", "Engine samples per instance", |out| out.push_str(&engine_table(overall)));
    out.push_str(&energy_section(input.metrics));
    out.push_str(&cost_section(input.metrics));
    out.push_str(FOOTER);
    out.push_str("</body>\n</html>\n");
    out
}

/// The cost figures of a cost profile (`--cost`): what the span cost and how, energy, the cost of a successful
/// answer, raw and effective tokens per dollar and per kWh; nothing without a profile.
pub fn cost_section(metrics: &Metrics) -> String {
    let Some(c) = &metrics.overall.cost else { return String::new() };
    let mut out = String::new();
    section(&mut out, "cost", "Cost and efficiency", |out| {
        out.push_str("<table class=\"figures\">\n<caption>From the cost profile, over the trace span</caption>\n");
        let hours = c.hours.map_or("-".to_owned(), |h| format!("{} h", significant(h, "")));
        row(out, &["span charged", &hours]);
        let mut parts = Vec::new();
        for (name, value) in [
            ("accelerators", c.accelerator_dollars),
            ("storage", c.storage_dollars),
            ("I/O", c.io_dollars),
            ("energy", c.energy_dollars),
            ("per-token prices", c.token_dollars),
        ] {
            if value.is_some() {
                parts.push(format!("{name} {}", dollars(value)));
            }
        }
        row(out, &["total", &format!("{} ({})", dollars(c.total_dollars), parts.join(", "))]);
        let energy = match (c.energy_kwh, c.energy_from) {
            (Some(kwh), from) => {
                let from = if from == Some(EnergySource::Measured) { "measured" } else { "nameplate watts" };
                format!("{} kWh ({from})", significant(kwh, ""))
            }
            (None, _) => "-".to_owned(),
        };
        row(out, &["energy", &energy]);
        let outcome = if c.outcome_known { "" } else { "; no outcome recorded, every request counted" };
        row(
            out,
            &[
                "cost per successful answer",
                &format!("{} ({} answers{outcome})", dollars(c.per_successful_answer), count(c.successful_answers)),
            ],
        );
        row(
            out,
            &[
                "tokens per $",
                &format!(
                    "{} raw, {} effective, {} visible answer tokens",
                    quantity(c.raw_tokens_per_dollar),
                    quantity(c.effective_tokens_per_dollar),
                    quantity(c.effective_answer_tokens_per_dollar)
                ),
            ],
        );
        row(
            out,
            &[
                "tokens per kWh",
                &format!("{} raw, {} effective", quantity(c.raw_tokens_per_kwh), quantity(c.effective_tokens_per_kwh)),
            ],
        );
        row(out, &["effective fraction (goodput of raw tokens)", &percent(c.effective_fraction)]);
        if c.api_equivalent_dollars.is_some() {
            row(out, &["at the profile's per-token prices", &dollars(c.api_equivalent_dollars)]);
        }
        out.push_str("</table>\n");
    });
    out
}

/// The energy measured from the dataset's power and energy samples, per instance; nothing without such samples.
pub fn energy_section(metrics: &Metrics) -> String {
    let Some(energy) = &metrics.energy else { return String::new() };
    let mut out = String::new();
    section(&mut out, "energy", "Measured energy", |out| {
        let per_kwh = match energy.tokens_per_kwh {
            Some(tokens) => format!(
                "{} tokens and {} output tokens per kWh",
                quantity(Some(tokens)),
                quantity(energy.output_tokens_per_kwh)
            ),
            None => "no request tokens counted".to_owned(),
        };
        writeln!(
            out,
            "<p>{} kWh over {} instances: {per_kwh}.</p>",
            significant(energy.kwh, ""),
            count(energy.instances.len() as u64)
        )
        .unwrap();
        out.push_str("<table class=\"engine\">\n<caption>Per instance, over its own sampled span</caption>\n");
        out.push_str(
            "<tr><th>instance</th><th>source</th><th>measured from</th><th>energy</th><th>span</th>\
             <th>mean power</th></tr>\n",
        );
        for i in &energy.instances {
            let power = i.mean_power_w.map_or("-".to_owned(), |w| format!("{} W", significant(w, "")));
            row(
                out,
                &[
                    &escape(&i.instance),
                    &escape(&i.source),
                    &i.how(),
                    &format!("{} kWh", significant(i.joules / JOULES_PER_KWH, "")),
                    &seconds(i.span_s),
                    &power,
                ],
            );
        }
        out.push_str("</table>\n");
    });
    out
}

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by entities, safe in HTML text and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn section(out: &mut String, id: &str, heading: &str, body: impl FnOnce(&mut String)) {
    writeln!(out, "<section id=\"{id}\">\n<h2>{heading}</h2>").unwrap();
    body(out);
    out.push_str("</section>\n");
}

fn figure(out: &mut String, svg: &str) {
    writeln!(out, "<figure>\n{svg}</figure>").unwrap();
}

/// Requests, span, sources and models (up to five of each named), from the series.
fn provenance(input: &ReportInput<'_>, overall: &GroupMetrics) -> String {
    let list = |names: &Names| {
        let mut named: Vec<String> = names.first.iter().map(|s| escape(s)).collect();
        if names.count > names.first.len() as u64 {
            named.push(format!("and {} more", names.count - names.first.len() as u64));
        }
        if named.is_empty() { "none".to_owned() } else { named.join(", ") }
    };
    format!(
        "{} requests and {} engine samples over {} · sources: {} · models: {}",
        count(overall.requests),
        count(input.series.sample_count),
        overall.throughput.span_s.map_or_else(|| "no span".to_owned(), seconds),
        list(&input.series.sources),
        list(&input.series.models)
    )
}

fn row(out: &mut String, cells: &[&str]) {
    out.push_str("<tr>");
    for (i, cell) in cells.iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        write!(out, "<{tag}>{cell}</{tag}>").unwrap();
    }
    out.push_str("</tr>\n");
}

/// The figures of `infertrace metrics` as a two-column table.
fn summary_table(metrics: &Metrics) -> String {
    let g = &metrics.overall;
    let mut out = String::from("<table class=\"figures\">\n<caption>All requests</caption>\n");
    row(&mut out, &["requests", &count(g.requests)]);
    let statuses: Vec<String> =
        g.status.iter().filter(|(_, n)| **n > 0).map(|(s, n)| format!("{s} {}", count(*n))).collect();
    row(&mut out, &["status", &if statuses.is_empty() { "none".to_owned() } else { statuses.join(", ") }]);
    row(&mut out, &["success rate", &percent(g.success_rate)]);
    let t = &g.throughput;
    row(&mut out, &["span", &t.span_s.map_or_else(|| "-".to_owned(), seconds)]);
    row(&mut out, &["throughput", &format!("{} requests/s", rate(t.requests_per_s))]);
    row(
        &mut out,
        &[
            "token throughput",
            &format!("{} input, {} output tokens/s", rate(t.input_tokens_per_s), rate(t.output_tokens_per_s)),
        ],
    );
    let goodput = match &g.goodput {
        Some(goodput) => {
            let bounds: Vec<String> =
                metrics.slo.iter().map(|(latency, bound)| format!("{latency} ≤ {}", seconds(*bound))).collect();
            format!(
                "{} requests/s; {} of requests ({}) meet {}",
                rate(goodput.requests_per_s),
                percent(goodput.fraction),
                count(goodput.requests),
                escape(&bounds.join(", "))
            )
        }
        None => "no SLO given (--slo ttft=2s,e2e=30s)".to_owned(),
    };
    row(&mut out, &["goodput", &goodput]);
    let cache = &g.cache;
    let hit = if cache.total.requests > 0 {
        format!(
            "{} of {} input tokens ({} requests)",
            percent(cache.total.hit_rate),
            count(cache.total.input_tokens),
            count(cache.total.requests)
        )
    } else {
        "-".to_owned()
    };
    row(&mut out, &["cache hit rate", &hit]);
    let reuse = &cache.reuse;
    let reuse_text = if reuse.requests > 0 {
        format!("{} of {} tokens ({} requests)", percent(reuse.hit_rate), count(reuse.tokens), count(reuse.requests))
    } else {
        "-".to_owned()
    };
    row(&mut out, &["prefix reuse (unbounded cache)", &reuse_text]);
    let depth = &g.reasoning;
    let depth_text = if depth.requests > 0 {
        format!(
            "{} ({} reasoning / {} answer tokens, {} requests)",
            depth.multiplier.map_or("-".to_owned(), |r| significant(r, "")),
            count(depth.reasoning_tokens),
            count(depth.answer_tokens),
            count(depth.requests)
        )
    } else {
        "-".to_owned()
    };
    row(&mut out, &["reasoning multiplier R", &depth_text]);
    let split = &g.time_split;
    let split_text = if split.requests > 0 {
        format!(
            "queue {}, prefill {}, decode {} of e2e ({} requests)",
            percent(split.queue),
            percent(split.prefill),
            percent(split.decode),
            count(split.requests)
        )
    } else {
        "-".to_owned()
    };
    row(&mut out, &["time split", &split_text]);
    out.push_str("</table>\n");
    out
}

fn distribution_cells(d: &Distribution) -> Vec<String> {
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), seconds);
    vec![count(d.count), cell(d.mean), cell(d.p50), cell(d.p90), cell(d.p95), cell(d.p99), cell(d.max)]
}

/// Count, mean and quantiles of every duration present.
fn latency_table(g: &GroupMetrics) -> String {
    let mut out = String::from("<table class=\"latency\">\n<caption>Latency</caption>\n");
    out.push_str(
        "<tr><th>duration</th><th>count</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th>\
         <th>max</th></tr>\n",
    );
    let mut any = false;
    for (latency, d) in g.latency.iter().filter(|(_, d)| d.count > 0) {
        any = true;
        let cells = distribution_cells(d);
        let mut all = vec![latency.column()];
        all.extend(cells.iter().map(String::as_str));
        row(&mut out, &all);
    }
    if !any {
        out.push_str("<tr><td colspan=\"8\" class=\"none\">no request has a duration</td></tr>\n");
    }
    out.push_str("</table>\n");
    out
}

fn sample_cells(s: &SampleSummary, format: impl Fn(f64) -> String) -> [String; 4] {
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), &format);
    [count(s.count), cell(s.time_weighted_mean), cell(s.p95), cell(s.max)]
}

/// KV-cache usage and queue depth per instance, as in `infertrace metrics`.
fn engine_table(g: &GroupMetrics) -> String {
    if g.engine.is_empty() {
        return "<p class=\"none\">no kv_cache_usage or requests_waiting samples</p>\n".to_owned();
    }
    let mut out = String::from("<table class=\"engine\">\n");
    out.push_str(
        "<tr><th>instance</th><th>KV usage samples</th><th>time mean</th><th>p95</th><th>max</th>\
         <th>waiting samples</th><th>time mean</th><th>p95</th><th>max</th></tr>\n",
    );
    for (instance, s) in &g.engine {
        let mut cells = vec![escape(instance)];
        cells.extend(sample_cells(&s.kv_cache_usage, |v| percent(Some(v))));
        cells.extend(sample_cells(&s.requests_waiting, |v| significant(v, "")));
        let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
        row(&mut out, &cells);
    }
    out.push_str("</table>\n");
    if g.engine.contains_key(NULL_GROUP) {
        out.push_str("<p class=\"note\">(none): samples without an instance.</p>\n");
    }
    out
}

const FOOTER: &str = "<footer>\n<p>Made by <code>infertrace report</code>. Quantiles interpolate linearly \
between closest ranks; hit rates are token-weighted; the time split is over the requests with queue, prefill, \
decode and e2e times. Every definition is in the documentation of the <code>infertrace-engine</code> and \
<code>infertrace-report</code> crates.</p>\n</footer>\n";

const STYLE: &str = r#":root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
  background: #fff; margin: 0 auto; padding: 16px 24px; max-width: 1232px; font-size: 14px; line-height: 1.4; }
h1 { font-size: 22px; margin: 4px 0; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 20px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin: 0 0 8px; overflow-wrap: anywhere; }
.tables { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 16px; align-items: start; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: 4px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
th { text-align: left; font-weight: 600; color: #333; }
td { text-align: right; }
table.latency td, table.engine td { white-space: nowrap; }
table.figures td { text-align: left; }
table.engine th, table.engine td { text-align: right; }
table.latency td, table.engine td { white-space: nowrap; }
table.engine th:first-child, table.engine tr > *:first-child { text-align: left; overflow-wrap: anywhere; }
.none, .note { color: #777; }
td.none { text-align: left; }
.charts { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 12px 16px; }
figure { margin: 0; }
svg.chart { width: 100%; height: auto; display: block; font-family: inherit; }
svg .title { font-size: 14px; font-weight: 600; fill: #222; }
svg .note { font-size: 11px; fill: #666; }
svg .legend { font-size: 11px; fill: #333; }
svg .tick { font-size: 11px; fill: #555; }
svg .axis-label { font-size: 12px; fill: #333; }
svg .mark { font-size: 11px; fill: #222; }
svg .marker { font-size: 10px; fill: #444; }
svg polyline { stroke-linejoin: round; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .axis { stroke: #888; stroke-width: 1; }
svg .empty { fill: #fafafa; stroke: #ccc; stroke-dasharray: 4 4; }
svg .no-data { font-size: 13px; fill: #777; }
footer { color: #666; font-size: 12px; margin-top: 24px; border-top: 1px solid #ddd; }
@media (max-width: 900px) { .charts, .tables { grid-template-columns: minmax(0, 1fr); } }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  section { break-inside: auto; }
  figure, table { break-inside: avoid; }
  h2 { break-after: avoid; }
}
"#;
