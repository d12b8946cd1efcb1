//! `infertrace capture`: scrape Prometheus endpoints and follow logs of a live deployment into a dataset that can
//! be read while it is written.
//!
//! Every source runs on two threads: a producer that fetches its text (a scrape every `--interval`, each preceded
//! by an RFC 3339 line of the instant it was taken; the bytes appended to a followed file; standard input) into a
//! bounded channel, and a parser that detects its format from the first 4 KiB (or the first scrape) and runs the
//! format's adapter over that text as over a file, one line at a time. The adapters' rows go through one channel to
//! the writing thread, which writes them as parts: every `--part-every` (or `--part-rows` rows) it finishes the
//! part's dataset in a hidden directory and renames its table files into place as
//! `<table>/date=<day>/part-<n>-<k>.parquet`, then replaces `manifest.json`. A reader sees only complete files; a
//! SIGKILL loses the part in progress and no more. SIGINT or SIGTERM (or `--duration`) ends every source at its
//! current end, writes the last part and a manifest marked complete; a second signal exits at once.
//!
//! Memory holds each source's channel (16 chunks), each adapter's own bounded state, and one part's record batches
//! being encoded, whatever the capture's length.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infertrace_adapter::time::format_rfc3339;
use infertrace_adapter::{
    Adapter, Diagnostic, DiagnosticKind, Drift, InputDigest, ParseContext, ParseOptions, Sink, parallel,
};
use infertrace_schema::{
    Assumptions, CacheEvent, CaptureRecord, ClockDomain, DatasetError, DatasetWriter, DiagnosticSummary, DriftSummary,
    EngineSample, HashSalt, InputEntry, MANIFEST_FILE, Manifest, PartitionKey, Producer, RequestRow, RowCounts,
    SCHEMA_VERSION, manifest_json,
};
use sha2::{Digest as _, Sha256};

use crate::registry::{self, DetectError};

/// Bytes of a source's start its format is detected from.
const HEAD_BYTES: usize = 4096;
/// Chunks a source's producer may be ahead of its parser.
const CHUNKS_AHEAD: usize = 16;
/// How long a source's head waits for more text once it has a whole line.
const HEAD_PAUSE: Duration = Duration::from_secs(1);
/// How often waiting threads look whether the capture is stopping.
const POLL: Duration = Duration::from_millis(100);
/// How long a followed path may name no file (between a rotation's rename and the new file) before it is reported.
const MISSING_GRACE: Duration = Duration::from_secs(2);
/// Bytes a followed file is read at a time.
const READ_BYTES: usize = 64 << 10;
/// Most bytes one scrape may hold.
const SCRAPE_BYTES: u64 = 64 << 20;
/// Events the parsers may be ahead of the writing thread.
const EVENTS_AHEAD: usize = 8192;
/// Hidden directory, beside the parts, where the part in progress is written.
const PART_DIR: &str = ".capture-part";

/// Where a source's text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A Prometheus text endpoint, scraped every interval.
    Scrape(String),
    /// A file being written, followed as `tail -F` follows it.
    Follow(PathBuf),
    /// Standard input, until its end or until the capture stops.
    Stdin,
}

/// One source of a capture: where its text comes from, when given its format, and a name for what it serves.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where its text comes from.
    pub origin: Origin,
    /// Its adapter; detected from its first text when `None`.
    pub format: Option<&'static dyn Adapter>,
    /// Put before the instance of every row it makes (the instance itself when the row has none), so that the
    /// same engine labels scraped from two pods (`engine-0`) stay two instances.
    pub name: Option<String>,
}

impl Source {
    /// A `--scrape` or `--follow` value: `[NAME@][FORMAT=]URL` or `[NAME@][FORMAT=]FILE` (`-` for standard input),
    /// where FORMAT is a format id and NAME letters, digits, `.`, `_` and `-` (a file that exists by the whole text
    /// is that file).
    pub fn parse(text: &str, scrape: bool) -> Result<Self> {
        let named = |name: &str| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        let (name, text) = match text.split_once('@') {
            Some((name, rest)) if named(name) && (scrape || !Path::new(text).exists()) => (Some(name.to_owned()), rest),
            _ => (None, text),
        };
        let (format, rest) = match text.split_once('=') {
            Some((id, rest)) if registry::by_id(id).is_some() => (registry::by_id(id), rest),
            _ => (None, text),
        };
        let origin = if scrape {
            if !rest.starts_with("http://") {
                bail!("--scrape {rest}: give an http:// URL (HTTPS endpoints need a plain-HTTP port-forward or proxy)");
            }
            Origin::Scrape(rest.to_owned())
        } else if rest == "-" {
            Origin::Stdin
        } else {
            Origin::Follow(PathBuf::from(rest))
        };
        Ok(Self { origin, format, name })
    }

