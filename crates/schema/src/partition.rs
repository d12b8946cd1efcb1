//! Hive-style partitioned tables: `<table>/<key>=<value>/part-0.parquet`, which Spark, Trino, DuckDB and Polars
//! read as one table (`read_parquet('requests/**/*.parquet', hive_partitioning = true)`).
//!
//! Keys: `date` (the UTC calendar day of `arrival_time` for requests, of `time` for samples and cache events; a
//! column of its own in no table, so every file keeps all its columns), `source` and `instance` (table columns,
//! which Hive layout keeps in the path only: the files leave them out, as Spark refuses a column that is both in
//! the files and in the path). A row without a value goes to `<key>=__HIVE_DEFAULT_PARTITION__`, which these
//! engines read as null. Values are percent-encoded outside `[A-Za-z0-9._-]` (`DP0 TP0` → `DP0%20TP0`).
//!
//! The dataset writer partitions each table as it writes it (`PartitionedTable`): its encoding thread splits every
//! record batch by key, so where partitions come one after another (a day after another, a file per instance) a
//! partitioned run costs about what a plain one does, with no table written whole, read back and written again. A
//! batch is kept whole while rows of it wait for their partitions, each partition noting which rows are its own, and
//! a partition's rows are copied once, into a batch of their own, when they make one (then they go to its Parquet
//! writer, which closes row groups as a plain table's does). However many partitions there are and however their
//! rows interleave, the batches kept for a table's partitions hold at most [`PARTITIONS_WAITING_BYTES`] (past it, the
//! oldest is let go: the partitions with rows in it spill them to a zstd'd Arrow IPC file in their directory, and
//! every later row of theirs follows them there, to be read back into its writer, in order, at the end), and their
//! open row groups at most [`PARTITIONS_HELD_BYTES`] (past it, the largest is closed); what grows with the
//! partitions is each one's writer between row groups (its schema and the metadata of the row groups it closed, tens
//! of KiB) and, where rows interleave, the spills on disk.
//! A part file is open only while bytes are appended to it, so thousands of partitions need no more file descriptors
//! than one. Rows inside a partition are in the order written, and where row groups end depends only on the rows, so
//! the output is as deterministic as the unpartitioned one. [`read_table`](crate::dataset::read_table) reads the
//! layout back, restoring the key column, so every infertrace command reads a partitioned dataset like any other.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead as _, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, DictionaryArray, Int64Array, RecordBatch, StringArray, UInt32Array,
    new_null_array,
};
use arrow::compute::{cast, concat_batches, interleave, take_record_batch};
use arrow::datatypes::{DataType, Int32Type, Schema, SchemaRef};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;

use crate::dataset::{
    BATCH_LIST_BYTES, BATCH_ROWS, DatasetError, io_error, parquet_error, write_batch, writer_properties,
};
use crate::table::Table;
use crate::writer::{SharedChunks, TableFileWriter};

/// What a partitioned dataset is split by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionKey {
    /// UTC calendar day of the row's time.
    Date,
    /// The `source` column (the adapter's format id).
    Source,
    /// The `instance` column (engine instance).
    Instance,
}

impl PartitionKey {
    /// The key's name, in paths and in the manifest.
    pub const fn as_str(self) -> &'static str {
        match self {
            PartitionKey::Date => "date",
            PartitionKey::Source => "source",
            PartitionKey::Instance => "instance",
        }
    }

    /// The key named `name`, as in [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        [PartitionKey::Date, PartitionKey::Source, PartitionKey::Instance].into_iter().find(|k| k.as_str() == name)
    }
}

/// The directory name of rows without a value, as Hive writes it.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";
/// Bytes the record batches kept for the waiting rows of one table's partitions hold together at most (as Arrow
/// arrays, with 8 bytes a waiting row): past it, the oldest is let go, its waiting rows spilled (or copied out, when
/// at most half its rows wait). A partition's rows wait until they make a record batch ([`BATCH_ROWS`] rows or
/// [`BATCH_LIST_BYTES`] of Arrow arrays), so that rows of many partitions interleaved (a fleet's instances in one
/// merged stream) do not each keep a Parquet writer's row group open: the writer of a `requests` part holds about a
/// mebibyte before its first page (74,000 bytes of dictionary encoder per integer column).
pub const PARTITIONS_WAITING_BYTES: usize = 32 << 20;

/// Bytes (as the Parquet writers estimate their memory) that the open row groups of one table's partitions hold
/// together at most: past it, the one holding the most is closed. (Each also closes at
/// [`crate::dataset::ROW_GROUP_BYTES`] or [`crate::dataset::ROW_GROUP_ROWS`], as a plain table's does.)
pub const PARTITIONS_HELD_BYTES: usize = 32 << 20;

/// The column of table `T` whose value the rows are split by.
fn key_column<T: Table>(key: PartitionKey) -> &'static str {
    match (key, T::NAME) {
        (PartitionKey::Date, "requests") => "arrival_time",
        (PartitionKey::Date, _) => "time",
        (PartitionKey::Source, _) => "source",
        (PartitionKey::Instance, _) => "instance",
    }
}

type Result<T, E = DatasetError> = std::result::Result<T, E>;

fn arrow_error(action: &'static str, path: &Path) -> impl FnOnce(arrow::error::ArrowError) -> DatasetError {
    let path = path.to_owned();
    move |e| DatasetError::Parquet { action, path, source: e.into() }
}

/// Table `T` written as `<dir>/<table>/<key>=<value>/part-0.parquet` as its record batches come.
pub(crate) struct PartitionedTable<T: Table> {
    root: PathBuf,
    key: PartitionKey,
    /// The key column's position in `T`'s schema.
    column: usize,
    /// The columns a part file keeps: all but the key column, for `source` and `instance`.
    keep: Vec<usize>,
    /// `T`'s schema with only those columns: the part files'.
    schema: SchemaRef,
    /// By directory name, so that they are finished in key order.
    parts: BTreeMap<String, Part>,
    /// The batches whose rows wait for their partitions.
    stage: Stage,
    /// What waiting rows and open row groups may hold: [`PARTITIONS_WAITING_BYTES`] and [`PARTITIONS_HELD_BYTES`]
    /// but in tests.
    budget: Budget,
    /// What spills are compressed with.
    compressor: zstd::bulk::Compressor<'static>,
    /// The column chunks of one value the part files' writers made, for all of them (see [`crate::writer`]).
    chunks: SharedChunks,
    table: PhantomData<fn() -> T>,
}

