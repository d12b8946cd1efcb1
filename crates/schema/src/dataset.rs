//! Writing and reading a dataset directory: `requests.parquet`, `samples.parquet`, `cache_events.parquet` and
//! `manifest.json`.
//!
//! The writer streams: rows go to Arrow builders, every [`BATCH_ROWS`] rows become a record batch handed through a
//! bounded channel to the table's encoding thread, whose Parquet writer flushes a row group every [`ROW_GROUP_ROWS`]
//! rows, so memory does not grow with the input and encoding overlaps with parsing (same bytes as in one thread).
//! Rows with long lists (prefix hashes of 30,000-token prompts) end a batch after [`BATCH_LIST_BYTES`] and a row
//! group after [`ROW_GROUP_BYTES`], so they cannot make memory grow either. With a partition key
//! ([`DatasetWriter::create_partitioned`]) the encoding thread splits the batches into Hive partitions instead of
//! writing one file (see [`crate::partition`]).
//! Everything is written into a temporary sibling directory that is renamed into place by [`DatasetWriter::finish`]:
//! an interrupted run leaves the previous dataset (or nothing), never half of a new one.
//!
//! Replacing an existing dataset takes two renames (the old one aside to `.<name>.infertrace-old`, the new one in),
//! as std offers no atomic exchange of directories. A run killed between the two leaves no dataset at the output
//! path but the previous one, complete, aside; the next [`DatasetWriter::create`] for that output puts it back
//! before anything else (and removes an `-old` left after a completed replacement).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::manifest::{Manifest, RowCounts};
use crate::partition::{PartitionKey, PartitionedTable, part_files, restore_key};
use crate::table::{Table, TableBuilder};
use crate::tables::{CacheEvent, EngineSample, RequestRow, cache_event, sample};
use crate::writer::{SharedChunks, TableFileWriter};

/// Version of the canonical schema written by this crate. Readers refuse datasets of a newer version.
pub const SCHEMA_VERSION: u32 = 1;
/// Parquet key-value metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "infertrace.schema_version";
/// Parquet key-value metadata key holding the table name.
pub const TABLE_KEY: &str = "infertrace.table";
/// File name of the manifest inside a dataset.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Rows accumulated in builders before they become one record batch.
pub const BATCH_ROWS: usize = 8192;
/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;
/// Bytes a row group holds at most before it is written (encoded size), whatever its rows. With
/// [`BATCH_LIST_BYTES`], what bounds the writer's memory for rows with long lists of prefix hashes: halving both (from
/// 32 and 8 MiB) took the peak of a Bailian trace from about 220 to 160 MiB and of a 1 GiB vLLM log from 138 to
/// 108 MiB, for files 0.03–0.04% larger.
pub const ROW_GROUP_BYTES: usize = 16 << 20;
/// Bytes of list values (prefix hashes) the builders hold at most before they become a record batch.
pub const BATCH_LIST_BYTES: usize = 4 << 20;

/// Why a dataset could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A file-system operation failed.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What was attempted (`create`, `rename`, `read`, …).
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Parquet encoding or decoding failed.
    #[error("cannot {action} parquet file {}", path.display())]
    Parquet {
        /// What was attempted.
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The output exists and replacing it was not asked for.
    #[error("output {} already exists; pass --force to replace it", path.display())]
    Exists {
        /// The existing output.
        path: PathBuf,
    },
    /// The dataset was written by a newer infertrace.
    #[error(
        "{} has schema version {found}, newer than the {supported} this infertrace reads; upgrade infertrace",
        path.display()
    )]
    NewerSchema {
        /// The file concerned.
        path: PathBuf,
        /// Version found in the file.
        found: u32,
        /// Newest version this crate reads.
        supported: u32,
    },
    /// The file does not carry infertrace metadata.
    #[error("{} is not an infertrace table (no valid {SCHEMA_VERSION_KEY} metadata)", path.display())]
    NotInfertrace {
        /// The file concerned.
        path: PathBuf,
    },
    /// The manifest is not valid JSON of the expected shape.
    #[error("invalid manifest {}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

type Result<T, E = DatasetError> = std::result::Result<T, E>;