    /// How the manifest names it: the URL, the path as given, or `-`, after its name.
    fn display(&self) -> String {
        let origin = match &self.origin {
            Origin::Scrape(url) => url.clone(),
            // Recorded as `normalize` records a path: relative, never an absolute path of this machine.
            Origin::Follow(path) => crate::paths::display_path(path, path),
            Origin::Stdin => "-".to_owned(),
        };
        match &self.name {
            Some(name) => format!("{name}@{origin}"),
            None => origin,
        }
    }
}

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Dataset directory to write.
    pub output: PathBuf,
    /// The sources.
    pub sources: Vec<Source>,
    /// Time between two scrapes of an endpoint.
    pub interval: Duration,
    /// Stop after this long; `None` runs until SIGINT or SIGTERM.
    pub duration: Option<Duration>,
    /// Longest time a part stays open.
    pub part_every: Duration,
    /// Most rows (all tables) in one part.
    pub part_rows: u64,
    /// Read followed files from their start rather than from their end when the capture starts.
    pub from_start: bool,
    /// Replace the output directory if it exists.
    pub force: bool,
    /// Key every prefix and block hash with this secret, as `normalize --hash-salt` does.
    pub hash_salt: Option<String>,
    /// Assumptions for times the sources do not carry.
    pub parse: ParseOptions,
}

/// What a capture wrote.
#[derive(Debug)]
pub struct CaptureReport {
    /// The final manifest.
    pub manifest: Manifest,
    /// Parts written.
    pub parts: u64,
}

