//! `infertrace merge`: open datasets, join their request rows with the engine, write one dataset.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{Context as _, Result};
use arrow::array::{ArrayRef, AsArray as _, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, UInt64Type};
use infertrace_engine::{MergeKey, MergeOptions, combine};
use infertrace_query::datafusion::prelude::ParquetReadOptions;
use infertrace_query::{ORDINAL, QueryOptions, Session};
use infertrace_schema::{
    Assumptions, CacheEvent, DatasetWriter, EngineSample, Manifest, MergeRecord, Producer, RequestRow, RowCounts,
    SCHEMA_VERSION, Table,
};

use crate::registry::CLIENT_FORMATS;
use crate::stream::{self, ScratchFile};

/// What to merge and how.
#[derive(Debug, Clone)]
pub struct MergeArgs {
    /// Datasets, as given on the command line.
    pub datasets: Vec<PathBuf>,
    /// Output directory.
    pub output: PathBuf,
    /// Largest arrival difference of rows joined by time, in seconds.
    pub tolerance_s: f64,
    /// Largest token-count difference of rows joined by time.
    pub token_slack: u32,
    /// Sources to take as client-observed besides the benchmark formats ([`CLIENT_FORMATS`]).
    pub client_sources: Vec<String>,
    /// Replace an existing output.
    pub force: bool,
    /// How the query engine uses the machine.
    pub query: QueryOptions,
}

