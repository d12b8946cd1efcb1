//! `infertrace normalize`: inputs in, one canonical dataset out.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use indicatif::ProgressBar;
use infertrace_adapter::time::format_rfc3339;
use infertrace_adapter::{
    Adapter, DecompressionLimits, Diagnostic, DiagnosticKind, Input, LineReader, ParseContext, ParseOptions, Sink, hash,
};
use infertrace_schema::{
    Assumptions, CacheEvent, DatasetError, DatasetWriter, DiagnosticSummary, EngineSample, HashSalt, InputEntry,
    Manifest, PartitionKey, Producer, RequestRow, RowCounts, SCHEMA_VERSION, SkippedInput,
};

use crate::paths::{InputFile, collect_inputs};
use crate::registry::{self, DetectError};

/// What to normalize and how.
#[derive(Debug, Clone, Default)]
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
    /// Key every prefix and block hash with this salt (`--hash-salt`), so that datasets of different tenants share
    /// no hash value. Never stored.
    pub hash_salt: Option<String>,
    /// Keep the first bytes of the first [`SHOWN_LINES`] offending lines for the caller to print (`--show-lines`).
    pub show_lines: bool,
    /// Limits on how far a compressed input may expand.
    pub limits: DecompressionLimits,
}

/// How many offending lines `--show-lines` shows over a run.
pub const SHOWN_LINES: usize = 20;
/// How many bytes of each offending line `--show-lines` shows.
pub const SHOWN_BYTES: usize = 200;

/// An input line that produced a diagnostic, kept only with `--show-lines` and never written to the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownLine {
    /// The input, as recorded in the manifest.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// Diagnostic kind.
    pub kind: &'static str,
    /// The line's first [`SHOWN_BYTES`] bytes, lossily decoded.
    pub text: String,
}

/// The outcome of a successful run.
#[derive(Debug, Clone)]
pub struct NormalizeReport {
    /// The manifest written, which holds everything the summary shows.
    pub manifest: Manifest,
    /// Where the dataset is.
    pub output: PathBuf,
    /// With `--show-lines`: the first offending lines, for stderr only.
    pub shown_lines: Vec<ShownLine>,
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
    let mut shown_lines = Vec::new();
    for file in &files {
        progress.set_message(file.display.clone());
        match normalize_file(file, options, &mut writer, progress, &mut shown_lines)? {
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
        hash_salt: options.hash_salt.as_ref().map(|_| HashSalt::Keyed),
        rows: RowCounts::default(),
    };
    let manifest =
        writer.finish(manifest).with_context(|| format!("cannot write output {}", options.output.display()))?;
    progress.finish_and_clear();
    Ok(NormalizeReport { manifest, output: options.output.clone(), shown_lines })
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
    shown_lines: &mut Vec<ShownLine>,
) -> Result<Outcome> {
    let read_error = || format!("cannot read input {}", file.display);
    let ticker = progress.clone();
    let mut input = Input::open_with_limits(&file.path, Some(Arc::new(move |n| ticker.inc(n))), options.limits)
        .with_context(read_error)?;
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
    let mut sink = DatasetSink {
        writer,
        records: RowCounts::default(),
        diagnostics: DiagnosticSummary::default(),
        salt_key: options.hash_salt.as_ref().map(|salt| hash::salt_key(salt.as_bytes())),
        show: if options.show_lines { SHOWN_LINES.saturating_sub(shown_lines.len()) } else { 0 },
        offending: Vec::new(),
    };
    let report = adapter.parse(input.reader(), &ctx, &mut sink).map_err(|e| match e {
        infertrace_adapter::ParseError::Write(e) => {
            anyhow::Error::new(e).context(format!("cannot write output {}", options.output.display()))
        }
        other => anyhow::Error::new(other).context(read_error()),
    })?;
    let (records, diagnostics, offending) = (sink.records, sink.diagnostics, sink.offending);
    let compression = input.compression();
    let digest = input.finish().with_context(read_error)?;
    if !offending.is_empty() {
        shown_lines.extend(read_lines(file, options.limits, &offending).with_context(read_error)?);
    }
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

/// Reads `file` again for the text of the lines of `offending`, for `--show-lines`.
///
/// Re-reading after the parse rather than keeping text during it leaves adapters and the `Sink` trait untouched
/// and costs a second pass only when `--show-lines` was given and something went wrong. Formats that number
/// records rather than lines (CSV with quoted newlines) may show a neighbouring line.
fn read_lines(
    file: &InputFile,
    limits: DecompressionLimits,
    offending: &[(u64, &'static str)],
) -> std::io::Result<Vec<ShownLine>> {
    let mut input = Input::open_with_limits(&file.path, None, limits)?;
    let mut lines = LineReader::new(input.reader());
    let mut shown = Vec::with_capacity(offending.len());
    let last = offending.iter().map(|&(line, _)| line).max().unwrap_or(0);
    while let Some((number, bytes)) = lines.next_bytes()? {
        for &(line, kind) in offending.iter().filter(|(line, _)| *line == number) {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN_BYTES)]).into_owned();
            shown.push(ShownLine { path: file.display.clone(), line, kind, text });
        }
        if number >= last {
            break;
        }
    }
    Ok(shown)
}

/// Forwards an adapter's rows to the dataset, filling derivable durations, keying hashes with `--hash-salt`, and
/// tallies its diagnostics.
struct DatasetSink<'w> {
    writer: &'w mut DatasetWriter,
    records: RowCounts,
    diagnostics: DiagnosticSummary,
    /// `hash::salt_key` of `--hash-salt`.
    salt_key: Option<u64>,
    /// How many more offending lines to remember for `--show-lines`.
    show: usize,
    /// Line and kind of the first diagnostics, for `--show-lines`.
    offending: Vec<(u64, &'static str)>,
}

impl Sink for DatasetSink<'_> {
    fn request(&mut self, mut row: RequestRow) -> Result<(), DatasetError> {
        if let (Some(key), Some(hashes)) = (self.salt_key, row.prefix_hashes.as_mut()) {
            hashes.iter_mut().for_each(|h| *h = hash::keyed(*h, key));
        }
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

    fn cache_event(&mut self, mut row: CacheEvent) -> Result<(), DatasetError> {
        if let Some(key) = self.salt_key {
            for hash in [&mut row.block_hash, &mut row.parent_hash].into_iter().flatten() {
                *hash = hash::keyed(*hash, key);
            }
        }
        self.writer.push_cache_event(&row)?;
        self.records.cache_events += 1;
        Ok(())
    }

    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        if self.show > 0 {
            self.show -= 1;
            self.offending.push((diagnostic.line, diagnostic.kind.as_str()));
        }
        self.diagnostics.record(diagnostic.kind.as_str(), diagnostic.line, diagnostic.message);
    }
}