/// What the parsers hand the writing thread, each tagged with its source's index.
enum Event {
    Request(usize, Box<RequestRow>),
    Sample(usize, EngineSample),
    Cache(usize, Box<CacheEvent>),
    Diagnostic(usize, Diagnostic),
    Drift(usize, Box<Drift>),
    Detected(usize, &'static str),
    Ended(usize, std::result::Result<infertrace_adapter::ParseReport, String>),
    Failed(String),
}

/// What the bytes of a source have been so far: count, lines, and the hash of them, finished only when a manifest
/// is written.
#[derive(Debug, Default, Clone)]
struct Tally {
    bytes: u64,
    lines: u64,
    sha: Sha256,
}

/// The state of one source on the writing thread.
struct SourceState {
    display: String,
    format: Option<&'static str>,
    /// Rows made so far, the part in progress included.
    records: RowCounts,
    /// Rows in the parts written: what the manifest counts.
    written: RowCounts,
    diagnostics: DiagnosticSummary,
    drift: Option<Box<Drift>>,
    report: Option<infertrace_adapter::ParseReport>,
    tally: Arc<Mutex<Tally>>,
}

/// Runs a capture until `--duration` or a signal, and returns what it wrote.
pub fn capture(options: &CaptureOptions) -> Result<CaptureReport> {
    if options.sources.is_empty() {
        bail!("capture needs at least one --scrape URL or --follow FILE");
    }
    if options.sources.iter().filter(|s| s.origin == Origin::Stdin).count() > 1 {
        bail!("--follow - names standard input, which can be followed once");
    }
    let output = &options.output;
    prepare_output(output, options.force)?;
    let stop = crate::stdin::stop_on_signals("during a capture")?;
    let stopping = Arc::new(AtomicBool::new(false));
    let (send, events) = sync_channel::<Event>(EVENTS_AHEAD);
    let mut states = Vec::with_capacity(options.sources.len());
    for (index, source) in options.sources.iter().enumerate() {
        let tally = Arc::new(Mutex::new(Tally::default()));
        start_source(index, source, options, &stopping, &tally, &send)?;
        states.push(SourceState {
            display: source.display(),
            format: source.format.map(|a| a.id()),
            records: RowCounts::default(),
            written: RowCounts::default(),
            diagnostics: DiagnosticSummary::default(),
            drift: None,
            report: None,
            tally,
        });
    }
    drop(send);

    let started = Instant::now();
    let progress = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        .with_style(ProgressStyle::with_template("{spinner} {elapsed} {wide_msg}").expect("valid template"));
    progress.enable_steady_tick(Duration::from_millis(250));
    let salt_key = options.hash_salt.as_ref().map(|salt| infertrace_adapter::hash::salt_key(salt.as_bytes()));
    let mut writer = Parts::new(output, options.parse, salt_key)?;
    writer.manifest(&states, false)?;
    let mut cut_at = started + options.part_every;
    let mut failure = None;
    loop {
        let past_duration = options.duration.is_some_and(|d| started.elapsed() >= d);
        if (past_duration || stop.load(Ordering::Relaxed)) && !stopping.swap(true, Ordering::Relaxed) {
            #[allow(clippy::print_stderr)]
            progress.suspend(|| eprintln!("capture: stopping; finishing every source and the last part"));
        }
        match events.recv_timeout(POLL) {
            Ok(Event::Failed(message)) => {
                stopping.store(true, Ordering::Relaxed);
                failure.get_or_insert(message);
            }
            Ok(event) => writer.handle(event, &mut states)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let pending = sum(&states, |s| s.records).total() - sum(&states, |s| s.written).total();
        if pending >= options.part_rows || Instant::now() >= cut_at {
            writer.cut(&mut states)?;
            cut_at = Instant::now() + options.part_every;
            progress.set_message(status(&states, writer.parts));
        }
    }
    writer.cut(&mut states)?;
    progress.finish_and_clear();
    if let Some(message) = failure {
        writer.manifest(&states, false)?;
        bail!("{message}");
    }
    let manifest = writer.manifest(&states, true)?;
    Ok(CaptureReport { manifest, parts: writer.parts })
}

/// The rows of every source, as `rows` counts them.
fn sum(states: &[SourceState], rows: impl Fn(&SourceState) -> RowCounts) -> RowCounts {
    states.iter().map(rows).fold(RowCounts::default(), |mut all, one| {
        all += one;
        all
    })
}

/// What the capture has written so far, in one line.
fn status(states: &[SourceState], parts: u64) -> String {
    let count = crate::summary::count;
    let written = sum(states, |s| s.written);
    format!(
        "{} parts · {} requests · {} samples · {} cache events · {} diagnostics",
        count(parts),
        count(written.requests),
        count(written.samples),
        count(written.cache_events),
        count(states.iter().map(|s| s.diagnostics.total).sum()),
    )
}

/// Creates the output directory and the table directories a reader expects, refusing an existing output without
/// `force`.
fn prepare_output(output: &Path, force: bool) -> Result<()> {
    if fs::symlink_metadata(output).is_ok() {
        if !force {
            bail!("output {} already exists; pass --force to replace it", output.display());
        }
        fs::remove_dir_all(output).with_context(|| format!("cannot replace output {}", output.display()))?;
    }
    for table in ["requests", "samples", "cache_events"] {
        let dir = output.join(table);
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(())
}

/// Starts the producer and the parser of source `index`.
fn start_source(
    index: usize,
    source: &Source,
    options: &CaptureOptions,
    stopping: &Arc<AtomicBool>,
    tally: &Arc<Mutex<Tally>>,
    events: &SyncSender<Event>,
) -> Result<()> {
    let (chunks, received) = sync_channel::<io::Result<Vec<u8>>>(CHUNKS_AHEAD);
    let spawn = |name: String, work: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().name(name).spawn(work).context("cannot start a capture thread").map(|_| ())
    };
    // Standard input may block in its read forever: its feed ends at the stop without waiting for the pump.
    let mut feed_stop = None;
    match &source.origin {
        Origin::Scrape(url) => {
            let (url, interval, stopping, events) = (url.clone(), options.interval, stopping.clone(), events.clone());
            spawn(
                format!("scrape-{index}"),
                Box::new(move || scrape(index, &url, interval, &chunks, &stopping, &events)),
            )?;
        }
        Origin::Follow(path) => {
            let (path, from_start, stopping, events) =
                (path.clone(), options.from_start, stopping.clone(), events.clone());
            let work = move || follow(index, &path, from_start, &chunks, &stopping, &events);
            spawn(format!("follow-{index}"), Box::new(work))?;
        }
        Origin::Stdin => {
            feed_stop = Some(stopping.clone());
            spawn("stdin".to_owned(), Box::new(move || crate::stdin::pump(io::stdin().lock(), &chunks)))?;
        }
    }
    let feed = Feed::new(received, feed_stop, tally.clone());
    // A followed file's modification time gives a year to formats whose times lack one, as in `normalize`.
    let modified = match &source.origin {
        Origin::Follow(path) => fs::metadata(path)
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok().and_then(|d| i64::try_from(d.as_nanos()).ok())),
        Origin::Scrape(_) | Origin::Stdin => None,
    };
    let (source, parse, events) = (source.clone(), options.parse, events.clone());
    let work = move || parse_source(index, feed, &source, parse, modified, &events);
    spawn(format!("parse-{index}"), Box::new(work))
}

/// The time now, in UTC nanoseconds.
fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Sleeps until `until` or the capture stops, whichever comes first.
fn sleep_until(until: Instant, stopping: &AtomicBool) {
    while !stopping.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(POLL));
    }
}