/// Merges the datasets into `args.output` and returns the manifest written.
///
/// The manifest lists the inputs of every merged dataset (their paths as those manifests recorded them), takes the
/// assumptions of the first, and records what the merge did under `merge`.
///
/// The rows are read through the query engine. With one source there is nothing to match: the rows stream sorted
/// by arrival. With several, matching reads each row's key (source, id, arrival, token counts: a few dozen bytes)
/// in input order, then the full rows stream joined to their place in the output, sorted by it (spilling past
/// `--memory-limit`), each request's rows combined as they come.
pub fn merge(args: &MergeArgs) -> Result<Manifest> {
    let query = &args.query;
    let session = stream::open(&args.datasets, query)?;
    let client_sources: BTreeSet<String> =
        CLIENT_FORMATS.iter().map(|s| (*s).to_owned()).chain(args.client_sources.iter().cloned()).collect();
    let options = MergeOptions {
        tolerance_ns: (args.tolerance_s * 1e9).round() as u64,
        token_slack: args.token_slack,
        client_sources,
    };
    let datasets = session.datasets();
    let what = "merge the requests";
    let engine = |e| stream::engine_error(e, query, what);
    session.block_on(datasets.sql("SET datafusion.optimizer.prefer_hash_join = false")).map_err(engine)?;
    let columns: Vec<&str> = RequestRow::COLUMNS.iter().map(|c| c.name).collect();
    datasets.register_ordered::<RequestRow>(ROWS, &columns).map_err(engine)?;
    // Counted over the rows as they are read (a dataset given twice counts twice, as its rows are merged twice).
    let sources = count(&session, query, &format!("SELECT count(DISTINCT source) FROM {ROWS}"))?;
    let (frame, mut record) = if sources <= 1 {
        // One source: every row is a request of its own, in arrival order (rows without one last, then input order).
        let rows = count(&session, query, &format!("SELECT count(*) FROM {ROWS}"))?;
        let frame = session
            .block_on(datasets.sql(&format!(
                "SELECT *, {ORDINAL} AS position FROM {ROWS} ORDER BY {ARRIVAL} ASC NULLS LAST, {ORDINAL}"
            )))
            .map_err(engine)?;
        (frame, single_source_record(&session, query, &options, rows)?)
    } else {
        let keys = keys(&session, query)?;
        let plan = infertrace_engine::plan(&keys, &options);
        drop(keys);
        let map = session.scratch().join("positions.parquet");
        write_positions(&map, &plan.requests)?;
        let frame = session
            .block_on(async {
                let path = map.to_string_lossy();
                datasets.context().register_parquet(POSITIONS, path.as_ref(), ParquetReadOptions::default()).await?;
                datasets
                    .sql(&format!(
                        "SELECT r.*, p.position FROM {ROWS} r JOIN {POSITIONS} p ON r.{ORDINAL} = p.{ORDINAL} \
                         ORDER BY p.position, r.{ORDINAL}"
                    ))
                    .await
            })
            .map_err(engine)?;
        (frame, plan.record)
    };
    let output = &args.output;
    let context = || format!("cannot write output {}", output.display());
    let mut writer = DatasetWriter::create(output, args.force).with_context(context)?;
    // The rows of one request come together: combined when there are several.
    let mut group: Vec<RequestRow> = Vec::new();
    let mut at: Option<u64> = None;
    let flush = |group: &mut Vec<RequestRow>, record: &mut MergeRecord, writer: &mut DatasetWriter| -> Result<()> {
        let row = match group.len() {
            0 => return Ok(()),
            1 => group.pop().expect("one row"),
            _ => combine(group.iter().collect(), &options.client_sources, record),
        };
        group.clear();
        writer.push_request(&row).with_context(context)
    };
    stream::for_each_batch(&session, frame, query, what, |batch| {
        let (rows, _) = stream::rows_of::<RequestRow>(batch)?;
        let positions = batch.column_by_name("position").expect("selected").as_primitive::<UInt64Type>();
        for (mut row, &position) in rows.into_iter().zip(positions.values()) {
            // Negative spans stay null, as in `normalize`.
            let _ = row.fill_durations();
            if at != Some(position) {
                flush(&mut group, &mut record, &mut writer)?;
                at = Some(position);
            }
            group.push(row);
        }
        Ok(())
    })?;
    flush(&mut group, &mut record, &mut writer)?;
    stream::for_each_row::<EngineSample>(&session, "infertrace_merge_samples", query, |row| {
        writer.push_sample(&row).with_context(context)
    })?;
    stream::for_each_row::<CacheEvent>(&session, "infertrace_merge_cache_events", query, |row| {
        writer.push_cache_event(&row).with_context(context)
    })?;
    record.datasets = args.datasets.iter().map(|p| display(p)).collect();
    let manifests = datasets.manifests();
    let first = manifests.first();
    writer
        .finish(Manifest {
            schema_version: SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: first.map_or_else(
                || Assumptions {
                    year: None,
                    utc_offset: "+00:00".into(),
                    start: "1970-01-01T00:00:00Z".into(),
                    block_size: None,
                },
                |m| m.assumptions.clone(),
            ),
            inputs: manifests.iter().flat_map(|m| m.inputs.iter().cloned()).collect(),
            skipped: manifests.iter().flat_map(|m| m.skipped.iter().cloned()).collect(),
            merge: Some(record),
            cache_sim: None,
            partition_by: None,
            hash_salt: manifests.iter().find_map(|m| m.hash_salt),
            capture: None,
            rows: RowCounts::default(),
        })
        .with_context(context)
}

/// Tables this module registers.
const ROWS: &str = "infertrace_merge_rows";
const POSITIONS: &str = "infertrace_merge_positions";
const ARRIVAL: &str = infertrace_schema::request::ARRIVAL_TIME;

/// The one number of a `SELECT count(…)`.
fn count(session: &Session, query: &QueryOptions, sql: &str) -> Result<u64> {
    let row = stream::one_row(session, query, sql, "count the requests")?;
    Ok(row[0].unwrap_or(0).max(0) as u64)
}

