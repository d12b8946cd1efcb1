//! The Parquet writer of one table file: what arrow-rs's [`ArrowWriter`] writes, byte for byte, without encoding
//! again, row by row, the columns that hold one value throughout a row group.
//!
//! arrow-rs's writer looks every row of a dictionary column up in a dictionary of its own and compares it with the
//! column's minimum and maximum, although the Arrow array it receives is already dictionary-encoded
//! (apache/arrow-rs#10465, open). Most of our dictionary columns hold one value for a whole input: `source`,
//! `source_file`, `instance`. On an SGLang log, whose 31 M `samples` rows carry the same three, that was about a
//! fifth of the samples table's encoding thread and 7% of all the CPU time; on the Azure trace 6%. A column with no
//! value in a row group (most of the 44 request columns of a trace) is cheaper to encode, but also row by row.
//!
//! Such a column chunk depends only on its value (or its having none), on the table's writer properties and on the
//! lengths of the batches its rows came in (the writer checks its page limits as each batch's rows go in). So
//! [`TableFileWriter`] holds such a column back while every batch of the row group has the same value in it, keeping
//! only that value and the batches' lengths; when the row group is written, it copies in a chunk made once for that
//! value and those lengths, with
//! [`SerializedRowGroupWriter::append_column`](parquet::file::writer::SerializedRowGroupWriter::append_column),
//! which moves the chunk's offsets to where it lands. A chunk is made by an [`ArrowWriter`] of that one column, with
//! the same properties, given the value in batches of the same lengths, and read back from the file it writes: the
//! bytes are arrow-rs's own. The chunks made are kept ([`Chunks`], at most [`CHUNK_BYTES_KEPT`], shared by the
//! partitions of a table). A column whose value changes within a row group is given the rows held back so far (the
//! value, in batches of the lengths held) and written as `ArrowWriter` writes it from then on; so is a held column
//! of a row group of fewer than [`COPIED_ROWS`] rows, for which making a chunk costs more than it saves.
//!
//! Row groups end where `ArrowWriter`'s would, at the properties' maximum number of rows or when [`flush`] is called.
//! What a caller can see differ is [`in_progress_size`] and [`memory_size`]: a column held back adds nothing to them,
//! where `ArrowWriter` counts its pending page (for a dictionary column of one value, about one byte per eight rows,
//! and the value) and its finished pages (tens of bytes each); so a row group closed by its size
//! ([`crate::ROW_GROUP_BYTES`]), or by the partitioned writer's bound on the memory of its open row groups, could close
//! a batch later. On every input of the benchmarks, every file is the same as `ArrowWriter`'s
//! (`docs/performance-history.md`, twenty-fourth pass). Not supported, as the tables do not use them: content-defined
//! chunking, a maximum row group size in bytes (both refused), and encryption (the `encryption` feature of `parquet` is
//! off: a copied page's authentication data would name another row group).
//!
//! [`flush`]: TableFileWriter::flush
//! [`in_progress_size`]: TableFileWriter::in_progress_size
//! [`memory_size`]: TableFileWriter::memory_size

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, Int32Array, RecordBatch, StringArray, new_null_array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataOptions, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

/// Bytes of the chunks kept for the row groups to come (their one-column files, which hold each chunk and, in the
/// footer, its metadata), the least recently used let go first. A chunk of a dictionary column of one value in a
/// full row group takes about 700 bytes (eight pages), so this keeps about ninety: every column of a table, for full
/// row groups and for the shorter last ones of input files.
const CHUNK_BYTES_KEPT: usize = 64 << 10;

/// Rows a row group must hold for its held columns to be copied from a chunk made for them: below that, making the
/// chunk (a one-column Parquet file, written and read back: 70–80 µs for a full row group here) costs more than
/// encoding the rows.
const COPIED_ROWS: usize = 4096;

/// Keys of row groups that were not full and had no chunk made, kept to tell when such lengths come again (a few
/// hundred bytes each).
const SEEN_KEPT: usize = 256;

/// Writes record batches of one schema to a Parquet file, as [`ArrowWriter`] does (same bytes), with the columns
/// that hold one value throughout a row group copied from a chunk made once (see the module's documentation).
pub(crate) struct TableFileWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    properties: WriterProperties,
    /// Per field: whether it can be held back, and how.
    holdable: Vec<Holdable>,
    /// Per field: the column writers of its leaves in a row group's writers (`start..start + count`).
    leaves: Vec<(usize, usize)>,
    max_rows: usize,
    group: Option<RowGroup>,
    chunks: SharedChunks,
}

impl<W: Write + Send> std::fmt::Debug for TableFileWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFileWriter")
            .field("rows_in_progress", &self.group.as_ref().map_or(0, |group| group.rows))
            .field("row_groups", &self.file.flushed_row_groups().len())
            .field("chunks", &self.chunks)
            .finish_non_exhaustive()
    }
}