/// Scrapes `url` every `interval` until the capture stops: each body is sent after a line holding the instant the
/// scrape started. A failed scrape (refused, timed out, an error status) is a `source-unavailable` diagnostic and
/// the next is tried at its time.
fn scrape(
    index: usize,
    url: &str,
    interval: Duration,
    chunks: &SyncSender<io::Result<Vec<u8>>>,
    stopping: &AtomicBool,
    events: &SyncSender<Event>,
) {
    let timeout = interval.clamp(Duration::from_secs(1), Duration::from_secs(30));
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(timeout)).build().into();
    let mut lines = 0u64;
    let mut next = Instant::now();
    while !stopping.load(Ordering::Relaxed) {
        let at = now_ns();
        let body = agent
            .get(url)
            .call()
            .and_then(|mut response| response.body_mut().with_config().limit(SCRAPE_BYTES).read_to_vec());
        match body {
            Ok(body) => {
                let mut text = format!("# {}\n", format_rfc3339(at)).into_bytes();
                text.extend_from_slice(&body);
                if !text.ends_with(b"\n") {
                    text.push(b'\n');
                }
                lines += newlines(&text);
                if chunks.send(Ok(text)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let message =
                    format!("scrape failed ({}); the next is tried in {} s", error_kind(&e), interval.as_secs_f64());
                let diagnostic = Diagnostic::new(lines + 1, DiagnosticKind::SourceUnavailable, message);
                if events.send(Event::Diagnostic(index, diagnostic)).is_err() {
                    return;
                }
            }
        }
        next += interval;
        if next < Instant::now() {
            next = Instant::now();
        }
        sleep_until(next, stopping);
    }
}

/// What kind of failure a scrape met, without the server's text.
fn error_kind(error: &ureq::Error) -> String {
    match error {
        ureq::Error::StatusCode(code) => format!("HTTP status {code}"),
        ureq::Error::Io(e) => format!("{}", e.kind()),
        ureq::Error::Timeout(_) => "timed out".to_owned(),
        ureq::Error::HostNotFound => "host not found".to_owned(),
        ureq::Error::ConnectionFailed => "connection failed".to_owned(),
        ureq::Error::BodyExceedsLimit(limit) => format!("body over {limit} bytes"),
        other => other.to_string(),
    }
}

