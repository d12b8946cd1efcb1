//! `infertrace normalize`: inputs in, one canonical dataset out.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use indicatif::ProgressBar;
use infertrace_adapter::time::format_rfc3339;
use infertrace_adapter::{Adapter, Diagnostic, DiagnosticKind, Input, ParseContext, ParseOptions, Sink};
use infertrace_schema::{
    Assumptions, CacheEvent, DatasetError, DatasetWriter, DiagnosticSummary, EngineSample, InputEntry, Manifest,
    PartitionKey, Producer, RequestRow, RowCounts, SCHEMA_VERSION, SkippedInput,
};

use crate::paths::{InputFile, collect_inputs};
use crate::registry::{self, DetectError};

/// What to normalize and how.
#[derive(Debug, Clone)]
pub struct NormalizeOptions<'a> {
    /// Files and directories to read.
    pub inputs: Vec<PathBuf>,
    /// Dataset directory to write.
    pub output: PathBuf,
    /// The adapter for every input, or `None` to detect one per file. Borrowed rather than `'static` so that an
    /// adapter built at run time (`--format csv --map m.toml`) is passed the same way as the registry's.
    pub format: Option<&'a dyn Adapter>,
    /// Assumptions for inputs that lack them.
    pub parse: ParseOptions,
    /// Replace an existing output.
    pub force: bool,
    /// Write Hive-style partitions by this key instead of one file per table.
    pub partition_by: Option<PartitionKey>,
}

/// The outcome of a successful run.
#[derive(Debug, Clone)]
pub struct NormalizeReport {
    /// The manifest written, which holds everything the summary shows.
    pub manifest: Manifest,
    /// Where the dataset is.
    pub output: PathBuf,
}

impl NormalizeReport {
    /// Diagnostics over all inputs.
    pub fn diagnostics(&self) -> u64 {
        self.manifest.inputs.iter().map(|i| i.diagnostics.total).sum()
    }
}

