//! `infertrace normalize`: inputs in, one canonical dataset out.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use indicatif::ProgressBar;
use infertrace_adapter::time::format_rfc3339;
use infertrace_adapter::{
    Adapter, Compression, DecompressionLimits, Diagnostic, DiagnosticKind, Drift, Input, InputDigest, LineReader,
    ParseContext, ParseOptions, ParseReport, Sidecars, Sink, hash, parallel,
};
use infertrace_schema::{
    Assumptions, CacheEvent, DatasetError, DatasetWriter, DiagnosticSummary, DriftSummary, EngineSample, HashSalt,
    InputEntry, Manifest, PartitionKey, Producer, RequestRow, RowCounts, SCHEMA_VERSION, SkippedInput,
};
use rayon::prelude::*;

use crate::paths::{InputFile, InputKind, collect_inputs, named_compressed};
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
    /// Threads of the pool that line-oriented adapters prepare lines on (`--threads`); 0 means one per CPU. The
    /// output does not depend on it.
    pub threads: usize,
}

/// The reason the manifest's `skipped` gives for an input whose content equals an earlier one's, followed by that
/// input's recorded path.
pub(crate) const DUPLICATE_REASON: &str = "same content as";

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
    /// Files read ahead that made more rows than they could hold and were parsed again, streamed: work done twice,
    /// never a difference in what is written.
    pub parsed_twice: u64,
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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .thread_name(|i| format!("normalize-{i}"))
        .build()
        .context("cannot start the worker threads; pass a smaller --threads")?;
    pool.install(|| normalize_in_pool(options, progress))
}