#[derive(Debug, Clone, Copy)]
struct Budget {
    waiting: usize,
    held: usize,
}

/// A waiting row: the number of its batch in the [`Stage`], and its row there.
type Waiting = (u32, u32);

/// A kept batch of which at most one row in `SPARSE` still waits is let go, its waiting rows copied
/// ([`PartitionedTable::compact_sparse`]).
const SPARSE: usize = 4;

/// Runs of neighbouring rows at least this long on average are copied a run at a time ([`Stage::take`]); shorter,
/// a row at a time.
const LONG_RUN: usize = 32;

/// Bytes a waiting row costs besides its batch: its [`Waiting`].
const WAITING_ROW_BYTES: usize = std::mem::size_of::<Waiting>();

/// The record batches (as the partitions keep them: without the key column of `source` or `instance`) whose rows wait
/// for their partitions, each kept whole until none of its rows waits. A row is copied once, when its partition takes
/// its rows as one batch ([`take`](Self::take)): not into a batch of its partition's rows of each batch that comes
/// and again when they are joined, as the rows of hundreds of interleaved partitions, a few dozen of each batch, made
/// the arrays' fixed costs (an allocation per buffer and column) most of a partitioned run's time.
#[derive(Default)]
struct Stage {
    /// Batch number `first + i` at `i`; `None` once none of its rows waits.
    batches: VecDeque<Option<Staged>>,
    first: u32,
    /// Bytes of the batches kept and of the [`Waiting`] of their waiting rows.
    bytes: usize,
}

struct Staged {
    batch: RecordBatch,
    /// Its rows that wait.
    waiting: usize,
    /// What it holds as far as it is its own ([`own_bytes`]).
    bytes: usize,
}

impl Stage {
    /// The number the next batch kept gets.
    fn end(&self) -> u32 {
        self.first + u32::try_from(self.batches.len()).expect("fewer than 2^32 batches wait")
    }

    /// Keeps `batch`, all of whose rows wait; its number and [`own_bytes`].
    fn push(&mut self, batch: RecordBatch) -> (u32, usize) {
        let id = self.end();
        let bytes = own_bytes(&batch);
        self.bytes += bytes + batch.num_rows() * WAITING_ROW_BYTES;
        self.batches.push_back(Some(Staged { waiting: batch.num_rows(), batch, bytes }));
        (id, bytes)
    }

    /// Batch number `id`, unless it is not kept (all its rows passed on, or a number to come).
    fn get(&self, id: u32) -> Option<&Staged> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.batches.get(i)?.as_ref()
    }

    /// The oldest batch kept: its number, rows and waiting rows.
    fn oldest(&self) -> Option<(u32, usize, usize)> {
        let staged = self.batches.front()?.as_ref().expect("the oldest batch kept has waiting rows");
        Some((self.first, staged.batch.num_rows(), staged.waiting))
    }

    /// The rows `rows` (in order, each waiting) as one batch; they no longer wait, and a batch none of whose rows
    /// waits is dropped. Rows that come in long runs of neighbours (a day's, a file's) are copied a run at a time,
    /// rows scattered among others' (interleaved partitions) one at a time.
    fn take(&mut self, rows: &[Waiting]) -> Result<RecordBatch, arrow::error::ArrowError> {
        let index = |id: u32| usize::try_from(id - self.first).expect("a batch number fits a usize");
        let at = |row: u32| usize::try_from(row).expect("a row number fits a usize");
        // Runs of neighbouring rows of one batch: its number, first row and length.
        let mut runs: Vec<(u32, usize, usize)> = Vec::new();
        for &(id, row) in rows {
            match runs.last_mut() {
                Some((last, first, len)) if *last == id && *first + *len == at(row) => *len += 1,
                _ => runs.push((id, at(row), 1)),
            }
        }
        let staged = |id: u32| &self.batches[index(id)].as_ref().expect("a waiting row's batch is kept").batch;
        let batch = match runs[..] {
            // All of one batch's rows, as a partition's rows are: the batch itself.
            [(id, 0, len)] if len == staged(id).num_rows() => staged(id).clone(),
            // Part of one batch: copied, not sliced, as a slice would keep the whole batch.
            [(id, first, len)] => {
                let end = u32::try_from(first + len).expect("a batch has fewer than 2^32 rows");
                take_record_batch(staged(id), &UInt32Array::from_iter_values(rows[0].1..end))?
            }
            _ if runs.len() * LONG_RUN <= rows.len() => {
                let slices: Vec<RecordBatch> =
                    runs.iter().map(|&(id, first, len)| staged(id).slice(first, len)).collect();
                concat_batches(&slices[0].schema(), &slices)?
            }
            _ => {
                // Each batch once, in order.
                let mut batches: Vec<&RecordBatch> = Vec::new();
                let mut indices = Vec::with_capacity(rows.len());
                for (i, &(id, row)) in rows.iter().enumerate() {
                    if i == 0 || rows[i - 1].0 != id {
                        batches.push(staged(id));
                    }
                    indices.push((batches.len() - 1, at(row)));
                }
                interleave_columns(&batches, &indices)?
            }
        };
        for (id, _, count) in runs {
            let i = index(id);
            let staged = self.batches[i].as_mut().expect("a waiting row's batch is kept");
            staged.waiting -= count;
            self.bytes -= count * WAITING_ROW_BYTES;
            if staged.waiting == 0 {
                self.bytes -= staged.bytes;
                self.batches[i] = None;
            }
        }
        while let Some(None) = self.batches.front() {
            self.batches.pop_front();
            self.first += 1;
        }
        Ok(batch)
    }
}

/// The rows `indices` (batch, row) of `batches` (of one schema) as one batch, as
/// [`arrow::compute::interleave_record_batch`] makes it, but a column that is null in every batch (most columns of a
/// trace that fills a few) made null at once rather than row by row.
fn interleave_columns(
    batches: &[&RecordBatch],
    indices: &[(usize, usize)],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let schema = batches[0].schema();
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|batch| batch.column(i).as_ref()).collect();
            if arrays.iter().all(|array| array.null_count() == array.len()) {
                Ok(new_null_array(field.data_type(), indices.len()))
            } else {
                interleave(&arrays, indices)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns)
}

/// `batch`, read back from a spill, with the columns of `schema` it leaves out (all null) put back.
fn with_nulls(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, arrow::error::ArrowError> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) => column.clone(),
            None => new_null_array(field.data_type(), batch.num_rows()),
        })
        .collect();
    RecordBatch::try_new(schema.clone(), columns)
}

