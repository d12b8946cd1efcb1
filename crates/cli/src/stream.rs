//! Rows of datasets as the commands that walk them need them: opened through the query engine, read batch by
//! batch, turned into rows one batch at a time. Memory holds a few batches, never a table.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};
use arrow::array::{Array as _, AsArray as _, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, SchemaRef, UInt64Type};
use infertrace_query::datafusion::error::DataFusionError;
use infertrace_query::datafusion::prelude::DataFrame;
use infertrace_query::{ORDINAL, QueryError, QueryOptions, Session};
use infertrace_schema::{RequestRow, Table};
use parquet::arrow::ArrowWriter;

/// Opens the datasets at `paths` in a session of their own.
pub(crate) fn open(paths: &[PathBuf], query: &QueryOptions) -> Result<Session> {
    Session::open(paths, query).map_err(|e| engine_error(e, query, "open the datasets"))
}

/// The error of a query run for `what` (`compute the metrics`), on one line: past the memory budget it says which
/// option to raise; an error of a dataset already names it.
pub(crate) fn engine_error(error: QueryError, query: &QueryOptions, what: &str) -> anyhow::Error {
    match error {
        QueryError::Dataset { .. }
        | QueryError::Path { .. }
        | QueryError::Twice { .. }
        | QueryError::Scratch { .. }
        | QueryError::MixedClocks { .. } => anyhow::Error::new(error),
        QueryError::Engine(ref engine) if matches!(engine.find_root(), DataFusionError::ResourcesExhausted(_)) => {
            let limit = match query.memory_limit {
                n if n >= 1 << 20 => format!("{} MiB", n >> 20),
                n => format!("{} KiB", n >> 10),
            };
            anyhow!("cannot {what} within --memory-limit ({limit}): give it more memory")
        }
        QueryError::Engine(_) => anyhow::Error::new(error).context(format!("cannot {what}")),
    }
}

/// Runs `frame` and hands each batch to `each`, in the order the query gives them.
pub(crate) fn for_each_batch(
    session: &Session,
    frame: DataFrame,
    query: &QueryOptions,
    what: &str,
    mut each: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    for batch in session.batches(frame).map_err(|e| engine_error(e, query, what))? {
        each(&batch.map_err(|e| engine_error(e, query, what))?)?;
    }
    Ok(())
}

/// The one row of a query that gives one (an aggregation), each column as an integer (`None` where null, and
/// every column `None` when the query gives no row).
pub(crate) fn one_row(session: &Session, query: &QueryOptions, sql: &str, what: &str) -> Result<Vec<Option<i64>>> {
    let frame = session.block_on(session.datasets().sql(sql)).map_err(|e| engine_error(e, query, what))?;
    let width = frame.schema().fields().len();
    let mut row = vec![None; width];
    for_each_batch(session, frame, query, what, |batch| {
        if batch.num_rows() > 0 {
            for (c, value) in row.iter_mut().enumerate() {
                let column = arrow::compute::cast(batch.column(c), &DataType::Int64)?;
                let column = column.as_primitive::<Int64Type>();
                *value = column.is_valid(0).then(|| column.value(0));
            }
        }
        Ok(())
    })?;
    Ok(row)
}

/// The rows of `batch` as rows of `T`, with their ordinals (the batch's [`ORDINAL`] column).
pub(crate) fn rows_of<T: Table>(batch: &RecordBatch) -> Result<(Vec<T>, Vec<u64>)> {
    let rows = T::from_batch(batch).with_context(|| format!("cannot read the {} table", T::NAME))?;
    let ordinals =
        batch.column_by_name(ORDINAL).map(|c| c.as_primitive::<UInt64Type>().values().to_vec()).unwrap_or_default();
    Ok((rows, ordinals))
}

/// Every row of table `T` of the session's datasets, in input order (datasets as given, files in path order, rows
/// in file order), to `each`. The table is registered as `name`.
pub(crate) fn for_each_row<T: Table>(
    session: &Session,
    name: &str,
    query: &QueryOptions,
    each: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    for_each_row_where(session, name, query, "TRUE", each)
}

/// The rows of [`for_each_row`] for which the SQL condition `filter` holds.
pub(crate) fn for_each_row_where<T: Table>(
    session: &Session,
    name: &str,
    query: &QueryOptions,
    filter: &str,
    mut each: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let what = format!("read the {} table", T::NAME);
    let columns: Vec<&str> = T::COLUMNS.iter().map(|c| c.name).collect();
    session.datasets().register_ordered::<T>(name, &columns).map_err(|e| engine_error(e, query, &what))?;
    let frame = session
        .block_on(session.datasets().sql(&format!("SELECT * FROM {name} WHERE {filter} ORDER BY {ORDINAL}")))
        .map_err(|e| engine_error(e, query, &what))?;
    for_each_batch(session, frame, query, &what, |batch| {
        let (rows, _) = rows_of::<T>(batch)?;
        rows.into_iter().try_for_each(&mut each)
    })
}

/// The request rows in replay order (arrival, rows without one last, ties in input order) with `columns` only,
/// each with its ordinal (its position in input order), to `each`. The sort spills past the session's budget.
pub(crate) fn for_each_by_arrival(
    session: &Session,
    columns: &[&str],
    query: &QueryOptions,
    mut each: impl FnMut(&RequestRow, u64) -> Result<()>,
) -> Result<()> {
    let what = "sort the requests by arrival";
    let frame =
        session.block_on(session.datasets().requests_by_arrival(columns)).map_err(|e| engine_error(e, query, what))?;
    for_each_batch(session, frame, query, what, |batch| {
        let (rows, ordinals) = rows_of::<RequestRow>(batch)?;
        rows.iter().zip(ordinals).try_for_each(|(row, ordinal)| each(row, ordinal))
    })
}

/// A Parquet file of intermediate rows in a session's scratch directory, written a batch at a time.
pub(crate) struct ScratchFile {
    path: PathBuf,
    writer: ArrowWriter<File>,
}

impl ScratchFile {
    /// Creates the file at `path` for batches of `schema`.
    pub(crate) fn create(path: &Path, schema: SchemaRef) -> Result<Self> {
        let context = || format!("cannot write scratch file {}", path.display());
        let file = File::create(path).with_context(context)?;
        let writer = ArrowWriter::try_new(file, schema, None).with_context(context)?;
        Ok(Self { path: path.to_owned(), writer })
    }

    /// Appends `batch`.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer.write(batch).with_context(|| format!("cannot write scratch file {}", self.path.display()))
    }

    /// Closes the file and returns its path.
    pub(crate) fn finish(self) -> Result<PathBuf> {
        self.writer.close().with_context(|| format!("cannot write scratch file {}", self.path.display()))?;
        Ok(self.path)
    }
}
