//! `infertrace sql`: a SQL query over the tables of datasets, run by DataFusion, printed as a table or written as CSV,
//! JSON lines or Parquet.
//!
//! The result streams: CSV, JSON and Parquet are written batch by batch, and the terminal table holds at most
//! `max_rows` rows (the others are counted), so memory does not grow with the rows of the result. Sorts, joins and
//! aggregations spill past the session's memory limit ([`QueryOptions`]).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use futures::StreamExt as _;
use infertrace_query::datafusion::execution::SendableRecordBatchStream;
use infertrace_query::{QueryOptions, Session};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// How `sql` writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SqlFormat {
    /// A text table of at most `--max-rows` rows.
    Table,
    /// CSV with a header line; times in RFC 3339.
    Csv,
    /// One JSON object per row and line; nulls left out.
    Json,
    /// A Parquet file (zstd); needs `-o`.
    Parquet,
}

/// What `sql` runs and where its result goes.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    /// The query, over the tables `requests`, `samples` and `cache_events`.
    pub query: String,
    /// The datasets whose tables are queried together.
    pub datasets: Vec<PathBuf>,
    /// How the result is written.
    pub format: SqlFormat,
    /// The file to write; standard output when `None`.
    pub output: Option<PathBuf>,
    /// Rows a table shows.
    pub max_rows: usize,
    /// How the session uses the machine.
    pub query_options: QueryOptions,
}

/// Runs the query and writes its result to `options.output`, or to `out`.
pub fn sql(options: &SqlOptions, out: &mut dyn Write) -> Result<()> {
    if options.format == SqlFormat::Parquet && options.output.is_none() {
        bail!("--format parquet needs -o FILE");
    }
    let session = Session::open(&options.datasets, &options.query_options)?;
    session.block_on(async {
        let stream = session
            .datasets()
            .sql(&options.query)
            .await
            .context("invalid query")?
            .execute_stream()
            .await
            .context("cannot run the query")?;
        match &options.output {
            Some(path) => write_file(stream, options, path).await,
            None => write(stream, options, out).await,
        }
    })
}

/// Writes the result to `path` through a hidden sibling, renamed into place once complete: a failed query leaves
/// no half-written file.
async fn write_file(stream: SendableRecordBatchStream, options: &SqlOptions, path: &Path) -> Result<()> {
    let name = path.file_name().with_context(|| format!("cannot write {}: not a file name", path.display()))?;
    let partial = path.with_file_name(format!(".{}.infertrace-partial", name.to_string_lossy()));
    let written: Result<()> = async {
        let mut file = BufWriter::new(File::create(&partial)?);
        if options.format == SqlFormat::Parquet {
            write_parquet(stream, &mut file).await?;
        } else {
            write(stream, options, &mut file).await?;
        }
        file.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()?;
        Ok(())
    }
    .await;
    match written {
        Ok(()) => fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display())),
        Err(error) => {
            let _ = fs::remove_file(&partial);
            Err(error.context(format!("cannot write {}", path.display())))
        }
    }
}

/// Writes the batches of `stream` as one Parquet file (zstd).
async fn write_parquet(mut stream: SendableRecordBatchStream, out: &mut BufWriter<File>) -> Result<()> {
    let properties = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?)).build();
    let mut writer = ArrowWriter::try_new(out, stream.schema(), Some(properties))?;
    while let Some(batch) = next(&mut stream).await? {
        writer.write(&batch)?;
    }
    writer.close()?;
    Ok(())
}

/// Writes the batches of `stream` in `options.format`.
async fn write(mut stream: SendableRecordBatchStream, options: &SqlOptions, out: &mut dyn Write) -> Result<()> {
    let schema = stream.schema();
    match options.format {
        SqlFormat::Table => {
            let (mut shown, mut rows) = (Vec::new(), 0usize);
            while let Some(batch) = next(&mut stream).await? {
                let room = options.max_rows.saturating_sub(rows);
                if room > 0 {
                    shown.push(batch.slice(0, room.min(batch.num_rows())));
                }
                rows += batch.num_rows();
            }
            if shown.is_empty() {
                shown.push(RecordBatch::new_empty(schema));
            }
            writeln!(out, "{}", pretty_format_batches(&shown)?)?;
            let kept = rows.min(options.max_rows);
            if rows > kept {
                writeln!(out, "{rows} rows, the first {kept} shown (--max-rows, or --format csv for all)")?;
            } else {
                writeln!(out, "{rows} {}", if rows == 1 { "row" } else { "rows" })?;
            }
        }
        SqlFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(out);
            while let Some(batch) = next(&mut stream).await? {
                writer.write(&batch)?;
            }
        }
        SqlFormat::Json => {
            let mut writer = arrow::json::LineDelimitedWriter::new(out);
            while let Some(batch) = next(&mut stream).await? {
                writer.write(&batch)?;
            }
            writer.finish()?;
        }
        SqlFormat::Parquet => bail!("--format parquet needs -o FILE"),
    }
    Ok(())
}

/// The next batch of `stream`, or the query's error.
async fn next(stream: &mut SendableRecordBatchStream) -> Result<Option<RecordBatch>> {
    stream.next().await.transpose().map_err(infertrace_query::QueryError::from).context("cannot run the query")
}
