//! `infertrace replay` and `infertrace calibrate`: read datasets and a cluster configuration, simulate, write a
//! canonical dataset.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use arrow::array::{Array as _, AsArray as _, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef};
use infertrace_engine::format::{count, percent, seconds};
use infertrace_model::Catalog;
use infertrace_query::datafusion::dataframe::DataFrameWriteOptions;
use infertrace_query::datafusion::prelude::ParquetReadOptions;
use infertrace_query::{ORDINAL, QueryOptions, Session};
use infertrace_replay::calibrate::{CALIBRATION_REPLAY, Calibration, Errors, Means, calibrate_by};
use infertrace_replay::{Config, ReplayOptions, Replayed, replay_stream};
use infertrace_schema::{
    Assumptions, DatasetWriter, Manifest, Producer, RequestRow, RowCounts, SCHEMA_VERSION, Table, TableBuilder as _,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::stream::{self, ScratchFile};

/// Reads and checks a cluster configuration.
pub fn read_config(path: &Path) -> Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read configuration {}", path.display()))?;
    Config::from_toml(&text).map_err(|e| anyhow!("invalid configuration {}: {e}", path.display()))
}

pub use crate::model::catalog;

/// Replays `datasets` on `config` and writes the result to `output`; with `timing`, prints the wall time of the
/// replay (reading the sorted requests and simulating, without writing) to stderr — never into an output.
///
/// The replayable requests stream in arrival order from a sort that spills; each replayed row goes to a scratch
/// file as its outcome becomes final, and is sorted back into input order as the output is written. Memory holds
/// the requests in flight, not the trace.
#[allow(clippy::too_many_arguments)]
pub fn replay_to(
    datasets: &[PathBuf],
    config_path: &Path,
    catalog: &Catalog,
    options: &ReplayOptions,
    output: &Path,
    force: bool,
    timing: bool,
    query: &QueryOptions,
) -> Result<Replayed> {
    let config = read_config(config_path)?;
    let session = stream::open(datasets, query)?;
    let what = "sort the requests by arrival";
    let (rows, usable, origin) = replay_counts(&session, query)?;
    let started = std::time::Instant::now();
    let scratch = session.scratch().join("replayed.parquet");
    let mut replayed_rows = OrdinalWriter::create(&scratch)?;
    let columns: Vec<&str> = RequestRow::COLUMNS.iter().map(|c| c.name).collect();
    let name = "infertrace_replay";
    session
        .datasets()
        .register_ordered::<RequestRow>(name, &columns)
        .map_err(|e| stream::engine_error(e, query, what))?;
    // The simulation's order: its arrival offsets (as `infertrace_replay::request` computes them), then the index;
    // rows already in arrival order are in that order as they are.
    let frame = session
        .block_on(async {
            let order = if session.datasets().arrivals_sorted().await? {
                String::new()
            } else {
                arrival_order(origin, options)
            };
            session
                .datasets()
                .sql(&format!(
                    "SELECT * FROM {name} WHERE arrival_time IS NOT NULL AND input_tokens IS NOT NULL \
                     ORDER BY {order}{ORDINAL}"
                ))
                .await
        })
        .map_err(|e| stream::engine_error(e, query, what))?;
    let batches = session.batches(frame).map_err(|e| stream::engine_error(e, query, what))?;
    let failed = RefCell::new(None);
    let arrivals = indexed_rows(batches.map(|b| b.map_err(|e| stream::engine_error(e, query, what))), &failed);
    let mut written: Result<()> = Ok(());
    let mut replayed = replay_stream(&config, catalog, origin, arrivals, options, &mut |i, row| {
        if written.is_ok() {
            written = replayed_rows.push(i as u64, &row);
        }
    })
    .map_err(|e| anyhow!("cannot replay: {e}"))?;
    if let Some(error) = failed.into_inner() {
        return Err(error);
    }
    written?;
    replayed.skipped = rows - usable;
    if timing {
        let wall = started.elapsed().as_secs_f64();
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "timing: {usable} requests read in arrival order and simulated in {wall:.3} s of wall time ({:.0} \
                 requests/s)",
                usable as f64 / wall
            );
        }
    }
    replayed_rows.finish()?;
    write_replayed(&session, query, &scratch, &replayed, output, force)?;
    Ok(replayed)
}

