//! Canonical infertrace datasets as Apache DataFusion tables: the one way the analysis commands read datasets.
//!
//! [`Datasets::open`] takes any number of dataset directories, plain or Hive-partitioned, and registers in one
//! DataFusion session the tables `requests`, `samples` and `cache_events`, each the union of that table in every
//! dataset, typed by the current canonical schema ([`infertrace_schema::Table::schema`]). Every file's schema version
//! is checked first, from its footer, as [`infertrace_schema::Dataset::open`] does: a newer dataset is refused with a
//! one-line error. A dataset of an older schema version reads with its missing columns null.
//!
//! Key decision: scans, projection, filters, sorts, joins and aggregations are DataFusion's, which reads only the
//! columns a query uses, streams record batches, and spills sorts and aggregations to disk past the memory budget
//! of [`QueryOptions`]. This crate only says where the tables are. [`Datasets::scan`] is the stream of one table's
//! batches with a projection, for work a query engine cannot express (a simulation that walks requests in order);
//! [`Datasets::sql`] runs a user's query. [`Datasets::requests_by_arrival`] is the order every replay walks in.
//! A caller that is not async opens a [`Session`], which runs the queries on a runtime of its own and hands out
//! their results as iterators of batches.
//!
//! A table partitioned by `source` or `instance` does not store that column in its files (Hive layout): each part's
//! value, read from its directory name by [`infertrace_schema::table_files`], is put back as a constant column. Rows
//! come in no particular order: a query that needs one says `ORDER BY`.
//!
//! It deliberately prints nothing and computes no figure: the engine says what a figure is, the CLI renders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::catalog::empty::EmptyTable;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{DataFrame, Expr, SessionConfig, SessionContext, cast, col, lit};
use datafusion::scalar::ScalarValue;
use infertrace_schema::{CacheEvent, DatasetError, EngineSample, Manifest, RequestRow, Table, TableFile};

pub use datafusion;

mod ordered;
mod pool;

/// The column [`Datasets::register_ordered`] adds: a row's position in input order, from 0.
pub const ORDINAL: &str = "ordinal";

/// Memory a session's sorts, joins and aggregations may hold before they spill, unless told otherwise: 1 GiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 1 << 30;

/// An error opening or querying datasets: a dataset that cannot be read, or the query engine's error.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A dataset's manifest or table file could not be read, or is of a newer schema.
    #[error("cannot read dataset {}", dir.display())]
    Dataset {
        /// The dataset.
        dir: PathBuf,
        /// What failed.
        #[source]
        source: DatasetError,
    },
    /// A path DataFusion cannot address.
    #[error("cannot read {path}: {message}")]
    Path {
        /// The file.
        path: PathBuf,
        /// What the engine said.
        message: String,
    },
    /// The same dataset was given twice: its rows would count twice in some figures and once in others.
    #[error("dataset {} is given twice (as {} and {}): give each dataset once", first.display(), first.display(), again.display())]
    Twice {
        /// The first time it was given.
        first: PathBuf,
        /// The second.
        again: PathBuf,
    },
    /// Request rows on clocks that cannot be compared: some count from a start given to `normalize` (clock
    /// `relative`), others are on the wall clock.
    #[error(
        "cannot put requests of {relative} (relative clock, counted from normalize's --start) and of {absolute} (wall clock) on one time line: break them down with --by source (metrics, compare), or normalize them into separate datasets"
    )]
    MixedClocks {
        /// An input whose rows count from `--start`.
        relative: String,
        /// An input whose rows are on the wall clock.
        absolute: String,
    },
    /// A scratch file (under `--spill-dir`) could not be written or read back.
    #[error("cannot write scratch file {}: {source}: free space there or choose another spill directory", path.display())]
    Scratch {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The query engine failed: a query that does not parse or plan, a file that does not decode, no room to spill.
    /// Its message is the innermost error's, on one line.
    #[error("{}", one_line(.0))]
    Engine(Box<DataFusionError>),
}

impl From<DataFusionError> for QueryError {
    fn from(error: DataFusionError) -> Self {
        QueryError::Engine(Box::new(error))
    }
}

impl From<datafusion::arrow::error::ArrowError> for QueryError {
    fn from(error: datafusion::arrow::error::ArrowError) -> Self {
        DataFusionError::from(error).into()
    }
}

/// DataFusion's message on one line, without the context it wraps around the error that matters.
fn one_line(error: &DataFusionError) -> String {
    error.find_root().to_string().replace('\n', " ")
}

