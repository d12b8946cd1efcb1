//! `infertrace cache-sim` and `infertrace mrc`: open a dataset, run the cache crate, render or write the result.
//!
//! Capacities are tokens (`2M`: k, M, G, T multiply by 1000) unless `--model` is given: then they are bytes
//! (`80GB`, `1.5TiB`, or a plain number) turned into tokens with the catalog model's KV bytes per token and the
//! compression ratio κ: `tokens = ⌊bytes × κ / kv_bytes_per_token⌋`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use arrow::array::{Array as _, ArrayRef, AsArray as _, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use infertrace_cache::{
    HitTokens, Mrc, MrcBuilder, MrcReport, Placement, Policy, Sampling, SimOptions, Simulation, Simulator, TierSpec,
};
use infertrace_engine::format::{count, percent};
use infertrace_query::datafusion::prelude::ParquetReadOptions;
use infertrace_query::{ORDINAL, QueryOptions, Session};
use infertrace_schema::{
    CacheEvent, CacheSimModel, CacheSimRecord, CacheSimTier, CacheTier, DatasetWriter, EngineSample, Manifest,
    Producer, RequestRow, RowCounts, request,
};
use serde::Serialize;

use crate::stream::{self, ScratchFile};
use crate::summary::render_table;

/// How capacities written in bytes become tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct ByteCapacity {
    /// Catalog model id (as the catalog spells it).
    pub model: String,
    /// Bytes per KV element.
    pub dtype_bytes: f64,
    /// KV compression ratio.
    pub kappa: f64,
    /// The model's KV bytes per token at `dtype_bytes`.
    pub kv_bytes_per_token: f64,
}

impl ByteCapacity {
    /// Looks `model` up in the built-in catalog.
    pub fn new(model: &str, dtype_bytes: f64, kappa: f64) -> Result<Self> {
        if !(dtype_bytes > 0.0 && dtype_bytes.is_finite()) {
            bail!("--dtype-bytes {dtype_bytes} must be a positive number");
        }
        if !(kappa > 0.0 && kappa.is_finite()) {
            bail!("--kappa {kappa} must be a positive number");
        }
        let catalog = infertrace_model::Catalog::builtin();
        let entry = catalog.model(model).ok_or_else(|| {
            let known: Vec<&str> = catalog.models.iter().map(|m| m.id.as_str()).collect();
            anyhow!("unknown model {model}; the catalog has {}", known.join(", "))
        })?;
        Ok(Self {
            model: entry.id.clone(),
            dtype_bytes,
            kappa,
            kv_bytes_per_token: entry.kv_bytes_per_token(dtype_bytes),
        })
    }

    /// Tokens that `bytes` of storage hold.
    pub fn tokens(&self, bytes: f64) -> u64 {
        (bytes * self.kappa / self.kv_bytes_per_token).floor() as u64
    }

    /// Bytes that `tokens` take.
    pub fn bytes(&self, tokens: u64) -> f64 {
        tokens as f64 * self.kv_bytes_per_token / self.kappa
    }

    fn record(&self) -> CacheSimModel {
        CacheSimModel {
            id: self.model.clone(),
            dtype_bytes: self.dtype_bytes,
            kappa: self.kappa,
            kv_bytes_per_token: self.kv_bytes_per_token,
        }
    }
}