/// Newlines in `bytes`.
fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Follows `path` as `tail -F` does until the capture stops, then sends what is left to its current end.
///
/// The file's text from its current end (from its start with `from_start`) is sent as it is appended. When the
/// path names another file (rotation: renamed away and created again), the old one is read to its end first, then
/// the new one from its start; when the file shrinks below what was read (truncated in place), it is read again from
/// its start. While the path names no file for longer than [`MISSING_GRACE`] (or at the start), the follower says
/// so once (a `source-unavailable` diagnostic) and waits for one. Line numbers run on across rotations, as one
/// stream.
fn follow(
    index: usize,
    path: &Path,
    from_start: bool,
    chunks: &SyncSender<io::Result<Vec<u8>>>,
    stopping: &AtomicBool,
    events: &SyncSender<Event>,
) {
    let mut open: Option<(File, FileId)> = None;
    let (mut read, mut lines) = (0u64, 0u64);
    let (mut first, mut reported, mut rotated) = (true, false, false);
    let mut missing_since: Option<Instant> = None;
    let mut buffer = vec![0; READ_BYTES];
    loop {
        let Some((file, id)) = open.as_mut() else {
            match File::open(path).and_then(|f| Ok((FileId::of(&f.metadata()?), f))) {
                Ok((id, mut file)) => {
                    // The first file is followed from its end unless asked otherwise; every later one from its start.
                    read = if first && !from_start { file.seek(SeekFrom::End(0)).unwrap_or(0) } else { 0 };
                    open = Some((file, id));
                    (first, reported, rotated, missing_since) = (false, false, false, None);
                }
                Err(e) => {
                    let since = *missing_since.get_or_insert_with(Instant::now);
                    if !reported && (first || since.elapsed() >= MISSING_GRACE) {
                        reported = true;
                        let message = format!("the followed file cannot be opened ({}); waiting for it", e.kind());
                        let diagnostic = Diagnostic::new(lines + 1, DiagnosticKind::SourceUnavailable, message);
                        if events.send(Event::Diagnostic(index, diagnostic)).is_err() {
                            return;
                        }
                    }
                    if stopping.load(Ordering::Relaxed) {
                        return;
                    }
                    first = false;
                    std::thread::sleep(POLL);
                }
            }
            continue;
        };
        match file.read(&mut buffer) {
            Ok(0) => {}
            Ok(n) => {
                read += n as u64;
                lines += newlines(&buffer[..n]);
                if chunks.send(Ok(buffer[..n].to_vec())).is_err() {
                    return;
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = chunks.send(Err(e));
                return;
            }
        }
        // At the end of what is written. A rotated file read to its end is left for the new one; a file the path no
        // longer names is read to its end once more (what was written before the rename); a shorter one from its
        // start. Only then does a stop end the follower, so that a rotation just before it loses nothing.
        if rotated {
            open = None;
            continue;
        }
        let stop = stopping.load(Ordering::Relaxed);
        match fs::metadata(path) {
            Ok(now) if FileId::of(&now) != *id => {
                rotated = true;
                continue;
            }
            Ok(now) if now.len() < read => {
                if file.seek(SeekFrom::Start(0)).is_err() {
                    open = None;
                }
                read = 0;
                continue;
            }
            Err(_) if !stop => {
                rotated = true;
                continue;
            }
            _ => {}
        }
        if stop {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// What tells two files apart: device and inode where there are such, else creation time and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId(u64, u64);

impl FileId {
    #[cfg(unix)]
    fn of(metadata: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self(metadata.dev(), metadata.ino())
    }

    #[cfg(not(unix))]
    fn of(metadata: &fs::Metadata) -> Self {
        let created = metadata.created().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
        Self(created.map_or(0, |d| d.as_nanos() as u64), 0)
    }
}

/// A source's text as a reader: the chunks its producer sends, hashed and counted as they are taken, until the
/// producer ends (or, for standard input, until the capture is signalled to stop).
struct Feed {
    chunks: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    ended: bool,
    stop: Option<Arc<AtomicBool>>,
    tally: Arc<Mutex<Tally>>,
}

impl Feed {
    fn new(chunks: Receiver<io::Result<Vec<u8>>>, stop: Option<Arc<AtomicBool>>, tally: Arc<Mutex<Tally>>) -> Self {
        Self { chunks, chunk: Vec::new(), at: 0, ended: false, stop, tally }
    }

    /// Takes the next chunk into the buffer, after what is left of it; `false` at the end (or after `wait`).
    fn receive(&mut self, wait: Duration) -> io::Result<bool> {
        let stopped = self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed));
        let next = if stopped {
            self.chunks.try_recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            self.chunks.recv_timeout(wait)
        };
        match next {
            Ok(Ok(chunk)) if chunk.is_empty() => self.ended = true,
            Ok(Ok(chunk)) => {
                let mut tally = self.tally.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                tally.bytes += chunk.len() as u64;
                tally.lines += newlines(&chunk);
                tally.sha.update(&chunk);
                drop(tally);
                self.chunk.drain(..self.at);
                self.at = 0;
                self.chunk.extend_from_slice(&chunk);
                return Ok(true);
            }
            Ok(Err(e)) => {
                self.ended = true;
                return Err(e);
            }
            Err(RecvTimeoutError::Timeout) => return Ok(false),
            Err(RecvTimeoutError::Disconnected) => self.ended = true,
        }
        Ok(false)
    }

    /// The first bytes of the source, to detect its format from: [`HEAD_BYTES`], or all of it if it ends first,
    /// or what came within [`HEAD_PAUSE`] of its first whole line (a quiet log, a small scrape).
    fn head(&mut self) -> io::Result<&[u8]> {
        let mut deadline: Option<Instant> = None;
        while !self.ended && self.chunk.len() - self.at < HEAD_BYTES {
            if deadline.is_none() && self.chunk[self.at..].contains(&b'\n') {
                deadline = Some(Instant::now() + HEAD_PAUSE);
            }
            let wait = match deadline {
                Some(deadline) if Instant::now() >= deadline => break,
                Some(deadline) => deadline - Instant::now(),
                None => POLL,
            };
            self.receive(wait.min(POLL))?;
        }
        let end = self.chunk.len().min(self.at + HEAD_BYTES);
        Ok(&self.chunk[self.at..end])
    }
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            if self.ended {
                return Ok(0);
            }
            self.receive(POLL)?;
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Detects the format of one source and runs its adapter over its text, forwarding what it makes.
fn parse_source(
    index: usize,
    mut feed: Feed,
    source: &Source,
    parse: ParseOptions,
    modified: Option<i64>,
    events: &SyncSender<Event>,
) {
    let (format, display) = (source.format, source.display());
    let adapter = match feed.head() {
        Err(e) => {
            let _ = events.send(Event::Ended(index, Err(format!("cannot read {display}: {e}"))));
            return;
        }
        Ok(head) => match (format, registry::detect(head)) {
            (Some(adapter), _) | (None, Ok(adapter)) => adapter,
            // Nothing came before the capture stopped: nothing to parse.
            (None, Err(_)) if head.is_empty() => return,
            (None, Err(DetectError::Unknown)) => {
                let message = format!(
                    "no adapter recognises the text of {display}; give its format as FORMAT={display}, one of: {}",
                    registry::ids()
                );
                let _ = events.send(Event::Failed(message));
                return;
            }
            (None, Err(DetectError::Ambiguous(ids))) => {
                let message = format!(
                    "the text of {display} matches several formats ({}); give one as FORMAT={display}",
                    ids.join(", ")
                );
                let _ = events.send(Event::Failed(message));
                return;
            }
        },
    };
    if events.send(Event::Detected(index, adapter.id())).is_err() {
        return;
    }
    let options = parse;
    let ctx = ParseContext { source_file: &display, options: &options, modified, sidecars: None };
    let mut sink = Forward { index, events, name: source.name.as_deref().map(Arc::from) };
    let mut reader = BufReader::with_capacity(READ_BYTES, feed);
    let report = parallel::sequentially(|| adapter.parse(&mut reader, &ctx, &mut sink));
    let _ = events.send(Event::Ended(index, report.map_err(|e| format!("cannot read {display}: {e}"))));
}

/// A sink that hands every row to the writing thread.
struct Forward<'a> {
    index: usize,
    events: &'a SyncSender<Event>,
    /// The source's name, put before every instance.
    name: Option<Arc<str>>,
}

impl Forward<'_> {
    /// `instance` named by the source: `<name> <instance>`, or the name alone.
    fn named<T: AsRef<str> + From<String>>(&self, instance: Option<T>) -> Option<T> {
        let Some(name) = &self.name else { return instance };
        Some(match instance {
            Some(instance) => T::from(format!("{name} {}", instance.as_ref())),
            None => T::from(name.to_string()),
        })
    }

    fn send(&self, event: Event) -> Result<(), DatasetError> {
        self.events.send(event).map_err(|_| DatasetError::Io {
            action: "hand rows to the writer of",
            path: PathBuf::from("the capture"),
            source: io::Error::from(io::ErrorKind::BrokenPipe),
        })
    }
}

impl Sink for Forward<'_> {
    fn request(&mut self, mut row: RequestRow) -> Result<(), DatasetError> {
        if self.name.is_some() {
            row.instance = self.named(row.instance.take());
            row.prefill_instance = row.prefill_instance.take().and_then(|i| self.named(Some(i)));
            row.decode_instance = row.decode_instance.take().and_then(|i| self.named(Some(i)));
        }
        self.send(Event::Request(self.index, Box::new(row)))
    }

    fn sample(&mut self, mut row: EngineSample) -> Result<(), DatasetError> {
        if self.name.is_some() {
            row.instance = self.named(row.instance.take());
        }
        self.send(Event::Sample(self.index, row))
    }

    fn cache_event(&mut self, mut row: CacheEvent) -> Result<(), DatasetError> {
        if self.name.is_some() {
            row.instance = self.named(row.instance.take());
        }
        self.send(Event::Cache(self.index, Box::new(row)))
    }

    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        let _ = self.send(Event::Diagnostic(self.index, diagnostic));
    }

    fn drift(&mut self, drift: Drift) {
        let _ = self.send(Event::Drift(self.index, Box::new(drift)));
    }
}