/// One partition: its writer, its waiting rows, and where they went when they could not wait.
struct Part {
    writer: TableFileWriter<PartFile>,
    /// Its waiting rows, in order (so in the order of their batches' numbers).
    waiting: Vec<Waiting>,
    /// What they hold as Arrow arrays, about: each batch's bytes shared out equally by its rows.
    waiting_bytes: usize,
    /// Once rows of this partition had to leave memory before the end, the file they and every later row go to
    /// (Arrow IPC streams, zstd-compressed), read back into the part's writer by [`PartitionedTable::finish`].
    spill: Option<PathBuf>,
}

impl Part {
    /// Whether the waiting rows make a batch of their own ([`BATCH_ROWS`] rows, or [`BATCH_LIST_BYTES`] of Arrow
    /// arrays, as long prefix-hash lists make), to be passed on.
    fn full(&self) -> bool {
        self.waiting.len() >= BATCH_ROWS || self.waiting_bytes >= BATCH_LIST_BYTES
    }

    /// Hands the waiting rows on: to the writer, or to the spill file once the partition has one (which rows
    /// must then follow, to stay in order).
    fn pass_waiting(&mut self, stage: &mut Stage, compressor: &mut zstd::bulk::Compressor<'static>) -> Result<()> {
        match self.take_waiting(stage)? {
            Some(batch) if self.spill.is_some() => self.spill(&batch, compressor),
            Some(batch) => self.write(&batch),
            None => Ok(()),
        }
    }

    /// Whether rows of batch number `id` wait for this partition.
    fn holds(&self, id: u32) -> bool {
        let at = self.waiting.partition_point(|w| w.0 < id);
        self.waiting.get(at).is_some_and(|w| w.0 == id)
    }

    /// Copies the waiting rows into a batch of their own, kept in `stage`: what else their batches held can go.
    fn compact(&mut self, stage: &mut Stage) -> Result<()> {
        if let Some(batch) = self.take_waiting(stage)? {
            let rows = u32::try_from(batch.num_rows()).expect("a batch has fewer than 2^32 rows");
            let (id, bytes) = stage.push(batch);
            self.waiting.extend((0..rows).map(|row| (id, row)));
            self.waiting_bytes = bytes;
        }
        Ok(())
    }

    /// Appends `batch` to the partition's spill file (made on the first call): one Arrow IPC stream, compressed as
    /// one zstd frame with `compressor` (one context for every spill: a context per column buffer, as IPC's own
    /// compression makes them, cost more than the rows). A column null in every row is left out of the stream (most
    /// columns of a trace that fills a few), its own schema saying which are in it.
    fn spill(&mut self, batch: &RecordBatch, compressor: &mut zstd::bulk::Compressor<'static>) -> Result<()> {
        let spill = self.spill.get_or_insert_with(|| self.writer.inner().path.with_file_name(SPILL_FILE));
        let mut some: Vec<usize> =
            batch.columns().iter().enumerate().filter(|(_, c)| c.null_count() < c.len()).map(|(i, _)| i).collect();
        if some.is_empty() {
            // A stream keeps its rows' count in its columns' lengths.
            some.push(0);
        }
        let batch = batch.project(&some).map_err(arrow_error("spill", spill))?;
        let mut stream = StreamWriter::try_new(Vec::new(), &batch.schema()).map_err(arrow_error("spill", spill))?;
        stream.write(&batch).map_err(arrow_error("spill", spill))?;
        let bytes = stream.into_inner().map_err(arrow_error("spill", spill))?;
        let frame = compressor.compress(&bytes).map_err(io_error("compress", spill))?;
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&*spill)
            .and_then(|mut file| file.write_all(&frame))
            .map_err(io_error("write", spill))
    }

    /// Spills the waiting rows.
    fn spill_waiting(&mut self, stage: &mut Stage, compressor: &mut zstd::bulk::Compressor<'static>) -> Result<()> {
        match self.take_waiting(stage)? {
            Some(batch) => self.spill(&batch, compressor),
            None => Ok(()),
        }
    }

    /// Writes what was spilled, and then what waits (spilled too, to keep the order), to the part's writer, joined
    /// into batches as the waiting rows are, and removes the spill file.
    fn unspill(
        &mut self,
        schema: &SchemaRef,
        stage: &mut Stage,
        compressor: &mut zstd::bulk::Compressor<'static>,
    ) -> Result<()> {
        let Some(spill) = self.spill.clone() else { return Ok(()) };
        self.spill_waiting(stage, compressor)?;
        self.spill = None;
        let file = File::open(&spill).map_err(io_error("open", &spill))?;
        // The frames one after another, each an IPC stream.
        let mut file = io::BufReader::new(zstd::stream::read::Decoder::new(file).map_err(io_error("read", &spill))?);
        let mut batches: Vec<RecordBatch> = Vec::new();
        let (mut rows, mut bytes) = (0, 0);
        // One stream after another, until the file's end.
        while !file.fill_buf().map_err(io_error("read", &spill))?.is_empty() {
            let stream = StreamReader::try_new(&mut file, None).map_err(arrow_error("read back", &spill))?;
            for batch in stream {
                let batch = batch.map_err(arrow_error("read back", &spill))?;
                let batch = with_nulls(&batch, schema).map_err(arrow_error("read back", &spill))?;
                rows += batch.num_rows();
                bytes += own_bytes(&batch);
                batches.push(batch);
                if rows >= BATCH_ROWS || bytes >= BATCH_LIST_BYTES {
                    self.write_joined(&mut batches, &spill)?;
                    (rows, bytes) = (0, 0);
                }
            }
        }
        self.write_joined(&mut batches, &spill)?;
        fs::remove_file(&spill).map_err(io_error("remove", &spill))
    }

    /// Writes `batches`, read back from `spill`, as one.
    fn write_joined(&mut self, batches: &mut Vec<RecordBatch>, spill: &Path) -> Result<()> {
        let batch = match batches.len() {
            0 => return Ok(()),
            1 => batches.pop().expect("one batch"),
            _ => concat_batches(&batches[0].schema(), batches.iter()).map_err(arrow_error("read back", spill))?,
        };
        batches.clear();
        self.write(&batch)
    }

    /// Hands `batch` to the writer, closing its row group by size as a plain table's.
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        write_batch(&mut self.writer, batch).map_err(|e| parquet_error("write", &self.writer.inner().path)(e))
    }

    /// The waiting rows as one batch (the writers' cost is largely per batch, and a partition of many gets a few
    /// rows from each), or `None` when none wait.
    fn take_waiting(&mut self, stage: &mut Stage) -> Result<Option<RecordBatch>> {
        if self.waiting.is_empty() {
            return Ok(None);
        }
        let batch = stage.take(&self.waiting).map_err(arrow_error("join the rows of", &self.writer.inner().path))?;
        // Freed, not cleared: hundreds of partitions each keeping room for a batch's rows add up.
        self.waiting = Vec::new();
        self.waiting_bytes = 0;
        Ok(Some(batch))
    }
}