/// A capacity: tokens (`2M`, `500k`, `1.5G`, `1000`), or with `bytes` given, bytes (`80GB`, `512GiB`, `2T`, `1e9`).
pub fn parse_capacity(text: &str, bytes: Option<&ByteCapacity>) -> Result<u64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| anyhow!("capacity {text:?} is not a non-negative number with an optional k, M, G or T"))?;
    let decimal = |unit: &str| match unit {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "M" => Some(1e6),
        "G" => Some(1e9),
        "T" => Some(1e12),
        _ => None,
    };
    match bytes {
        None => {
            let factor = decimal(unit).ok_or_else(|| {
                if unit.ends_with('B') {
                    anyhow!("capacity {text:?} is in bytes: pass --model <catalog id> to turn bytes into tokens")
                } else {
                    anyhow!("capacity {text:?}: unknown unit {unit:?} (tokens take k, M, G or T)")
                }
            })?;
            Ok((value * factor).round() as u64)
        }
        Some(model) => {
            let factor = match unit {
                "KiB" => Some(1024.0),
                "MiB" => Some(1024.0 * 1024.0),
                "GiB" => Some(1024.0 * 1024.0 * 1024.0),
                "TiB" => Some(1024.0 * 1024.0 * 1024.0 * 1024.0),
                _ => decimal(unit.strip_suffix('B').unwrap_or(unit)),
            }
            .ok_or_else(|| {
                anyhow!("capacity {text:?}: unknown unit {unit:?} (bytes take kB, MB, GB, TB or KiB…TiB)")
            })?;
            Ok(model.tokens(value * factor))
        }
    }
}