/// How a session uses the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryOptions {
    /// Bytes that sorts, joins and aggregations may hold together before spilling to disk.
    pub memory_limit: usize,
    /// Where spills go; the system's temporary directory when `None`.
    pub spill_dir: Option<PathBuf>,
    /// Partitions each plan is split into, at most the threads that run it; 0 for one per core.
    pub threads: usize,
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self { memory_limit: DEFAULT_MEMORY_LIMIT, spill_dir: None, threads: 0 }
    }
}

/// One or more datasets, registered as the tables `requests`, `samples` and `cache_events` of one session.
pub struct Datasets {
    context: SessionContext,
    manifests: Vec<Manifest>,
    /// The files of each table, by table name, in input order: datasets as given, then path order.
    files: BTreeMap<&'static str, Vec<TableFile>>,
}

impl std::fmt::Debug for Datasets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datasets").field("session", &self.context.session_id()).finish_non_exhaustive()
    }
}

impl Datasets {
    /// Registers the datasets at `dirs`, checking every manifest and table file first.
    pub async fn open(dirs: &[PathBuf], options: &QueryOptions) -> Result<Self, QueryError> {
        let mut seen: BTreeMap<PathBuf, &PathBuf> = BTreeMap::new();
        for dir in dirs {
            // A directory that does not resolve fails below, with the dataset's own error.
            if let Ok(real) = std::fs::canonicalize(dir)
                && let Some(first) = seen.insert(real, dir)
            {
                return Err(QueryError::Twice { first: first.clone(), again: dir.clone() });
            }
        }
        let manifests = dirs
            .iter()
            .map(|dir| infertrace_schema::read_manifest(dir).map_err(dataset_error(dir)))
            .collect::<Result<Vec<_>, _>>()?;
        let context = session(options)?;
        let mut files = BTreeMap::new();
        files.insert(RequestRow::NAME, register::<RequestRow>(&context, dirs).await?);
        files.insert(EngineSample::NAME, register::<EngineSample>(&context, dirs).await?);
        files.insert(CacheEvent::NAME, register::<CacheEvent>(&context, dirs).await?);
        Ok(Self { context, manifests, files })
    }

    /// The DataFusion session the tables are registered in.
    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    /// The manifests of the datasets, in the order given.
    pub fn manifests(&self) -> &[Manifest] {
        &self.manifests
    }

    /// The rows of table `T` of every dataset, as a stream of record batches holding `columns` only, in that order.
    /// Only those columns are read from the files.
    pub async fn scan<T: Table>(&self, columns: &[&str]) -> Result<SendableRecordBatchStream, QueryError> {
        Ok(self.table::<T>(columns).await?.execute_stream().await?)
    }

    /// The plan of [`scan`](Self::scan), not yet run: to filter, sort or aggregate it further.
    pub async fn table<T: Table>(&self, columns: &[&str]) -> Result<DataFrame, QueryError> {
        Ok(self.context.table(T::NAME).await?.select_columns(columns)?)
    }

    /// The plan of a SQL query over the tables, not yet run.
    pub async fn sql(&self, query: &str) -> Result<DataFrame, QueryError> {
        Ok(self.context.sql(query).await?)
    }

    /// Registers as table `name` the rows of table `T` in input order (the datasets as given, each table's files in
    /// path order, each file's rows in order), with `columns` only and a last column [`ORDINAL`]: the row's
    /// position in that order, from 0. Queries whose figures depend on the order of ties (the first of two requests
    /// that arrived at the same instant) sort on it.
    ///
    /// The files are read one after the other on one thread, each with only `columns`; a query that does not need
    /// the order reads the plain table, which is faster.
    pub fn register_ordered<T: Table>(&self, name: &str, columns: &[&str]) -> Result<(), QueryError> {
        let canonical = T::schema();
        let mut fields = columns
            .iter()
            .map(|&c| Ok(Arc::new(canonical.field_with_name(c)?.clone().with_metadata(Default::default()))))
            .collect::<Result<Vec<_>, DataFusionError>>()?;
        fields.push(Arc::new(Field::new(ORDINAL, DataType::UInt64, false)));
        let schema = Arc::new(Schema::new(fields));
        let files = self.files.get(T::NAME).cloned().unwrap_or_default();
        let partition = Arc::new(ordered::Ordered { schema: schema.clone(), files });
        // Declared sorted by the ordinal, so that `ORDER BY ordinal` costs nothing.
        let table =
            StreamingTable::try_new(schema, vec![partition])?.with_sort_order(vec![col(ORDINAL).sort(true, false)]);
        // Registering a name again replaces the table.
        self.context.deregister_table(name)?;
        self.context.register_table(name, Arc::new(table))?;
        Ok(())
    }