/// Bytes `batch` holds as far as it is its own: a dictionary column counts its keys, not its values, which the
/// batches of one table share.
fn own_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|column| match column.as_any_dictionary_opt() {
            Some(dictionary) => dictionary.keys().get_array_memory_size(),
            None => column.get_array_memory_size(),
        })
        .sum()
}

impl<T: Table> PartitionedTable<T> {
    /// Creates `<dir>/<table>/` (present even when no row comes, so the table reads back as empty).
    pub(crate) fn create(dir: &Path, key: PartitionKey) -> Result<Self> {
        Self::with_budget(dir, key, Budget { waiting: PARTITIONS_WAITING_BYTES, held: PARTITIONS_HELD_BYTES })
    }

    fn with_budget(dir: &Path, key: PartitionKey, budget: Budget) -> Result<Self> {
        let root = dir.join(T::NAME);
        fs::create_dir(&root).map_err(io_error("create", &root))?;
        let schema = T::schema();
        let name = key_column::<T>(key);
        let column = schema.index_of(name).expect("every table has the key columns");
        let keep: Vec<usize> =
            (0..schema.fields().len()).filter(|&i| key == PartitionKey::Date || i != column).collect();
        let schema = Arc::new(schema.project(&keep).expect("the kept columns are the schema's"));
        let compressor = zstd::bulk::Compressor::new(1).map_err(io_error("start the compressor of", &root))?;
        let stage = Stage::default();
        let parts = BTreeMap::new();
        let chunks = SharedChunks::default();
        Ok(Self { root, key, column, keep, schema, parts, stage, budget, compressor, chunks, table: PhantomData })
    }

    /// Writes each row of `batch` (of `T`'s schema) to its partition, in order.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let (names, rows) = split(batch.column(self.column), self.key).map_err(arrow_error("partition", &self.root))?;
        let batch = batch.project(&self.keep).map_err(arrow_error("split", &self.root))?;
        let total = batch.num_rows();
        let (id, bytes) = self.stage.push(batch);
        // Each name once, its rows in order.
        for (name, rows) in names.into_iter().zip(rows) {
            let part = match self.parts.entry(name) {
                Entry::Occupied(part) => part.into_mut(),
                Entry::Vacant(slot) => {
                    let directory = self.root.join(slot.key());
                    fs::create_dir(&directory).map_err(io_error("create", &directory))?;
                    let path = directory.join("part-0.parquet");
                    let file = PartFile::create(path.clone()).map_err(io_error("create", &path))?;
                    let writer = TableFileWriter::try_new(
                        file,
                        self.schema.clone(),
                        writer_properties::<T>(),
                        self.chunks.clone(),
                    )
                    .map_err(parquet_error("create", &path))?;
                    slot.insert(Part { writer, waiting: Vec::new(), waiting_bytes: 0, spill: None })
                }
            };
            part.waiting_bytes += bytes * rows.len() / total;
            part.waiting.extend(rows.into_iter().map(|row| (id, row)));
            if part.full() {
                part.pass_waiting(&mut self.stage, &mut self.compressor)?;
            }
        }
        self.compact_sparse()?;
        self.bound()?;
        for part in self.parts.values_mut() {
            let file = part.writer.inner_mut();
            file.write_out().map_err(io_error("write", &file.path))?;
        }
        Ok(())
    }

    /// Lets go of each batch at most a quarter of whose rows still wait (a day's last rows, the rest of the batch
    /// passed on with the next day's), the partitions with rows in it copying their waiting rows into batches of
    /// their own: else a partition whose rows stop coming keeps whole batches for a few of their rows to the end.
    fn compact_sparse(&mut self) -> Result<()> {
        let mut id = self.stage.first;
        while id < self.stage.end() {
            if self.stage.get(id).is_some_and(|staged| staged.waiting * SPARSE <= staged.batch.num_rows()) {
                for part in self.parts.values_mut().filter(|part| part.holds(id)) {
                    part.compact(&mut self.stage)?;
                }
            }
            id = self.stage.first.max(id + 1);
        }
        Ok(())
    }

    /// Keeps the waiting rows, then the open row groups, within the budget. While the batches of the waiting rows hold
    /// too much, the oldest is let go: when at most half its rows still wait, the partitions they are of copy their
    /// waiting rows into batches of their own (a day's last rows, a file's); else, as where the rows of many partitions
    /// interleave, they spill them. Spilled rather than written: what each partition has waiting then is a few hundred
    /// rows, and a row group of that size costs its metadata (held until the file ends) and the compressors' set-up
    /// more than its rows (3 M rows of 300 interleaved partitions written so made 18 row groups a partition, in 16.0 s
    /// and 539 MiB; spilled, one each, in 10.7 s and 138 MiB: `docs/performance-history.md`, eighteenth pass). Past the
    /// budget of open row groups, the partition holding the most (the first by name of those with as much) closes its
    /// row group.
    fn bound(&mut self) -> Result<()> {
        while self.stage.bytes > self.budget.waiting {
            let Some((oldest, rows, waiting)) = self.stage.oldest() else { break };
            // A partition with rows of the oldest batch has them first.
            for part in self.parts.values_mut().filter(|part| part.waiting.first().is_some_and(|w| w.0 == oldest)) {
                if waiting * 2 <= rows {
                    part.compact(&mut self.stage)?;
                } else {
                    part.spill_waiting(&mut self.stage, &mut self.compressor)?;
                }
            }
            assert!(self.stage.first > oldest, "the oldest batch kept had waiting rows of no partition");
        }
        let held: usize = self.parts.values().map(|part| part.writer.memory_size()).sum();
        for part in most_first(&mut self.parts, held, self.budget.held, |part| part.writer.memory_size()) {
            part.writer.flush().map_err(parquet_error("write", &part.writer.inner().path))?;
        }
        Ok(())
    }

    /// Writes every partition's waiting rows, last row group and footer, in key order, and syncs its file.
    pub(crate) fn finish(mut self) -> Result<()> {
        for mut part in std::mem::take(&mut self.parts).into_values() {
            part.unspill(&self.schema, &mut self.stage, &mut self.compressor)?;
            part.pass_waiting(&mut self.stage, &mut self.compressor)?;
            let path = part.writer.inner().path.clone();
            let file = part.writer.into_inner().map_err(parquet_error("finish", &path))?;
            file.finish().map_err(io_error("write", &path))?;
        }
        Ok(())
    }
}