/// `gpu=2M` → the tier and its capacity as written.
pub fn parse_tier(text: &str) -> Result<(CacheTier, String), String> {
    let (tier, capacity) = text.split_once('=').ok_or_else(|| format!("expected TIER=CAPACITY, got {text:?}"))?;
    let tier = CacheTier::parse(tier.trim())
        .ok_or_else(|| format!("unknown tier {tier:?}: expected gpu, cpu, disk or remote"))?;
    Ok((tier, capacity.trim().to_owned()))
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct CacheSimArgs {
    /// The dataset.
    pub dataset: PathBuf,
    /// Tiers with their capacities as written, in any order.
    pub tiers: Vec<(CacheTier, String)>,
    /// Replacement policy.
    pub policy: Policy,
    /// Placement.
    pub placement: Placement,
    /// Capacities in bytes through this model.
    pub bytes: Option<ByteCapacity>,
    /// Dataset to write with the simulated cache columns.
    pub output: Option<PathBuf>,
    /// Replace `output` if it exists.
    pub force: bool,
    /// How the query engine that reads and sorts the requests uses the machine.
    pub query: QueryOptions,
}

/// Wall-clock phases, for `--timing` (stderr only, never in outputs).
#[derive(Debug, Clone, Default)]
pub struct Timing {
    /// Opening the dataset (its manifest and table files).
    pub open: Duration,
    /// Reading the requests in arrival order (sorting them if needed) and the simulation or the curve, which run
    /// together.
    pub compute: Duration,
    /// Writing the output dataset.
    pub write: Duration,
}

impl Timing {
    /// One line: `timing: open 0.041 s, simulate 0.052 s, write 0.090 s` (write only when something was written).
    pub fn line(&self, compute: &str) -> String {
        let mut line =
            format!("timing: open {:.3} s, {compute} {:.3} s", self.open.as_secs_f64(), self.compute.as_secs_f64());
        if !self.write.is_zero() {
            line.push_str(&format!(", write {:.3} s", self.write.as_secs_f64()));
        }
        line
    }
}

/// The tiers as specs, fastest first (gpu, cpu, disk, remote, whatever the order given), capacities in tokens.
pub fn tier_specs(tiers: &[(CacheTier, String)], bytes: Option<&ByteCapacity>) -> Result<Vec<TierSpec>> {
    let mut specs = tiers
        .iter()
        .map(|(tier, text)| {
            let capacity_tokens = parse_capacity(text, bytes).with_context(|| format!("--tier {tier}={text}"))?;
            Ok(TierSpec { tier: *tier, capacity_tokens })
        })
        .collect::<Result<Vec<_>>>()?;
    specs.sort_by_key(|s| s.tier);
    infertrace_cache::check_tiers(&specs).map_err(|e| anyhow!("{e}"))?;
    Ok(specs)
}

/// The columns a replay of the cache reads.
const REPLAY_COLUMNS: [&str; 3] = [request::INPUT_TOKENS, request::BLOCK_SIZE, request::PREFIX_HASHES];

/// Runs `cache-sim`: the simulation and, with `output`, the dataset written with its values.
///
/// The requests are read in replay order from a sort that spills; with `output`, each row's hit tokens go to a
/// scratch file, sorted back into input order and joined to the rows as they are written.
pub fn cache_sim(args: &CacheSimArgs) -> Result<(Simulation, Timing)> {
    let specs = tier_specs(&args.tiers, args.bytes.as_ref())?;
    let mut timing = Timing::default();
    let start = Instant::now();
    let session = stream::open(std::slice::from_ref(&args.dataset), &args.query)?;
    let source = session.datasets().manifests()[0].clone();
    timing.open = start.elapsed();
    let start = Instant::now();
    let options = SimOptions { tiers: specs, policy: args.policy, placement: args.placement };
    let mut simulator = Simulator::new(&options).map_err(|e| anyhow!("{e}"))?;
    let mut hits = match &args.output {
        Some(_) => Some(HitsWriter::create(&session.scratch().join("hits.parquet"), options.tiers.len())?),
        None => None,
    };
    stream::for_each_by_arrival(&session, &REPLAY_COLUMNS, &args.query, |row, ordinal| {
        let hit = simulator.push(row);
        match &mut hits {
            Some(hits) => hits.push(ordinal, hit.as_ref()),
            None => Ok(()),
        }
    })?;
    let sim = simulator.finish();
    timing.compute = start.elapsed();
    if let (Some(output), Some(hits)) = (&args.output, hits) {
        let start = Instant::now();
        let hits = hits.finish()?;
        write_dataset(args, &session, &source, &hits, &sim, output)?;
        timing.write = start.elapsed();
    }
    Ok((sim, timing))
}

/// Rows per batch of the hits file.
const HITS_BATCH: usize = 64 * 1024;

/// Each simulated row's hit tokens in replay order, written to a Parquet file: its ordinal, then the total and each
/// tier's tokens (null for a row left out).
struct HitsWriter {
    file: ScratchFile,
    schema: SchemaRef,
    ordinals: Vec<u64>,
    /// The total, then per tier.
    columns: Vec<Vec<Option<u64>>>,
}

impl HitsWriter {
    fn create(path: &Path, tiers: usize) -> Result<Self> {
        let mut fields = vec![Field::new(ORDINAL, DataType::UInt64, false)];
        fields.extend((0..=tiers).map(|t| Field::new(format!("hit_{t}"), DataType::UInt64, true)));
        let schema = Arc::new(Schema::new(fields));
        let file = ScratchFile::create(path, schema.clone())?;
        Ok(Self { file, schema, ordinals: Vec::new(), columns: vec![Vec::new(); tiers + 1] })
    }

    fn push(&mut self, ordinal: u64, hit: Option<&HitTokens>) -> Result<()> {
        self.ordinals.push(ordinal);
        self.columns[0].push(hit.map(|h| h.total));
        for (t, column) in self.columns[1..].iter_mut().enumerate() {
            column.push(hit.map(|h| h.per_tier[t]));
        }
        if self.ordinals.len() == HITS_BATCH { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<()> {
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(std::mem::take(&mut self.ordinals)))];
        arrays.extend(self.columns.iter_mut().map(|c| Arc::new(UInt64Array::from(std::mem::take(c))) as ArrayRef));
        self.file.write(&RecordBatch::try_new(self.schema.clone(), arrays)?)
    }

    /// Closes the file and returns its path.
    fn finish(mut self) -> Result<PathBuf> {
        if !self.ordinals.is_empty() {
            self.flush()?;
        }
        self.file.finish()
    }
}

/// Writes the dataset of `args.output`: the requests in input order with the simulated cache columns (from the
/// hits file at `hits`), then the samples and cache events as they were.
fn write_dataset(
    args: &CacheSimArgs,
    session: &Session,
    source: &Manifest,
    hits: &Path,
    sim: &Simulation,
    output: &Path,
) -> Result<Manifest> {
    let query = &args.query;
    let what = "sort the simulated rows back into input order";
    let datasets = session.datasets();
    let frame = session
        .block_on(async {
            let hits = hits.to_string_lossy();
            datasets.context().register_parquet(HITS, hits.as_ref(), ParquetReadOptions::default()).await?;
            datasets.sql(&format!("SELECT * FROM {HITS} ORDER BY {ORDINAL}")).await
        })
        .map_err(|e| stream::engine_error(e, query, what))?;
    let mut hits = session.batches(frame).map_err(|e| stream::engine_error(e, query, what))?;
    let mut batch: Option<RecordBatch> = None;
    let mut at = 0;
    let written = |e: infertrace_schema::DatasetError| {
        anyhow::Error::new(e).context(format!("cannot write output {}", output.display()))
    };
    let mut writer = DatasetWriter::create(output, args.force).map_err(written)?;
    stream::for_each_row::<RequestRow>(session, "infertrace_all_requests", query, |mut row| {
        while batch.as_ref().is_none_or(|b| at == b.num_rows()) {
            let next = hits.next().ok_or_else(|| anyhow!("cannot {what}: a row has no simulated value"))?;
            batch = Some(next.map_err(|e| stream::engine_error(e, query, what))?);
            at = 0;
        }
        let b = batch.as_ref().expect("filled above");
        let value = |c: usize| {
            let column = b.column(c).as_primitive::<UInt64Type>();
            column.is_valid(at).then(|| column.value(at))
        };
        let hit = value(1).map(|total| HitTokens {
            total,
            per_tier: (0..sim.tiers.len()).map(|t| value(t + 2).unwrap_or(0)).collect(),
        });
        at += 1;
        infertrace_cache::apply(&mut row, &sim.tiers, hit.as_ref());
        writer.push_request(&row).map_err(written)
    })?;
    stream::for_each_row::<EngineSample>(session, "infertrace_all_samples", query, |row| {
        writer.push_sample(&row).map_err(written)
    })?;
    stream::for_each_row::<CacheEvent>(session, "infertrace_all_cache_events", query, |row| {
        writer.push_cache_event(&row).map_err(written)
    })?;
    let given = |tier: CacheTier| args.tiers.iter().find(|(t, _)| *t == tier).map(|(_, c)| c.clone());
    let record = CacheSimRecord {
        dataset: args.dataset.display().to_string(),
        policy: sim.policy.to_string(),
        placement: sim.placement.to_string(),
        tiers: sim
            .tiers
            .iter()
            .map(|t| CacheSimTier {
                tier: t.tier.to_string(),
                capacity: given(t.tier).unwrap_or_default(),
                capacity_tokens: t.capacity_tokens,
                hit_tokens: t.hit_tokens,
                evictions: t.evictions,
            })
            .collect(),
        model: args.bytes.as_ref().map(ByteCapacity::record),
        requests: sim.requests,
        rows_without_hashes: sim.rows_without_hashes,
        input_tokens: sim.input_tokens,
        hit_tokens: sim.hit_tokens,
    };
    writer
        .finish(Manifest {
            schema_version: infertrace_schema::SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: source.assumptions.clone(),
            inputs: source.inputs.clone(),
            skipped: source.skipped.clone(),
            merge: source.merge.clone(),
            cache_sim: Some(record),
            partition_by: None,
            hash_salt: source.hash_salt,
            capture: None,
            rows: RowCounts::default(),
        })
        .map_err(written)
}

/// The table the hits file is registered as.
const HITS: &str = "infertrace_hits";

/// The simulation as a table: per tier its capacity, hit tokens, share of input tokens and evictions, then the
/// total and the rows left out.
pub fn render_cache_sim(sim: &Simulation, bytes: Option<&ByteCapacity>) -> String {
    let mut headers = vec!["tier", "capacity (tokens)"];
    if bytes.is_some() {
        headers.push("capacity (bytes)");
    }
    headers.extend(["hit tokens", "of input", "evictions"]);
    let mut rows: Vec<Vec<String>> = sim
        .tiers
        .iter()
        .map(|t| {
            let mut row = vec![t.tier.to_string(), count(t.capacity_tokens)];
            if let Some(b) = bytes {
                row.push(human_bytes(b.bytes(t.capacity_tokens)));
            }
            row.extend([count(t.hit_tokens), percent(t.hit_ratio), count(t.evictions)]);
            row
        })
        .collect();
    let mut total = vec!["all tiers".to_owned(), count(sim.tiers.iter().map(|t| t.capacity_tokens).sum())];
    if let Some(b) = bytes {
        total.push(human_bytes(b.bytes(sim.tiers.iter().map(|t| t.capacity_tokens).sum())));
    }
    total.extend([count(sim.hit_tokens), percent(sim.hit_ratio), count(sim.tiers.iter().map(|t| t.evictions).sum())]);
    rows.push(total);
    let mut out = format!("policy {}, placement {}\n", sim.policy, sim.placement);
    out.push_str(&render_table(&headers, &rows, 1));
    out.push_str(&format!(
        "requests: {} simulated ({} input tokens, {} block accesses, {} hit blocks), {} without prefix_hashes or \
         block_size\n",
        count(sim.requests),
        count(sim.input_tokens),
        count(sim.blocks),
        count(sim.hit_blocks),
        count(sim.rows_without_hashes)
    ));
    if let Some(b) = bytes {
        out.push_str(&model_line(b));
    }
    out
}

fn model_line(b: &ByteCapacity) -> String {
    format!(
        "bytes to tokens: {} at {} bytes per element, {} KV bytes per token, κ = {}\n",
        b.model, b.dtype_bytes, b.kv_bytes_per_token, b.kappa
    )
}

/// `8.59e10` → `85.9 GB` (decimal units, three significant digits).
fn human_bytes(bytes: f64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{} {}", infertrace_engine::format::figure(value), units[unit])
}

#[derive(Serialize)]
struct WithModel<'a, T: Serialize> {
    #[serde(flatten)]
    inner: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<CacheSimModel>,
}