pub(crate) fn io_error<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> DatasetError + 'p {
    move |source| DatasetError::Io { action, path: path.to_owned(), source }
}

/// Streams rows into a new dataset directory.
#[derive(Debug)]
pub struct DatasetWriter {
    final_dir: PathBuf,
    temp_dir: PathBuf,
    replace: bool,
    requests: TableWriter<RequestRow>,
    samples: TableWriter<EngineSample>,
    cache_events: TableWriter<CacheEvent>,
    partition: Option<PartitionKey>,
    finished: bool,
}

struct TableWriter<T: Table> {
    path: PathBuf,
    builder: T::Builder,
    /// Bytes of a row's list values, summed in `list_bytes` to end a batch early.
    bytes_of: fn(&T) -> usize,
    list_bytes: usize,
    /// Record batches on their way to the encoding thread; `None` once closed.
    batches: Option<SyncSender<RecordBatch>>,
    encoder: Option<JoinHandle<Result<()>>>,
    rows: u64,
}

/// Record batches waiting for the encoding thread: bounds memory at a few batches per table.
const BATCHES_AHEAD: usize = 2;

/// Where a table's encoding thread writes its batches.
enum TableSink<T: Table> {
    /// One file, `<table>.parquet`.
    Whole(Box<TableFileWriter<BufWriter<File>>>, PathBuf),
    /// Hive partitions, `<table>/<key>=<value>/part-0.parquet`.
    Partitioned(PartitionedTable<T>),
}

impl<T: Table> TableSink<T> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            TableSink::Whole(writer, path) => write_batch(writer, batch).map_err(parquet_error("write", path)),
            TableSink::Partitioned(table) => table.write(batch),
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            TableSink::Whole(writer, path) => {
                let mut out = writer.into_inner().map_err(parquet_error("finish", &path))?;
                out.flush().map_err(io_error("write", &path))?;
                out.get_ref().sync_all().map_err(io_error("sync", &path))
            }
            TableSink::Partitioned(table) => table.finish(),
        }
    }
}

/// Writes `batch`, then closes the row group if it holds more than [`ROW_GROUP_BYTES`]: a row group is also closed by
/// size, so that long prefix-hash lists cannot make it hold the table.
pub(crate) fn write_batch<W: io::Write + Send>(
    writer: &mut TableFileWriter<W>,
    batch: &RecordBatch,
) -> Result<(), parquet::errors::ParquetError> {
    writer.write(batch)?;
    if writer.in_progress_size() > ROW_GROUP_BYTES {
        writer.flush()?;
    }
    Ok(())
}

impl<T: Table> std::fmt::Debug for TableWriter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter").field("path", &self.path).field("rows", &self.rows).finish_non_exhaustive()
    }
}

