//! `infertrace model`, `sweep` and `size`: parameters from a file, datasets and flags; rendering.
//!
//! Precedence, lowest first: the model's defaults, what is measured from `--from` datasets, the parameter file,
//! then each `--set NAME=VALUE` in order. The file and the measurement are merged table by table, so a file that
//! sets only `[hardware]` keeps the measured workload.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use arrow::array::{Array as _, ArrayRef, AsArray as _};
use arrow::datatypes::{Float64Type, Int64Type};
use infertrace_cache::Mrc;
use infertrace_engine::{MetricsOptions, compute_over, rows_in_input_order};
use infertrace_model::eval::{Derived, Evaluation, Origin};
use infertrace_model::fit::{Quadratic, fit_quadratic_by};
use infertrace_model::size::Sizing;
use infertrace_model::sweep::Surface;
use infertrace_model::{Catalog, Params};
use infertrace_query::{QueryOptions, Session};
use infertrace_schema::{CacheTier, EngineSample, metrics as sample_metrics};
use serde::Serialize;

use infertrace_engine::format::figure as number;

use crate::stream;
use crate::summary::{count, render_table};

/// Where the parameters come from.
#[derive(Debug, Clone, Default)]
pub struct ParamSources {
    /// A TOML parameter file.
    pub file: Option<PathBuf>,
    /// Datasets to measure parameters from.
    pub from: Vec<PathBuf>,
    /// `NAME=VALUE` overrides, in order.
    pub set: Vec<(String, f64)>,
    /// A user catalog extending the built-in one.
    pub catalog: Option<PathBuf>,
    /// `infertrace mrc --json` output to use as `compression.hit_curve` (overrides the file and `--from`).
    pub hit_curve: Option<PathBuf>,
}

/// One measured parameter: its value and how it was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// The value.
    pub value: f64,
    /// How.
    pub how: String,
}

/// What `--from` measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measured {
    /// Parameter (TOML path) → measurement.
    pub params: BTreeMap<String, Measurement>,
    /// The prefill fit, seconds against uncached prompt tokens.
    pub prefill_fit: Option<Quadratic>,
    /// The LRU hit-ratio curve of the datasets' `prefix_hashes` (`[capacity tokens, hit ratio]`, as `infertrace
    /// mrc` computes it at powers of two), for `compression.hit_curve`; empty without hashes.
    pub hit_curve: Vec<[f64; 2]>,
}

/// Parameters, what was measured, and the catalog.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The parameters.
    pub params: Params,
    /// What the datasets gave.
    pub measured: Option<Measured>,
    /// Built-in catalog plus the user's.
    pub catalog: Catalog,
}

/// Parses `NAME=VALUE`.
pub fn parse_set(text: &str) -> Result<(String, f64), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("expected NAME=VALUE in {text:?}, such as R=12"))?;
    let value: f64 = value.trim().parse().map_err(|_| format!("expected a number after = in {text:?}"))?;
    Ok((name.trim().to_owned(), value))
}

/// The built-in catalog, extended by a user catalog.
pub fn catalog(extra: Option<&Path>) -> Result<Catalog> {
    let mut catalog = Catalog::builtin();
    if let Some(path) = extra {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read catalog {}", path.display()))?;
        catalog.extend(Catalog::from_toml(&text).map_err(|e| anyhow!("invalid catalog {}: {e}", path.display()))?);
    }
    Ok(catalog)
}