/// Which fields can be held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holdable {
    /// No: the field is not nullable and not a dictionary of text, or has more than one leaf, or a bloom filter.
    No,
    /// When it has no value in the row group.
    Null,
    /// When it has one value in the row group, or (if nullable) none: a dictionary of text with 32-bit keys.
    Text,
}

/// One value of a held column: `None` for no value.
type Value = Option<Box<str>>;

/// What a row group did with one of its columns so far.
#[derive(Debug)]
enum Held {
    /// Nothing: no batch yet.
    Open,
    /// Held back: every batch had `value` throughout; their lengths, in order.
    Value { value: Value, lengths: Vec<usize> },
    /// Given to its column writers.
    Written,
}

struct RowGroup {
    writers: Vec<ArrowColumnWriter>,
    held: Vec<Held>,
    rows: usize,
}

/// Column chunks of one value made for earlier row groups, kept for the row groups to come; shared by the writers of
/// one schema and properties (the partitions of a table), which make the same chunks.
pub(crate) struct Chunks {
    /// Least recently used first.
    kept: VecDeque<Chunk>,
    bytes: usize,
    /// The columns, values and batch lengths of the last row groups that were not full and had no chunk made,
    /// oldest first: the next with the same has one made.
    seen: VecDeque<(usize, Value, Vec<usize>)>,
    /// Bytes kept at most: [`CHUNK_BYTES_KEPT`] but in tests.
    limit: usize,
    /// Held columns copied from a chunk already made, and chunks made.
    copied: u64,
    made: u64,
}

/// [`Chunks`] shared by the partitions of a table (on one thread: the lock is never contended).
pub(crate) type SharedChunks = Arc<Mutex<Chunks>>;

impl std::fmt::Debug for Chunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunks")
            .field("kept", &self.kept.len())
            .field("bytes", &self.bytes)
            .field("copied", &self.copied)
            .field("made", &self.made)
            .finish()
    }
}

impl Default for Chunks {
    fn default() -> Self {
        Self::with_limit(CHUNK_BYTES_KEPT)
    }
}

impl Chunks {
    fn with_limit(limit: usize) -> Self {
        Self { kept: VecDeque::new(), bytes: 0, seen: VecDeque::new(), limit, copied: 0, made: 0 }
    }

    /// The chunk of column `column` (`field`) holding `value` in batches of `lengths`, to be copied into a row group
    /// (`full` when it holds the most rows a row group holds): the one kept, or one made for it when the row group is
    /// full or another had the same before (a row group that is neither, such as the last of an input or one of a
    /// partition, is likely the only one of its lengths). `None` when the caller is to write the column itself: for a
    /// row group of fewer than [`COPIED_ROWS`] rows, and for the first of such lengths, whose key is then noted.
    fn get(
        &mut self,
        column: usize,
        field: &Field,
        value: &Value,
        lengths: &[usize],
        full: bool,
        properties: &WriterProperties,
    ) -> Result<Option<&Chunk>> {
        if lengths.iter().sum::<usize>() < COPIED_ROWS {
            return Ok(None);
        }
        let found = self.kept.iter().position(|c| c.column == column && c.value == *value && c.lengths == lengths);
        let chunk = match found {
            Some(at) => {
                self.copied += 1;
                self.kept.remove(at).expect("a chunk found")
            }
            None => {
                let seen = self.seen.iter().position(|(c, v, l)| *c == column && v == value && l == lengths);
                match seen {
                    Some(at) => drop(self.seen.remove(at)),
                    None if full => {}
                    None => {
                        if self.seen.len() == SEEN_KEPT {
                            self.seen.pop_front();
                        }
                        self.seen.push_back((column, value.clone(), lengths.to_vec()));
                        return Ok(None);
                    }
                }
                self.made += 1;
                let chunk = make_chunk(column, field, value.clone(), lengths.to_vec(), properties)?;
                self.bytes += chunk.bytes.len();
                while self.bytes > self.limit
                    && let Some(oldest) = self.kept.pop_front()
                {
                    self.bytes -= oldest.bytes.len();
                }
                chunk
            }
        };
        self.kept.push_back(chunk);
        Ok(self.kept.back())
    }
}

/// A column chunk of one value, made for rows in batches of `lengths`: the one-column file holding it, and what its
/// writer reported at its close (offsets in that file).
struct Chunk {
    column: usize,
    value: Value,
    lengths: Vec<usize>,
    bytes: Bytes,
    close: ColumnCloseResult,
}