/// The parts that must give up what `size` counts for the `total` to come within `budget`: those with the most
/// first (by name among equals), sorted once rather than searched for each (thousands of partitions).
fn most_first(
    parts: &mut BTreeMap<String, Part>,
    mut total: usize,
    budget: usize,
    size: impl Fn(&Part) -> usize,
) -> Vec<&mut Part> {
    if total <= budget {
        return Vec::new();
    }
    let mut by_size: Vec<(usize, &mut Part)> = parts.values_mut().map(|part| (size(part), part)).collect();
    // Stable: equal sizes stay in name order.
    by_size.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
    let mut chosen = Vec::new();
    for (size, part) in by_size {
        if total <= budget || size == 0 {
            break;
        }
        total -= size;
        chosen.push(part);
    }
    chosen
}

/// The name of a partition's spill file, in its directory until the table is finished.
const SPILL_FILE: &str = ".spill.arrows";

/// A part file that is open only while bytes are written to it: what the Parquet writer writes (a row group's column
/// chunks when it closes one, the footer at the end) is kept here until [`write_out`](Self::write_out), or until a
/// mebibyte is pending, and then appended.
struct PartFile {
    path: PathBuf,
    pending: Vec<u8>,
}

/// Bytes a [`PartFile`] keeps pending at most.
const PART_FILE_PENDING_BYTES: usize = 1 << 20;

impl PartFile {
    /// Creates the file, empty.
    fn create(path: PathBuf) -> io::Result<Self> {
        File::create(&path)?;
        Ok(Self { path, pending: Vec::new() })
    }

    /// Appends what is pending, and frees its buffer: a partition no row comes to holds nothing.
    fn write_out(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut file = OpenOptions::new().append(true).open(&self.path)?;
        file.write_all(&std::mem::take(&mut self.pending))
    }

    /// Appends what is pending and syncs the file.
    fn finish(mut self) -> io::Result<()> {
        self.write_out()?;
        OpenOptions::new().append(true).open(&self.path)?.sync_all()
    }
}

impl Write for PartFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= PART_FILE_PENDING_BYTES {
            self.write_out()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()
    }
}

/// The partitions of the rows of `column` (a `T` table's key column) by directory name (`key=value`), each with its
/// rows in order. Each distinct value is named once, not once a row: a row's partition is found from its dictionary
/// key (`source`, `instance`) or its day (`date`).
fn split(column: &ArrayRef, key: PartitionKey) -> Result<(Vec<String>, Vec<Vec<u32>>), arrow::error::ArrowError> {
    let index = |row: usize| u32::try_from(row).expect("a batch has fewer than 2^32 rows");
    let mut names = Vec::new();
    let mut rows: Vec<Vec<u32>> = Vec::new();
    match key {
        PartitionKey::Date => {
            // Days since the epoch from the UTC nanoseconds (no time-zone database needed: the zone is UTC).
            let nanos = cast(column, &DataType::Int64)?;
            let nanos = nanos.as_any().downcast_ref::<Int64Array>().expect("cast to Int64 gives an Int64Array");
            let mut days: BTreeMap<Option<i32>, usize> = BTreeMap::new();
            let mut last: Option<(Option<i32>, usize)> = None;
            for (row, ns) in nanos.iter().enumerate() {
                let day = ns.and_then(|ns| i32::try_from(ns.div_euclid(86_400_000_000_000)).ok());
                let group = match last {
                    Some((last_day, group)) if last_day == day => group,
                    _ => {
                        let next = days.len();
                        let group = *days.entry(day).or_insert(next);
                        if group == rows.len() {
                            rows.push(Vec::new());
                        }
                        last = Some((day, group));
                        group
                    }
                };
                rows[group].push(index(row));
            }
            names.resize(rows.len(), String::new());
            let distinct: Vec<(Option<i32>, usize)> = days.into_iter().collect();
            let text: Date32Array = distinct.iter().map(|(day, _)| *day).collect();
            let text = cast(&text, &DataType::Utf8)?;
            let text = text.as_any().downcast_ref::<StringArray>().expect("cast to Utf8 gives a StringArray");
            for (i, (_, group)) in distinct.iter().enumerate() {
                names[*group] = directory_name(key, text.is_valid(i).then(|| text.value(i)));
            }
        }
        PartitionKey::Source | PartitionKey::Instance => {
            // The schema's type for both (`kind.rs`); the batches come from its builders.
            let dictionary = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>().ok_or_else(|| {
                arrow::error::ArrowError::SchemaError(format!("a partition key of type {}", column.data_type()))
            })?;
            let values = cast(dictionary.values(), &DataType::Utf8)?;
            let values = values.as_any().downcast_ref::<StringArray>().expect("cast to Utf8 gives a StringArray");
            // The group of each dictionary value, and of null; equal values (a dictionary may repeat one) share it.
            let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
            let mut group_of = |name: String, rows: &mut Vec<Vec<u32>>, names: &mut Vec<String>| {
                let next = by_name.len();
                let group = *by_name.entry(name.clone()).or_insert(next);
                if group == rows.len() {
                    rows.push(Vec::new());
                    names.push(name);
                }
                group
            };
            let mut of_value: Vec<Option<usize>> = vec![None; values.len()];
            let mut of_null = None;
            for (row, k) in dictionary.keys().iter().enumerate() {
                let k = k.and_then(|k| usize::try_from(k).ok()).filter(|&k| values.is_valid(k));
                let slot = match k {
                    Some(k) => &mut of_value[k],
                    None => &mut of_null,
                };
                let group = match *slot {
                    Some(group) => group,
                    None => {
                        let group = group_of(directory_name(key, k.map(|k| values.value(k))), &mut rows, &mut names);
                        *slot = Some(group);
                        group
                    }
                };
                rows[group].push(index(row));
            }
        }
    }
    Ok((names, rows))
}

/// `key=value`, percent-encoded, or Hive's null partition.
fn directory_name(key: PartitionKey, value: Option<&str>) -> String {
    match value {
        Some(value) => format!("{}={}", key.as_str(), encode(value)),
        None => format!("{}={NULL_PARTITION}", key.as_str()),
    }
}

