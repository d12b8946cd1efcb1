//! `infertrace normalize`: inputs in, one canonical dataset out.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use indicatif::ProgressBar;
use infertrace_adapter::time::format_rfc3339;
use infertrace_adapter::{Adapter, Diagnostic, DiagnosticKind, Input, ParseContext, ParseOptions, Sink};
use infertrace_schema::{
    Assumptions, CacheEvent, DatasetError, DatasetWriter, DiagnosticSummary, EngineSample, InputEntry, Manifest,
    Producer, RequestRow, RowCounts, SCHEMA_VERSION,
};

use crate::paths::{InputFile, collect_inputs};
use crate::registry::{self, DetectError};

/// What to normalize and how.
#[derive(Debug, Clone)]
pub struct NormalizeOptions {
    /// Files and directories to read.
    pub inputs: Vec<PathBuf>,
    /// Dataset directory to write.
    pub output: PathBuf,
    /// The adapter for every input, or `None` to detect one per file.
    pub format: Option<&'static dyn Adapter>,
    /// Assumptions for inputs that lack them.
    pub parse: ParseOptions,
    /// Replace an existing output.
    pub force: bool,
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
/// Fails (and leaves no dataset behind) when an input cannot be read or its format is unknown, or when the output
/// cannot be written. Content problems are diagnostics in the manifest, not failures.
pub fn normalize(options: &NormalizeOptions, progress: &ProgressBar) -> Result<NormalizeReport> {
    let files = collect_inputs(&options.inputs, &options.output)?;
    progress.set_length(files.iter().map(|f| f.bytes).sum());
    let mut writer = DatasetWriter::create(&options.output, options.force).map_err(|e| match e {
        // This message already names the output and says what to do.
        DatasetError::Exists { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(format!("cannot write output {}", options.output.display())),
    })?;
    let mut entries = Vec::with_capacity(files.len());
    for file in &files {
        progress.set_message(file.display.clone());
        entries.push(normalize_file(file, options, &mut writer, progress)?);
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
        rows: RowCounts::default(),
    };
    let manifest =
        writer.finish(manifest).with_context(|| format!("cannot write output {}", options.output.display()))?;
    progress.finish_and_clear();
    Ok(NormalizeReport { manifest, output: options.output.clone() })
}

fn normalize_file(
    file: &InputFile,
    options: &NormalizeOptions,
    writer: &mut DatasetWriter,
    progress: &ProgressBar,
) -> Result<InputEntry> {
    let read_error = || format!("cannot read input {}", file.display);
    let ticker = progress.clone();
    let mut input = Input::open(&file.path, Some(Arc::new(move |n| ticker.inc(n)))).with_context(read_error)?;
    let adapter = match options.format {
        Some(adapter) => adapter,
        None => registry::detect(input.head()).map_err(|e| match e {
            DetectError::Unknown => {
                anyhow!("no adapter recognises input {}; pass --format with one of: {}", file.display, registry::ids())
            }
            DetectError::Ambiguous(ids) => {
                anyhow!("input {} matches several formats ({}); pass --format to choose", file.display, ids.join(", "))
            }
        })?,
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
    Ok(InputEntry {
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
    })
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