/// Loads the catalog and the parameters from every source.
pub fn load(sources: &ParamSources) -> Result<Loaded> {
    let catalog = catalog(sources.catalog.as_deref())?;
    let measured = if sources.from.is_empty() { None } else { Some(measure(&sources.from)?) };
    let mut merged = toml::Table::new();
    if let Some(m) = &measured {
        let mut params = Params::default();
        for (name, measurement) in &m.params {
            params.set(name, measurement.value).map_err(|e| anyhow!("measured {name}: {e}"))?;
        }
        params.compression.hit_curve.clone_from(&m.hit_curve);
        // Reads from the disk and remote tiers are storage I/O.
        for (name, tier) in &mut params.tiers {
            tier.external = tier_name(CacheTier::Disk).0 == name || tier_name(CacheTier::Remote).0 == name;
        }
        merged = toml::Table::try_from(&params).context("measured parameters serialize")?;
    }
    if let Some(path) = &sources.file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read parameters {}", path.display()))?;
        // Checked on its own first, for errors with its line numbers.
        Params::from_toml(&text).map_err(|e| anyhow!("invalid parameters {}: {e}", path.display()))?;
        let file: toml::Table =
            toml::from_str(&text).map_err(|e| anyhow!("invalid parameters {}: {e}", path.display()))?;
        merge_tables(&mut merged, file);
    }
    let mut params: Params = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow!("invalid parameters: {}", e.message()))?;
    if let Some(path) = &sources.hit_curve {
        params.compression.hit_curve = read_hit_curve(path)?;
    }
    for (name, value) in &sources.set {
        params.set(name, *value).map_err(|e| anyhow!("--set {name}={value}: {e}"))?;
    }
    params.validate().map_err(|e| anyhow!("invalid parameters: {e}"))?;
    Ok(Loaded { params, measured, catalog })
}