/// A [`DatasetError::Parquet`] maker for `path`, for `map_err`.
pub(crate) fn parquet_error(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(parquet::errors::ParquetError) -> DatasetError + use<> {
    let path = path.to_owned();
    move |source| DatasetError::Parquet { action, path, source }
}

/// How every table file is written: zstd level 3, [`ROW_GROUP_ROWS`] rows per row group, and the schema version and
/// table name in the key-value metadata.
///
/// Columns whose values mostly grow by small steps — every timestamp, `source_line`, and the items of `prefix_hashes`
/// (block ids in the public traces) — are delta-encoded (`DELTA_BINARY_PACKED`) instead of dictionary-encoded: on a
/// generated SGLang log this makes `samples` 37% smaller, on a Mooncake trace `requests` 25%. Plain strings (request
/// and session ids, unique or nearly, and error text) are written without a dictionary as `DELTA_BYTE_ARRAY` (each
/// value as the length of the prefix it shares with the one before, and the rest): ids such as `r12-0` or `code:1234`
/// shrink 5 to 8 times against plain values, and even random UUIDs 6%; floats (durations, sample values) are plain,
/// without a dictionary: 7% smaller (measured with pyarrow on the same tables; `docs/performance.md`, and
/// `docs/performance-history.md`, sixteenth pass). Dictionary text and integer counts keep their dictionaries, which
/// measured smaller there, except `cache_events.block_hash` and `parent_hash`: random 64-bit values, with which a
/// dictionary made the table 19–23% larger and slower to write (the generated KV-event streams of every engine), so
/// they are plain. Readers: Spark 3.3 or later, Trino, DuckDB 0.10 or later, Polars, pyarrow, Velox.
///
/// `samples.metric` and `samples.instance`, and `cache_events.event`, `tier` and `instance`, are written without
/// statistics: every row group interleaves all the metrics (events, tiers) and ranks (workers) of the lines it
/// holds, so their minimum and maximum never let a reader skip one, and the writer compared every value's bytes to
/// keep them (3% of the CPU time of an SGLang log).
pub(crate) fn writer_properties<T: Table>() -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("3 is a valid zstd level")))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(SCHEMA_VERSION_KEY.to_owned(), SCHEMA_VERSION.to_string()),
            KeyValue::new(TABLE_KEY.to_owned(), T::NAME.to_owned()),
        ]));
    for field in T::schema().fields() {
        let path = match field.data_type() {
            DataType::Timestamp(..) => vec![field.name().clone()],
            DataType::UInt64 if field.name() == "source_line" => vec![field.name().clone()],
            DataType::List(item) if item.data_type() == &DataType::UInt64 => {
                vec![field.name().clone(), "list".to_owned(), item.name().clone()]
            }
            DataType::Dictionary(..)
                if (T::NAME == EngineSample::NAME
                    && [sample::METRIC, sample::INSTANCE].contains(&field.name().as_str()))
                    || (T::NAME == CacheEvent::NAME
                        && [cache_event::EVENT, cache_event::TIER, cache_event::INSTANCE]
                            .contains(&field.name().as_str())) =>
            {
                builder = builder.set_column_statistics_enabled(
                    ColumnPath::new(vec![field.name().clone()]),
                    EnabledStatistics::None,
                );
                continue;
            }
            DataType::Utf8 => {
                let path = ColumnPath::new(vec![field.name().clone()]);
                builder = builder
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path, Encoding::DELTA_BYTE_ARRAY);
                continue;
            }
            DataType::Float64 | DataType::UInt64
                if field.data_type() == &DataType::Float64
                    || (T::NAME == CacheEvent::NAME
                        && [cache_event::BLOCK_HASH, cache_event::PARENT_HASH].contains(&field.name().as_str())) =>
            {
                builder = builder.set_column_dictionary_enabled(ColumnPath::new(vec![field.name().clone()]), false);
                continue;
            }
            _ => continue,
        };
        let path = ColumnPath::new(path);
        builder = builder
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    builder.build()
}

impl<T: Table + 'static> TableWriter<T> {
    /// Creates the table's file (or, partitioned, its directory) and starts its encoding thread: Parquet encoding
    /// and zstd run beside the parse that produces the rows, on the batches in the order they were made, so the
    /// bytes are those of a single-threaded writer.
    fn create(dir: &Path, bytes_of: fn(&T) -> usize, partition: Option<PartitionKey>) -> Result<Self> {
        let (path, mut sink) = match partition {
            Some(key) => (dir.join(T::NAME), TableSink::Partitioned(PartitionedTable::<T>::create(dir, key)?)),
            None => {
                let path = dir.join(format!("{}.parquet", T::NAME));
                let file = File::create(&path).map_err(io_error("create", &path))?;
                let properties = writer_properties::<T>();
                let writer = TableFileWriter::try_new(
                    BufWriter::with_capacity(1 << 20, file),
                    T::schema(),
                    properties,
                    SharedChunks::default(),
                )
                .map_err(parquet_error("create", &path))?;
                (path.clone(), TableSink::Whole(Box::new(writer), path))
            }
        };
        let (batches, received) = sync_channel::<RecordBatch>(BATCHES_AHEAD);
        let encoder = std::thread::Builder::new()
            .name(format!("encode-{}", T::NAME))
            .spawn(move || -> Result<()> {
                for batch in received {
                    sink.write(&batch)?;
                }
                sink.finish()
            })
            .map_err(io_error("start the encoder of", &path))?;
        Ok(Self {
            path,
            builder: T::Builder::default(),
            bytes_of,
            list_bytes: 0,
            batches: Some(batches),
            encoder: Some(encoder),
            rows: 0,
        })
    }

    fn append(&mut self, row: &T) -> Result<()> {
        self.builder.append(row);
        self.rows += 1;
        self.list_bytes += (self.bytes_of)(row);
        if self.builder.len() >= BATCH_ROWS || self.list_bytes >= BATCH_LIST_BYTES { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<()> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let batch = self.builder.finish();
        self.list_bytes = 0;
        let sent = self.batches.as_ref().is_some_and(|batches| batches.send(batch).is_ok());
        // The encoder stops receiving only when it failed: its error is the one to report.
        if sent { Ok(()) } else { self.join() }
    }

    fn close(&mut self) -> Result<()> {
        self.flush()?;
        self.join()
    }

    /// Ends the encoder (after the batches already sent) and returns how it ended.
    fn join(&mut self) -> Result<()> {
        self.batches = None;
        match self.encoder.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Err(DatasetError::Io {
                action: "write",
                path: self.path.clone(),
                source: io::Error::other("the table was already closed after an error"),
            }),
        }
    }
}