impl<W: Write + Send> TableFileWriter<W> {
    /// A writer of `schema` to `out`, with `properties` (whose maximum row count ends row groups; a maximum size, and
    /// content-defined chunking, are not supported), keeping its chunks of one value in `chunks` (shared with writers
    /// of the same schema and properties, or its own).
    pub(crate) fn try_new(
        out: W,
        schema: SchemaRef,
        properties: WriterProperties,
        chunks: SharedChunks,
    ) -> Result<Self> {
        if properties.max_row_group_bytes().is_some() || properties.content_defined_chunking().is_some() {
            return Err(ParquetError::General(
                "TableFileWriter ends row groups by rows only, and pages without content-defined chunking".to_owned(),
            ));
        }
        let max_rows = properties.max_row_group_row_count().unwrap_or(usize::MAX);
        // The file as `ArrowWriter` starts it (the schema, the Arrow schema in the metadata), and its column writers.
        let (file, factory) =
            ArrowWriter::try_new(out, schema.clone(), Some(properties.clone()))?.into_serialized_writer()?;
        let mut leaves = Vec::with_capacity(schema.fields().len());
        let mut holdable = Vec::with_capacity(schema.fields().len());
        let mut start = 0;
        for field in schema.fields() {
            let count = compute_leaves(field, &new_null_array(field.data_type(), 0))?.len();
            leaves.push((start, count));
            start += count;
            let bloom_filter = (start - count..start)
                .any(|leaf| properties.bloom_filter_properties(file.schema_descr().column(leaf).path()).is_some());
            holdable.push(match field.data_type() {
                // A chunk copied would lack the column's bloom filter, which the file's footer does not hold.
                _ if count != 1 || bloom_filter => Holdable::No,
                DataType::Dictionary(key, value) if **key == DataType::Int32 && **value == DataType::Utf8 => {
                    Holdable::Text
                }
                _ if field.is_nullable() => Holdable::Null,
                _ => Holdable::No,
            });
        }
        Ok(Self { file, factory, schema, properties, holdable, leaves, max_rows, group: None, chunks })
    }

    /// Writes `batch`, ending the row group (and starting the next) where it reaches the maximum row count.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_columns() != self.schema.fields().len() {
            return Err(ParquetError::General(format!(
                "a batch of {} columns for a table of {}",
                batch.num_columns(),
                self.schema.fields().len()
            )));
        }
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            if self.group.is_none() {
                let writers = self.factory.create_column_writers(self.file.flushed_row_groups().len())?;
                let held = self.holdable.iter().map(|_| Held::Open).collect();
                self.group = Some(RowGroup { writers, held, rows: 0 });
            }
            let group = self.group.as_mut().expect("a row group was started");
            let room = self.max_rows - group.rows;
            let now = if rest.num_rows() > room { rest.slice(0, room) } else { rest.clone() };
            rest = rest.slice(now.num_rows(), rest.num_rows() - now.num_rows());
            for (index, column) in now.columns().iter().enumerate() {
                let field = self.schema.field(index);
                let (start, count) = self.leaves[index];
                let writers = &mut group.writers[start..start + count];
                let value = value_of(self.holdable[index], field, column);
                match (&mut group.held[index], value) {
                    (held @ Held::Open, Some(value)) => *held = Held::Value { value, lengths: vec![now.num_rows()] },
                    (Held::Value { value: kept, lengths }, Some(value)) if *kept == value => {
                        lengths.push(now.num_rows())
                    }
                    (held, _) => {
                        if let Held::Value { value, lengths } = std::mem::replace(held, Held::Written) {
                            for length in lengths {
                                write_leaves(writers, field, &filled(field, value.as_deref(), length))?;
                            }
                        }
                        write_leaves(writers, field, column)?;
                    }
                }
            }
            group.rows += now.num_rows();
            if group.rows >= self.max_rows {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Writes the row group in progress, if any.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else { return Ok(()) };
        let mut writers = group.writers.into_iter();
        let mut row_group = self.file.next_row_group()?;
        let full = group.rows >= self.max_rows;
        for (index, held) in group.held.into_iter().enumerate() {
            let mut column: Vec<_> = writers.by_ref().take(self.leaves[index].1).collect();
            if let Held::Value { value, lengths } = held {
                let field = self.schema.field(index);
                let mut chunks = self.chunks.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(chunk) = chunks.get(index, field, &value, &lengths, full, &self.properties)? {
                    // The column's writers were given nothing: dropped unclosed.
                    row_group.append_column(&chunk.bytes, chunk.close.clone())?;
                    continue;
                }
                for length in lengths {
                    write_leaves(&mut column, field, &filled(field, value.as_deref(), length))?;
                }
            }
            for writer in column {
                writer.close()?.append_to_row_group(&mut row_group)?;
            }
        }
        row_group.close()?;
        Ok(())
    }

    /// The estimated encoded size of the row group in progress, as [`ArrowWriter::in_progress_size`] counts it,
    /// without the columns held back.
    pub(crate) fn in_progress_size(&self) -> usize {
        self.group.as_ref().map_or(0, |group| group.writers.iter().map(|w| w.get_estimated_total_bytes()).sum())
    }

    /// The memory the row group in progress holds, as [`ArrowWriter::memory_size`] counts it (a held column holds
    /// its value and the lengths of its batches, next to nothing).
    pub(crate) fn memory_size(&self) -> usize {
        self.group.as_ref().map_or(0, |group| group.writers.iter().map(ArrowColumnWriter::memory_size).sum())
    }

    pub(crate) fn inner(&self) -> &W {
        self.file.inner()
    }

    pub(crate) fn inner_mut(&mut self) -> &mut W {
        self.file.inner_mut()
    }

    /// Writes the row group in progress and the footer, and returns the output.
    pub(crate) fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        self.file.into_inner()
    }

    /// Held columns copied from a chunk already made, and chunks made, by the writers sharing its chunks.
    #[cfg(test)]
    pub(crate) fn chunks_copied_and_made(&self) -> (u64, u64) {
        let chunks = self.chunks.lock().unwrap_or_else(PoisonError::into_inner);
        (chunks.copied, chunks.made)
    }
}