/// Normalizes `options.inputs` into the dataset `options.output`.
///
/// Fails (and leaves no dataset behind) when an input cannot be read, a named input's format is unknown, nothing
/// at all was recognised, or the output cannot be written. A file found in an input directory that no adapter
/// recognises (a README, a sidecar) is skipped and listed in the manifest's `skipped`. Content problems are
/// diagnostics in the manifest, not failures.
pub fn normalize(options: &NormalizeOptions<'_>, progress: &ProgressBar) -> Result<NormalizeReport> {
    let files = collect_inputs(&options.inputs, &options.output)?;
    progress.set_length(files.iter().map(|f| f.bytes).sum());
    let mut writer = DatasetWriter::create(&options.output, options.force).map_err(|e| match e {
        // This message already names the output and says what to do.
        DatasetError::Exists { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(format!("cannot write output {}", options.output.display())),
    })?;
    if let Some(key) = options.partition_by {
        writer.partition_by(key);
    }
    let mut entries = Vec::with_capacity(files.len());
    let mut skipped = Vec::new();
    for file in &files {
        progress.set_message(file.display.clone());
        match normalize_file(file, options, &mut writer, progress)? {
            Outcome::Read(entry) => entries.push(*entry),
            Outcome::Skipped(reason) => {
                progress.inc(file.bytes);
                skipped.push(SkippedInput { path: file.display.clone(), reason })
            }
        }
    }
    if entries.is_empty() {
        bail!(
            "no adapter recognises any input ({} files skipped); pass --format with one of: {}",
            skipped.len(),
            registry::choices()
        );
    }
    let manifest = Manifest {
        schema_version: SCHEMA_VERSION,
        producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
        assumptions: Assumptions {
            year: options.parse.year,
            utc_offset: options.parse.utc_offset.to_string(),
            start: format_rfc3339(options.parse.start_ns),
        },
        inputs: entries,
        skipped,
        merge: None,
        cache_sim: None,
        partition_by: None,
        rows: RowCounts::default(),
    };
    let manifest =
        writer.finish(manifest).with_context(|| format!("cannot write output {}", options.output.display()))?;
    progress.finish_and_clear();
    Ok(NormalizeReport { manifest, output: options.output.clone() })
}

/// What became of one input file.
enum Outcome {
    /// Boxed: an entry is large and a skipped file's reason is small.
    Read(Box<InputEntry>),
    /// A file of an input directory no adapter claims, and why.
    Skipped(String),
}

fn normalize_file(
    file: &InputFile,
    options: &NormalizeOptions<'_>,
    writer: &mut DatasetWriter,
    progress: &ProgressBar,
) -> Result<Outcome> {
    let read_error = || format!("cannot read input {}", file.display);
    let ticker = progress.clone();
    let mut input = Input::open(&file.path, Some(Arc::new(move |n| ticker.inc(n)))).with_context(read_error)?;
    let adapter = match (options.format, registry::detect(input.head())) {
        (Some(adapter), _) => adapter,
        (None, Ok(adapter)) => adapter,
        (None, Err(DetectError::Unknown)) if file.in_directory => return Ok(Outcome::Skipped("unrecognised".into())),
        (None, Err(DetectError::Ambiguous(ids))) if file.in_directory => {
            return Ok(Outcome::Skipped(format!("ambiguous: {}", ids.join(", "))));
        }
        (None, Err(DetectError::Unknown)) => {
            bail!("no adapter recognises input {}; pass --format with one of: {}", file.display, registry::choices())
        }
        (None, Err(DetectError::Ambiguous(ids))) => {
            bail!("input {} matches several formats ({}); pass --format to choose", file.display, ids.join(", "))
        }
    };
    let ctx = ParseContext { source_file: &file.display, options: &options.parse, modified: file.modified };
    let mut sink = DatasetSink { writer, records: RowCounts::default(), diagnostics: DiagnosticSummary::default() };
    let report = adapter.parse(input.reader(), &ctx, &mut sink).map_err(|e| match e {
        infertrace_adapter::ParseError::Write(e) => {
            anyhow::Error::new(e).context(format!("cannot write output {}", options.output.display()))
        }
        other => anyhow::Error::new(other).context(read_error()),
    })?;
    let (records, diagnostics) = (sink.records, sink.diagnostics);
    let compression = input.compression();
    let digest = input.finish().with_context(read_error)?;
    Ok(Outcome::Read(Box::new(InputEntry {
        path: file.display.clone(),
        bytes: digest.bytes,
        sha256: digest.sha256,
        compression: compression.as_str().to_owned(),
        format: adapter.id().to_owned(),
        format_version: report.format_version,
        clock_domain: report.clock_domain,
        year: report.year,
        lines: report.lines,
        records,
        diagnostics,
        details: report.details,
    })))
}

/// Forwards an adapter's rows to the dataset, filling derivable durations, and tallies its diagnostics.
struct DatasetSink<'w> {
    writer: &'w mut DatasetWriter,
    records: RowCounts,
    diagnostics: DiagnosticSummary,
}

impl Sink for DatasetSink<'_> {
    fn request(&mut self, mut row: RequestRow) -> Result<(), DatasetError> {
        for column in row.fill_durations() {
            self.diagnostic(Diagnostic::new(
                row.source_line.unwrap_or(0),
                DiagnosticKind::Inconsistent,
                format!("{column} would be negative (its end precedes its start); left null"),
            ));
        }
        self.writer.push_request(&row)?;
        self.records.requests += 1;
        Ok(())
    }

    fn sample(&mut self, row: EngineSample) -> Result<(), DatasetError> {
        self.writer.push_sample(&row)?;
        self.records.samples += 1;
        Ok(())
    }

    fn cache_event(&mut self, row: CacheEvent) -> Result<(), DatasetError> {
        self.writer.push_cache_event(&row)?;
        self.records.cache_events += 1;
        Ok(())
    }

    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.record(diagnostic.kind.as_str(), diagnostic.line, diagnostic.message);
    }
}