impl TableWriter<EngineSample> {
    /// [`SamplesBuilder::append_values`](crate::SamplesBuilder::append_values), with the batches ended where
    /// appending the rows one by one ends them.
    fn append_values(&mut self, row: &EngineSample, values: &[(&'static str, f64)]) -> Result<()> {
        let mut rest = values;
        while !rest.is_empty() {
            let taken = rest.len().min(BATCH_ROWS - self.builder.len());
            self.builder.append_values(row, &rest[..taken]);
            self.rows += taken as u64;
            if self.builder.len() >= BATCH_ROWS {
                self.flush()?;
            }
            rest = &rest[taken..];
        }
        Ok(())
    }
}

impl DatasetWriter {
    /// Starts a dataset that will appear at `dir` when [`finish`](Self::finish) succeeds.
    ///
    /// Fails with [`DatasetError::Exists`] when `dir` exists and `replace` is false, before anything is written.
    pub fn create(dir: &Path, replace: bool) -> Result<Self> {
        Self::create_partitioned(dir, replace, None)
    }

    /// [`create`](Self::create), with the tables Hive-partitioned by `key` (see [`crate::partition`]) when it is
    /// given, instead of one file each.
    pub fn create_partitioned(dir: &Path, replace: bool, key: Option<PartitionKey>) -> Result<Self> {
        recover(dir)?;
        if !replace && fs::symlink_metadata(dir).is_ok() {
            return Err(DatasetError::Exists { path: dir.to_owned() });
        }
        let temp_dir = sibling(dir, "tmp");
        if temp_dir.exists() {
            // Left by an interrupted run: it was never a complete dataset.
            fs::remove_dir_all(&temp_dir).map_err(io_error("remove stale", &temp_dir))?;
        }
        if let Some(parent) = temp_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(io_error("create", parent))?;
        }
        fs::create_dir(&temp_dir).map_err(io_error("create", &temp_dir))?;
        Ok(Self {
            final_dir: dir.to_owned(),
            replace,
            requests: TableWriter::create(
                &temp_dir,
                |row: &RequestRow| row.prefix_hashes.as_ref().map_or(0, |hashes| hashes.len() * size_of::<u64>()),
                key,
            )?,
            samples: TableWriter::create(&temp_dir, |_| 0, key)?,
            cache_events: TableWriter::create(&temp_dir, |_| 0, key)?,
            temp_dir,
            partition: key,
            finished: false,
        })
    }

    /// Appends one request row.
    pub fn push_request(&mut self, row: &RequestRow) -> Result<()> {
        self.requests.append(row)
    }

    /// Appends one engine sample.
    pub fn push_sample(&mut self, row: &EngineSample) -> Result<()> {
        self.samples.append(row)
    }

    /// Appends one engine sample per `(metric, value)` of `values`, each `row` with its metric and value replaced:
    /// the same table as [`push_sample`](Self::push_sample) for each, at a fraction of the cost.
    pub fn push_samples(&mut self, row: &EngineSample, values: &[(&'static str, f64)]) -> Result<()> {
        self.samples.append_values(row, values)
    }

    /// Appends one cache event.
    pub fn push_cache_event(&mut self, row: &CacheEvent) -> Result<()> {
        self.cache_events.append(row)
    }

    /// Rows appended so far, per table.
    pub fn rows(&self) -> RowCounts {
        RowCounts { requests: self.requests.rows, samples: self.samples.rows, cache_events: self.cache_events.rows }
    }

    /// Closes the tables, writes `manifest` (with its row counts set to what was written) and moves the dataset
    /// into place, replacing an existing one if the writer was created with `replace`.
    pub fn finish(mut self, mut manifest: Manifest) -> Result<Manifest> {
        self.requests.close()?;
        self.samples.close()?;
        self.cache_events.close()?;
        manifest.partition_by = self.partition.map(|key| key.as_str().to_owned());
        manifest.rows = self.rows();
        let manifest_path = self.temp_dir.join(MANIFEST_FILE);
        fs::write(&manifest_path, manifest_json(&manifest)).map_err(io_error("write", &manifest_path))?;

        let old = sibling(&self.final_dir, "old");
        let existed = fs::symlink_metadata(&self.final_dir).is_ok();
        if existed {
            if !self.replace {
                return Err(DatasetError::Exists { path: self.final_dir.clone() });
            }
            if old.exists() {
                fs::remove_dir_all(&old).map_err(io_error("remove stale", &old))?;
            }
            fs::rename(&self.final_dir, &old).map_err(io_error("move aside", &self.final_dir))?;
        }
        if let Err(source) = fs::rename(&self.temp_dir, &self.final_dir) {
            if existed {
                // Put the previous dataset back rather than leave the user with neither.
                let _ = fs::rename(&old, &self.final_dir);
            }
            return Err(DatasetError::Io { action: "move into place", path: self.final_dir.clone(), source });
        }
        self.finished = true;
        if existed {
            let removed = if old.is_dir() { fs::remove_dir_all(&old) } else { fs::remove_file(&old) };
            removed.map_err(io_error("remove previous", &old))?;
        }
        Ok(manifest)
    }
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: an unfinished dataset must not be mistaken for a complete one.
            let _ = fs::remove_dir_all(&self.temp_dir);
        }
    }
}

/// Finishes what a replacement killed between its two renames left: with no dataset at `dir`, the previous one
/// aside is put back; with a dataset at `dir`, the one aside is the replaced one and is removed.
fn recover(dir: &Path) -> Result<()> {
    let old = sibling(dir, "old");
    if fs::symlink_metadata(&old).is_err() {
        return Ok(());
    }
    if fs::symlink_metadata(dir).is_err() {
        fs::rename(&old, dir).map_err(io_error("restore the previous dataset", &old))
    } else {
        fs::remove_dir_all(&old).map_err(io_error("remove stale", &old))
    }
}

/// `dir`'s hidden sibling used while writing (`tmp`) or while replacing (`old`).
fn sibling(dir: &Path, role: &str) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".to_owned());
    dir.with_file_name(format!(".{name}.infertrace-{role}"))
}