/// `value` with every byte outside `[A-Za-z0-9._-]` written as `%XX`.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `%XX` sequences decoded; `None` when that does not give UTF-8 text.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The part files under `<dir>/<table>/`, each with its partition key and value (`None` for the null partition),
/// sorted by path.
pub(crate) fn part_files(root: &Path) -> Result<Vec<(PathBuf, String, Option<String>)>> {
    let mut parts = Vec::new();
    let mut partitions: Vec<PathBuf> =
        fs::read_dir(root).map_err(io_error("read", root))?.filter_map(|e| Some(e.ok()?.path())).collect();
    partitions.sort();
    for partition in partitions.into_iter().filter(|p| p.is_dir()) {
        let name = partition.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let bad = || DatasetError::Io {
            action: "read partition",
            path: partition.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not a `key=value` directory"),
        };
        let (key, value) = name.split_once('=').ok_or_else(bad)?;
        let value = if value == NULL_PARTITION { None } else { Some(decode(value).ok_or_else(bad)?) };
        let mut files: Vec<PathBuf> = fs::read_dir(&partition)
            .map_err(io_error("read", &partition))?
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
        files.sort();
        parts.extend(files.into_iter().map(|f| (f, key.to_owned(), value.clone())));
    }
    Ok(parts)
}

/// `batch` with the partition column `key` put back (as `T`'s schema types it) where it is missing.
pub(crate) fn restore_key<T: Table>(
    batch: RecordBatch,
    key: &str,
    value: Option<&str>,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let full = T::schema();
    let Ok(position) = full.index_of(key) else { return Ok(batch) };
    if batch.schema().index_of(key).is_ok() {
        return Ok(batch);
    }
    let field = full.field(position).clone();
    let column: ArrayRef = match value {
        Some(value) => cast(&StringArray::from(vec![value; batch.num_rows()]), field.data_type())?,
        None => new_null_array(field.data_type(), batch.num_rows()),
    };
    let at = position.min(batch.num_columns());
    let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    fields.insert(at, Arc::new(field));
    columns.insert(at, column);
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, batch.schema().metadata().clone())), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_directory_names() {
        for (value, encoded) in [
            ("vllm-log", "vllm-log"),
            ("DP0 TP0", "DP0%20TP0"),
            ("a/b=c%", "a%2Fb%3Dc%25"),
            ("é", "%C3%A9"),
            ("2026-01-01", "2026-01-01"),
        ] {
            assert_eq!(encode(value), encoded);
            assert_eq!(decode(encoded).as_deref(), Some(value));
        }
        assert_eq!(decode("%C3"), None, "half a character");
        assert_eq!(decode("%G1"), None);
        assert_eq!(decode("%2"), None);
    }

    use crate::table::TableBuilder;
    use crate::tables::{CacheEvent, EngineSample, sample};
    use proptest::prelude::*;

    /// Samples of `instances`, from line `first` on.
    fn samples(instances: &[Option<&str>], first: u64) -> RecordBatch {
        samples_of(instances, first, None)
    }

    /// Samples of `instances`, from line `first` on, of input `file`.
    fn samples_of(instances: &[Option<&str>], first: u64, file: Option<&str>) -> RecordBatch {
        let mut builder = <EngineSample as Table>::Builder::default();
        for (line, instance) in (first..).zip(instances) {
            builder.append(&EngineSample {
                time: 0,
                source: "vllm-log".into(),
                instance: instance.map(Into::into),
                metric: "kv_cache_usage".into(),
                value: 0.5,
                source_file: file.map(Into::into),
                source_line: Some(line),
            });
        }
        builder.finish()
    }

    #[test]
    fn rows_are_grouped_by_their_value_in_order() {
        let batch = samples(&[Some("a"), Some("b b"), None, Some("a"), Some("b b"), None, Some("c")], 0);
        let (names, rows) = split(batch.column_by_name(sample::INSTANCE).unwrap(), PartitionKey::Instance).unwrap();
        assert_eq!(names, ["instance=a", "instance=b%20b", "instance=__HIVE_DEFAULT_PARTITION__", "instance=c"]);
        assert_eq!(rows, [vec![0, 3], vec![1, 4], vec![2, 5], vec![6]]);

        // UTC days of nanosecond times: the last nanosecond of 1970-01-01, one before the epoch, none.
        let day = 86_400_000_000_000_i64;
        let mut builder = <CacheEvent as Table>::Builder::default();
        for time in [Some(0), Some(day - 1), Some(-1), None, Some(day), Some(5)] {
            builder.append(&CacheEvent { time, source: "vllm-kv-events".into(), ..Default::default() });
        }
        let batch = builder.finish();
        let (names, rows) = split(batch.column_by_name("time").unwrap(), PartitionKey::Date).unwrap();
        assert_eq!(names, ["date=1970-01-01", "date=1969-12-31", "date=__HIVE_DEFAULT_PARTITION__", "date=1970-01-02"]);
        assert_eq!(rows, [vec![0, 1, 5], vec![2], vec![3], vec![4]]);
    }

    /// Each part's row groups and rows, by directory.
    type Parts = BTreeMap<String, (usize, Vec<EngineSample>)>;

    /// What [`PartitionedTable`] kept at most after each of `batches` was written with `budget`: bytes waiting
    /// (batches kept and their waiting rows), bytes of open row groups, whether a partition spilled, and how many
    /// rows of the batches kept did not wait; then the parts.
    fn write_with(budget: Budget, batches: &[RecordBatch]) -> (usize, usize, bool, usize, Parts) {
        let dir = tempfile::tempdir().unwrap();
        let mut table =
            PartitionedTable::<EngineSample>::with_budget(dir.path(), PartitionKey::Instance, budget).unwrap();
        let (mut waiting, mut held, mut spilled, mut idle) = (0, 0, false, 0);
        for batch in batches {
            table.write(batch).unwrap();
            let kept = table.stage.batches.iter().flatten();
            let rows: usize = table.parts.values().map(|part| part.waiting.len()).sum();
            assert_eq!(rows, kept.clone().map(|staged| staged.waiting).sum::<usize>(), "waiting rows are counted");
            waiting = table.stage.bytes.max(waiting);
            held = table.parts.values().map(|part| part.writer.memory_size()).sum::<usize>().max(held);
            spilled |= table.parts.values().any(|part| part.spill.is_some());
            idle = kept.map(|staged| staged.batch.num_rows() - staged.waiting).sum::<usize>().max(idle);
        }
        table.finish().unwrap();
        let mut parts = BTreeMap::new();
        for entry in fs::read_dir(dir.path().join("samples")).unwrap() {
            let directory = entry.unwrap().path();
            let files: Vec<_> = fs::read_dir(&directory).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(files, ["part-0.parquet"], "the spill file is removed");
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                File::open(directory.join("part-0.parquet")).unwrap(),
            )
            .unwrap();
            let groups = reader.metadata().num_row_groups();
            let rows: Vec<EngineSample> =
                reader.build().unwrap().flat_map(|batch| EngineSample::from_batch(&batch.unwrap()).unwrap()).collect();
            // The instance is in the path only.
            assert!(rows.iter().all(|r| r.instance.is_none()));
            let name = directory.file_name().unwrap().to_string_lossy().into_owned();
            parts.insert(name, (groups, rows));
        }
        (waiting, held, spilled, idle, parts)
    }

    /// Each part's row groups, and its rows' `source_line` and `source_file`, by directory.
    type Seen = BTreeMap<String, (usize, Vec<(u64, Option<String>)>)>;

    /// The `source_line`s of a part's rows.
    fn lines(rows: &[EngineSample]) -> Vec<u64> {
        rows.iter().map(|r| r.source_line.unwrap()).collect()
    }

    /// Rows of 50 instances interleaved, 8 × 164 of each: past 64 KiB waiting (a batch is about 45 bytes a row as
    /// Arrow arrays), the partitions spill their rows, which come back in order, each partition's in one row group.
    /// Every other batch has no file name, a column the spills then leave out and the rows read back put back.
    #[test]
    fn interleaved_partitions_spill_past_their_budget() {
        let names: Vec<String> = (0..50).map(|i| format!("i{i:02}")).collect();
        let instances: Vec<_> = (0..8192).map(|row| Some(names[row % 50].as_str())).collect();
        let file = |b: u64| b.is_multiple_of(2).then_some("a.log");
        let batches: Vec<_> = (0..8).map(|b| samples_of(&instances, b * 8192, file(b))).collect();
        // Instance i's rows: row i and every 50th after it, of each of the 8 batches, in one row group.
        let expected: Seen = (0..50)
            .map(|i| {
                let rows = (0..8).flat_map(|b| {
                    (b * 8192 + i..(b + 1) * 8192).step_by(50).map(move |l| (l, file(b).map(String::from)))
                });
                (format!("instance=i{i:02}"), (1, rows.collect()))
            })
            .collect();
        let read = |parts: &Parts| -> Seen {
            let row = |r: &EngineSample| (r.source_line.unwrap(), r.source_file.as_deref().map(String::from));
            parts
                .iter()
                .map(|(name, (groups, rows))| (name.clone(), (*groups, rows.iter().map(row).collect())))
                .collect()
        };

        let (waiting, held, spilled, _, parts) = write_with(Budget { waiting: 64 << 10, held: 256 << 10 }, &batches);
        assert!(waiting <= 64 << 10, "{waiting} bytes waiting");
        assert_eq!(held, 0, "no partition made a batch, so no row group was open before the end");
        assert!(spilled);
        assert!(read(&parts) == expected);

        // With room for them, every row waits in memory.
        let (waiting, held, spilled, _, parts) =
            write_with(Budget { waiting: PARTITIONS_WAITING_BYTES, held: PARTITIONS_HELD_BYTES }, &batches);
        assert!(waiting > 64 << 10, "{waiting} bytes waiting");
        assert_eq!(held, 0);
        assert!(!spilled);
        assert!(read(&parts) == expected);
    }

    /// A partition that spilled and then gets batches of its own sends them to its spill too, so that its rows stay
    /// in order, and they come back with it in one row group.
    #[test]
    fn rows_after_a_spill_follow_it() {
        let names: Vec<String> = (0..50).map(|i| format!("i{i:02}")).collect();
        let interleaved: Vec<_> = (0..8192).map(|row| Some(names[row % 50].as_str())).collect();
        let mut batches: Vec<_> = (0..4).map(|b| samples(&interleaved, b * 8192)).collect();
        batches.extend((4..6).map(|b| samples(&[Some("i07"); 8192], b * 8192)));
        let (waiting, _, spilled, _, parts) = write_with(Budget { waiting: 64 << 10, held: 256 << 10 }, &batches);
        assert!(waiting <= 64 << 10, "{waiting} bytes waiting");
        assert!(spilled);
        let expected: Vec<u64> =
            (0..4).flat_map(|b| (b * 8192 + 7..(b + 1) * 8192).step_by(50)).chain(4 * 8192..6 * 8192).collect();
        let (groups, rows) = &parts["instance=i07"];
        let written = lines(rows);
        assert!(*groups == 1 && written == expected, "{groups} row groups; {} rows, not in order", written.len());
    }

    /// Two partitions of 4,096 rows a batch make batches of their own, which go to their writers: past 64 KiB of
    /// open row groups, the larger is closed.
    #[test]
    fn open_row_groups_close_past_their_budget() {
        let instances: Vec<_> = (0..8192).map(|row| Some(if row < 4096 { "a" } else { "b" })).collect();
        let batches: Vec<_> = (0..8).map(|b| samples(&instances, b * 8192)).collect();
        let (_, held, spilled, _, parts) = write_with(Budget { waiting: 64 << 20, held: 64 << 10 }, &batches);
        assert!(held <= 64 << 10, "{held} bytes held");
        assert!(!spilled);
        let (groups, rows) = &parts["instance=b"];
        assert!(*groups > 1, "{groups} row groups");
        assert_eq!(lines(rows), (0..8).flat_map(|b| b * 8192 + 4096..(b + 1) * 8192).collect::<Vec<u64>>());
        // With room, each partition's 32,768 rows make one row group.
        let (_, held, _, _, parts) =
            write_with(Budget { waiting: PARTITIONS_WAITING_BYTES, held: PARTITIONS_HELD_BYTES }, &batches);
        assert!(held > 64 << 10, "{held} bytes held");
        assert_eq!(parts["instance=b"].0, 1);
    }

    /// Each batch ends a partition (200 rows of `t<b>`, the last of it) after a batch's worth of another: the few
    /// rows left waiting are copied out, so that no batch is kept for them, and nothing spills.
    #[test]
    fn the_last_rows_of_a_partition_keep_no_batch() {
        let names: Vec<String> = (0..8).map(|b| format!("t{b}")).collect();
        let batches: Vec<_> = (0..8)
            .map(|b| {
                let instances: Vec<_> =
                    (0..8192 + 200).map(|row| Some(if row < 8192 { "main" } else { names[b].as_str() })).collect();
                samples(&instances, b as u64 * 8392)
            })
            .collect();
        let (_, _, spilled, idle, parts) =
            write_with(Budget { waiting: PARTITIONS_WAITING_BYTES, held: PARTITIONS_HELD_BYTES }, &batches);
        assert_eq!(idle, 0, "a batch was kept for the rows of one partition");
        assert!(!spilled);
        for (b, name) in (0..).zip(&names) {
            assert_eq!(
                lines(&parts[&format!("instance={name}")].1),
                (b * 8392 + 8192..(b + 1) * 8392).collect::<Vec<_>>()
            );
        }
        let main: Vec<u64> = (0..8).flat_map(|b| b * 8392..b * 8392 + 8192).collect();
        assert_eq!(lines(&parts["instance=main"].1), main);
    }

    /// One row of [`partitions_hold_their_rows_in_order`]'s input: its instance (of five, or none), its day (of
    /// three), whether it names its file and whether it has a line.
    type Drawn = (Option<u8>, u8, bool, bool);

    /// How rows come: a few long runs of one partition, partitions interleaved row by row, or a whole batch of one.
    fn drawn_batches() -> impl Strategy<Value = Vec<Vec<Drawn>>> {
        let row = (prop::option::weighted(0.9, 0..5u8), 0..3u8, prop::bool::weighted(0.3), prop::bool::weighted(0.9));
        let runs = prop::collection::vec((row.clone(), 1..600usize), 1..8)
            .prop_map(|runs| runs.into_iter().flat_map(|(row, n)| std::iter::repeat_n(row, n)).collect());
        let scattered = prop::collection::vec(row.clone(), 0..1500);
        // A batch's worth of one partition, which its partition passes on at once (or spills after what it spilled).
        let whole = (row, BATCH_ROWS..BATCH_ROWS + 500).prop_map(|(row, n)| vec![row; n]);
        prop::collection::vec(prop_oneof![3 => runs, 3 => scattered, 1 => whole], 1..10)
    }

    /// The samples of `drawn`, row `i` of the whole input at line `i` (when it has one) and with value `i`: every row
    /// is told apart by its value.
    fn drawn_samples(drawn: &[Vec<Drawn>]) -> (Vec<RecordBatch>, Vec<EngineSample>) {
        const DAY: i64 = 86_400_000_000_000;
        let mut rows = Vec::new();
        let batches = drawn
            .iter()
            .map(|batch| {
                let mut builder = <EngineSample as Table>::Builder::default();
                for &(instance, day, named, lined) in batch {
                    let i = rows.len() as u64;
                    let row = EngineSample {
                        time: i64::from(day) * DAY + i as i64,
                        source: "vllm-log".into(),
                        instance: instance.map(|k| format!("worker {k}").into()),
                        metric: "kv_cache_usage".into(),
                        value: i as f64,
                        source_file: named.then(|| format!("f{}.log", i % 3).into()),
                        source_line: lined.then_some(i),
                    };
                    builder.append(&row);
                    rows.push(row);
                }
                builder.finish()
            })
            .collect();
        (batches, rows)
    }

    /// Every row of `batches` in the part of its key, in input order, whatever the budgets make the table do (keep
    /// rows waiting, copy them out, spill them with or without their null columns, close row groups early): read
    /// back, each part holds exactly its rows (less the key column, for `instance`), and no spill is left.
    #[test]
    fn partitions_hold_their_rows_in_order() {
        let budgets = (
            prop::sample::select(vec![512, 8 << 10, 64 << 10, PARTITIONS_WAITING_BYTES]),
            prop::sample::select(vec![4 << 10, 64 << 10, PARTITIONS_HELD_BYTES]),
        );
        let keys = prop::sample::select(vec![PartitionKey::Instance, PartitionKey::Date]);
        let config = ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() };
        proptest!(config, |(drawn in drawn_batches(), (waiting, held) in budgets, key in keys)| {
            let (batches, rows) = drawn_samples(&drawn);
            let dir = tempfile::tempdir().unwrap();
            let mut table = PartitionedTable::<EngineSample>::with_budget(dir.path(), key, Budget { waiting, held })
                .unwrap();
            for batch in &batches {
                table.write(batch).unwrap();
                prop_assert!(table.stage.bytes <= waiting, "{} bytes waiting past {waiting}", table.stage.bytes);
            }
            table.finish().unwrap();

            let mut expected: BTreeMap<String, Vec<EngineSample>> = BTreeMap::new();
            for row in &rows {
                let (name, row) = match key {
                    PartitionKey::Instance => (
                        row.instance.as_deref().map_or("instance=__HIVE_DEFAULT_PARTITION__".to_owned(), |name| {
                            format!("instance={}", name.replace(' ', "%20"))
                        }),
                        EngineSample { instance: None, ..row.clone() },
                    ),
                    _ => (format!("date=1970-01-0{}", 1 + row.time / 86_400_000_000_000), row.clone()),
                };
                expected.entry(name).or_default().push(row);
            }
            let mut read = BTreeMap::new();
            for entry in fs::read_dir(dir.path().join("samples")).unwrap() {
                let directory = entry.unwrap().path();
                let files: Vec<_> = fs::read_dir(&directory).unwrap().map(|e| e.unwrap().file_name()).collect();
                prop_assert_eq!(files, ["part-0.parquet"]);
                let file = File::open(directory.join("part-0.parquet")).unwrap();
                let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
                let rows: Vec<EngineSample> = reader
                    .build()
                    .unwrap()
                    .flat_map(|batch| EngineSample::from_batch(&batch.unwrap()).unwrap())
                    .collect();
                read.insert(directory.file_name().unwrap().to_string_lossy().into_owned(), rows);
            }
            prop_assert!(read == expected, "{:?} rows by part, {:?} expected", counts(&read), counts(&expected));
        });
    }

    /// Each part's name and number of rows, for a failure's message.
    fn counts(parts: &BTreeMap<String, Vec<EngineSample>>) -> Vec<(&str, usize)> {
        parts.iter().map(|(name, rows)| (name.as_str(), rows.len())).collect()
    }

    #[test]
    fn keys_have_stable_names() {
        for key in [PartitionKey::Date, PartitionKey::Source, PartitionKey::Instance] {
            assert_eq!(PartitionKey::from_name(key.as_str()), Some(key));
        }
        assert_eq!(PartitionKey::from_name("hour"), None);
    }
}