/// The rows of each batch in turn, each with its ordinal. An error ends the stream and is kept in `failed`, to be
/// reported once the replay that reads the stream returns.
fn indexed_rows<'a>(
    batches: impl Iterator<Item = Result<RecordBatch>> + 'a,
    failed: &'a RefCell<Option<anyhow::Error>>,
) -> impl Iterator<Item = (usize, RequestRow)> + 'a {
    batches
        .map_while(move |batch| match batch.and_then(|b| stream::rows_of::<RequestRow>(&b)) {
            Ok((rows, ordinals)) => Some(rows.into_iter().zip(ordinals).map(|(row, n)| (n as usize, row))),
            Err(e) => {
                *failed.borrow_mut() = Some(e);
                None
            }
        })
        .flatten()
}

/// Requests in all, those replayed (with an arrival and input tokens), and the earliest arrival of those.
fn replay_counts(session: &Session, query: &QueryOptions) -> Result<(u64, u64, i64)> {
    let row = stream::one_row(
        session,
        query,
        "SELECT count(*), \
         sum(CASE WHEN arrival_time IS NOT NULL AND input_tokens IS NOT NULL THEN 1 ELSE 0 END), \
         min(CASE WHEN input_tokens IS NOT NULL THEN arrow_cast(arrival_time, 'Int64') END) FROM requests",
        "count the requests",
    )?;
    let count = |n: Option<i64>| n.unwrap_or(0).max(0) as u64;
    Ok((count(row[0]), count(row[1]), row[2].unwrap_or(0)))
}

/// Replayed rows with their index, written to a Parquet file as they come.
struct OrdinalWriter {
    file: ScratchFile,
    schema: SchemaRef,
    builder: <RequestRow as Table>::Builder,
    ordinals: Vec<u64>,
}

/// Rows per batch of the scratch file.
const SCRATCH_BATCH: usize = 8192;