/// [`normalize`] on the current rayon pool.
fn normalize_in_pool(options: &NormalizeOptions<'_>, progress: &ProgressBar) -> Result<NormalizeReport> {
    let files = collect_inputs(&options.inputs, &options.output)?;
    if options.format.is_none() && files.iter().any(|f| f.kind == InputKind::Stdin) {
        bail!(
            "reading standard input (-) needs --format, as a live log has no head to detect it from; pass one of: {}",
            registry::choices()
        );
    }
    progress.set_length(files.iter().map(|f| f.bytes).sum());
    let mut writer = DatasetWriter::create_partitioned(&options.output, options.force, options.partition_by).map_err(
        |e| match e {
            // This message already names the output and says what to do.
            DatasetError::Exists { .. } => anyhow::Error::new(e),
            other => anyhow::Error::new(other).context(format!("cannot write output {}", options.output.display())),
        },
    )?;
    let mut entries = Vec::with_capacity(files.len());
    let mut skipped = Vec::new();
    let mut shown_lines = Vec::new();
    let threads = rayon::current_num_threads();
    let mut bound = ReadAheadBound::default();
    let mut parsed_twice = 0;
    let mut next = 0;
    while next < files.len() {
        // Small files are read ahead in parallel, a window at a time, and written in their turn; a large file is
        // streamed alone, its lines parsed in parallel by its adapter.
        let window = bound.window(&files[next..], threads);
        let read: Vec<(&InputFile, Option<Result<ReadAhead>>)> = if threads > 1 && window > 1 {
            let held = ReadAheadBound::held_share(window);
            let ahead: Vec<_> = files[next..next + window]
                .par_iter()
                .map(|file| {
                    // As many files as threads keep the pool busy: each file's lines need not go to it as well.
                    if window >= threads {
                        parallel::sequentially(|| read_ahead(file, options, held))
                    } else {
                        read_ahead(file, options, held)
                    }
                })
                .collect();
            files[next..next + window].iter().zip(ahead.into_iter().map(Some)).collect()
        } else {
            vec![(&files[next], None)]
        };
        next += read.len();
        for (file, ahead) in read {
            progress.set_message(file.display.clone());
            if let Some(Ok(ReadAhead::TooLarge)) = &ahead {
                bound.overflowed(file);
                parsed_twice += 1;
            }
            let outcome = match ahead.transpose()? {
                Some(ReadAhead::Done(events, parsed)) => {
                    let mut sink = DatasetSink::new(&mut writer, options, shown_lines.len());
                    events.replay(&mut sink).map_err(|e| write_error(e, options))?;
                    progress.inc(file.bytes);
                    parsed.into_outcome(file, options, sink, &mut shown_lines)?
                }
                Some(ReadAhead::Skipped(reason)) => Outcome::Skipped(reason),
                // Not read ahead, or too many rows to hold: streamed.
                Some(ReadAhead::TooLarge) | None => {
                    let mut sink = DatasetSink::new(&mut writer, options, shown_lines.len());
                    match parse_file(file, options, progress, &mut sink)? {
                        FileOutcome::Parsed(parsed) => parsed.into_outcome(file, options, sink, &mut shown_lines)?,
                        FileOutcome::Skipped(reason) => Outcome::Skipped(reason),
                    }
                }
            };
            match outcome {
                Outcome::Read(entry) => entries.push(*entry),
                Outcome::Skipped(reason) => {
                    progress.inc(file.bytes);
                    skipped.push(SkippedInput { path: file.display.clone(), reason })
                }
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
            block_size: options.parse.block_size,
        },
        inputs: entries,
        skipped,
        merge: None,
        cache_sim: None,
        partition_by: None,
        hash_salt: options.hash_salt.as_ref().map(|_| HashSalt::Keyed),
        capture: None,
        rows: RowCounts::default(),
    };
    let manifest =
        writer.finish(manifest).with_context(|| format!("cannot write output {}", options.output.display()))?;
    progress.finish_and_clear();
    Ok(NormalizeReport { manifest, output: options.output.clone(), shown_lines, parsed_twice })
}

/// What became of one input file.
enum Outcome {
    /// Boxed: an entry is large and a skipped file's reason is small.
    Read(Box<InputEntry>),
    /// A file of an input directory no adapter claims, and why.
    Skipped(String),
}

/// Files at most this large (as stored) are read ahead in parallel, their rows held until their turn to be written.
const READ_AHEAD_BYTES: u64 = 8 << 20;

/// Bytes of text the files read ahead together may hold, as estimated from their sizes (see
/// [`ReadAheadBound::text_bytes`]): what each holds while it is parsed (its blocks, its batches of lines) grows with
/// its text, so this bounds it whatever the number of threads.
const READ_AHEAD_WINDOW_BYTES: u64 = 16 << 20;

/// How many bytes of text a file named as gzip'd or zstd'd is taken to hold per stored byte when its compression
/// records no size: logs compress 3:1 (prompt token ids) to 10:1.
const COMPRESSED_EXPANSION: u64 = 8;

/// Bytes of rows and diagnostics the files read ahead together may hold (counted as [`EVENT_BYTES`] each plus
/// their prefix hashes), shared equally among them, at most [`READ_AHEAD_FILE_HELD_BYTES`] each; a file that makes
/// more is handed back and streamed.
const READ_AHEAD_HELD_BYTES: usize = 48 << 20;

/// The most one read-ahead file may hold, however few are read ahead together.
const READ_AHEAD_FILE_HELD_BYTES: usize = 16 << 20;

/// Which files are read ahead, and how much each may hold.
///
/// A window of files is read ahead together: at most `threads + 1`, each at most [`READ_AHEAD_BYTES`] as stored,
/// together at most [`READ_AHEAD_WINDOW_BYTES`] of text, each holding an equal share of [`READ_AHEAD_HELD_BYTES`].
/// Before the last two bounds, memory grew with the thread count: 100 SGLang files of 2.7 MB took 1 GB with 32
/// threads.
///
/// And once a file read ahead makes more rows than its share, files half its size or larger (in text, as estimated)
/// are streamed instead.
/// Such a file is parsed twice, once ahead and once streamed, and while it is read ahead it holds the most memory.
/// Row-dense logs overflow far below [`READ_AHEAD_BYTES`] (an SGLang log makes a row per 30 bytes, 16 MiB of rows
/// from 2 MB of text), and a fleet's logs come in many files of similar size, so one overflow predicts the next:
/// without this bound, 100 SGLang files of 2.7 MB took twice as long with two threads as with one, and twice the
/// memory.
///
/// Whether a file is read ahead changes when it is parsed, never what is written.
#[derive(Debug)]
struct ReadAheadBound {
    /// Files of fewer bytes of text than this (see [`ReadAheadBound::text_bytes`]) may be read ahead.
    below: u64,
}

impl Default for ReadAheadBound {
    fn default() -> Self {
        Self { below: u64::MAX }
    }
}

impl ReadAheadBound {
    /// How many of `files`, from the first, are read ahead together; zero or one: the first is streamed.
    fn window(&self, files: &[InputFile], threads: usize) -> usize {
        let mut text = 0u64;
        let mut count = 0;
        for file in files.iter().take(threads + 1) {
            // Saturating: a zstd frame header may claim up to 2⁶⁴ bytes.
            text = text.saturating_add(Self::text_bytes(file));
            // A stream (standard input, a named pipe) is read once, as it comes: never held, never parsed twice.
            let admitted =
                file.kind == InputKind::File && file.bytes <= READ_AHEAD_BYTES && Self::text_bytes(file) < self.below;
            if !admitted || (count > 0 && text > READ_AHEAD_WINDOW_BYTES) {
                break;
            }
            count += 1;
        }
        count
    }

    /// The bytes of rows and diagnostics each of a window of `files` files may hold.
    fn held_share(files: usize) -> usize {
        (READ_AHEAD_HELD_BYTES / files.max(1)).min(READ_AHEAD_FILE_HELD_BYTES)
    }

    /// The text `file` is taken to hold: its size; for a file named as gzip'd or zstd'd, the size its compression
    /// records, else [`COMPRESSED_EXPANSION`] times its size. A recorded size below the stored one is not believed
    /// (a gzip size past 4 GiB wraps around). Either may fall short (several gzip members, a zstd file of several
    /// frames): such a file overflows its share of rows and is streamed.
    fn text_bytes(file: &InputFile) -> u64 {
        if !named_compressed(&file.path) {
            return file.bytes;
        }
        match file.recorded_text {
            Some(text) if text >= file.bytes => text,
            _ => file.bytes.saturating_mul(COMPRESSED_EXPANSION),
        }
    }

    /// `file` was read ahead and made too many rows: files with half its text or more are streamed from now on.
    fn overflowed(&mut self, file: &InputFile) {
        self.below = self.below.min(Self::text_bytes(file).div_ceil(2));
    }
}

/// What one held row or diagnostic is counted as, besides its prefix hashes: its struct and its strings, roughly.
const EVENT_BYTES: usize = 256;

/// A small file parsed ahead of its turn, on a worker.
enum ReadAhead {
    /// Everything its adapter pushed, in order, and what the parse found.
    Done(Events, Box<Parsed>),
    /// A file of an input directory no adapter claims, and why.
    Skipped(String),
    /// More than its share of [`READ_AHEAD_HELD_BYTES`]: the file is streamed instead, so memory stays bounded.
    TooLarge,
}

/// Parses `file` into memory, holding at most `held` bytes of rows, without the progress bar (its bytes are counted
/// when the file is written).
fn read_ahead(file: &InputFile, options: &NormalizeOptions<'_>, held: usize) -> Result<ReadAhead> {
    let mut events = Events { budget: held, ..Events::default() };
    match parse_file(file, options, &ProgressBar::hidden(), &mut events) {
        _ if events.full => Ok(ReadAhead::TooLarge),
        Ok(FileOutcome::Parsed(parsed)) => Ok(ReadAhead::Done(events, parsed)),
        Ok(FileOutcome::Skipped(reason)) => Ok(ReadAhead::Skipped(reason)),
        Err(e) => Err(e),
    }
}

/// What an adapter pushed into a [`Sink`], in order, up to `budget` bytes (counted as for [`READ_AHEAD_HELD_BYTES`]).
#[derive(Default)]
struct Events {
    events: Vec<Event>,
    /// Bytes held, as counted for [`READ_AHEAD_HELD_BYTES`].
    held: usize,
    /// The most `held` may reach.
    budget: usize,
    full: bool,
}

enum Event {
    Request(Box<RequestRow>),
    Sample(EngineSample),
    /// What [`Sink::samples`] was given: one row, and the metrics and values of its samples.
    Samples(EngineSample, Vec<(&'static str, f64)>),
    CacheEvent(CacheEvent),
    Diagnostic(Diagnostic),
    Drift(Drift),
}

impl Events {
    /// Holds `event`, counted as `bytes`.
    fn push(&mut self, event: Event, bytes: usize) -> Result<(), DatasetError> {
        self.held += bytes;
        if self.held > self.budget {
            self.full = true;
            // Stops the adapter; `read_ahead` sees `full` and hands the file back to be streamed.
            return Err(DatasetError::Io {
                action: "hold the rows of",
                path: "a file read ahead".into(),
                source: std::io::Error::other("too many rows to read ahead"),
            });
        }
        self.events.push(event);
        Ok(())
    }

    /// Pushes everything into `sink`, in the order it came.
    fn replay(self, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        for event in self.events {
            match event {
                Event::Request(row) => sink.request(*row)?,
                Event::Sample(row) => sink.sample(row)?,
                Event::Samples(mut row, values) => sink.samples(&mut row, &values)?,
                Event::CacheEvent(row) => sink.cache_event(row)?,
                Event::Diagnostic(diagnostic) => sink.diagnostic(diagnostic),
                Event::Drift(drift) => sink.drift(drift),
            }
        }
        Ok(())
    }
}

impl Sink for Events {
    fn request(&mut self, row: RequestRow) -> Result<(), DatasetError> {
        let hashes = row.prefix_hashes.as_ref().map_or(0, Vec::len);
        self.push(Event::Request(Box::new(row)), EVENT_BYTES + hashes * size_of::<u64>())
    }
    fn sample(&mut self, row: EngineSample) -> Result<(), DatasetError> {
        self.push(Event::Sample(row), EVENT_BYTES)
    }
    /// Held as they came, one row and its values, and replayed through [`Sink::samples`], so that the dataset's
    /// sink finds each metric's name by address as it does for a file it is given directly. Passed on one sample
    /// at a time, each sample made its own copy of its metric's name, and writing the dictionary column looked
    /// every copy up by its text: a third of the writing thread's time on 4,000 small SGLang logs. Each value is
    /// counted as a row.
    fn samples(&mut self, row: &mut EngineSample, values: &[(&'static str, f64)]) -> Result<(), DatasetError> {
        self.push(Event::Samples(row.clone(), values.to_vec()), EVENT_BYTES * values.len())
    }
    fn cache_event(&mut self, row: CacheEvent) -> Result<(), DatasetError> {
        self.push(Event::CacheEvent(row), EVENT_BYTES)
    }
    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        // A diagnostic cannot stop the adapter: past the bound it is dropped and the file marked full, to be
        // streamed again from its start.
        self.held += EVENT_BYTES;
        if self.held > self.budget {
            self.full = true;
        } else {
            self.events.push(Event::Diagnostic(diagnostic));
        }
    }
    fn drift(&mut self, drift: Drift) {
        // Once per file, and small (its names are bounded): never counted against the bound.
        self.events.push(Event::Drift(drift));
    }
}

/// What parsing one file found, besides the rows it pushed.
struct Parsed {
    format: &'static str,
    report: ParseReport,
    compression: Compression,
    digest: InputDigest,
}

enum FileOutcome {
    Parsed(Box<Parsed>),
    Skipped(String),
}

fn write_error(e: DatasetError, options: &NormalizeOptions<'_>) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("cannot write output {}", options.output.display()))
}

/// Opens `file`, picks its adapter and parses it into `sink`.
fn parse_file(
    file: &InputFile,
    options: &NormalizeOptions<'_>,
    progress: &ProgressBar,
    sink: &mut dyn Sink,
) -> Result<FileOutcome> {
    if let Some(first) = &file.duplicate_of {
        return Ok(FileOutcome::Skipped(format!("{DUPLICATE_REASON} {first}")));
    }
    let read_error = || format!("cannot read input {}", file.display);
    let ticker = progress.clone();
    let ticker: infertrace_adapter::Progress = Arc::new(move |n| ticker.inc(n));
    let input = match file.kind {
        InputKind::Stdin => Input::from_reader(crate::stdin::Stdin::open()?, Some(ticker), options.limits),
        InputKind::File | InputKind::Stream => Input::open_with_limits(&file.path, Some(ticker), options.limits),
    };
    let mut input = input.with_context(read_error)?;
    let adapter = match (options.format, registry::detect(input.head())) {
        (Some(adapter), _) => adapter,
        (None, Ok(adapter)) => adapter,
        (None, Err(DetectError::Unknown)) if file.in_directory => {
            return Ok(FileOutcome::Skipped("unrecognised".into()));
        }
        (None, Err(DetectError::Ambiguous(ids))) if file.in_directory => {
            return Ok(FileOutcome::Skipped(format!("ambiguous: {}", ids.join(", "))));
        }
        (None, Err(DetectError::Unknown)) => {
            bail!("no adapter recognises input {}; pass --format with one of: {}", file.display, registry::choices())
        }
        (None, Err(DetectError::Ambiguous(ids))) => {
            bail!("input {} matches several formats ({}); pass --format to choose", file.display, ids.join(", "))
        }
    };
    let beside =
        file.path.parent().filter(|_| file.kind != InputKind::Stdin).map(|dir| Beside { dir, limits: options.limits });
    let sidecars = beside.as_ref().map(|b| b as &dyn Sidecars);
    let ctx = ParseContext { source_file: &file.display, options: &options.parse, modified: file.modified, sidecars };
    let report = adapter.parse(input.reader(), &ctx, sink).map_err(|e| match e {
        infertrace_adapter::ParseError::Write(e) => write_error(e, options),
        other => anyhow::Error::new(other).context(read_error()),
    })?;
    let compression = input.compression();
    let digest = input.finish().with_context(read_error)?;
    Ok(FileOutcome::Parsed(Box::new(Parsed { format: adapter.id(), report, compression, digest })))
}

/// The most bytes a file beside an input may hold (decompressed) to be read as its context.
const SIDECAR_BYTES: u64 = 4 << 20;

/// The files beside an input, in its directory.
#[derive(Debug)]
struct Beside<'a> {
    dir: &'a std::path::Path,
    limits: DecompressionLimits,
}

impl Sidecars for Beside<'_> {
    fn read(&self, relative: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(relative);
        if !std::fs::metadata(&path).ok()?.is_file() {
            return None;
        }
        let mut input = Input::open_with_limits(&path, None, self.limits).ok()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(input.reader(), SIDECAR_BYTES + 1), &mut bytes).ok()?;
        (bytes.len() as u64 <= SIDECAR_BYTES).then_some(bytes)
    }
}

impl Parsed {
    /// The manifest entry of `file`, whose rows went through `sink`; with `--show-lines`, reads the offending lines.
    fn into_outcome(
        self,
        file: &InputFile,
        options: &NormalizeOptions<'_>,
        sink: DatasetSink<'_>,
        shown_lines: &mut Vec<ShownLine>,
    ) -> Result<Outcome> {
        let (records, diagnostics, offending, drift) = (sink.records, sink.diagnostics, sink.offending, sink.drift);
        // A stream cannot be read again for its lines.
        if !offending.is_empty() && file.kind == InputKind::File {
            let lines = read_lines(file, options.limits, &offending);
            shown_lines.extend(lines.with_context(|| format!("cannot read input {}", file.display))?);
        }
        let Parsed { format, report, compression, digest } = self;
        Ok(Outcome::Read(Box::new(InputEntry {
            path: file.display.clone(),
            bytes: digest.bytes,
            sha256: digest.sha256,
            compression: compression.as_str().to_owned(),
            format: format.to_owned(),
            format_version: report.format_version,
            clock_domain: report.clock_domain,
            year: report.year,
            lines: report.lines,
            records,
            diagnostics,
            details: report.details,
            drift: drift.map(DriftSummary::from),
        })))
    }
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

/// Keys `row`'s prefix hashes with `salt_key` and fills its durations derivable from its instants; one that would
/// be negative is left null and reported to `diagnostic`.
pub(crate) fn prepare_request(row: &mut RequestRow, salt_key: Option<u64>, diagnostic: &mut dyn FnMut(Diagnostic)) {
    if let (Some(key), Some(hashes)) = (salt_key, row.prefix_hashes.as_mut()) {
        hashes.iter_mut().for_each(|h| *h = hash::keyed(*h, key));
    }
    for column in row.fill_durations() {
        diagnostic(Diagnostic::new(
            row.source_line.unwrap_or(0),
            DiagnosticKind::Inconsistent,
            format!("{column} would be negative (its end precedes its start); left null"),
        ));
    }
}

/// Keys a cache event's block and parent hashes with `salt_key`, as `prepare_request` keys prefix hashes.
pub(crate) fn key_cache_event(row: &mut CacheEvent, salt_key: Option<u64>) {
    if let Some(key) = salt_key {
        for hash in [&mut row.block_hash, &mut row.parent_hash].into_iter().flatten() {
            *hash = hash::keyed(*hash, key);
        }
    }
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
    /// The adapter's drift report, if it made one.
    drift: Option<Drift>,
}

impl<'w> DatasetSink<'w> {
    /// A sink for the next file, `shown` offending lines having been kept so far.
    fn new(writer: &'w mut DatasetWriter, options: &NormalizeOptions<'_>, shown: usize) -> Self {
        DatasetSink {
            writer,
            records: RowCounts::default(),
            diagnostics: DiagnosticSummary::default(),
            salt_key: options.hash_salt.as_ref().map(|salt| hash::salt_key(salt.as_bytes())),
            show: if options.show_lines { SHOWN_LINES.saturating_sub(shown) } else { 0 },
            offending: Vec::new(),
            drift: None,
        }
    }
}

impl Sink for DatasetSink<'_> {
    fn request(&mut self, mut row: RequestRow) -> Result<(), DatasetError> {
        prepare_request(&mut row, self.salt_key, &mut |d| self.diagnostic(d));
        self.writer.push_request(&row)?;
        self.records.requests += 1;
        Ok(())
    }

    fn sample(&mut self, row: EngineSample) -> Result<(), DatasetError> {
        self.writer.push_sample(&row)?;
        self.records.samples += 1;
        Ok(())
    }

    fn samples(&mut self, row: &mut EngineSample, values: &[(&'static str, f64)]) -> Result<(), DatasetError> {
        self.writer.push_samples(row, values)?;
        self.records.samples += values.len() as u64;
        Ok(())
    }

    fn cache_event(&mut self, mut row: CacheEvent) -> Result<(), DatasetError> {
        key_cache_event(&mut row, self.salt_key);
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

    fn drift(&mut self, drift: Drift) {
        self.drift = Some(drift);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(sizes: &[(&str, u64)]) -> Vec<InputFile> {
        sizes
            .iter()
            .map(|&(name, bytes)| InputFile {
                path: PathBuf::from(name),
                display: name.to_owned(),
                bytes,
                recorded_text: None,
                modified: None,
                in_directory: true,
                duplicate_of: None,
                kind: InputKind::File,
            })
            .collect()
    }

    #[test]
    fn files_half_as_large_as_one_that_overflowed_are_streamed() {
        let files = files(&[
            ("a.log", 100_000),
            ("b.log", 2_700_001),
            ("c.log", 2_600_000),
            ("d.log", 1_350_000),
            ("e.log", 1_350_001),
            ("f.log", 9_000_000),
            ("g.log", 50),
            ("h.log.gz", 150_000),
            ("i.log.gz", 200_000),
        ]);
        let mut bound = ReadAheadBound::default();
        // Up to 8 MiB, `threads + 1` at a time; a larger file ends the window and is streamed alone.
        assert_eq!(bound.window(&files, 2), 3);
        assert_eq!(bound.window(&files, 7), 5);
        assert_eq!(bound.window(&files[5..], 2), 0);
        assert_eq!(bound.window(&files[6..], 2), 3);
        // The 2,700,001-byte file made too many rows: files of 1,350,001 bytes of text or more are streamed from
        // now on; a gzip'd file counts eight times its stored size, 1.2 MB for 150 KB stored, 1.6 MB for 200 KB.
        bound.overflowed(&files[1]);
        assert_eq!(bound.window(&files, 7), 1);
        assert_eq!(bound.window(&files[3..], 7), 1);
        assert_eq!(bound.window(&files[4..], 7), 0);
        assert_eq!(bound.window(&files[6..], 7), 2);
        assert_eq!(bound.window(&files[8..], 7), 0);
        // A larger overflow does not raise the bound again; a smaller one lowers it.
        bound.overflowed(&files[5]);
        assert_eq!(bound.window(&files[3..], 7), 1);
        // The 150 KB gzip'd file is 1.2 MB of text: from 600,000 bytes of text on, files are streamed.
        bound.overflowed(&files[7]);
        assert_eq!((bound.window(&files, 7), bound.window(&files[1..], 7), bound.window(&files[6..], 7)), (1, 0, 1));
    }

    #[test]
    fn a_window_holds_16_mib_of_text_whatever_the_thread_count() {
        let bound = ReadAheadBound::default();
        // 3 MiB files: five fit in 16 MiB, however many threads there are.
        let plain = files(&[("x.log", 3 << 20); 40]);
        assert_eq!((bound.window(&plain, 1), bound.window(&plain, 4), bound.window(&plain, 63)), (2, 5, 5));
        // A gzip'd or zstd'd file counts eight times its size: 1 MiB stored is 8 MiB of text.
        let compressed = files(&[("1.log.gz", 1 << 20), ("2.log.zst", 1 << 20), ("3.json.zstd", 1 << 20), ("4", 1)]);
        assert_eq!(bound.window(&compressed, 63), 2);
        assert_eq!(bound.window(&compressed[2..], 63), 2);
        // A size the compression records counts instead, when it is no less than the stored size: gzip'd parts of
        // 4 MiB of text in 1.7 MB each are three to a window on two threads (12 MiB), not one (13.6 MB guessed).
        let mut parts = files(&[("p.log.gz", 1_700_000); 10]);
        assert_eq!(bound.window(&parts, 2), 1);
        for part in &mut parts {
            part.recorded_text = Some(4 << 20);
        }
        assert_eq!(bound.window(&parts, 2), 3);
        assert_eq!(bound.window(&parts, 63), 4);
        // A recorded size below the stored one (a wrapped gzip size) is not believed: 13.6 MB, then 4 MiB more.
        parts[0].recorded_text = Some(5);
        assert_eq!(bound.window(&parts, 2), 1);
        // A claim near 2⁶⁴ (a zstd header may make one) is a window of one, not a sum that wraps around.
        parts[0].recorded_text = Some(u64::MAX - 2);
        parts[1].recorded_text = Some(u64::MAX - 2);
        assert_eq!(bound.window(&parts, 2), 1);
        // Nor is one given for a file not named as compressed (which is read as it is stored).
        let mut plain_parts = files(&[("p.log", 1_000_000); 4]);
        plain_parts[0].recorded_text = Some(40 << 20);
        assert_eq!(bound.window(&plain_parts, 2), 3);
        // One file over 16 MiB of text on its own is a window of one: it is streamed.
        assert_eq!(bound.window(&files(&[("big.gz", 4 << 20), ("small.log", 10)]), 63), 1);
        // Many small files: as many as there are threads, plus one.
        assert_eq!(bound.window(&files(&[("s.json.zst", 25_000); 200]), 63), 64);
        // Each file of a window holds an equal share of 48 MiB of rows, at most 16 MiB.
        assert_eq!(ReadAheadBound::held_share(2), 16 << 20);
        assert_eq!(ReadAheadBound::held_share(3), 16 << 20);
        assert_eq!(ReadAheadBound::held_share(64), 48 << 20 >> 6);
    }
}