fn merge_tables(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge_tables(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// Canonical cache tiers → the model's tier names, and whether reads from it are storage I/O.
fn tier_name(tier: CacheTier) -> (&'static str, bool) {
    match tier {
        CacheTier::Gpu => ("hbm", false),
        CacheTier::Cpu => ("dram", false),
        CacheTier::Disk => ("disk", true),
        CacheTier::Remote => ("external", true),
    }
}

/// Measures the model's parameters from datasets (taken together), by queries over them: the metrics, then walks
/// over the requests (and the running-batch samples) in input order, then the LRU curve in arrival order. Memory
/// does not grow with the rows.
pub fn measure(paths: &[PathBuf]) -> Result<Measured> {
    let query = QueryOptions::default();
    let session = stream::open(paths, &query)?;
    let computed = session
        .block_on(compute_over(session.datasets(), &MetricsOptions::default(), session.scratch()))
        .map_err(|e| stream::engine_error(e, &query, "compute the metrics"))?;
    let (metrics, energy) = (computed.overall, computed.energy);
    let mut out = Measured::default();
    let mut found: BTreeMap<String, Measurement> = BTreeMap::new();
    let mut put = |name: &str, value: f64, how: String| {
        if value.is_finite() {
            found.insert(name.to_owned(), Measurement { value, how });
        }
    };
    if let Some(r) = metrics.reasoning.multiplier {
        put(
            "workload.reasoning_multiplier",
            r,
            format!("Σ reasoning / Σ answer tokens over {} requests", metrics.reasoning.requests),
        );
    }
    let reuse = metrics.cache.reuse.hit_rate;
    if let Some(u) = reuse {
        put(
            "workload.prefix_reuse",
            u,
            format!("unbounded-cache hit rate of prefix_hashes over {} requests", metrics.cache.reuse.requests),
        );
    }
    // Watts per accelerator as drawn: the accelerators' measured energy over their sampled accelerator-seconds.
    let accelerators: Vec<_> = energy
        .iter()
        .flat_map(|e| &e.instances)
        .filter(|i| i.metric != infertrace_schema::metrics::CPU_ENERGY_JOULES_TOTAL && i.span_s > 0.0)
        .collect();
    let seconds: f64 = accelerators.iter().map(|i| i.span_s).sum();
    if seconds > 0.0 {
        let joules: f64 = accelerators.iter().map(|i| i.joules).sum();
        put(
            "price.watts",
            joules / seconds,
            format!("measured energy over {} accelerators' sampled time", accelerators.len()),
        );
    }
    if let Some(s) = metrics.success_rate.filter(|s| *s > 0.0) {
        put("workload.success_rate", s, "ok over requests with a known outcome".to_owned());
    }
    // Means summed in input order, from −0.0 as `Iterator::sum` does.
    let (mut answers, mut inputs, mut tpots) = (Mean::default(), Mean::default(), Mean::default());
    walk_rows(&session, &query, &["output", "reasoning", "input", "tpot"], |row| {
        if let Some(output) = row.count(0) {
            answers.add(output.saturating_sub(row.count(1).unwrap_or(0)) as f64);
        }
        if let Some(input) = row.count(2) {
            inputs.add(input as f64);
        }
        if let Some(tpot) = row.seconds(3) {
            tpots.add(tpot);
        }
    })?;
    if let Some(mean) = answers.mean() {
        put("workload.visible_tokens", mean, format!("mean output − reasoning tokens over {} requests", answers.n));
    }
    let mean_input = inputs.mean();
    if let Some(i) = mean_input {
        put("workload.input_tokens", i, format!("mean input tokens over {} requests", inputs.n));
        if let Some(u) = reuse {
            put("workload.prefix_tokens", i * u, "mean input tokens × prefix reuse".to_owned());
        }
    }
    let mut any_tier = false;
    for (tier, rate) in &metrics.cache.tiers {
        if let Some(h) = rate.hit_rate.filter(|_| rate.requests > 0) {
            let (name, _) = tier_name(*tier);
            put(
                &format!("tiers.{name}.hit_rate"),
                h,
                format!("cached_tokens_{tier} / input tokens over {} requests", rate.requests),
            );
            any_tier = true;
        }
    }
    if !any_tier && let Some(h) = metrics.cache.total.hit_rate {
        put("tiers.hbm.hit_rate", h, "cached_tokens / input tokens (tier not recorded, taken as hbm)".to_owned());
    }
    // Prefill time against uncached prompt tokens: prefill_s where recorded, else ttft_s; the points are read
    // again for each pass of the fit rather than held.
    let fit = fit_quadratic_by(|f: &mut dyn FnMut(f64, f64)| {
        walk_rows(&session, &query, &["input", "cached", "prefill", "ttft"], |row| {
            let Some(input) = row.count(0) else { return };
            let uncached = input.saturating_sub(row.count(1).unwrap_or(0)) as f64;
            if let Some(y) = row.seconds(2).or(row.seconds(3)).filter(|y| *y >= 0.0) {
                f(uncached, y);
            }
        })
    })?;
    let prefix_tokens = mean_input.zip(reuse).map(|(i, u)| i * u);
    if let (Some(fit), Some(prefix)) = (fit, prefix_tokens) {
        let seconds = fit.at(prefix).max(0.0);
        put("prefill.prefix_s", seconds, format!("prefill fit at {prefix:.0} tokens ({} points)", fit.points));
    }
    out.prefill_fit = fit;
    // Decode instance-seconds per token: mean TPOT over the mean running batch, when the engine samples it.
    if let Some(tpot) = tpots.mean() {
        let running = running_batch(&session, &query)?;
        match running.mean() {
            None => put(
                "decode.s_per_token",
                tpot,
                format!("mean TPOT over {} requests (no running-batch samples: batch 1, an upper bound)", tpots.n),
            ),
            Some(batch) => {
                put("decode.s_per_token", tpot / batch, format!("mean TPOT / mean running batch {batch:.1}"));
            }
        }
    }
    out.params = found;
    let curve = crate::cache::curve(&session, infertrace_cache::Sampling::Auto, &query)?;
    out.hit_curve = hit_curve(&curve).unwrap_or_default();
    Ok(out)
}

/// A mean summed in order.
#[derive(Debug)]
struct Mean {
    n: u64,
    sum: f64,
}

impl Default for Mean {
    fn default() -> Self {
        Self { n: 0, sum: -0.0 }
    }
}

impl Mean {
    fn add(&mut self, value: f64) {
        self.n += 1;
        self.sum += value;
    }

    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// One derived row of [`walk_rows`]: its columns by position.
struct RowView<'a> {
    columns: &'a [ArrayRef],
    at: usize,
}

impl RowView<'_> {
    /// A count column (`BIGINT`), when not null.
    fn count(&self, c: usize) -> Option<u64> {
        let column = self.columns[c].as_primitive::<Int64Type>();
        column.is_valid(self.at).then(|| column.value(self.at).max(0) as u64)
    }

    /// A duration column (finite seconds), when not null.
    fn seconds(&self, c: usize) -> Option<f64> {
        let column = self.columns[c].as_primitive::<Float64Type>();
        column.is_valid(self.at).then(|| column.value(self.at))
    }
}

/// Every request's derived `columns` (see [`rows_in_input_order`]), in input order, to `each`.
fn walk_rows(
    session: &Session,
    query: &QueryOptions,
    columns: &[&str],
    mut each: impl FnMut(&RowView<'_>),
) -> Result<()> {
    let what = "read the requests";
    let frame = session
        .block_on(rows_in_input_order(session.datasets(), columns))
        .map_err(|e| stream::engine_error(e, query, what))?;
    stream::for_each_batch(session, frame, query, what, |batch| {
        for at in 0..batch.num_rows() {
            each(&RowView { columns: batch.columns(), at });
        }
        Ok(())
    })
}

/// The `requests_running` samples above 0 (finite, with a time), in input order.
fn running_batch(session: &Session, query: &QueryOptions) -> Result<Mean> {
    use infertrace_schema::sample;
    let what = "read the running-batch samples";
    let name = "infertrace_model_samples";
    session
        .datasets()
        .register_ordered::<EngineSample>(name, &[sample::METRIC, sample::TIME, sample::VALUE])
        .map_err(|e| stream::engine_error(e, query, what))?;
    let frame = session
        .block_on(session.datasets().sql(&format!(
            "SELECT value FROM {name} WHERE metric = '{}' AND time IS NOT NULL AND value > 0 \
             AND value < CAST('inf' AS DOUBLE) ORDER BY ordinal",
            sample_metrics::REQUESTS_RUNNING
        )))
        .map_err(|e| stream::engine_error(e, query, what))?;
    let mut running = Mean::default();
    stream::for_each_batch(session, frame, query, what, |batch| {
        batch.column(0).as_primitive::<Float64Type>().values().iter().for_each(|&v| running.add(v));
        Ok(())
    })?;
    Ok(running)
}

/// The LRU hit-ratio curve at the default capacities of `infertrace mrc`; `None` without hashes.
fn hit_curve(curve: &Mrc) -> Option<Vec<[f64; 2]>> {
    let report = curve.report(&curve.default_capacities());
    let points: Vec<[f64; 2]> =
        report.points.iter().filter_map(|p| Some([p.capacity_tokens as f64, p.hit_ratio?])).collect();
    (report.requests > 0 && !points.is_empty()).then_some(points)
}

/// Reads the `points` of `infertrace mrc --json` as `[capacity tokens, hit ratio]` pairs.
pub fn read_hit_curve(path: &Path) -> Result<Vec<[f64; 2]>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read hit curve {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!("invalid hit curve {}: {e}; expected the output of `infertrace mrc --json`", path.display())
    })?;
    let points: Vec<[f64; 2]> = json["points"]
        .as_array()
        .ok_or_else(|| {
            anyhow!("invalid hit curve {}: no `points` array; expected `infertrace mrc --json`", path.display())
        })?
        .iter()
        .filter_map(|p| Some([p["capacity_tokens"].as_f64()?, p["hit_ratio"].as_f64()?]))
        .collect();
    if points.is_empty() {
        bail!("invalid hit curve {}: no point has a capacity and a hit ratio", path.display());
    }
    Ok(points)
}