/// The simulation as pretty JSON (see the `infertrace-cache` crate documentation), with a final newline.
pub fn cache_sim_json(sim: &Simulation, bytes: Option<&ByteCapacity>) -> String {
    let mut text = serde_json::to_string_pretty(&WithModel { inner: sim, model: bytes.map(ByteCapacity::record) })
        .expect("a simulation serializes");
    text.push('\n');
    text
}

/// What `mrc` computes.
#[derive(Debug, Clone)]
pub struct MrcArgs {
    /// The dataset.
    pub dataset: PathBuf,
    /// Exact, sampled, or decided by the trace's size.
    pub sampling: Sampling,
    /// Capacities to list, as written (tokens, or bytes with `bytes`); default: powers of two.
    pub points: Option<Vec<String>>,
    /// Capacities in bytes through this model.
    pub bytes: Option<ByteCapacity>,
    /// How the query engine that reads and sorts the requests uses the machine.
    pub query: QueryOptions,
}

/// Runs `mrc`: the curve and the report at the capacities asked for.
pub fn mrc(args: &MrcArgs) -> Result<(Mrc, MrcReport, Timing)> {
    let points = args
        .points
        .as_ref()
        .map(|points| {
            points
                .iter()
                .map(|p| parse_capacity(p, args.bytes.as_ref()).with_context(|| format!("--points {p}")))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let mut timing = Timing::default();
    let start = Instant::now();
    let session = stream::open(std::slice::from_ref(&args.dataset), &args.query)?;
    timing.open = start.elapsed();
    let start = Instant::now();
    let curve = curve(&session, args.sampling, &args.query)?;
    timing.compute = start.elapsed();
    let capacities = points.unwrap_or_else(|| curve.default_capacities());
    let report = curve.report(&capacities);
    Ok((curve, report, timing))
}

/// The LRU curve of the session's requests, streamed in arrival order. Only the automatic choice of sampling needs
/// the trace's size first: one aggregation.
pub(crate) fn curve(session: &Session, sampling: Sampling, query: &QueryOptions) -> Result<Mrc> {
    let accesses = match sampling {
        Sampling::Auto => block_accesses(session, query)?,
        _ => 0,
    };
    let mut builder =
        MrcBuilder::new(sampling.rate(accesses).map_err(|e| anyhow!("{e}"))?).map_err(|e| anyhow!("{e}"))?;
    stream::for_each_by_arrival(session, &REPLAY_COLUMNS, query, |row, _| {
        builder.push(row);
        Ok(())
    })?;
    Ok(builder.finish())
}

/// Block accesses of the rows that take part (see [`infertrace_cache::block_accesses`]), by one aggregation.
fn block_accesses(session: &Session, query: &QueryOptions) -> Result<u64> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(cardinality({h})), 0) AS BIGINT) FROM requests WHERE {h} IS NOT NULL AND {b} > 0",
        h = request::PREFIX_HASHES,
        b = request::BLOCK_SIZE,
    );
    let row = stream::one_row(session, query, &sql, "count the block accesses")?;
    Ok(row[0].unwrap_or(0).max(0) as u64)
}

