//! Hive-style partitioned tables: `<table>/<key>=<value>/part-0.parquet`, which Spark, Trino, DuckDB and Polars
//! read as one table (`read_parquet('requests/**/*.parquet', hive_partitioning = true)`).
//!
//! Keys: `date` (the UTC calendar day of `arrival_time` for requests, of `time` for samples and cache events; a
//! column of its own in no table, so every file keeps all its columns), `source` and `instance` (table columns,
//! which Hive layout keeps in the path only: the files leave them out, as Spark refuses a column that is both in
//! the files and in the path). A row without a value goes to `<key>=__HIVE_DEFAULT_PARTITION__`, which these
//! engines read as null. Values are percent-encoded outside `[A-Za-z0-9._-]` (`DP0 TP0` → `DP0%20TP0`).
//!
//! The dataset writer first writes each table whole, then [`partition_table`] splits it, reading it back batch by
//! batch: memory stays bounded by the open writers' unflushed row groups, which are flushed past
//! [`FLUSH_BYTES`] each. Partitions are written in key order, rows inside one in the order written, so the output
//! is as deterministic as the unpartitioned one. [`read_partitioned`] reads the layout back, restoring the key
//! column, so every infertrace command reads a partitioned dataset like any other.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow::compute::{cast, take_record_batch};
use arrow::datatypes::{DataType, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::dataset::{BATCH_ROWS, DatasetError, io_error, parquet_error, writer_properties};
use crate::table::Table;

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
/// Unflushed bytes past which a partition's writer closes its row group.
pub const FLUSH_BYTES: usize = 16 << 20;

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

/// Splits `<dir>/<table>.parquet` into `<dir>/<table>/<key>=<value>/part-0.parquet` and removes it.
pub(crate) fn partition_table<T: Table>(dir: &Path, key: PartitionKey) -> Result<()> {
    let whole = dir.join(format!("{}.parquet", T::NAME));
    let root = dir.join(T::NAME);
    fs::create_dir(&root).map_err(io_error("create", &root))?;
    let file = File::open(&whole).map_err(io_error("open", &whole))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(parquet_error("read", &whole))?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(parquet_error("read", &whole))?;
    let column = key_column::<T>(key);
    let mut writers: BTreeMap<String, (PathBuf, ArrowWriter<BufWriter<File>>)> = BTreeMap::new();
    for batch in reader {
        let batch = batch.map_err(arrow_error("decode", &whole))?;
        let values = key_values(&batch, column, key).map_err(arrow_error("partition", &whole))?;
        // Row indices per partition directory, in row order.
        let mut groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (row, value) in values.iter().enumerate() {
            let name = match value {
                Some(value) => format!("{}={}", key.as_str(), encode(value)),
                None => format!("{}={NULL_PARTITION}", key.as_str()),
            };
            groups.entry(name).or_default().push(u32::try_from(row).expect("a batch has fewer than 2^32 rows"));
        }
        for (name, rows) in groups {
            let mut part = take_record_batch(&batch, &UInt32Array::from(rows)).map_err(arrow_error("split", &whole))?;
            if key != PartitionKey::Date {
                // The value is in the path; Hive layout keeps it out of the file.
                let keep: Vec<usize> =
                    (0..part.num_columns()).filter(|&i| part.schema().field(i).name() != column).collect();
                part = part.project(&keep).map_err(arrow_error("split", &whole))?;
            }
            if !writers.contains_key(&name) {
                let directory = root.join(&name);
                fs::create_dir(&directory).map_err(io_error("create", &directory))?;
                let path = directory.join("part-0.parquet");
                let file = File::create(&path).map_err(io_error("create", &path))?;
                let writer = ArrowWriter::try_new(
                    BufWriter::with_capacity(1 << 16, file),
                    part.schema(),
                    Some(writer_properties::<T>()),
                )
                .map_err(parquet_error("create", &path))?;
                writers.insert(name.clone(), (path, writer));
            }
            let (path, writer) = writers.get_mut(&name).expect("inserted above");
            writer.write(&part).map_err(parquet_error("write", path))?;
            if writer.in_progress_size() > FLUSH_BYTES {
                writer.flush().map_err(parquet_error("write", path))?;
            }
        }
    }
    for (path, writer) in writers.into_values() {
        let mut out = writer.into_inner().map_err(parquet_error("finish", &path))?;
        out.flush().map_err(io_error("write", &path))?;
        out.get_ref().sync_all().map_err(io_error("sync", &path))?;
    }
    fs::remove_file(&whole).map_err(io_error("remove", &whole))
}

/// The partition value of every row of `batch`: the UTC day of `column` for [`PartitionKey::Date`], its text
/// otherwise.
fn key_values(
    batch: &RecordBatch,
    column: &str,
    key: PartitionKey,
) -> Result<Vec<Option<String>>, arrow::error::ArrowError> {
    let array = batch
        .column_by_name(column)
        .ok_or_else(|| arrow::error::ArrowError::SchemaError(format!("no column {column}")))?;
    let text = match key {
        PartitionKey::Date => {
            // Days since the epoch from the UTC nanoseconds (no time-zone database needed: the zone is UTC).
            let nanos = cast(array, &DataType::Int64)?;
            let nanos = nanos.as_any().downcast_ref::<Int64Array>().expect("cast to Int64 gives an Int64Array");
            let days: Date32Array = nanos
                .iter()
                .map(|ns| ns.and_then(|ns| i32::try_from(ns.div_euclid(86_400_000_000_000)).ok()))
                .collect();
            cast(&days, &DataType::Utf8)?
        }
        PartitionKey::Source | PartitionKey::Instance => cast(array, &DataType::Utf8)?,
    };
    let text = text.as_any().downcast_ref::<StringArray>().expect("cast to Utf8 gives a StringArray");
    Ok(text.iter().map(|v| v.map(str::to_owned)).collect())
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

    #[test]
    fn keys_have_stable_names() {
        for key in [PartitionKey::Date, PartitionKey::Source, PartitionKey::Instance] {
            assert_eq!(PartitionKey::from_name(key.as_str()), Some(key));
        }
        assert_eq!(PartitionKey::from_name("hour"), None);
    }
}