/// The manifest as written to disk: pretty JSON with a final newline.
pub fn manifest_json(manifest: &Manifest) -> String {
    let mut text = serde_json::to_string_pretty(manifest).expect("a manifest always serializes");
    text.push('\n');
    text
}

/// A dataset read fully into memory.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Its manifest.
    pub manifest: Manifest,
    /// All request rows.
    pub requests: RecordBatch,
    /// All engine samples.
    pub samples: RecordBatch,
    /// All cache events.
    pub cache_events: RecordBatch,
}

impl Dataset {
    /// Reads the dataset at `dir`, checking the schema version of every file.
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(Self {
            manifest: read_manifest(dir)?,
            requests: read_table::<RequestRow>(dir)?,
            samples: read_table::<EngineSample>(dir)?,
            cache_events: read_table::<CacheEvent>(dir)?,
        })
    }
}

/// The manifest of the dataset at `dir`, refused when a newer infertrace wrote it.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = fs::read_to_string(&manifest_path).map_err(io_error("read", &manifest_path))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|source| DatasetError::Manifest { path: manifest_path.clone(), source })?;
    if manifest.schema_version > SCHEMA_VERSION {
        return Err(DatasetError::NewerSchema {
            path: manifest_path,
            found: manifest.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(manifest)
}

/// One Parquet file of a table: the whole table, or one part of a Hive-partitioned table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFile {
    /// Where it is.
    pub path: PathBuf,
    /// For a part, its partition column and that column's value (`None` for the null partition). A part of a
    /// table partitioned by `source` or `instance` does not hold that column: its value is here only.
    pub partition: Option<(String, Option<String>)>,
}

/// The files of table `T` in the dataset at `dir`, in path order, each checked to be an infertrace table of a schema
/// version this build reads (only its footer is read). A partitioned table with no rows has no files.
pub fn table_files<T: Table>(dir: &Path) -> Result<Vec<TableFile>> {
    let files = layout::<T>(dir)?;
    for file in &files {
        let opened = File::open(&file.path).map_err(io_error("open", &file.path))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(opened).map_err(parquet_error("read", &file.path))?;
        check_version(&builder, &file.path)?;
    }
    Ok(files)
}

/// The files of table `T` in the dataset at `dir`: `<table>.parquet`, else the parts of a partitioned `<table>/`.
fn layout<T: Table>(dir: &Path) -> Result<Vec<TableFile>> {
    let path = dir.join(format!("{}.parquet", T::NAME));
    let root = dir.join(T::NAME);
    if path.exists() || !root.is_dir() {
        return Ok(vec![TableFile { path, partition: None }]);
    }
    Ok(part_files(&root)?
        .into_iter()
        .map(|(path, key, value)| TableFile { path, partition: Some((key, value)) })
        .collect())
}

/// Refuses a file that is not an infertrace table, or that a newer infertrace wrote.
fn check_version(builder: &ParquetRecordBatchReaderBuilder<File>, path: &Path) -> Result<()> {
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kvs| kvs.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY))
        .and_then(|kv| kv.value.as_deref()?.parse::<u32>().ok())
        .ok_or_else(|| DatasetError::NotInfertrace { path: path.to_owned() })?;
    if version > SCHEMA_VERSION {
        return Err(DatasetError::NewerSchema { path: path.to_owned(), found: version, supported: SCHEMA_VERSION });
    }
    Ok(())
}