/// The writing thread's side: the part in progress, and what was written before it.
struct Parts<'a> {
    output: &'a Path,
    parse: ParseOptions,
    /// `hash::salt_key` of `--hash-salt`.
    salt_key: Option<u64>,
    writer: Option<DatasetWriter>,
    /// Parts written.
    parts: u64,
}

impl<'a> Parts<'a> {
    fn new(output: &'a Path, parse: ParseOptions, salt_key: Option<u64>) -> Result<Self> {
        let stale = output.join(PART_DIR);
        if stale.exists() {
            fs::remove_dir_all(&stale).with_context(|| format!("cannot remove {}", stale.display()))?;
        }
        Ok(Self { output, parse, salt_key, writer: None, parts: 0 })
    }

    /// The part in progress, started if there is none.
    fn writer(&mut self) -> Result<&mut DatasetWriter> {
        if self.writer.is_none() {
            let dir = self.output.join(PART_DIR);
            let writer = DatasetWriter::create_partitioned(&dir, true, Some(PartitionKey::Date))
                .with_context(|| format!("cannot write a part of {}", self.output.display()))?;
            self.writer = Some(writer);
        }
        Ok(self.writer.as_mut().expect("started above"))
    }

    fn handle(&mut self, event: Event, states: &mut [SourceState]) -> Result<()> {
        let context =
            |e: DatasetError| anyhow::Error::new(e).context(format!("cannot write {}", self.output.display()));
        match event {
            Event::Request(i, mut row) => {
                let state = &mut states[i];
                crate::normalize::prepare_request(&mut row, self.salt_key, &mut |d| {
                    state.diagnostics.record(d.kind.as_str(), d.line, d.message)
                });
                self.writer()?.push_request(&row).map_err(context)?;
                states[i].records.requests += 1;
            }
            Event::Sample(i, row) => {
                self.writer()?.push_sample(&row).map_err(context)?;
                states[i].records.samples += 1;
            }
            Event::Cache(i, mut row) => {
                crate::normalize::key_cache_event(&mut row, self.salt_key);
                self.writer()?.push_cache_event(&row).map_err(context)?;
                states[i].records.cache_events += 1;
            }
            Event::Diagnostic(i, d) => {
                states[i].diagnostics.record(d.kind.as_str(), d.line, d.message);
            }
            Event::Drift(i, drift) => {
                states[i].drift = Some(drift);
            }
            Event::Detected(i, id) => {
                states[i].format = Some(id);
            }
            Event::Ended(i, report) => match report {
                Ok(report) => states[i].report = Some(report),
                Err(message) => {
                    let d = Diagnostic::new(0, DiagnosticKind::SourceUnavailable, message);
                    states[i].diagnostics.record(d.kind.as_str(), d.line, d.message);
                }
            },
            Event::Failed(_) => {}
        }
        Ok(())
    }