/// The curve as a table (capacity, hit tokens, hit ratio, share of the unbounded hit ratio), then the unbounded
/// ratio and the capacities reaching 50, 90 and 99 % of it.
pub fn render_mrc(report: &MrcReport, bytes: Option<&ByteCapacity>) -> String {
    let mut headers = vec!["capacity (tokens)"];
    if bytes.is_some() {
        headers.push("capacity (bytes)");
    }
    headers.extend(["hit tokens", "hit ratio", "of unbounded"]);
    let share = |ratio: Option<f64>| match (ratio, report.unbounded_hit_ratio) {
        (Some(r), Some(u)) if u > 0.0 => Some(r / u),
        _ => None,
    };
    let rows: Vec<Vec<String>> = report
        .points
        .iter()
        .map(|p| {
            let mut row = vec![count(p.capacity_tokens)];
            if let Some(b) = bytes {
                row.push(human_bytes(b.bytes(p.capacity_tokens)));
            }
            row.extend([count(p.hit_tokens), percent(p.hit_ratio), percent(share(p.hit_ratio))]);
            row
        })
        .collect();
    let mut out = String::from("LRU hit ratio by capacity (one tier; capacities in tokens of KV)\n");
    out.push_str(&render_table(&headers, &rows, 0));
    out.push_str(&format!("unbounded: {}\n", percent(report.unbounded_hit_ratio)));
    let reaching: Vec<String> = report
        .reaching
        .iter()
        .map(|r| {
            let at = r.capacity_tokens.map_or_else(
                || "never".to_owned(),
                |c| match bytes {
                    Some(b) => format!("{} tokens ({})", count(c), human_bytes(b.bytes(c))),
                    None => format!("{} tokens", count(c)),
                },
            );
            format!("{:.0}% at {at}", r.fraction * 100.0)
        })
        .collect();
    out.push_str(&format!("of the unbounded ratio: {}\n", reaching.join(", ")));
    let sampling = if report.sample_rate == 1.0 {
        "exact".to_owned()
    } else {
        format!(
            "SHARDS at rate {} ({} of {} block accesses sampled)",
            report.sample_rate,
            count(report.sampled_blocks),
            count(report.blocks)
        )
    };
    out.push_str(&format!(
        "requests: {} ({} input tokens, {} block accesses, {}), {} without prefix_hashes or block_size\n",
        count(report.requests),
        count(report.input_tokens),
        count(report.blocks),
        sampling,
        count(report.rows_without_hashes)
    ));
    if let Some(b) = bytes {
        out.push_str(&model_line(b));
    }
    out
}