fn value(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".to_owned(), |v| format!("{}{unit}", number(v)))
}

fn derived(d: Option<Derived>, unit: &str) -> String {
    match d {
        None => "-".to_owned(),
        Some(d) => {
            let origin = match d.origin {
                Origin::Given => "",
                Origin::Roofline => " (roofline)",
                Origin::Catalog => " (catalog)",
            };
            format!("{}{unit}{origin}", number(d.value))
        }
    }
}

/// The evaluation as text.
pub fn render_model(loaded: &Loaded, e: &Evaluation) -> String {
    let mut out = String::new();
    if let Some(m) = &loaded.measured {
        writeln!(out, "measured from the datasets:").unwrap();
        for (name, measurement) in &m.params {
            writeln!(out, "  {name} = {}  ({})", number(measurement.value), measurement.how).unwrap();
        }
        if let (Some(first), Some(last)) = (m.hit_curve.first(), m.hit_curve.last()) {
            writeln!(
                out,
                "  LRU hit-ratio curve (compression.hit_curve): {} points, {} at {} tokens to {} at {} tokens",
                m.hit_curve.len(),
                number(first[1]),
                number(first[0]),
                number(last[1]),
                number(last[0])
            )
            .unwrap();
        }
        if let Some(f) = &m.prefill_fit {
            writeln!(
                out,
                "  prefill fit: {} + {} n + {} n² s over {} requests (R² {})",
                number(f.a),
                number(f.b),
                number(f.c),
                count(f.points),
                f.r_squared.map_or("-".to_owned(), number)
            )
            .unwrap();
        }
        out.push('\n');
    }
    let p = &e.prefill;
    writeln!(out, "prefill of a continued request").unwrap();
    writeln!(out, "  pure recompute: {}", value(p.recompute_s, " s")).unwrap();
    writeln!(out, "  expected:       {}", p.arithmetic).unwrap();
    writeln!(
        out,
        "  saving:         {} per request ({})",
        value(p.saving_s, " s"),
        p.saving_fraction.map_or("-".to_owned(), |f| format!("{:.1}%", f * 100.0))
    )
    .unwrap();
    if let Some(d) = &e.daily {
        writeln!(out, "per day").unwrap();
        writeln!(out, "  {}", d.arithmetic).unwrap();
        writeln!(out, "  pure recompute of the prefixes: {} GPU-hours/day", value(d.gpu_hours_recompute, "")).unwrap();
    }
    let i = &e.inputs;
    let a = &e.answer;
    writeln!(out, "answer").unwrap();
    writeln!(
        out,
        "  generated tokens: {} ({} visible × (1 + R), R = {})",
        number(i.generated_tokens),
        number(loaded.params.workload.visible_tokens),
        number(loaded.params.workload.reasoning_multiplier)
    )
    .unwrap();
    writeln!(out, "  decode: {} per token → {}", derived(i.decode_s_per_token, " s"), value(a.decode_s, " s")).unwrap();
    if i.suffix_s.is_some() {
        writeln!(out, "  new-suffix prefill: {}", derived(i.suffix_s, " s")).unwrap();
    }
    if a.transfer_s.is_some_and(|t| t > 0.0) {
        writeln!(out, "  KV transfer: {}", value(a.transfer_s, " s")).unwrap();
    }
    writeln!(out, "  instance time per request: {} × {} accelerators", value(a.instance_s, " s"), number(i.tp))
        .unwrap();
    writeln!(
        out,
        "  price {} per accelerator-hour, {} per accelerator; storage I/O ${} per request",
        i.accelerator_per_hour.map_or("-".to_owned(), |d| format!("${}", derived(Some(d), ""))),
        derived(i.watts, " W"),
        number(a.io_dollars)
    )
    .unwrap();
    writeln!(
        out,
        "  cost per successful answer: {}; energy {}",
        a.cost_per_successful_answer.map_or("-".to_owned(), |c| format!("${}", number(c))),
        value(a.kwh_per_successful_answer, " kWh")
    )
    .unwrap();
    writeln!(
        out,
        "  tokens per $: {} visible, {} generated; per kWh: {} visible, {} generated",
        value(a.visible_tokens_per_dollar, ""),
        value(a.generated_tokens_per_dollar, ""),
        value(a.visible_tokens_per_kwh, ""),
        value(a.generated_tokens_per_kwh, "")
    )
    .unwrap();
    if !e.breakeven.is_empty() {
        writeln!(out, "retrieve vs recompute").unwrap();
        let rows: Vec<Vec<String>> = e
            .breakeven
            .iter()
            .map(|(tier, b)| {
                vec![
                    tier.clone(),
                    value(b.retrieval_s, " s"),
                    value(b.max_retrieval_s, " s"),
                    b.retrieval_wins.map_or("-".to_owned(), |w| if w { "retrieve" } else { "recompute" }.to_owned()),
                    value(b.max_base_latency_s, " s"),
                    value(b.min_context_tokens, ""),
                ]
            })
            .collect();
        let headers = ["tier", "retrieval", "recompute", "wins", "max base latency", "min context tokens"];
        for line in render_table(&headers, &rows, 1).lines() {
            writeln!(out, "  {line}").unwrap();
        }
    }
    let d = &e.disaggregation;
    writeln!(out, "disaggregation").unwrap();
    writeln!(
        out,
        "  collocated {} per request, disaggregated {} with δ = {}; disaggregation wins while δ < {}",
        value(d.collocated_s, " s"),
        value(d.disaggregated_s, " s"),
        value(d.delta_s, " s"),
        value(d.breakeven_delta_s, " s")
    )
    .unwrap();
    let c = &e.compression;
    writeln!(out, "compression").unwrap();
    writeln!(
        out,
        "  κ = {}: {} per request, ${} per answer against κ = 1{}; best κ in 1..{}: {}",
        number(c.kappa),
        value(c.net_s_per_request, " s"),
        c.net_dollars_per_answer.map_or("-".to_owned(), number),
        match (c.hit_rate_uncompressed, c.hit_rate) {
            (Some(a), Some(b)) => format!(" (hit rate {} → {})", number(a), number(b)),
            _ => String::new(),
        },
        number(loaded.params.compression.kappa_max),
        c.best_kappa.map_or("-".to_owned(), number)
    )
    .unwrap();
    for warning in &e.warnings {
        writeln!(out, "note: {warning}").unwrap();
    }
    out
}

