//! `infertrace export`: a segment of datasets in a load generator's format, and a manifest of what it holds.
//!
//! The query engine selects the segment (arrivals in `[from, to)`) and gives the rows in the order the format needs:
//! by arrival, or grouped by session (sessions by first arrival). Sampling keeps whole sessions: each session (or
//! request without one) is kept by a seeded hash of its name, so the reuse inside a session is kept with it.
//! [`infertrace_export::Exporter`] writes the lines. The file is written beside its final path and renamed into
//! place at the end, with its manifest, `<file>.manifest.json`.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use arrow::array::{Array as _, AsArray as _};
use arrow::datatypes::UInt64Type;
use infertrace_adapter::time::format_rfc3339;
use infertrace_export::{Counts, Exporter, Format, Options};
use infertrace_query::{ORDINAL, QueryOptions, Session};
use infertrace_schema::{
    CacheEvent, DatasetWriter, EngineSample, Manifest, Producer, RequestRow, RowCounts, Table, cache_event, request,
    sample,
};
use serde::Serialize;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::stream;

/// One end of the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// An instant, UTC nanoseconds.
    At(i64),
    /// Nanoseconds after the first arrival of the datasets.
    After(i64),
}

/// Which sessions to keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    /// Every one.
    All,
    /// This many: those whose seeded hash is smallest.
    Sessions(u64),
    /// This share of them, by seeded hash.
    Fraction(f64),
}

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportArgs {
    /// The datasets (their requests are one table).
    pub datasets: Vec<PathBuf>,
    /// The file to write.
    pub output: PathBuf,
    /// Replace `output` if it exists.
    pub force: bool,
    /// Start of the segment; the first arrival when `None`.
    pub from: Option<Bound>,
    /// End of the segment (excluded); the last arrival's when `None`.
    pub to: Option<Bound>,
    /// Which sessions to keep.
    pub sample: Sample,
    /// A dataset of the segment instead of a load generator's file: `options.format` is then unused.
    pub dataset: bool,
    /// Format, block size, time scale, clipping and seed (`start_ns` is set from the segment).
    pub options: Options,
    /// How the query engine uses the machine.
    pub query: QueryOptions,
}

/// What an export wrote, as `<file>.manifest.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct ExportManifest {
    /// infertrace's version.
    pub infertrace_version: &'static str,
    /// The format written.
    pub format: &'static str,
    /// Who reads it, and the source its fields were taken from.
    pub readers: &'static str,
    /// The file's name (no directory).
    pub file: String,
    /// The datasets, as given.
    pub datasets: Vec<String>,
    /// The segment.
    pub segment: SegmentRecord,
    /// The options that shaped it.
    pub options: OptionsRecord,
    /// How the text of the formats with text was made; absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PromptsRecord>,
    /// What was written and what was left out.
    pub counts: ExportCounts,
}

/// The segment exported.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentRecord {
    /// Its start: the instant timestamps count from (RFC 3339).
    pub from: String,
    /// Its end, excluded (RFC 3339); absent when it runs to the last arrival.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// The options of an export.
#[derive(Debug, Clone, Serialize)]
pub struct OptionsRecord {
    /// Tokens per `hash_ids` block (formats with block ids).
    pub block_size: u32,
    /// Factor on times and delays.
    pub time_scale: f64,
    /// Prompt length clipped to.
    pub max_input_tokens: Option<u32>,
    /// Sessions kept (`--sessions`).
    pub sessions: Option<u64>,
    /// Share of sessions kept (`--sample`).
    pub sample: Option<f64>,
    /// Seed of the sampling and of the text of unhashed blocks.
    pub seed: u64,
}