/// The report as pretty JSON (see the `infertrace-cache` crate documentation), with a final newline.
pub fn mrc_json(report: &MrcReport, bytes: Option<&ByteCapacity>) -> String {
    let mut text = serde_json::to_string_pretty(&WithModel { inner: report, model: bytes.map(ByteCapacity::record) })
        .expect("a report serializes");
    text.push('\n');
    text
}

/// The curve as a standalone SVG line chart: the hit ratio against log2 of the capacity in tokens, four points
/// per doubling from the smallest block size to where the curve is flat, with the 50/90/99 % capacities marked.
pub fn mrc_svg(curve: &Mrc, report: &MrcReport) -> String {
    use infertrace_report::plot::{Line, Marker, line_chart};
    let capacities = curve.default_capacities();
    let (low, high) = (capacities[0] as f64, *capacities.last().expect("at least one capacity") as f64);
    let steps = ((high / low).log2() * 4.0).round() as i32;
    let points = (0..=steps)
        .map(|k| {
            let capacity = low * 2f64.powf(f64::from(k) / 4.0);
            (capacity.log2(), curve.hit_ratio(capacity.floor() as u64))
        })
        .collect();
    let markers: Vec<Marker> = report
        .reaching
        .iter()
        .filter_map(|r| {
            let c = r.capacity_tokens?;
            Some(Marker { x: (c.max(1) as f64).log2(), text: format!("{:.0}% of unbounded", r.fraction * 100.0) })
        })
        .collect();
    let name = if curve.is_exact() { "LRU".to_owned() } else { format!("LRU (SHARDS, R = {})", curve.sample_rate) };
    line_chart(
        "LRU hit ratio by cache capacity",
        "capacity (log2 tokens)",
        "hit ratio",
        &[Line { name, points }],
        &markers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_in_tokens() {
        let tokens = |t| parse_capacity(t, None).unwrap();
        assert_eq!(tokens("1000"), 1000);
        assert_eq!(tokens("2M"), 2_000_000);
        assert_eq!(tokens("500k"), 500_000);
        assert_eq!(tokens("0.25M"), 250_000);
        assert_eq!(tokens("1.5G"), 1_500_000_000);
        assert_eq!(tokens("0"), 0);
        assert!(parse_capacity("80GB", None).unwrap_err().to_string().contains("--model"));
        assert!(parse_capacity("2X", None).is_err());
        assert!(parse_capacity("-1", None).is_err());
        assert!(parse_capacity("", None).is_err());
    }

    #[test]
    fn capacities_in_bytes() {
        // A made-up model of 1,000 KV bytes per token, κ = 2: a byte of storage holds 2 bytes of KV.
        let model = ByteCapacity { model: "m".into(), dtype_bytes: 2.0, kappa: 2.0, kv_bytes_per_token: 1000.0 };
        let tokens = |t| parse_capacity(t, Some(&model)).unwrap();
        assert_eq!(tokens("1MB"), 2_000); // 1e6 × 2 / 1000
        assert_eq!(tokens("1M"), 2_000);
        assert_eq!(tokens("1000"), 2); // plain bytes
        assert_eq!(tokens("1KiB"), 2); // ⌊1024 × 2 / 1000⌋
        assert_eq!(tokens("1GiB"), 2_147_483); // ⌊1073741824 × 2 / 1000⌋
        assert_eq!(tokens("1e9"), 2_000_000);
        assert!(parse_capacity("1XB", Some(&model)).is_err());
    }

    #[test]
    fn tiers_are_sorted_fastest_first() {
        let specs = tier_specs(&[(CacheTier::Disk, "3".into()), (CacheTier::Gpu, "1".into())], None).unwrap();
        assert_eq!(
            specs.iter().map(|s| (s.tier, s.capacity_tokens)).collect::<Vec<_>>(),
            [(CacheTier::Gpu, 1), (CacheTier::Disk, 3)]
        );
        assert_eq!(parse_tier("cpu = 2M"), Ok((CacheTier::Cpu, "2M".to_owned())));
        assert!(parse_tier("hbm=2M").is_err());
        assert!(parse_tier("gpu").is_err());
    }
}