/// The JSON of `infertrace model --json`: parameters as used, measurements and the evaluation.
pub fn model_json(loaded: &Loaded, e: &Evaluation) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        params: &'a Params,
        measured: &'a Option<Measured>,
        evaluation: &'a Evaluation,
    }
    let mut text =
        serde_json::to_string_pretty(&Out { params: &loaded.params, measured: &loaded.measured, evaluation: e })
            .expect("model output serializes");
    text.push('\n');
    text
}

/// The sizing as text.
pub fn render_size(s: &Sizing) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "decode batch {} per instance (bound by {}), step {}, {} tokens/s per instance",
        s.batch,
        s.batch_bound,
        value(Some(s.step_s), " s"),
        number(s.decode_tokens_per_s)
    )
    .unwrap();
    writeln!(
        out,
        "prefill {} per request, {} generated tokens",
        value(Some(s.prefill_s), " s"),
        number(s.generated_tokens)
    )
    .unwrap();
    let rows: Vec<Vec<String>> = [("prefill", &s.prefill), ("decode", &s.decode), ("collocated", &s.collocated)]
        .iter()
        .map(|(name, p)| {
            vec![
                (*name).to_owned(),
                count(p.instances),
                count(p.accelerators),
                format!("{:.0}%", p.utilization * 100.0),
                format!("${}", number(p.dollars_per_hour)),
            ]
        })
        .collect();
    out.push_str(&render_table(&["pool", "instances", "accelerators", "utilization", "$/hour"], &rows, 1));
    writeln!(
        out,
        "disaggregated: {} accelerators; collocated: {}",
        count(s.disaggregated_accelerators),
        count(s.collocated.accelerators)
    )
    .unwrap();
    out
}