/// The value `column` has in every row, if it can be held back as `holdable` says: `Some(None)` when it has none.
///
/// Only arrays that the column writer takes as [`filled`]'s are held: of the field's type (a compatible one, which
/// `ArrowWriter` accepts, is written), of no value only where the field is nullable (else the writer refuses the
/// batch, as `ArrowWriter` does, when it is written), and of one value without a null buffer where the field is
/// nullable (the writer takes the rows of a column with definition levels that vary, as it sees one with a null
/// buffer even without a null in it, 1,024 at a time, and of one without, as many as a page holds: its pages would end
/// elsewhere). A null buffer without nulls comes, for one, from a batch split at a row group's end.
fn value_of(holdable: Holdable, field: &Field, column: &ArrayRef) -> Option<Value> {
    if holdable == Holdable::No || column.is_empty() || column.data_type() != field.data_type() {
        return None;
    }
    let logical = column.logical_nulls();
    let nulls = logical.as_ref().map_or(0, NullBuffer::null_count);
    if nulls == column.len() {
        return field.is_nullable().then_some(None);
    }
    // Where the field is not nullable, no row is null here: all the keys are equal below, or it is not held.
    if holdable != Holdable::Text || (field.is_nullable() && logical.is_some()) {
        return None;
    }
    let dictionary = column.as_dictionary::<Int32Type>();
    let keys = dictionary.keys().values();
    let first = keys[0];
    if keys.iter().any(|&key| key != first) {
        return None;
    }
    // In range (the array is valid) and not null (no row is).
    let index = usize::try_from(first).ok()?;
    Some(Some(dictionary.values().as_string::<i32>().value(index).into()))
}

/// An array of `length` rows of `value` (or of none) for `field`.
fn filled(field: &Field, value: Option<&str>, length: usize) -> ArrayRef {
    match value {
        None => new_null_array(field.data_type(), length),
        Some(text) => Arc::new(DictionaryArray::<Int32Type>::new(
            Int32Array::from(vec![0; length]),
            Arc::new(StringArray::from(vec![text])),
        )),
    }
}

fn write_leaves(writers: &mut [ArrowColumnWriter], field: &Field, column: &ArrayRef) -> Result<()> {
    for (writer, leaf) in writers.iter_mut().zip(compute_leaves(field, column)?) {
        writer.write(&leaf)?;
    }
    Ok(())
}