    /// The request rows in replay order: by `arrival_time`, rows without one last, ties in input order; with
    /// `columns` and [`ORDINAL`] (see [`register_ordered`](Self::register_ordered)). The sort spills past the
    /// session's memory budget; when the rows are in that order already ([`arrivals_sorted`](Self::arrivals_sorted))
    /// they are read as they are. It registers the tables `infertrace_by_arrival` and `infertrace_arrivals`.
    pub async fn requests_by_arrival(&self, columns: &[&str]) -> Result<DataFrame, QueryError> {
        let mut read: Vec<&str> = columns.to_vec();
        if !read.contains(&ARRIVAL_TIME) {
            read.push(ARRIVAL_TIME);
        }
        let sorted = self.arrivals_sorted().await?;
        self.register_ordered::<RequestRow>(BY_ARRIVAL, &read)?;
        let selected = columns.iter().map(|c| format!("\"{c}\", ")).collect::<String>();
        let order = if sorted { String::new() } else { format!("{ARRIVAL_TIME} ASC NULLS LAST, ") };
        self.sql(&format!("SELECT {selected}{ORDINAL} FROM {BY_ARRIVAL} ORDER BY {order}{ORDINAL}")).await
    }

    /// Whether the request rows in input order are already in replay order: arrivals never decrease, and rows
    /// without one come after every row with one. Traces are usually written in arrival order, and then a replay
    /// reads them as they are instead of sorting them (one pass over one column decides).
    pub async fn arrivals_sorted(&self) -> Result<bool, QueryError> {
        use datafusion::arrow::array::{Array as _, AsArray as _};
        use futures::StreamExt as _;
        self.register_ordered::<RequestRow>(ARRIVALS, &[ARRIVAL_TIME])?;
        let frame =
            self.sql(&format!("SELECT arrow_cast({ARRIVAL_TIME}, 'Int64') FROM {ARRIVALS} ORDER BY {ORDINAL}")).await?;
        let mut stream = frame.execute_stream().await?;
        // The last arrival seen; `None` once a row without one was seen.
        let mut last: Option<Option<i64>> = None;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let column = batch.column(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            for i in 0..batch.num_rows() {
                let arrival = column.is_valid(i).then(|| column.value(i));
                let in_order = match (last, arrival) {
                    (None, _) | (Some(_), None) => true,
                    (Some(Some(previous)), Some(a)) => previous <= a,
                    (Some(None), Some(_)) => false,
                };
                if !in_order {
                    return Ok(false);
                }
                last = Some(match (last, arrival) {
                    (Some(None), _) | (_, None) => None,
                    (_, Some(a)) => Some(a),
                });
            }
        }
        Ok(true)
    }
}

const BY_ARRIVAL: &str = "infertrace_by_arrival";
const ARRIVALS: &str = "infertrace_arrivals";
const ARRIVAL_TIME: &str = infertrace_schema::request::ARRIVAL_TIME;

/// [`Datasets`] with a runtime of their own, for a caller that is not async: it runs the session's futures, hands
/// out query results as plain iterators of batches, and keeps a scratch directory.
pub struct Session {
    runtime: tokio::runtime::Runtime,
    datasets: Datasets,
    scratch: tempfile::TempDir,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("datasets", &self.datasets).finish_non_exhaustive()
    }
}

impl Session {
    /// Opens the datasets at `dirs` (see [`Datasets::open`]) on a runtime of `options.threads` threads (one per
    /// core when 0).
    pub fn open(dirs: &[PathBuf], options: &QueryOptions) -> Result<Self, QueryError> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if options.threads > 0 {
            builder.worker_threads(options.threads);
        }
        let io = |e| QueryError::from(DataFusionError::IoError(e));
        let runtime = builder.build().map_err(io)?;
        let datasets = runtime.block_on(Datasets::open(dirs, options))?;
        let scratch = match &options.spill_dir {
            Some(dir) => tempfile::TempDir::with_prefix_in(".infertrace-scratch", dir),
            None => tempfile::TempDir::with_prefix(".infertrace-scratch"),
        }
        .map_err(io)?;
        Ok(Self { runtime, datasets, scratch })
    }

    /// A directory for the session's own intermediate files, under the spill directory (the system's temporary
    /// directory by default); removed with the session.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// The datasets.
    pub fn datasets(&self) -> &Datasets {
        &self.datasets
    }

    /// Runs `future` to its end on the session's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs `frame` and returns its batches as they come: memory holds a few batches, not the result.
    pub fn batches(&self, frame: DataFrame) -> Result<Batches<'_>, QueryError> {
        let stream = self.block_on(frame.execute_stream())?;
        Ok(Batches { runtime: &self.runtime, stream })
    }
}