    /// Finishes the part in progress, if it has rows, and moves its files into place; then writes the manifest
    /// (also when there was no part: the sources' diagnostics so far).
    fn cut(&mut self, states: &mut [SourceState]) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            self.manifest(states, false)?;
            return Ok(());
        };
        let dir = self.output.join(PART_DIR);
        writer
            .finish(self.manifest_of(states, false))
            .with_context(|| format!("cannot write a part of {}", self.output.display()))?;
        let sequence = self.parts;
        for table in ["requests", "samples", "cache_events"] {
            let from = dir.join(table);
            let Ok(partitions) = fs::read_dir(&from) else { continue };
            let mut partitions: Vec<PathBuf> = partitions.filter_map(|e| Some(e.ok()?.path())).collect();
            partitions.sort();
            for partition in partitions {
                let (Some(name), Ok(files)) = (partition.file_name(), fs::read_dir(&partition)) else { continue };
                let into = self.output.join(table).join(name);
                fs::create_dir_all(&into).with_context(|| format!("cannot create {}", into.display()))?;
                let mut files: Vec<PathBuf> = files.filter_map(|e| Some(e.ok()?.path())).collect();
                files.sort();
                for (n, file) in files.iter().enumerate() {
                    let target = into.join(format!("part-{sequence:06}-{n}.parquet"));
                    fs::rename(file, &target).with_context(|| format!("cannot move a part to {}", target.display()))?;
                }
            }
        }
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        self.parts += 1;
        for state in states.iter_mut() {
            state.written = state.records;
        }
        self.manifest(states, false)?;
        Ok(())
    }

    /// The manifest of what the parts written so far hold.
    fn manifest_of(&self, states: &[SourceState], complete: bool) -> Manifest {
        let inputs = states
            .iter()
            .map(|state| {
                let tally = state.tally.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                let digest = InputDigest::new(tally.bytes, tally.sha);
                let report = state.report.as_ref();
                InputEntry {
                    path: state.display.clone(),
                    bytes: digest.bytes,
                    sha256: digest.sha256,
                    compression: "none".to_owned(),
                    format: state.format.unwrap_or("unknown").to_owned(),
                    format_version: report.and_then(|r| r.format_version.clone()),
                    // Scrapes are timed by the capturing machine; a log's own clock is known at its end.
                    clock_domain: report.map_or(ClockDomain::Utc, |r| r.clock_domain),
                    year: report.and_then(|r| r.year),
                    lines: tally.lines,
                    records: state.written,
                    diagnostics: state.diagnostics.clone(),
                    details: report.map(|r| r.details.clone()).unwrap_or_default(),
                    drift: state.drift.as_deref().cloned().map(DriftSummary::from),
                }
            })
            .collect();
        Manifest {
            schema_version: SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: Assumptions {
                year: self.parse.year,
                utc_offset: self.parse.utc_offset.to_string(),
                start: format_rfc3339(self.parse.start_ns),
                block_size: self.parse.block_size,
            },
            inputs,
            skipped: Vec::new(),
            merge: None,
            cache_sim: None,
            partition_by: Some(PartitionKey::Date.as_str().to_owned()),
            hash_salt: self.salt_key.map(|_| HashSalt::Keyed),
            capture: Some(CaptureRecord { complete, parts: self.parts }),
            rows: sum(states, |s| s.written),
        }
    }

    /// Replaces `manifest.json` (written beside, then renamed over it) with the manifest of the parts so far.
    fn manifest(&self, states: &[SourceState], complete: bool) -> Result<Manifest> {
        let manifest = self.manifest_of(states, complete);
        let path = self.output.join(MANIFEST_FILE);
        let beside = self.output.join(format!(".{MANIFEST_FILE}.tmp"));
        fs::write(&beside, manifest_json(&manifest)).with_context(|| format!("cannot write {}", beside.display()))?;
        fs::rename(&beside, &path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `follow` on `path` in a thread; `act` changes the file while it runs, given what was received so far;
    /// then the follower is stopped and everything it sent is returned.
    fn followed(path: &Path, from_start: bool, act: impl FnOnce(&dyn Fn() -> Vec<u8>)) -> (Vec<u8>, Vec<Event>) {
        let (chunks, received) = sync_channel(1024);
        let (events, diagnostics) = sync_channel(1024);
        let stopping = Arc::new(AtomicBool::new(false));
        let (path_owned, stop) = (path.to_owned(), stopping.clone());
        let thread = std::thread::spawn(move || follow(0, &path_owned, from_start, &chunks, &stop, &events));
        let text = Mutex::new(Vec::new());
        let so_far = || {
            let mut text = text.lock().unwrap();
            while let Ok(chunk) = received.try_recv() {
                text.extend(chunk.unwrap());
            }
            text.clone()
        };
        act(&so_far);
        stopping.store(true, Ordering::Relaxed);
        thread.join().unwrap();
        (so_far(), diagnostics.try_iter().collect())
    }

    fn wait_until(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !check() {
            assert!(Instant::now() < deadline, "waited too long for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write as _;
        fs::OpenOptions::new().append(true).create(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_truncated_file_is_read_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        fs::write(&path, "one\ntwo\n").unwrap();
        let (text, events) = followed(&path, true, |so_far: &dyn Fn() -> Vec<u8>| {
            wait_until("the first lines", || so_far() == b"one\ntwo\n");
            // `copytruncate`: emptied in place, then written again, shorter than what was read.
            fs::write(&path, "3\n").unwrap();
            wait_until("the line after the truncation", || so_far().ends_with(b"3\n"));
        });
        assert_eq!(String::from_utf8(text).unwrap(), "one\ntwo\n3\n");
        assert!(events.is_empty());
    }

    #[test]
    fn a_rotated_file_is_read_to_its_end_and_the_new_one_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        fs::write(&path, "old\n").unwrap();
        let (text, events) = followed(&path, false, |so_far: &dyn Fn() -> Vec<u8>| {
            // From the end: what the file held before is not read; lines are appended until one arrives.
            while so_far().is_empty() {
                append(&path, "a\n");
                std::thread::sleep(Duration::from_millis(20));
            }
            // Written after the follower's last read, then renamed away: still read, before the new file.
            append(&path, "last\n");
            fs::rename(&path, dir.path().join("app.log.1")).unwrap();
            append(&path, "new\n");
            wait_until("the new file's line", || so_far().ends_with(b"new\n"));
        });
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("old"), "{text}");
        assert!(text.ends_with("a\nlast\nnew\n"), "{text}");
        assert!(text.trim_end_matches("last\nnew\n").split_terminator('\n').all(|l| l == "a"), "{text}");
        assert!(events.is_empty());
    }

    #[test]
    fn a_missing_file_is_said_once_and_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.log");
        let (text, events) = followed(&path, false, |so_far: &dyn Fn() -> Vec<u8>| {
            std::thread::sleep(Duration::from_millis(300));
            append(&path, "here\n");
            wait_until("the file's line", || so_far() == b"here\n");
        });
        assert_eq!(text, b"here\n");
        let kinds: Vec<_> = events
            .iter()
            .map(|e| match e {
                Event::Diagnostic(0, d) => (d.line, d.kind),
                _ => panic!("only diagnostics"),
            })
            .collect();
        assert_eq!(kinds, [(1, DiagnosticKind::SourceUnavailable)]);
    }

    #[test]
    fn sources_name_their_format_when_a_format_id_comes_first() {
        let s = Source::parse("dcgm-exporter=http://127.0.0.1:9400/metrics", true).unwrap();
        assert_eq!(
            (s.origin, s.format.map(|a| a.id())),
            (Origin::Scrape("http://127.0.0.1:9400/metrics".into()), Some("dcgm-exporter"))
        );
        let s = Source::parse("vllm-log=-", false).unwrap();
        assert_eq!((s.origin, s.format.map(|a| a.id())), (Origin::Stdin, Some("vllm-log")));
        let s = Source::parse("logs/a=b.log", false).unwrap();
        assert_eq!((s.origin, s.format.is_none()), (Origin::Follow("logs/a=b.log".into()), true));
        assert!(Source::parse("https://example.invalid/metrics", true).is_err());
        let s = Source::parse("vllm-1@vllm-metrics=http://127.0.0.1:8001/metrics", true).unwrap();
        assert_eq!((s.name.as_deref(), s.format.map(|a| a.id())), (Some("vllm-1"), Some("vllm-metrics")));
        assert_eq!(s.display(), "vllm-1@http://127.0.0.1:8001/metrics");
        let s = Source::parse("pod-a@-", false).unwrap();
        assert_eq!((s.name.as_deref(), s.origin), (Some("pod-a"), Origin::Stdin));
    }

    #[test]
    fn a_named_source_names_the_instances_of_its_rows() {
        let (events, received) = sync_channel(16);
        let mut sink = Forward { index: 0, events: &events, name: Some(Arc::from("vllm-1")) };
        let sample =
            |instance: Option<&str>| EngineSample { instance: instance.map(Arc::from), ..EngineSample::default() };
        sink.sample(sample(Some("engine-0"))).unwrap();
        sink.sample(sample(None)).unwrap();
        sink.request(RequestRow { decode_instance: Some("d0".into()), ..RequestRow::default() }).unwrap();
        let got: Vec<String> = received
            .try_iter()
            .map(|e| match e {
                Event::Sample(_, s) => format!("{:?}", s.instance.as_deref()),
                Event::Request(_, r) => format!("{:?} {:?} {:?}", r.instance, r.prefill_instance, r.decode_instance),
                _ => panic!("rows only"),
            })
            .collect();
        assert_eq!(got, ["Some(\"vllm-1 engine-0\")", "Some(\"vllm-1\")", "Some(\"vllm-1\") None Some(\"vllm-1 d0\")"]);
    }
}