/// Reads one table of the dataset at `dir` into a single batch, checking its schema version: `<table>.parquet`, or
/// every part of a partitioned `<table>/` with its partition column restored.
pub fn read_table<T: Table>(dir: &Path) -> Result<RecordBatch> {
    let decode_error = |path: &Path| {
        let path = path.to_owned();
        move |e: arrow::error::ArrowError| DatasetError::Parquet { action: "decode", path, source: e.into() }
    };
    let files = layout::<T>(dir)?;
    if let [TableFile { path, partition: None }] = files.as_slice() {
        let (schema, batches) = read_file(path)?;
        return concat_batches(&schema, &batches).map_err(decode_error(path));
    }
    let mut batches = Vec::new();
    for TableFile { path, partition } in &files {
        for batch in read_file(path)?.1 {
            batches.push(match partition {
                Some((key, value)) => restore_key::<T>(batch, key, value.as_deref()).map_err(decode_error(path))?,
                None => batch,
            });
        }
    }
    let schema = batches.first().map_or_else(T::schema, RecordBatch::schema);
    concat_batches(&schema, &batches).map_err(decode_error(&dir.join(T::NAME)))
}

/// The batches of one table file, after checking its schema version.
fn read_file(path: &Path) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>)> {
    let parquet_error = |action| parquet_error(action, path);
    let file = File::open(path).map_err(io_error("open", path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_error("read"))?;
    check_version(&builder, path)?;
    let schema = builder.schema().clone();
    let batches = builder
        .build()
        .map_err(parquet_error("read"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| parquet_error("decode")(parquet::errors::ParquetError::from(e)))?;
    Ok((schema, batches))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Rows of 2,048 prefix hashes (16 KiB) end a batch at every 256th row, when the batch holds 4 MiB of them, far
    /// below `BATCH_ROWS`.
    #[test]
    fn rows_with_long_lists_end_a_batch_at_batch_list_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let hash_bytes = |row: &RequestRow| row.prefix_hashes.as_ref().map_or(0, |h| h.len() * size_of::<u64>());
        let mut writer = TableWriter::<RequestRow>::create(dir.path(), hash_bytes, None).unwrap();
        let row = RequestRow { prefix_hashes: Some(vec![7; 2048]), ..RequestRow::default() };
        for i in 1..=600 {
            writer.append(&row).unwrap();
            assert_eq!(writer.builder.len(), i % 256, "rows in the batch after row {i}");
        }
        writer.close().unwrap();
    }

    /// Samples given a line at a time (`append_values`) write the very file that the same rows given one by one
    /// write: the same batches, ended at the same rows, whatever the groups' sizes against `BATCH_ROWS`.
    #[test]
    fn samples_given_a_line_at_a_time_write_what_rows_one_by_one_write() {
        const NAMES: [&str; 3] = ["num_running_reqs", "gen_throughput", "token_usage"];
        // A name at another address with the same text: one dictionary entry, as for rows.
        let copy: &'static str = String::from("gen_throughput").leak();
        let dir = tempfile::tempdir().unwrap();
        let (one, together) = (dir.path().join("one"), dir.path().join("together"));
        fs::create_dir_all(&one).unwrap();
        fs::create_dir_all(&together).unwrap();
        let mut by_row = TableWriter::<EngineSample>::create(&one, |_| 0, None).unwrap();
        let mut by_line = TableWriter::<EngineSample>::create(&together, |_| 0, None).unwrap();
        let instances: [Option<Arc<str>>; 2] = [Some("DP0 TP0".into()), None];
        let (source, file): (Arc<str>, Arc<str>) = ("sglang-log".into(), "server.log".into());
        let (mut rows, mut line) = (0usize, 0u64);
        // Groups of 0 to 11 values, 3,000 lines: about 16,500 rows, so groups cross two batch ends.
        while line < 3_000 {
            line += 1;
            let n = (line * 7 % 12) as usize;
            let values: Vec<(&'static str, f64)> =
                (0..n).map(|i| (if i == 4 { copy } else { NAMES[i % 3] }, line as f64 + i as f64 / 8.0)).collect();
            let row = EngineSample {
                time: 1_000 * line as i64,
                source: Arc::clone(&source),
                instance: instances[(line % 5 == 0) as usize].clone(),
                metric: "ignored".into(),
                value: -1.0,
                source_file: Some(Arc::clone(&file)),
                source_line: (line % 3 != 0).then_some(line),
            };
            for &(metric, value) in &values {
                by_row.append(&EngineSample { metric: metric.into(), value, ..row.clone() }).unwrap();
            }
            by_line.append_values(&row, &values).unwrap();
            rows += n;
            assert_eq!(by_line.builder.len(), rows % BATCH_ROWS, "rows in the batch after line {line}");
            assert_eq!(by_line.rows, rows as u64);
        }
        assert!(rows > 2 * BATCH_ROWS, "{rows} rows");
        by_row.close().unwrap();
        by_line.close().unwrap();
        let (a, b) =
            (fs::read(one.join("samples.parquet")).unwrap(), fs::read(together.join("samples.parquet")).unwrap());
        assert!(a == b, "the two files differ");
        // And what they hold, read back: line 10 has 10 values after the 51 of lines 1 to 9 (7, 2, 9, 4, 11, 6, 1,
        // 8, 3); its fifth is the name at another address, 10 + 4/8, on no instance (10 is a multiple of 5).
        let rows_read = EngineSample::from_batch(&read_table::<EngineSample>(&together).unwrap()).unwrap();
        assert_eq!(rows_read.len(), rows);
        let fifth = &rows_read[51 + 4];
        assert_eq!((&*fifth.metric, fifth.value, fifth.time), ("gen_throughput", 10.5, 10_000));
        assert_eq!((fifth.instance.as_deref(), fifth.source_line), (None, Some(10)));
    }
}