/// The batches of a query run by a [`Session`], in the order the query gives them.
pub struct Batches<'a> {
    runtime: &'a tokio::runtime::Runtime,
    stream: SendableRecordBatchStream,
}

impl std::fmt::Debug for Batches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches").field("schema", &self.stream.schema()).finish_non_exhaustive()
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<RecordBatch, QueryError>;

    fn next(&mut self) -> Option<Self::Item> {
        use futures::StreamExt as _;
        self.runtime.block_on(self.stream.next()).map(|batch| batch.map_err(QueryError::from))
    }
}

/// A session whose sorts, joins and aggregations spill past `options.memory_limit`.
fn session(options: &QueryOptions) -> Result<SessionContext, QueryError> {
    let mut disk = DiskManagerBuilder::default();
    if let Some(dir) = &options.spill_dir {
        disk = disk.with_mode(DiskManagerMode::Directories(vec![dir.clone()]));
    }
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool::HeadroomPool::new(options.memory_limit)))
        .with_disk_manager_builder(disk)
        .build_arc()?;
    let mut config = SessionConfig::new().with_information_schema(true);
    if options.threads > 0 {
        config = config.with_target_partitions(options.threads);
    }
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// Registers table `T` of every dataset in `dirs` as one table named `T::NAME`.
///
/// Files that hold every column of the table (whole tables, and parts partitioned by date) are one listing table.
/// Parts that lack their partition column are one listing table per partition value, with the value put back as a
/// constant; all are then one union.
async fn register<T: Table>(context: &SessionContext, dirs: &[PathBuf]) -> Result<Vec<TableFile>, QueryError> {
    // Without the schema's metadata, so that every branch of the union has the same schema.
    let schema: SchemaRef = Arc::new(Schema::new(T::schema().fields().clone()));
    let mut whole = Vec::new();
    let mut parts: BTreeMap<(String, Option<String>), Vec<PathBuf>> = BTreeMap::new();
    let mut all = Vec::new();
    for dir in dirs {
        all.extend(infertrace_schema::table_files::<T>(dir).map_err(dataset_error(dir))?);
    }
    for TableFile { path, partition } in all.iter().cloned() {
        match partition {
            Some(key_value) if schema.index_of(&key_value.0).is_ok() => {
                parts.entry(key_value).or_default().push(path);
            }
            _ => whole.push(path),
        }
    }
    let mut frames = Vec::new();
    if !whole.is_empty() {
        frames.push(context.read_table(listing(&whole, schema.clone())?)?);
    }
    for ((key, value), files) in parts {
        let stored = Arc::new(Schema::new(
            schema.fields().iter().filter(|field| *field.name() != key).cloned().collect::<Vec<_>>(),
        ));
        let frame = context.read_table(listing(&files, stored)?)?;
        let columns: Vec<Expr> = schema
            .fields()
            .iter()
            .map(|field| {
                if *field.name() == key {
                    let value = ScalarValue::Utf8(value.clone());
                    cast(lit(value), field.data_type().clone()).alias(&key)
                } else {
                    col(field.name())
                }
            })
            .collect();
        frames.push(frame.select(columns)?);
    }
    let mut frames = frames.into_iter();
    let table: Arc<dyn TableProvider> = match frames.next() {
        Some(first) => frames.try_fold(first, DataFrame::union)?.into_view(),
        None => Arc::new(EmptyTable::new(schema)),
    };
    context.register_table(T::NAME, table)?;
    Ok(all)
}

/// A listing table of the Parquet `files`, read as `schema` (a column a file lacks reads as null).
fn listing(files: &[PathBuf], schema: SchemaRef) -> Result<Arc<dyn TableProvider>, QueryError> {
    let urls = files.iter().map(|path| url(path)).collect::<Result<Vec<_>, _>>()?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls).with_listing_options(options).with_schema(schema);
    Ok(Arc::new(ListingTable::try_new(config)?))
}

/// A [`QueryError::Dataset`] maker for `dir`, for `map_err`.
fn dataset_error(dir: &Path) -> impl FnOnce(DatasetError) -> QueryError + use<'_> {
    move |source| QueryError::Dataset { dir: dir.to_owned(), source }
}

/// The URL DataFusion reads `path` by.
fn url(path: &Path) -> Result<ListingTableUrl, QueryError> {
    let absolute =
        std::path::absolute(path).map_err(|e| QueryError::Path { path: path.to_owned(), message: e.to_string() })?;
    ListingTableUrl::parse(absolute.to_string_lossy())
        .map_err(|e| QueryError::Path { path: path.to_owned(), message: one_line(&e) })
}