impl OrdinalWriter {
    fn create(path: &Path) -> Result<Self> {
        let mut fields: Vec<_> = RequestRow::schema().fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(ORDINAL, DataType::UInt64, false)));
        let schema = Arc::new(Schema::new(fields));
        let file = ScratchFile::create(path, schema.clone())?;
        Ok(Self { file, schema, builder: Default::default(), ordinals: Vec::new() })
    }

    fn push(&mut self, ordinal: u64, row: &RequestRow) -> Result<()> {
        self.builder.append(row);
        self.ordinals.push(ordinal);
        if self.ordinals.len() == SCRATCH_BATCH { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<()> {
        let mut columns = self.builder.finish().columns().to_vec();
        columns.push(Arc::new(UInt64Array::from(std::mem::take(&mut self.ordinals))));
        self.file.write(&RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// Closes the file.
    fn finish(mut self) -> Result<()> {
        if !self.ordinals.is_empty() {
            self.flush()?;
        }
        self.file.finish().map(drop)
    }
}

/// Writes the output dataset: the replayed rows of the scratch file in input order, then the samples.
fn write_replayed(
    session: &Session,
    query: &QueryOptions,
    scratch: &Path,
    replayed: &Replayed,
    output: &Path,
    force: bool,
) -> Result<()> {
    let context = || format!("cannot write output {}", output.display());
    let mut writer = DatasetWriter::create(output, force).with_context(context)?;
    let what = "sort the replayed rows back into input order";
    let frame = session
        .block_on(async {
            let path = scratch.to_string_lossy();
            session
                .datasets()
                .context()
                .register_parquet("infertrace_replayed", path.as_ref(), ParquetReadOptions::default())
                .await?;
            session.datasets().sql(&format!("SELECT * FROM infertrace_replayed ORDER BY {ORDINAL}")).await
        })
        .map_err(|e| stream::engine_error(e, query, what))?;
    stream::for_each_batch(session, frame, query, what, |batch| {
        for row in
            RequestRow::from_batch(batch).with_context(|| format!("cannot read scratch file {}", scratch.display()))?
        {
            writer.push_request(&row).with_context(context)?;
        }
        Ok(())
    })?;
    for sample in &replayed.samples {
        writer.push_sample(sample).with_context(context)?;
    }
    let manifests = session.datasets().manifests();
    let first = manifests.first().map(|m| m.assumptions.clone());
    writer
        .finish(Manifest {
            schema_version: SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: first.unwrap_or(Assumptions {
                year: None,
                utc_offset: "+00:00".into(),
                start: "1970-01-01T00:00:00Z".into(),
                block_size: None,
            }),
            inputs: manifests.iter().flat_map(|m| m.inputs.iter().cloned()).collect(),
            skipped: Vec::new(),
            merge: None,
            cache_sim: None,
            partition_by: None,
            hash_salt: manifests.iter().find_map(|m| m.hash_salt),
            capture: None,
            rows: RowCounts::default(),
        })
        .with_context(context)?;
    Ok(())
}

/// What a replay did, for the terminal.
pub fn render_replay(replayed: &Replayed, output: &Path) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "replayed {} requests ({} completed, {} rejected for KV memory, {} rows skipped without arrival or input \
         tokens) in {} iterations ({} folded) over {} simulated; {} preemptions; {} KV blocks per instance",
        count(replayed.replayed),
        count(replayed.completed),
        count(replayed.rejected),
        count(replayed.skipped),
        count(replayed.iterations),
        count(replayed.folded),
        seconds(replayed.makespan_s),
        count(replayed.preemptions),
        count(replayed.blocks_per_instance)
    )
    .unwrap();
    writeln!(out, "wrote {}", output.display()).unwrap();
    out
}

/// Calibrates `config` against the measured datasets.
///
/// The measured means are summed over the requests in input order. The replayable requests are written once, in
/// replay order, to a scratch file that each of the calibration's few hundred replays streams; a replay keeps each
/// row's three durations (24 bytes a row) to sum them in input order, not the rows.
pub fn calibrate_from(
    datasets: &[PathBuf],
    config_path: &Path,
    catalog: &Catalog,
    query: &QueryOptions,
) -> Result<(Config, Calibration)> {
    let config = read_config(config_path)?;
    let session = stream::open(datasets, query)?;
    let measured = measured_means(&session, query)?;
    let (rows, _, origin) = replay_counts(&session, query)?;
    let requests = session.scratch().join("calibrate.parquet");
    write_replay_order(&session, query, origin, &requests)?;
    let calibration = calibrate_by(&config, measured, |c| replayed_means(c, catalog, origin, &requests, rows))?;
    let mut fitted = config;
    fitted.efficiency = calibration.efficiency;
    Ok((fitted, calibration))
}

/// The means of `ttft_s`, `tpot_s` and `e2e_s` over the requests (durations filled from their instants), summed
/// in input order.
fn measured_means(session: &Session, query: &QueryOptions) -> Result<Means> {
    let what = "read the measured durations";
    let frame = session
        .block_on(infertrace_engine::rows_in_input_order(session.datasets(), &["ttft", "tpot", "e2e"]))
        .map_err(|e| stream::engine_error(e, query, what))?;
    let mut sums = DurationSums::default();
    stream::for_each_batch(session, frame, query, what, |batch| {
        let columns: Vec<_> = (0..3).map(|c| batch.column(c).as_primitive::<Float64Type>()).collect();
        for i in 0..batch.num_rows() {
            sums.add(columns.iter().map(|c| c.is_valid(i).then(|| c.value(i))));
        }
        Ok(())
    })?;
    Ok(sums.means())
}

/// Σ and count of each of the three durations, in the order added, from −0.0 as [`Means::of`] sums.
#[derive(Debug)]
struct DurationSums([(f64, u64); 3]);

impl Default for DurationSums {
    fn default() -> Self {
        Self([(-0.0, 0); 3])
    }
}

impl DurationSums {
    fn add(&mut self, values: impl Iterator<Item = Option<f64>>) {
        for (slot, value) in self.0.iter_mut().zip(values) {
            if let Some(v) = value.filter(|v| v.is_finite()) {
                slot.0 += v;
                slot.1 += 1;
            }
        }
    }

    fn means(&self) -> Means {
        let mean = |(sum, n): (f64, u64)| (n > 0).then(|| sum / n as f64);
        Means { ttft_s: mean(self.0[0]), tpot_s: mean(self.0[1]), e2e_s: mean(self.0[2]) }
    }
}

/// The columns a replay reads of a request.
const REPLAYED_COLUMNS: [&str; 5] = ["arrival_time", "input_tokens", "output_tokens", "prefix_hashes", "block_size"];

/// Writes the replayable requests, with [`REPLAYED_COLUMNS`] and their ordinal, in the simulation's order.
fn write_replay_order(session: &Session, query: &QueryOptions, origin: i64, path: &Path) -> Result<()> {
    let what = "sort the requests by arrival";
    let name = "infertrace_calibrate";
    let datasets = session.datasets();
    datasets
        .register_ordered::<RequestRow>(name, &REPLAYED_COLUMNS)
        .map_err(|e| stream::engine_error(e, query, what))?;
    session
        .block_on(async {
            let order = if datasets.arrivals_sorted().await? {
                String::new()
            } else {
                arrival_order(origin, &CALIBRATION_REPLAY)
            };
            let options = DataFrameWriteOptions::new().with_single_file_output(true);
            datasets
                .sql(&format!(
                    "SELECT * FROM {name} WHERE arrival_time IS NOT NULL AND input_tokens IS NOT NULL \
                     ORDER BY {order}{ORDINAL}"
                ))
                .await?
                .write_parquet(&path.to_string_lossy(), options, None)
                .await?;
            Ok::<(), infertrace_query::QueryError>(())
        })
        .map_err(|e| stream::engine_error(e, query, what))?;
    Ok(())
}

/// The SQL sort keys of the simulation's order before the ordinal: its arrival offsets, as
/// `infertrace_replay::request` computes them.
fn arrival_order(origin: i64, options: &ReplayOptions) -> String {
    format!(
        "CAST(arrow_cast(arrival_time, 'Int64') - ({origin}) AS DOUBLE) / CAST(1000000000 AS DOUBLE) \
         / CAST('{:?}' AS DOUBLE), ",
        options.rate_scale
    )
}

/// The means of the requests of the file at `path` (see [`write_replay_order`]) replayed on `config`, summed in
/// input order (`rows` requests in all).
fn replayed_means(config: &Config, catalog: &Catalog, origin: i64, path: &Path, rows: u64) -> Result<Means> {
    let context = || format!("cannot read scratch file {}", path.display());
    let file = std::fs::File::open(path).with_context(context)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).with_context(context)?.build().with_context(context)?;
    let failed = RefCell::new(None);
    let arrivals = indexed_rows(reader.map(|b| b.with_context(context)), &failed);
    let mut durations: Vec<[f64; 3]> = vec![[f64::NAN; 3]; usize::try_from(rows).unwrap_or(usize::MAX)];
    replay_stream(config, catalog, origin, arrivals, &CALIBRATION_REPLAY, &mut |i, row| {
        let value = |d: Option<f64>| d.unwrap_or(f64::NAN);
        durations[i] = [value(row.ttft_s), value(row.tpot_s), value(row.e2e_s)];
    })
    .map_err(|e| anyhow!("cannot calibrate: {e}"))?;
    if let Some(error) = failed.into_inner() {
        return Err(error);
    }
    let mut sums = DurationSums::default();
    for d in &durations {
        sums.add(d.iter().map(|&v| Some(v)));
    }
    Ok(sums.means())
}