/// A figure of the surface: its column name and how to read it from an evaluation.
type Figure = (&'static str, fn(&Evaluation) -> Option<f64>);

/// The figures written for every point of a sweep, in column order.
const FIGURES: [Figure; 8] = [
    ("expected_prefill_s", |e| e.prefill.expected_s),
    ("saving_s", |e| e.prefill.saving_s),
    ("instance_s", |e| e.answer.instance_s),
    ("cost_per_successful_answer", |e| e.answer.cost_per_successful_answer),
    ("visible_tokens_per_dollar", |e| e.answer.visible_tokens_per_dollar),
    ("generated_tokens_per_kwh", |e| e.answer.generated_tokens_per_kwh),
    ("disaggregated_minus_collocated_s", |e| {
        e.disaggregation.disaggregated_s.zip(e.disaggregation.collocated_s).map(|(a, b)| a - b)
    }),
    ("gpu_hours_saved_per_day", |e| e.daily.as_ref().and_then(|d| d.gpu_hours_saved)),
];

/// The surface as a table: one column per axis then per figure, one row per point.
#[derive(Debug, Clone, PartialEq)]
pub struct SurfaceTable {
    /// Column names: the axes' TOML paths, then the names of the figures (`FIGURES`).
    pub headers: Vec<String>,
    /// Values, null where a figure cannot be computed or the point is invalid.
    pub rows: Vec<Vec<Option<f64>>>,
    /// Why each point is invalid, or null.
    pub invalid: Vec<Option<String>>,
}

/// One column per axis, then the figures, one row per point; invalid points keep their reason.
pub fn surface_table(surface: &Surface) -> SurfaceTable {
    let mut headers: Vec<String> = surface.axes.iter().map(|a| a.path.clone()).collect();
    headers.extend(FIGURES.iter().map(|(name, _)| (*name).to_owned()));
    let mut rows = Vec::new();
    let mut invalid = Vec::new();
    for point in &surface.points {
        let mut row: Vec<Option<f64>> = point.at.iter().map(|v| Some(*v)).collect();
        match &point.result {
            Ok(e) => {
                row.extend(FIGURES.iter().map(|(_, f)| f(e)));
                invalid.push(None);
            }
            Err(reason) => {
                row.extend(FIGURES.iter().map(|_| None));
                invalid.push(Some(reason.clone()));
            }
        }
        rows.push(row);
    }
    SurfaceTable { headers, rows, invalid }
}

/// Writes the surface as CSV (`.csv`) or Parquet (anything else).
pub fn write_surface(surface: &Surface, path: &Path) -> Result<()> {
    let SurfaceTable { headers, rows, invalid } = surface_table(surface);
    let context = || format!("cannot write {}", path.display());
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
        let mut text = headers.join(",");
        text.push_str(",invalid\n");
        for (row, reason) in rows.iter().zip(&invalid) {
            let mut cells: Vec<String> = row.iter().map(|v| v.map_or(String::new(), |v| format!("{v}"))).collect();
            cells.push(reason.as_ref().map_or(String::new(), |r| format!("\"{}\"", r.replace('"', "\"\""))));
            text.push_str(&cells.join(","));
            text.push('\n');
        }
        return std::fs::write(path, text).with_context(context);
    }
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
    let mut columns: Vec<(String, ArrayRef)> = Vec::new();
    for (i, name) in headers.iter().enumerate() {
        let values: Float64Array = rows.iter().map(|r| r[i]).collect();
        columns.push((name.clone(), Arc::new(values)));
    }
    columns.push(("invalid".to_owned(), Arc::new(invalid.iter().map(|r| r.as_deref()).collect::<StringArray>())));
    let batch = RecordBatch::try_from_iter(columns).context("surface columns")?;
    let file = std::fs::File::create(path).with_context(context)?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).with_context(context)?;
    writer.write(&batch).with_context(context)?;
    writer.close().with_context(context)?;
    Ok(())
}