/// The column chunk `ArrowWriter` writes for `field` with `properties`, given `value` in batches of `lengths`: written
/// as a file of that one column, and read back.
fn make_chunk(
    column: usize,
    field: &Field,
    value: Value,
    lengths: Vec<usize>,
    properties: &WriterProperties,
) -> Result<Chunk> {
    let schema = Arc::new(Schema::new(vec![field.clone()]));
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties.clone()))?;
    for &length in &lengths {
        writer.write(&RecordBatch::try_new(schema.clone(), vec![filled(field, value.as_deref(), length)])?)?;
    }
    let bytes = Bytes::from(writer.into_inner()?);
    // Every page's encoding, as the writer reported it (by default the reader keeps only the set of encodings,
    // which the footer would then hold instead).
    let options = ParquetMetaDataOptions::new().with_encoding_stats_as_mask(false);
    let metadata = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .with_metadata_options(Some(options))
        .parse_and_finish(&bytes)?;
    if metadata.num_row_groups() != 1 {
        return Err(ParquetError::General(format!(
            "a chunk of {} rows made {} row groups",
            lengths.iter().sum::<usize>(),
            metadata.num_row_groups()
        )));
    }
    let row_group = metadata.row_group(0);
    let chunk = row_group.column(0).clone();
    let close = ColumnCloseResult {
        bytes_written: u64::try_from(chunk.compressed_size()).unwrap_or_default(),
        rows_written: u64::try_from(row_group.num_rows()).unwrap_or_default(),
        bloom_filter: None,
        column_index: metadata.column_index().and_then(|groups| groups.first()?.first()).cloned(),
        offset_index: metadata.offset_index().and_then(|groups| groups.first()?.first()).cloned(),
        metadata: chunk,
    };
    Ok(Chunk { column, value, lengths, bytes, close })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ListArray, StringDictionaryBuilder, TimestampNanosecondArray, UInt64Array};
    use arrow::compute::concat_batches;
    use arrow::datatypes::{TimeUnit, UInt64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::EnabledStatistics;
    use parquet::schema::types::ColumnPath;
    use proptest::prelude::*;

    fn text() -> DataType {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("time", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false),
            // Held when one value fills a row group.
            Field::new("source", text(), false),
            // Held when one value, or none, fills a row group; written without statistics.
            Field::new("instance", text(), true),
            // Held when nothing fills a row group.
            Field::new("tokens", DataType::UInt64, true),
            Field::new("hashes", DataType::new_list(DataType::UInt64, true), true),
            // Never held.
            Field::new("id", DataType::Utf8, false),
        ]))
    }

    /// Row groups of at most 6,000 rows (so that several fill past [`COPIED_ROWS`]), pages of at most 700 rows (so
    /// that where batches end decides where pages end), zstd, no statistics for `instance`: as the tables are
    /// written, at a smaller scale.
    fn properties() -> WriterProperties {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("a zstd level")))
            .set_max_row_group_row_count(Some(6000))
            .set_data_page_row_count_limit(700)
            .set_column_statistics_enabled(ColumnPath::new(vec!["instance".to_owned()]), EnabledStatistics::None)
            .build()
    }

    /// What a text column holds in one batch.
    #[derive(Debug, Clone, Copy)]
    enum Cells {
        /// This value (an index into [`NAMES`]) in every row.
        All(usize),
        /// No value in any row: null keys, or (`true`) keys of a null dictionary value.
        Null(bool),
        /// Values and nulls mixed, from this row on.
        Mixed(usize),
        /// This value, and no value in every third row (whose keys the builder leaves at 0, the first value's).
        Gaps(usize),
        /// This value in every row, the keys with a null buffer without a null.
        Valid(usize),
        /// This value in every row, of a dictionary holding a null value too (unused).
        NullValue(usize),
        /// This value until this row, no value after.
        Tail(usize, usize),
    }

    const NAMES: [&str; 3] = ["vllm-log", "node-7:8000", "a value longer than a usual instance name, past forty bytes"];

    /// `rows` cells of `cells`, in a dictionary of more values than the batch uses (the dictionary builders of the
    /// tables keep every value of the batch before).
    fn text_column(cells: Cells, rows: usize, start: usize) -> ArrayRef {
        let mut builder = StringDictionaryBuilder::<Int32Type>::new();
        for name in NAMES {
            builder.append_value(name);
        }
        let unused = builder.finish();
        let mut builder =
            StringDictionaryBuilder::<Int32Type>::new_with_dictionary(rows, unused.values().as_string::<i32>())
                .expect("a dictionary of text");
        for row in 0..rows {
            match cells {
                Cells::All(name) => builder.append_value(NAMES[name]),
                Cells::Null(_) => builder.append_null(),
                Cells::Mixed(from) if (row + start).is_multiple_of(3) && row >= from => builder.append_null(),
                Cells::Mixed(_) => builder.append_value(NAMES[(row + start) % NAMES.len()]),
                Cells::Gaps(_) if (row + start).is_multiple_of(3) => builder.append_null(),
                Cells::Gaps(name) => builder.append_value(NAMES[name]),
                Cells::Tail(_, from) if row >= from => builder.append_null(),
                Cells::Valid(name) | Cells::NullValue(name) | Cells::Tail(name, _) => builder.append_value(NAMES[name]),
            }
        }
        let array = builder.finish();
        match cells {
            Cells::Null(true) => {
                // Every key valid, pointing at a null value.
                let values = StringArray::from(vec![Some("unused"), None]);
                Arc::new(DictionaryArray::<Int32Type>::new(Int32Array::from(vec![1; rows]), Arc::new(values)))
            }
            Cells::Valid(_) => {
                let keys = Int32Array::new(array.keys().values().clone(), Some(NullBuffer::new_valid(rows)));
                Arc::new(DictionaryArray::<Int32Type>::new(keys, array.values().clone()))
            }
            Cells::NullValue(_) => {
                let values = StringArray::from(NAMES.iter().map(|&name| Some(name)).chain([None]).collect::<Vec<_>>());
                Arc::new(DictionaryArray::<Int32Type>::new(array.keys().clone(), Arc::new(values)))
            }
            _ => Arc::new(array),
        }
    }

    /// A batch of `rows` rows starting at row `start` of the file: `source` and `instance` as given, `tokens` and
    /// `hashes` null throughout or not.
    fn batch(rows: usize, start: usize, source: usize, instance: Cells, nulls: bool) -> RecordBatch {
        let at = |row: usize| (start + row) as u64;
        let tokens: UInt64Array = (0..rows).map(|row| (!nulls).then(|| at(row) % 5)).collect();
        let hashes = ListArray::from_iter_primitive::<UInt64Type, _, _>(
            (0..rows).map(|row| (!nulls && row % 4 != 0).then(|| (0..row % 3).map(move |i| Some(at(row) + i as u64)))),
        );
        let ids: StringArray = (0..rows).map(|row| Some(format!("r{}", at(row)))).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(
                TimestampNanosecondArray::from_iter_values((0..rows).map(|row| at(row) as i64 * 1000))
                    .with_timezone("UTC"),
            ),
            text_column(Cells::All(source), rows, start),
            text_column(instance, rows, start),
            Arc::new(tokens),
            Arc::new(hashes),
            Arc::new(ids),
        ];
        RecordBatch::try_new(schema(), columns).expect("a valid batch")
    }

    /// A step of a test: a batch, or a flush (a row group closed early, as by its size).
    #[derive(Debug, Clone)]
    enum Step {
        Batch { rows: usize, source: usize, instance: Cells, nulls: bool },
        Flush,
    }

    /// The file `ArrowWriter` writes and the one [`TableFileWriter`] writes, and how many held columns the latter
    /// copied and made; asserts that the file holds the rows given.
    fn both(steps: &[Step], chunks: &SharedChunks) -> (Vec<u8>, Vec<u8>, (u64, u64)) {
        let mut arrow = ArrowWriter::try_new(Vec::new(), schema(), Some(properties())).expect("a writer");
        let mut ours = TableFileWriter::try_new(Vec::new(), schema(), properties(), chunks.clone()).expect("a writer");
        let mut given = Vec::new();
        let mut start = 0;
        for step in steps {
            match *step {
                Step::Batch { rows, source, instance, nulls } => {
                    let batch = batch(rows, start, source, instance, nulls);
                    start += rows;
                    arrow.write(&batch).expect("written");
                    ours.write(&batch).expect("written");
                    given.push(batch);
                }
                Step::Flush => {
                    arrow.flush().expect("flushed");
                    ours.flush().expect("flushed");
                }
            }
        }
        let counts = ours.chunks_copied_and_made();
        let (arrow, ours) = (arrow.into_inner().expect("closed"), ours.into_inner().expect("closed"));
        let read: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(ours.clone()))
            .expect("a Parquet file")
            .build()
            .expect("a reader")
            .collect::<Result<_, _>>()
            .expect("readable");
        let rows = |batches: &[RecordBatch]| concat_batches(&schema(), batches).expect("one schema");
        // Dictionaries are read back with the values of their row group only: compare values, not arrays.
        let (read, given) = (rows(&read), rows(&given));
        assert_eq!(read.num_rows(), given.num_rows());
        for (index, (read, given)) in read.columns().iter().zip(given.columns()).enumerate() {
            let cast = |array: &ArrayRef| match array.data_type() {
                DataType::Dictionary(..) => arrow::compute::cast(array, &DataType::Utf8).expect("text"),
                _ => array.clone(),
            };
            assert_eq!(&cast(read), &cast(given), "column {index}");
        }
        (arrow, ours, counts)
    }

    fn rows(rows: usize, source: usize, instance: Cells, nulls: bool) -> Step {
        Step::Batch { rows, source, instance, nulls }
    }

    #[test]
    fn held_columns_are_written_as_arrow_writer_writes_them() {
        use Cells::{All, Gaps, Mixed, Null, NullValue, Tail, Valid};
        let steps = [
            // Row groups 0 and 1: one source and instance throughout, tokens and hashes null: four columns made,
            // then copied into the next row group, the same in batches of the same lengths.
            rows(2000, 0, All(1), true),
            rows(2000, 0, All(1), true),
            rows(2000, 0, All(1), true),
            rows(2000, 0, All(1), true),
            rows(2000, 0, All(1), true),
            rows(2000, 0, All(1), true),
            // Row group 2: the same value in batches of other lengths (a chunk of its own); the instance changes in
            // the last batch, tokens and hashes have values from the second.
            rows(1000, 0, All(1), true),
            rows(3000, 0, All(1), false),
            rows(2000, 0, All(2), false),
            // Row group 3: the instance null, then mixed within the second batch; another source.
            rows(3000, 1, Null(false), true),
            rows(3000, 1, Mixed(100), true),
            // Row group 3b: the instance of one value with gaps whose keys are that value's, throughout.
            rows(3000, 1, Gaps(0), true),
            rows(3000, 1, Gaps(0), true),
            // Row group 4: closed early after 4,500 rows of a null instance whose keys are valid (a null value):
            // not full, the first of its lengths: written; row group 5, 4,500 rows again: made.
            rows(4500, 2, Null(true), true),
            Step::Flush,
            rows(4500, 2, Null(true), true),
            Step::Flush,
            // Row groups A and B: the instance of one value, but with a null buffer (without a null), then of a
            // dictionary holding a null: its definition levels are taken as varying, so it is written.
            rows(3000, 0, Valid(1), true),
            rows(3000, 0, Valid(1), true),
            rows(3000, 0, NullValue(2), true),
            rows(3000, 0, NullValue(2), true),
            // Row group C: the instance of one value, held; then a batch across two row groups whose part in this
            // one has that value throughout but a null buffer (its nulls are in the next row group's part).
            rows(4000, 0, All(1), true),
            rows(4000, 0, Tail(1, 3000), true),
            // Row group D, the rest of it and the start of a batch across two row groups; then a last row group
            // shorter than [`COPIED_ROWS`]: written, not held.
            rows(7000, 0, All(0), true),
            rows(100, 0, All(0), true),
        ];
        let chunks = SharedChunks::default();
        let (arrow, ours, (copied, made)) = both(&steps, &chunks);
        assert!(arrow == ours, "the files differ ({} and {} bytes)", arrow.len(), ours.len());
        // Row groups of 6,000 rows at most. 0 (the first three batches): source, instance, tokens, hashes made; 1:
        // all four copied; 2: source made; 3: source (another value), tokens and hashes made (the instance null,
        // then not); 3b: source, tokens and hashes copied (the instance has gaps); 4 (4,500 rows): source,
        // instance, tokens, hashes written; 5 (the same): all four made; A: source made, tokens and hashes copied
        // (from 3); B: the three copied; C: source, tokens, hashes made (lengths 4,000 and 2,000), the instance
        // written; D (2,000 and 4,000): the same; E: 3,100 rows, written.
        assert_eq!((copied, made), (4 + 3 + 2 + 3, 4 + 1 + 3 + 4 + 1 + 3 + 3));
        // A second file (another partition of the table) shares the chunks: it makes none, and copies every held
        // column of its row groups of more than 3,100 rows, row group 4's too.
        let (arrow, ours, (copied, made)) = both(&steps, &chunks);
        assert!(arrow == ours, "the files differ ({} and {} bytes)", arrow.len(), ours.len());
        assert_eq!((copied, made), (12 + 4 + 4 + 1 + 3 + 3 + 4 + 4 + 3 + 3 + 3 + 3, 19));
        // With room for one chunk of about 700 bytes, a chunk is let go for the next one made (the least recently
        // used first): the full row groups that copied theirs make them again, and the files are still the same.
        let chunks = Arc::new(Mutex::new(Chunks::with_limit(1000)));
        let (arrow, ours, (copied, made)) = both(&steps, &chunks);
        assert!(arrow == ours, "the files differ ({} and {} bytes)", arrow.len(), ours.len());
        assert_eq!((copied, made), (0, 4 + 4 + 1 + 3 + 3 + 4 + 3 + 3 + 3 + 3));
    }

    #[test]
    fn batches_arrow_writer_refuses_or_takes_as_compatible_are_refused_or_taken() {
        // A `source` (not nullable) whose keys point at a null value: both writers refuse it as it is written, or
        // (parquet 59, which does not check a dictionary's values) both take it.
        let mut given = batch(5000, 0, 0, Cells::All(1), true).columns().to_vec();
        let values = StringArray::from(vec![Some("unused"), None]);
        given[1] = Arc::new(DictionaryArray::<Int32Type>::new(Int32Array::from(vec![1; 5000]), Arc::new(values)));
        let nulls = RecordBatch::try_new(schema(), given).expect("nulls only in the dictionary's values");
        let mut arrow = ArrowWriter::try_new(Vec::new(), schema(), Some(properties())).expect("a writer");
        let mut ours =
            TableFileWriter::try_new(Vec::new(), schema(), properties(), SharedChunks::default()).expect("a writer");
        let (arrow_took, ours_took) = (arrow.write(&nulls).is_ok(), ours.write(&nulls).is_ok());
        assert_eq!(arrow_took, ours_took);
        if arrow_took {
            assert!(arrow.into_inner().unwrap() == ours.into_inner().unwrap(), "the files differ");
        }
        // An `instance` of plain text (`ArrowWriter` takes it for the dictionary of the schema): written, not held.
        let plain_schema = {
            let mut fields: Vec<Field> = schema().fields().iter().map(|field| field.as_ref().clone()).collect();
            fields[2] = Field::new("instance", DataType::Utf8, true);
            Arc::new(Schema::new(fields))
        };
        let mut arrow = ArrowWriter::try_new(Vec::new(), schema(), Some(properties())).expect("a writer");
        let mut ours =
            TableFileWriter::try_new(Vec::new(), schema(), properties(), SharedChunks::default()).expect("a writer");
        for start in [0, 5000] {
            let mut columns = batch(5000, start, 0, Cells::All(1), true).columns().to_vec();
            columns[2] = arrow::compute::cast(&columns[2], &DataType::Utf8).expect("text");
            let plain = RecordBatch::try_new(plain_schema.clone(), columns).expect("a valid batch");
            arrow.write(&plain).expect("written");
            ours.write(&plain).expect("written");
        }
        assert!(arrow.into_inner().expect("closed") == ours.into_inner().expect("closed"));
        // A batch of another number of columns than the table's: refused.
        let mut ours =
            TableFileWriter::try_new(Vec::new(), schema(), properties(), SharedChunks::default()).expect("a writer");
        let short = batch(10, 0, 0, Cells::All(1), true).project(&[0, 1]).expect("two columns");
        assert!(ours.write(&short).is_err());
    }

    #[test]
    fn row_groups_not_full_have_a_chunk_made_when_their_lengths_come_again() {
        let field = Field::new("tokens", DataType::UInt64, true);
        let properties = properties();
        let mut chunks = Chunks::default();
        let mut get = |lengths: &[usize], full| {
            chunks.get(3, &field, &None, lengths, full, &properties).expect("made").map(|chunk| chunk.lengths.clone())
        };
        // Fewer rows than a chunk is made for: never one, full or not, seen or not.
        assert_eq!(get(&[COPIED_ROWS - 1], true), None);
        assert_eq!(get(&[COPIED_ROWS - 1], false), None);
        // Full: made at once.
        assert_eq!(get(&[6000], true), Some(vec![6000]));
        // Not full: written the first time (its lengths noted), made the second, copied after.
        for first in 0..=SEEN_KEPT {
            assert_eq!(get(&[5000, first], false), None);
        }
        assert_eq!(get(&[5000, SEEN_KEPT], false), Some(vec![5000, SEEN_KEPT]));
        assert_eq!(get(&[5000, SEEN_KEPT], false), Some(vec![5000, SEEN_KEPT]));
        // The oldest lengths noted were let go for the last: written again.
        assert_eq!(get(&[5000, 0], false), None);
        assert_eq!(get(&[5000, 1], false), Some(vec![5000, 1]));
        assert_eq!((chunks.copied, chunks.made, chunks.seen.len()), (1, 3, SEEN_KEPT - 1));
    }

    fn cells() -> impl Strategy<Value = Cells> {
        prop_oneof![
            (0..NAMES.len()).prop_map(Cells::All),
            any::<bool>().prop_map(Cells::Null),
            (0usize..3000).prop_map(Cells::Mixed),
            (0..NAMES.len()).prop_map(Cells::Gaps),
            (0..NAMES.len()).prop_map(Cells::Valid),
            (0..NAMES.len()).prop_map(Cells::NullValue),
            (0..NAMES.len(), 0usize..7000).prop_map(|(name, from)| Cells::Tail(name, from)),
        ]
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        let step = prop_oneof![
            8 => (prop_oneof![Just(2000usize), Just(3000), 1usize..7000], 0..2usize, cells(), any::<bool>())
                .prop_map(|(rows, source, instance, nulls)| Step::Batch { rows, source, instance, nulls }),
            1 => Just(Step::Flush),
        ];
        proptest::collection::vec(step, 1..14)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Any sequence of batches and early ends of row groups gives the bytes `ArrowWriter` gives, with the
        /// chunks' room of the tables or room for one to four.
        #[test]
        fn any_batches_are_written_as_arrow_writer_writes_them(
            steps in steps(),
            limit in prop_oneof![Just(CHUNK_BYTES_KEPT), 500usize..3000],
        ) {
            let chunks = Arc::new(Mutex::new(Chunks::with_limit(limit)));
            let (arrow, ours, _) = both(&steps, &chunks);
            prop_assert!(arrow == ours, "the files differ ({} and {} bytes)", arrow.len(), ours.len());
        }
    }
}