fn error_cell(e: Option<f64>) -> String {
    e.map_or("-".to_owned(), |e| format!("{:+.1}%", e * 100.0))
}

/// A calibration, for the terminal.
pub fn render_calibration(c: &Calibration) -> String {
    let mut out = String::new();
    let mean = |v: Option<f64>| v.map_or("-".to_owned(), seconds);
    let line = |out: &mut String, name: &str, m: &infertrace_replay::calibrate::Means, e: Option<&Errors>| {
        writeln!(
            out,
            "{name:<10} TTFT {} {}, TPOT {} {}, e2e {} {}",
            mean(m.ttft_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.ttft))),
            mean(m.tpot_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.tpot))),
            mean(m.e2e_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.e2e))),
        )
        .unwrap();
    };
    writeln!(out, "means (error against measured):").unwrap();
    line(&mut out, "measured", &c.measured, None);
    line(&mut out, "as given", &c.before, Some(&c.before_errors));
    line(&mut out, "fitted", &c.after, Some(&c.after_errors));
    writeln!(
        out,
        "fitted efficiency: mfu {}, mbu {}, step overhead {} ({} replays)",
        percent(Some(c.efficiency.mfu)),
        percent(Some(c.efficiency.mbu)),
        seconds(c.efficiency.step_overhead_s),
        count(c.replays)
    )
    .unwrap();
    out
}