/// How synthetic prompts were made.
#[derive(Debug, Clone, Serialize)]
pub struct PromptsRecord {
    /// Tokenizers under which every word is one token (so a prompt has exactly its length).
    pub exact_under: [&'static str; 2],
    /// Words drawn from.
    pub words: usize,
}

/// Counts of an export.
#[derive(Debug, Clone, Serialize)]
pub struct ExportCounts {
    /// Request rows in the datasets.
    pub dataset_requests: u64,
    /// Rows with an arrival outside the segment.
    pub outside_segment: u64,
    /// Rows of sessions not sampled.
    pub sampled_out: u64,
    /// What the exporter wrote and left out.
    #[serde(flatten)]
    pub written: Counts,
}

/// The columns an export reads.
const COLUMNS: [&str; 10] = [
    request::SESSION_ID,
    request::ARRIVAL_TIME,
    request::COMPLETION_TIME,
    request::LAST_TOKEN_TIME,
    request::E2E_S,
    request::INPUT_TOKENS,
    request::OUTPUT_TOKENS,
    request::MAX_TOKENS,
    request::PREFIX_HASHES,
    request::BLOCK_SIZE,
];

/// The table the export registers: the requests with their ordinals.
const TABLE: &str = "infertrace_export";

/// Writes the export of `args` and its manifest, and returns the manifest.
pub fn export(args: &ExportArgs) -> Result<ExportManifest> {
    if args.output.exists() && !args.force && !args.dataset {
        bail!("output {} exists; pass --force to replace it", args.output.display());
    }
    let query = &args.query;
    let session = stream::open(&args.datasets, query)?;
    let what = "read the requests";
    session
        .datasets()
        .register_ordered::<RequestRow>(TABLE, &COLUMNS)
        .map_err(|e| stream::engine_error(e, query, what))?;
    let arrival = format!("arrow_cast({}, 'Int64')", request::ARRIVAL_TIME);
    let totals = stream::one_row(
        &session,
        query,
        &format!("SELECT count(*), count({arrival}), min({arrival}) FROM {TABLE}"),
        what,
    )?;
    let count = |i: usize| totals[i].unwrap_or(0) as u64;
    let (rows, with_arrival) = (count(0), count(1));
    let Some(first) = totals[2] else {
        bail!("no request of {} has an arrival time: there is nothing to replay", names(&args.datasets));
    };
    let resolve = |bound: Bound| match bound {
        Bound::At(instant) => instant,
        Bound::After(offset) => first.saturating_add(offset),
    };
    let from = args.from.map_or(first, resolve);
    let to = args.to.map(resolve);
    if to.is_some_and(|to| to <= from) {
        bail!("the segment ends before it starts: --to must be after --from");
    }
    let mut segment = format!("{arrival} >= {from}");
    if let Some(to) = to {
        segment.push_str(&format!(" AND {arrival} < {to}"));
    }
    let in_segment = stream::one_row(&session, query, &format!("SELECT count(*) FROM {TABLE} WHERE {segment}"), what)?
        [0]
    .unwrap_or(0) as u64;

    let seed = args.options.seed;
    let keep = match args.sample {
        Sample::All => Keep::All,
        Sample::Fraction(share) => Keep::Below((share * 2f64.powi(64)).min(u64::MAX as f64) as u64),
        Sample::Sessions(n) => Keep::In(smallest_units(&session, query, &segment, n, seed)?),
    };

    if args.dataset {
        return write_segment(args, &session, &segment, &keep, from, to, [rows, with_arrival, in_segment]);
    }
    let options = Options { start_ns: from, ..args.options.clone() };
    let format = options.format;
    let order = if format.by_session() {
        let arrival_col = request::ARRIVAL_TIME;
        let session_col = request::SESSION_ID;
        format!(
            "SELECT * FROM (SELECT *, CASE WHEN {session_col} IS NULL THEN {arrival_col} \
             ELSE min({arrival_col}) OVER (PARTITION BY {session_col}) END AS infertrace_start FROM {TABLE} \
             WHERE {segment}) ORDER BY infertrace_start, {session_col} NULLS FIRST, {arrival_col}, {ORDINAL}"
        )
    } else {
        format!("SELECT * FROM {TABLE} WHERE {segment} ORDER BY {}, {ORDINAL}", request::ARRIVAL_TIME)
    };
    let partial = partial_path(&args.output);
    let file = File::create(&partial).with_context(|| format!("cannot write {}", args.output.display()))?;
    let mut exporter = Exporter::new(BufWriter::new(file), options.clone());
    let mut sampled_out = 0u64;
    let what = "sort the segment";
    let frame = session.block_on(session.datasets().sql(&order)).map_err(|e| stream::engine_error(e, query, what))?;
    let written = |e: std::io::Error| anyhow::Error::new(e).context(format!("cannot write {}", args.output.display()));
    let result = stream::for_each_batch(&session, frame, query, what, |batch| {
        let (rows, ordinals) = stream::rows_of::<RequestRow>(batch)?;
        for (row, ordinal) in rows.iter().zip(ordinals) {
            if !keep.keeps(unit(row, ordinal, seed)) {
                sampled_out += 1;
                continue;
            }
            exporter.push(row, ordinal).map_err(written)?;
        }
        Ok(())
    });
    let counts = result.and_then(|()| exporter.finish().map_err(written));
    let mut counts = match counts {
        Ok(counts) => counts,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    counts.without_arrival = rows - with_arrival;
    let manifest = ExportManifest {
        infertrace_version: env!("CARGO_PKG_VERSION"),
        format: format.name(),
        readers: format.readers(),
        file: file_name(&args.output),
        datasets: args.datasets.iter().map(|d| d.display().to_string()).collect(),
        segment: SegmentRecord { from: format_rfc3339(from), to: to.map(format_rfc3339) },
        options: options_record(args),
        prompts: format.has_text().then(|| PromptsRecord {
            exact_under: ["cl100k_base", "o200k_base"],
            words: infertrace_export::prompt::WORDS.len(),
        }),
        counts: ExportCounts {
            dataset_requests: rows,
            outside_segment: with_arrival - in_segment,
            sampled_out,
            written: counts,
        },
    };
    let manifest_path = manifest_path(&args.output);
    let mut json = serde_json::to_string_pretty(&manifest)?;
    json.push('\n');
    std::fs::write(&manifest_path, json).with_context(|| format!("cannot write {}", manifest_path.display()))?;
    std::fs::rename(&partial, &args.output).with_context(|| format!("cannot write {}", args.output.display()))?;
    Ok(manifest)
}

/// Writes the rows of the segment that `keep` keeps, unchanged, as a dataset at `args.output`, with the samples and
/// cache events of the segment's time range; returns what the export's manifest would say.
fn write_segment(
    args: &ExportArgs,
    session: &Session,
    segment: &str,
    keep: &Keep,
    from: i64,
    to: Option<i64>,
    [rows, with_arrival, in_segment]: [u64; 3],
) -> Result<ExportManifest> {
    let query = &args.query;
    let seed = args.options.seed;
    let written = |e: infertrace_schema::DatasetError| {
        anyhow::Error::new(e).context(format!("cannot write output {}", args.output.display()))
    };
    let mut writer = DatasetWriter::create(&args.output, args.force).map_err(written)?;
    let mut counts = Counts { without_arrival: rows - with_arrival, ..Counts::default() };
    let mut sessions = std::collections::HashSet::new();
    let mut sampled_out = 0;
    let all = "infertrace_export_all";
    let columns: Vec<&str> = RequestRow::COLUMNS.iter().map(|c| c.name).collect();
    let what = "read the requests";
    session
        .datasets()
        .register_ordered::<RequestRow>(all, &columns)
        .map_err(|e| stream::engine_error(e, query, what))?;
    let sql = format!("SELECT * FROM {all} WHERE {segment} ORDER BY {ORDINAL}");
    let frame = session.block_on(session.datasets().sql(&sql)).map_err(|e| stream::engine_error(e, query, what))?;
    stream::for_each_batch(session, frame, query, what, |batch| {
        let (rows, ordinals) = stream::rows_of::<RequestRow>(batch)?;
        for (row, ordinal) in rows.iter().zip(ordinals) {
            if !keep.keeps(unit(row, ordinal, seed)) {
                sampled_out += 1;
                continue;
            }
            counts.requests += 1;
            if let Some(id) = &row.session_id
                && sessions.insert(xxh3_64_with_seed(id.as_bytes(), 0))
            {
                counts.sessions += 1;
            }
            writer.push_request(row).map_err(written)?;
        }
        Ok(())
    })?;
    let in_range = |column: &str| {
        let time = format!("arrow_cast({column}, 'Int64')");
        let mut range = format!("{time} >= {from}");
        if let Some(to) = to {
            range.push_str(&format!(" AND {time} < {to}"));
        }
        range
    };
    let samples = in_range(sample::TIME);
    stream::for_each_row_where::<EngineSample>(session, "infertrace_export_samples", query, &samples, |row| {
        writer.push_sample(&row).map_err(written)
    })?;
    let events = in_range(cache_event::TIME);
    stream::for_each_row_where::<CacheEvent>(session, "infertrace_export_events", query, &events, |row| {
        writer.push_cache_event(&row).map_err(written)
    })?;
    let manifests = session.datasets().manifests();
    let first = &manifests[0];
    writer
        .finish(Manifest {
            schema_version: infertrace_schema::SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: first.assumptions.clone(),
            inputs: manifests.iter().flat_map(|m| m.inputs.iter().cloned()).collect(),
            skipped: Vec::new(),
            merge: None,
            cache_sim: None,
            partition_by: None,
            hash_salt: first.hash_salt,
            capture: None,
            rows: RowCounts::default(),
        })
        .map_err(written)?;
    Ok(ExportManifest {
        infertrace_version: env!("CARGO_PKG_VERSION"),
        format: "dataset",
        readers: "infertrace (metrics, compare, report, …)",
        file: file_name(&args.output),
        datasets: args.datasets.iter().map(|d| d.display().to_string()).collect(),
        segment: SegmentRecord { from: format_rfc3339(from), to: to.map(format_rfc3339) },
        options: options_record(args),
        prompts: None,
        counts: ExportCounts {
            dataset_requests: rows,
            outside_segment: with_arrival - in_segment,
            sampled_out,
            written: counts,
        },
    })
}

fn options_record(args: &ExportArgs) -> OptionsRecord {
    OptionsRecord {
        block_size: args.options.block_size,
        time_scale: args.options.time_scale,
        max_input_tokens: args.options.max_input_tokens,
        sessions: match args.sample {
            Sample::Sessions(n) => Some(n),
            _ => None,
        },
        sample: match args.sample {
            Sample::Fraction(share) => Some(share),
            _ => None,
        },
        seed: args.options.seed,
    }
}

/// The summary `export` prints.
pub fn render_export(manifest: &ExportManifest, output: &Path) -> String {
    let c = &manifest.counts;
    let w = &c.written;
    let mut text = format!(
        "wrote {} ({}): {} requests, {} sessions, from {}{}\n",
        output.display(),
        manifest.format,
        w.requests,
        w.sessions,
        manifest.segment.from,
        manifest.segment.to.as_ref().map(|to| format!(" to {to}")).unwrap_or_default(),
    );
    let left = [
        ("outside the segment", c.outside_segment),
        ("sampled out", c.sampled_out),
        ("without an arrival", w.without_arrival),
        ("without a prompt length", w.without_input_tokens),
        ("without an output length or limit", w.without_output_tokens),
    ];
    let left: Vec<String> = left.iter().filter(|(_, n)| *n > 0).map(|(what, n)| format!("{n} {what}")).collect();
    if !left.is_empty() {
        text.push_str(&format!("left out: {}\n", left.join(", ")));
    }
    if w.clipped > 0 {
        text.push_str(&format!("clipped: {} prompts, {} tokens\n", w.clipped, w.clipped_tokens));
    }
    if w.sessions_restarted > 0 {
        text.push_str(&format!(
            "sessions restarted (a turn that does not continue the one before): {}\n",
            w.sessions_restarted
        ));
    }
    if manifest.format != "dataset" {
        text.push_str(&format!("manifest: {}\n", manifest_path(output).display()));
    }
    text
}

/// Which sampling units to keep.
enum Keep {
    All,
    Below(u64),
    In(std::collections::HashSet<u64>),
}

impl Keep {
    fn keeps(&self, unit: u64) -> bool {
        match self {
            Keep::All => true,
            Keep::Below(limit) => unit < *limit,
            Keep::In(kept) => kept.contains(&unit),
        }
    }
}

/// The seeded hash of a row's sampling unit: its session, or the row itself when it has none.
fn unit(row: &RequestRow, ordinal: u64, seed: u64) -> u64 {
    match &row.session_id {
        Some(session) => xxh3_64_with_seed(session.as_bytes(), seed),
        None => xxh3_64_with_seed(&ordinal.to_le_bytes(), seed ^ 0x5e55_1011),
    }
}

/// The `n` smallest unit hashes among the segment's sessions and session-less requests.
fn smallest_units(
    session: &Session,
    query: &QueryOptions,
    segment: &str,
    n: u64,
    seed: u64,
) -> Result<std::collections::HashSet<u64>> {
    let what = "list the sessions";
    let sql = format!(
        "SELECT DISTINCT {s}, CASE WHEN {s} IS NULL THEN {ORDINAL} END AS o FROM {TABLE} WHERE {segment}",
        s = request::SESSION_ID
    );
    let frame = session.block_on(session.datasets().sql(&sql)).map_err(|e| stream::engine_error(e, query, what))?;
    let mut heap: BinaryHeap<u64> = BinaryHeap::new();
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    stream::for_each_batch(session, frame, query, what, |batch| {
        let sessions = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Utf8)?;
        let sessions = sessions.as_string::<i32>();
        let ordinals = batch.column(1).as_primitive::<UInt64Type>();
        for i in 0..batch.num_rows() {
            let hash = if sessions.is_valid(i) {
                xxh3_64_with_seed(sessions.value(i).as_bytes(), seed)
            } else {
                xxh3_64_with_seed(&ordinals.value(i).to_le_bytes(), seed ^ 0x5e55_1011)
            };
            if heap.len() < limit {
                heap.push(hash);
            } else if heap.peek().is_some_and(|&top| hash < top) {
                heap.pop();
                heap.push(hash);
            }
        }
        Ok(())
    })?;
    Ok(heap.into_iter().collect())
}

fn names(datasets: &[PathBuf]) -> String {
    datasets.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `<file>.manifest.json`, beside the file.
pub fn manifest_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_owned();
    name.push(".manifest.json");
    output.with_file_name(name)
}

/// Where the file is written before it is renamed into place.
fn partial_path(output: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(output.file_name().unwrap_or_default());
    name.push(".partial");
    output.with_file_name(name)
}

/// Parses `--from`/`--to`: an RFC 3339 instant, or an offset from the first arrival (`90s`, `15m`, `1.5h`, `0`).
pub fn parse_bound(text: &str) -> Result<Bound, String> {
    if let Ok(instant) = infertrace_adapter::time::parse_rfc3339(text) {
        return Ok(Bound::At(instant));
    }
    let error =
        || format!("{text:?} is neither an RFC 3339 instant (2026-12-07T10:00:00Z) nor an offset (90s, 15m, 1.5h)");
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor = match unit {
        "ms" => 1e6,
        "" | "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "d" => 86_400e9,
        _ => return Err(error()),
    };
    let value: f64 = number.parse().map_err(|_| error())?;
    let ns = value * factor;
    if !(ns.is_finite() && ns >= 0.0 && ns < i64::MAX as f64) {
        return Err(error());
    }
    Ok(Bound::After(ns.round() as i64))
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A load generator's file.
    Trace(Format),
    /// The segment's rows as a canonical dataset, unchanged: the production side of `compare`.
    Dataset,
}

/// Parses `--format`.
pub fn parse_format(text: &str) -> Result<Target, String> {
    if text == "dataset" {
        return Ok(Target::Dataset);
    }
    Format::parse(text).map(Target::Trace).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format {text:?}; expected one of {} or dataset", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_instants_or_offsets() {
        assert_eq!(parse_bound("2026-12-07T10:00:00Z"), Ok(Bound::At(1_796_637_600_000_000_000)));
        assert_eq!(parse_bound("90s"), Ok(Bound::After(90_000_000_000)));
        assert_eq!(parse_bound("1.5h"), Ok(Bound::After(5_400_000_000_000)));
        assert_eq!(parse_bound("0"), Ok(Bound::After(0)));
        assert_eq!(parse_bound("250ms"), Ok(Bound::After(250_000_000)));
        assert!(parse_bound("10 minutes").is_err());
        assert!(parse_bound("-5s").is_err());
    }

    #[test]
    fn the_manifest_and_the_partial_file_sit_beside_the_output() {
        assert_eq!(manifest_path(Path::new("out/trace.jsonl")), Path::new("out/trace.jsonl.manifest.json"));
        assert_eq!(partial_path(Path::new("out/trace.jsonl")), Path::new("out/.trace.jsonl.partial"));
    }
}