/// The record of a merge of one source's `rows` rows: each is a request of its own.
fn single_source_record(
    session: &Session,
    query: &QueryOptions,
    options: &MergeOptions,
    rows: u64,
) -> Result<MergeRecord> {
    let mut record = infertrace_engine::plan(&[], options).record;
    if rows > 0 {
        let what = "name the source";
        let frame = session
            .block_on(session.datasets().sql(&format!("SELECT CAST(source AS VARCHAR) FROM {ROWS} LIMIT 1")))
            .map_err(|e| stream::engine_error(e, query, what))?;
        let mut source = String::new();
        stream::for_each_batch(session, frame, query, what, |batch| {
            if batch.num_rows() > 0 {
                let column = arrow::compute::cast(batch.column(0), &DataType::Utf8)?;
                source = column.as_string::<i32>().value(0).to_owned();
            }
            Ok(())
        })?;
        record.rows_in.insert(source.clone(), rows);
        record.unmatched.insert(source, rows);
    }
    Ok(record)
}

/// The matching key of every request row, in input order.
fn keys(session: &Session, query: &QueryOptions) -> Result<Vec<MergeKey>> {
    use infertrace_schema::request;
    let what = "read the requests' ids, arrivals and token counts";
    let name = "infertrace_merge_keys";
    let columns = [
        request::SOURCE,
        request::REQUEST_ID,
        request::SOURCE_FILE,
        request::ARRIVAL_TIME,
        request::INPUT_TOKENS,
        request::OUTPUT_TOKENS,
    ];
    session
        .datasets()
        .register_ordered::<RequestRow>(name, &columns)
        .map_err(|e| stream::engine_error(e, query, what))?;
    let frame = session
        .block_on(session.datasets().sql(&format!("SELECT * FROM {name} ORDER BY {ORDINAL}")))
        .map_err(|e| stream::engine_error(e, query, what))?;
    let mut keys = Vec::new();
    stream::for_each_batch(session, frame, query, what, |batch| {
        let (rows, _) = stream::rows_of::<RequestRow>(batch)?;
        keys.extend(rows.iter().map(MergeKey::of));
        Ok(())
    })?;
    Ok(keys)
}

/// Writes each row's position in the output: `(ordinal, position)` for every member of every request.
fn write_positions(path: &Path, requests: &[Vec<usize>]) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(ORDINAL, DataType::UInt64, false),
        Field::new("position", DataType::UInt64, false),
    ]));
    let mut file = ScratchFile::create(path, schema.clone())?;
    for (chunk, members) in requests.chunks(65_536).enumerate() {
        let (mut ordinals, mut positions) = (Vec::new(), Vec::new());
        for (k, rows) in members.iter().enumerate() {
            for &i in rows {
                ordinals.push(i as u64);
                positions.push((chunk * 65_536 + k) as u64);
            }
        }
        let columns: Vec<ArrayRef> =
            vec![Arc::new(UInt64Array::from(ordinals)), Arc::new(UInt64Array::from(positions))];
        file.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
    }
    file.finish().map(drop)
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// What the merge did, in a few lines for the terminal.
pub fn render_merge(manifest: &Manifest, output: &Path) -> String {
    use crate::summary::count;
    let Some(m) = &manifest.merge else { return String::new() };
    let rows_in: u64 = m.rows_in.values().sum();
    let per_source = |map: &std::collections::BTreeMap<String, u64>| {
        map.iter().map(|(s, n)| format!("{s} {}", count(*n))).collect::<Vec<_>>().join(", ")
    };
    let mut out = format!(
        "request rows: {} ({})\nrequests: {}, of which {} from several sources ({} rows joined by id, {} by time, {} \
         of them with several candidates)\nunmatched rows: {}\n",
        count(rows_in),
        per_source(&m.rows_in),
        count(manifest.rows.requests),
        count(m.merged_requests),
        count(m.matched_by_id),
        count(m.matched_by_time),
        count(m.ambiguous),
        per_source(&m.unmatched),
    );
    out.push_str(&format!(
        "samples: {}, cache events: {}\nwrote {}\n",
        count(manifest.rows.samples),
        count(manifest.rows.cache_events),
        output.display()
    ));
    out
}