/// The optimum and the breakevens, for the terminal.
pub fn render_sweep(surface: &Surface) -> String {
    let mut out = String::new();
    let valid = surface.points.iter().filter(|p| p.result.is_ok()).count();
    writeln!(
        out,
        "{} points ({} valid) over {}",
        count(surface.points.len() as u64),
        count(valid as u64),
        surface.axes.iter().map(|a| a.path.as_str()).collect::<Vec<_>>().join(" × ")
    )
    .unwrap();
    let at = |values: &[f64]| {
        surface
            .axes
            .iter()
            .zip(values)
            .map(|(a, v)| format!("{} = {}", a.name, number(*v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match surface.optimum {
        Some(i) => {
            let point = &surface.points[i];
            let value =
                point.result.as_ref().ok().and_then(|e| infertrace_model::sweep::objective(surface.objective, e));
            writeln!(
                out,
                "optimum ({}): {} at {}",
                surface.objective,
                value.map_or("-".to_owned(), number),
                at(&point.at)
            )
            .unwrap();
        }
        None => writeln!(out, "optimum ({}): none (no point could be evaluated)", surface.objective).unwrap(),
    }
    if surface.crossings.is_empty() {
        writeln!(out, "no breakeven in this range").unwrap();
    }
    for c in &surface.crossings {
        let last = surface.axes.last().map_or("", |a| a.name.as_str());
        let fixed = if c.at.is_empty() { String::new() } else { format!(" (at {})", at(&c.at)) };
        writeln!(out, "breakeven {}: {last} = {}{fixed}", c.what, number(c.value)).unwrap();
    }
    out
}

/// Fails when the parameters name no catalog model and accelerator, which sizing needs.
pub fn require_hardware(params: &Params) -> Result<()> {
    if params.hardware.is_none() {
        bail!("sizing needs [hardware] (model and accelerator from the catalog); give it in the parameter file");
    }
    Ok(())
}

/// The surface as a standalone SVG: the objective against the parameter (with the optimum and the breakevens
/// marked) for one axis, a heat map of it for two (the optimum starred).
pub fn surface_svg(surface: &Surface) -> String {
    use infertrace_model::sweep::objective;
    use infertrace_report::plot::{Line, Marker, heat_map, line_chart};
    let value =
        |p: &infertrace_model::sweep::Point| p.result.as_ref().ok().and_then(|e| objective(surface.objective, e));
    let title = format!("{} over the sweep", surface.objective);
    match surface.axes.as_slice() {
        [axis] => {
            let points = surface.points.iter().map(|p| (p.at[0], value(p))).collect();
            let mut markers: Vec<Marker> = surface
                .optimum
                .map(|i| Marker { x: surface.points[i].at[0], text: "optimum".to_owned() })
                .into_iter()
                .collect();
            markers.extend(
                surface.crossings.iter().map(|c| Marker { x: c.value, text: format!("breakeven: {}", c.what) }),
            );
            line_chart(
                &title,
                &axis.name,
                surface.objective,
                &[Line { name: surface.objective.to_owned(), points }],
                &markers,
            )
        }
        [rows, columns] => {
            let width = columns.values.len();
            let values: Vec<Vec<Option<f64>>> =
                surface.points.chunks(width).map(|row| row.iter().map(value).collect()).collect();
            let marked = surface.optimum.map(|i| (i / width, i % width));
            heat_map(&title, &columns.name, &rows.name, &columns.values, &rows.values, &values, marked)
        }
        _ => String::new(),
    }
}
