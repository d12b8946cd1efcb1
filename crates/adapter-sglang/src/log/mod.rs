//! `sglang-log`: SGLang scheduler and tokenizer text logs.
//!
//! [`envelope`] finds `[time ranks] message`; [`batch`] reads `Prefill batch` / `Decode batch` lines into
//! canonical samples, with `instance` the rank tags (`DP1 TP0`) so data-parallel ranks stay apart; [`requests`]
//! reads request logs into one row per request, joining `Receive` and `Finish` on the `rid` (a request received
//! and never finished is written at the end with status `unknown`). Other SGLang records are recognised and not
//! used, except uvicorn access lines, counted by endpoint and status in `details.http_responses` (they name no
//! request, so they are not joined to rows); lines without an envelope (tracebacks, other programs, the `#` header of corpus excerpts) are
//! `not-a-record` diagnostics.
//!
//! Times are the host's local time: `--utc-offset` applies. Before 0.3.4 the envelope has no date: the date of the
//! file's modification time is used (advancing when the time of day goes backwards), and the manifest's `year`
//! records that choice.

mod batch;
mod envelope;
pub(crate) mod requests;
mod time_stats;

use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;
use std::ops::Range;
use std::sync::Arc;

use ahash::{HashMap, HashSet};
use lru::LruCache;

use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::time::{civil_to_nanos, next_date, seconds_to_nanos, utc_date};
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Drift, Head, LineReader, ParseContext, ParseError, ParseReport,
    SharedText, Sink, UtcOffset, utf8_line,
};
use infertrace_schema::{ClockDomain, DatasetError, EngineSample, RequestRow, Status, YearAssumption, YearSource};

use requests::{RequestFacts, RequestLine};
use time_stats::TimeStats;

/// The SGLang text log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct SglangLog;

impl SglangLog {
    /// Format id.
    pub const ID: &'static str = "sglang-log";
}

/// Messages only SGLang writes, for detection.
/// (The access line inside the envelope is SGLang's own uvicorn format from 0.3.4.)
const SGLANG_MESSAGES: &[&str] = &[
    "Prefill batch",
    "Decode batch",
    "Receive: ",
    "Finish: ",
    "max_total_num_tokens=",
    "Req Time Stats",
    "bootstrap_room",
    "sglang",
    "INFO:     ",
];

impl Adapter for SglangLog {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "SGLang scheduler log, 0.3-0.5.23 (and pre-0.3 fill-batch lines): Prefill/Decode batch statistics to samples"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let mut records = 0;
        let mut specific = false;
        for line in text.lines().take(64) {
            if line.starts_with("new fill batch. ") || (line.starts_with('{') && line.contains("\"event\": \"request."))
            {
                return Some(Confidence::High);
            }
            if let Some(record) = envelope::parse_unknown(line) {
                records += 1;
                specific |= SGLANG_MESSAGES.iter().any(|m| record.message.contains(m));
            }
        }
        match (records, specific) {
            (0, _) => None,
            (_, true) => Some(Confidence::High),
            (_, false) => Some(Confidence::Low),
        }
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut clock = Clock::new(ctx);
        let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
        let mut open = OpenRequests::default();
        let mut http: BTreeMap<String, u64> = BTreeMap::new();
        let mut shared = SharedText::default();
        let (source, source_file) = (shared.get(Self::ID), shared.get(ctx.source_file));
        let mut rows: Vec<EngineSample> = Vec::new();
        let mut drift = Drift::default();
        // Records by where their envelope was found ([`envelope::Found`]), and records without one.
        let (mut found, mut bare) = ([0u64; 3], 0u64);
        let mut lines_used = 0u64;
        map_lines(&mut lines, prepare, |line_no, bytes, prepared| {
            // `prepare` read this line on the pool; a line it could not read is read again here, to report why.
            let Some(Prepared { stamp, message }) = prepared.or_else(|| prepare_reported(line_no, bytes, sink)) else {
                return Ok(());
            };
            let (time, instance) = match &stamp {
                Some(stamp) => {
                    found[stamp.found as usize] += 1;
                    (clock.instant(stamp, line_no, sink), Some(stamp.ranks(bytes)))
                }
                None => {
                    bare += 1;
                    (None, None)
                }
            };
            lines_used += u64::from(match &message {
                Message::Request(_) | Message::TimeStats(Ok(_)) => true,
                Message::Batch(batch) => time.is_some() && !batch.values.is_empty(),
                _ => false,
            });
            match message {
                Message::Request(request) => {
                    let mut request = *request;
                    if let RequestLine::Finished(RequestFacts { meta: Some(meta), .. }) = &mut request {
                        for name in std::mem::take(&mut meta.unknown) {
                            drift.unknown_field(&name);
                        }
                    }
                    // Bare JSON request logs carry their own local `timestamp` (datetime.now().isoformat()).
                    let logged_at = |facts: &RequestFacts| {
                        let text = facts.logged_at.as_deref()?;
                        infertrace_adapter::time::parse_datetime(text, ctx.options.utc_offset).ok().map(|i| i.nanos)
                    };
                    match request {
                        RequestLine::Received(facts) if time.is_none() => {
                            let time = logged_at(&facts);
                            open.receive(facts, time, line_no, ctx, sink)?
                        }
                        RequestLine::Finished(facts) if time.is_none() => {
                            let time = logged_at(&facts);
                            open.finish(facts, time, line_no, ctx, sink)?
                        }
                        RequestLine::Received(facts) => open.receive(facts, time, line_no, ctx, sink)?,
                        RequestLine::Finished(facts) => open.finish(facts, time, line_no, ctx, sink)?,
                        RequestLine::Malformed(what) => {
                            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, what));
                        }
                    }
                }
                Message::Access(key) => *http.entry(key).or_default() += 1,
                Message::TimeStats(Ok(stats)) => {
                    let instance = instance.filter(|r| !r.is_empty());
                    open.time_stats(stats, time, instance, line_no, ctx, sink)?
                }
                Message::TimeStats(Err(what)) => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, what))
                }
                Message::Batch(batch) => {
                    let OddKeys { unknown, unreadable } = batch.odd.map(|odd| *odd).unwrap_or_default();
                    // A field of a newer release is counted by name (a key that is no name, like text that is no
                    // field at all, is a line cut short or broken by terminal wrapping).
                    let names: Vec<&str> =
                        unknown.iter().filter_map(|key| infertrace_adapter::drift::field_name(key)).collect();
                    for name in &names {
                        drift.unknown_field(name);
                    }
                    if names.len() < unknown.len() {
                        sink.diagnostic(Diagnostic::new(
                            line_no,
                            DiagnosticKind::MalformedRecord,
                            "a batch line with text that is no `key: value` field (cut short, or broken by terminal \
                             wrapping); its fields were read",
                        ));
                    }
                    for key in unreadable {
                        sink.diagnostic(Diagnostic::new(
                            line_no,
                            DiagnosticKind::InvalidValue,
                            format!("`{key}` is not a number"),
                        ));
                        *skipped.entry(key).or_default() += 1;
                    }
                    let Some(time) = time else {
                        if !batch.values.is_empty() {
                            sink.diagnostic(Diagnostic::new(
                                line_no,
                                DiagnosticKind::MissingField,
                                "batch statistics without a time (pre-0.3 lines have none) were skipped",
                            ));
                        }
                        return Ok(());
                    };
                    if let Some(&(metric, value)) = batch.values.first() {
                        // The row of this instance's last line, its time and line changed: no reference count is
                        // taken or dropped for a line.
                        let instance = instance.filter(|r| !r.is_empty());
                        let row = match rows.iter().position(|row| row.instance.as_deref() == instance) {
                            Some(at) => &mut rows[at],
                            None => {
                                if rows.len() == MAX_INSTANCE_ROWS {
                                    rows.pop();
                                }
                                rows.push(EngineSample {
                                    time,
                                    source: Arc::clone(&source),
                                    instance: instance.map(|r| shared.get(r)),
                                    metric: shared.get(metric),
                                    value,
                                    source_file: Some(Arc::clone(&source_file)),
                                    source_line: Some(line_no),
                                });
                                rows.last_mut().expect("just pushed")
                            }
                        };
                        // Its metric stays the first line's: `Sink::samples` writes each sample with the metric of
                        // its pair, never the row's.
                        (row.time, row.value, row.source_line) = (time, value, Some(line_no));
                        sink.samples(row, &batch.values)?;
                    }
                }
                Message::Other => {}
            }
            Ok::<_, ParseError>(())
        })?;
        open.flush_all(ctx, sink)?;
        for (kind, n) in
            [envelope::Found::Start, envelope::Found::Inside, envelope::Found::Custom].into_iter().zip(found)
        {
            drift.envelope(kind.name(), n);
        }
        drift.envelope("none", bare);
        if found[envelope::Found::Custom as usize] > 0 {
            // A deployment's formatter puts the date before the message: those records are timed by it.
            drift.times_from.insert("prefix", found[envelope::Found::Custom as usize]);
            let own = found[0] + found[1];
            if own > 0 {
                drift.times_from.insert("record", own);
            }
        }
        drift.lines_used = Some(lines_used);
        sink.drift(drift);
        let mut details = BTreeMap::new();
        if !http.is_empty() {
            details.insert("http_responses".to_owned(), serde_json::json!(http));
        }
        if open.stats_lines > 0 {
            details.insert("req_time_stats_lines".to_owned(), open.stats_lines.into());
            details.insert("req_time_stats_unusable".to_owned(), open.stats_unusable.into());
            if open.stats_written_alone > 0 {
                details.insert("req_time_stats_written_alone".to_owned(), open.stats_written_alone.into());
            }
            if open.stats_unusable > 0 {
                details.insert(
                    "req_time_stats_unusable_reason".to_owned(),
                    "0.4.7-0.5.2 never set the queue and forward entry times (or the line says Invalid Time Stats): \
                     their durations were not written"
                        .into(),
                );
            }
        }
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::AssumedOffset,
            year: clock.assumed,
            lines: lines.lines_read(),
            details,
        })
    }
}

/// A line's envelope (when it has one) and message: `None` for a line that is no SGLang record.
fn message_of(line: &str) -> Option<(Option<envelope::Record<'_>>, &str)> {
    if line.trim_ascii().is_empty() {
        return None;
    }
    match envelope::parse(line) {
        Some(record) => {
            let message = record.message;
            Some((Some(record), message))
        }
        // Pre-0.3 schedulers wrote their lines without any envelope, and JSON request logs (0.5.7) have none.
        // uvicorn writes its access lines with a formatter of its own, no envelope.
        None if line.starts_with("new fill batch. ")
            || line.starts_with("#running-req: ")
            || line.starts_with('{')
            || line.starts_with("INFO:     ") =>
        {
            Some((None, line))
        }
        None => None,
    }
}

/// What a record's message says, owning what it keeps: made by [`prepare`] on any thread, folded in order.
enum Message {
    /// Boxed, as the largest variant: every line's message is moved on its way to the fold, and a request line
    /// already allocates its text.
    Request(Box<RequestLine>),
    /// `METHOD path status` of a uvicorn access line.
    Access(String),
    TimeStats(Result<TimeStats, &'static str>),
    Batch(OwnedBatch),
    /// A record this adapter has no use for.
    Other,
}

/// A [`batch::Batch`] with its keys owned.
struct OwnedBatch {
    values: batch::Values,
    /// The keys it did not know or could not read, rare: boxed, `None` for none.
    odd: Option<Box<OddKeys>>,
}

/// Keys of a batch line that gave no sample.
#[derive(Default)]
struct OddKeys {
    /// An empty key stands for text that is no `key: value` field.
    unknown: Vec<String>,
    unreadable: Vec<String>,
}

/// Classifies one message, in the order the formats are told apart: request lines, access lines, time stats, batch
/// statistics.
fn classify(message: &str) -> Message {
    if let Some(request) = requests::parse(message) {
        return Message::Request(Box::new(request));
    }
    if let Some(key) = access(message) {
        return Message::Access(key);
    }
    if let Some(stats) = time_stats::parse(message) {
        return Message::TimeStats(stats);
    }
    match batch::parse(message) {
        Some(batch) => Message::Batch(OwnedBatch {
            odd: (!batch.unknown.is_empty() || !batch.unreadable.is_empty()).then(|| {
                Box::new(OddKeys {
                    unknown: batch.unknown.into_iter().map(str::to_owned).collect(),
                    unreadable: batch.unreadable.into_iter().map(str::to_owned).collect(),
                })
            }),
            values: batch.values,
        }),
        None => Message::Other,
    }
}

/// What the fold needs of a record's envelope: its time and its rank tags.
struct Stamp {
    found: envelope::Found,
    date: Option<(i32, u32, u32)>,
    hms: (u32, u32, u32),
    millis: Option<u32>,
    ranks: Ranks,
}

/// Rank tags longer than this are found again in the line rather than copied.
const INLINE_RANKS: usize = 30;

/// A record's rank tags, copied when short (`DP0 TP0`): the fold then reads the values prepared for its lines
/// one after another and never the lines themselves, which the other core read last (a cache miss per line).
enum Ranks {
    Copied {
        len: u8,
        bytes: [u8; INLINE_RANKS],
    },
    /// Byte range in the line.
    InLine(Range<usize>),
}

impl Stamp {
    fn of(line: &str, record: &envelope::Record<'_>) -> Self {
        let tags = record.ranks.as_bytes();
        let ranks = match u8::try_from(tags.len()) {
            Ok(len) if tags.len() <= INLINE_RANKS => {
                let mut bytes = [0; INLINE_RANKS];
                bytes[..tags.len()].copy_from_slice(tags);
                Ranks::Copied { len, bytes }
            }
            _ => {
                // `ranks` is a slice of `line`: its offset is the distance between the two.
                let start = (tags.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize).min(line.len());
                Ranks::InLine(start..(start + tags.len()).min(line.len()))
            }
        };
        Self { found: record.found, date: record.date, hms: record.hms, millis: record.millis, ranks }
    }

    /// The rank tags, from the copy or from the line they were read in (UTF-8 text cut at character boundaries,
    /// so the conversion cannot fail).
    fn ranks<'a>(&'a self, line: &'a [u8]) -> &'a str {
        let tags = match &self.ranks {
            Ranks::Copied { len, bytes } => bytes.get(..usize::from(*len)),
            Ranks::InLine(range) => line.get(range.clone()),
        };
        tags.and_then(|tags| std::str::from_utf8(tags).ok()).unwrap_or_default()
    }
}

/// A record read by [`prepare`]: its envelope (when it has one) and what its message says.
struct Prepared {
    stamp: Option<Stamp>,
    message: Message,
}

/// The pure part of reading a line, done by [`map_lines`] on any thread: its envelope read and its message
/// classified, so that the fold never reads the line's text again. `None` for a line that is not UTF-8 or no
/// record, which the fold reads again to report ([`prepare_reported`]).
fn prepare(bytes: &[u8]) -> Option<Prepared> {
    prepare_line(infertrace_adapter::utf8(bytes)?)
}

fn prepare_line(line: &str) -> Option<Prepared> {
    let (record, message) = message_of(line)?;
    Some(Prepared { stamp: record.map(|r| Stamp::of(line, &r)), message: classify(message) })
}

/// [`prepare`] for a line it gave nothing for, reporting why: not UTF-8 (or too long), or not a record.
fn prepare_reported(line_no: u64, bytes: &[u8], sink: &mut dyn Sink) -> Option<Prepared> {
    let line = utf8_line(line_no, bytes, sink)?;
    let prepared = prepare_line(line);
    if prepared.is_none() && !line.trim_ascii().is_empty() {
        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not an SGLang log record"));
    }
    prepared
}

static ACCESS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"^INFO: +\S+ - "(?P<method>[A-Z]+) (?P<path>[^ ?"]*)\S* HTTP/[0-9.]+" (?P<status>\d{3})\b"#)
        .expect("valid regex")
});

/// `METHOD path status` of a uvicorn access line (the query string dropped: it can carry request content).
fn access(message: &str) -> Option<String> {
    // The pattern's own anchor, checked before anything else for every batch line.
    if !message.starts_with("INFO:") {
        return None;
    }
    let (method, path, status) = if message.is_ascii() { access_ascii(message)? } else { access_by_regex(message)? };
    Some(format!("{method} {path} {status}"))
}

/// The method, path and status [`ACCESS`] captures in `message`, by its regex.
fn access_by_regex(message: &str) -> Option<(&str, &str, &str)> {
    let c = ACCESS.captures(message)?;
    let group = |name| c.name(name).map(|m| m.as_str());
    Some((group("method")?, group("path")?, group("status")?))
}

/// [`access_by_regex`] for an ASCII `message`, without the regex engine (its backtracker was 1.6% of the CPU time
/// of a generated SGLang log, where one line in thirteen is an access line). Each of the pattern's repeated parts is
/// followed by a byte it cannot take, so its longest run is the only one that can match: `\S` is any byte but the
/// six ASCII bytes Unicode counts as white space (with the vertical tab, which `is_ascii_whitespace` leaves out).
fn access_ascii(message: &str) -> Option<(&str, &str, &str)> {
    let bytes = message.as_bytes();
    let space = |b: u8| matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
    // The length of the longest run of bytes from `at` that `take` accepts.
    let run = |at: usize, take: &dyn Fn(u8) -> bool| bytes[at..].iter().take_while(|&&b| take(b)).count();
    let mut at = "INFO:".len();
    let spaces = run(at, &|b| b == b' ');
    let client = run(at + spaces, &|b| !space(b));
    if spaces == 0 || client == 0 {
        return None;
    }
    at += spaces + client;
    at += bytes[at..].starts_with(b" - \"").then_some(4)?;
    let method = run(at, &|b| b.is_ascii_uppercase());
    if method == 0 || bytes.get(at + method) != Some(&b' ') {
        return None;
    }
    let method_at = at;
    at += method + 1;
    let path = run(at, &|b| !matches!(b, b' ' | b'?' | b'"'));
    let path_at = at;
    at += path;
    at += run(at, &|b| !space(b));
    at += bytes[at..].starts_with(b" HTTP/").then_some(6)?;
    let version = run(at, &|b| b.is_ascii_digit() || b == b'.');
    if version == 0 {
        return None;
    }
    at += version;
    at += bytes[at..].starts_with(b"\" ").then_some(2)?;
    let status_at = at;
    let word = |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_');
    if run(at, &|b| b.is_ascii_digit()) < 3 || word(bytes.get(at + 3)) {
        return None;
    }
    Some((
        &message[method_at..method_at + method],
        &message[path_at..path_at + path],
        &message[status_at..status_at + 3],
    ))
}

/// Sample rows kept for reuse, one per instance (rank tags) seen last; past it the latest is replaced.
const MAX_INSTANCE_ROWS: usize = 64;

/// At most this many received-but-unfinished requests are held; past it the oldest is written early.
const MAX_OPEN_REQUESTS: usize = 100_000;

/// At most this many requests' time-stats lines wait for their `Finish` line; past it the oldest are written alone.
/// (The scheduler logs them moments before the tokenizer logs the finish.)
const MAX_PENDING_STATS: usize = 16_384;

/// How many finished request ids are remembered, to notice time stats that come after their `Finish` line.
const FINISHED_MEMORY: usize = 65_536;

/// The time-stats lines of one request waiting for its `Finish` line: one per stage on a PD pair logging to one
/// file (`type=prefill`, then `type=decode`), each with its scheduler's rank tags.
struct PendingStats {
    stages: Vec<(TimeStats, Option<String>)>,
    /// Time and line of the latest.
    time: Option<i64>,
    line: u64,
}

impl PendingStats {
    fn apply(&self, row: &mut RequestRow) {
        let had_output = row.output_tokens.is_some();
        for (stats, instance) in &self.stages {
            stats.apply(row, instance.as_deref());
        }
        // A prefill server counts the one token it makes; the decode server counts the whole output.
        let decoded = self.stages.iter().find(|(s, _)| s.role == time_stats::Role::Decode);
        if let (false, Some((decode, _))) = (had_output, decoded) {
            row.output_tokens = decode.output_len.or(row.output_tokens);
        }
    }
}

/// Requests seen on a `Receive` line and not finished yet, in arrival order, and time-stats lines not yet joined.
struct OpenRequests {
    open: HashMap<String, RequestRow>,
    order: VecDeque<String>,
    /// Time-stats lines waiting for their `Finish` line by request id, in the order of each request's first:
    /// entries are read with `peek_mut`, which leaves that order as it is. (A map beside a queue of the ids held
    /// each id three times and looked it up twice more; a log without request lines writes every time-stats line
    /// through this table.)
    stats: LruCache<String, PendingStats, ahash::RandomState>,
    finished: HashSet<String>,
    finished_order: VecDeque<String>,
    stats_lines: u64,
    stats_unusable: u64,
    /// Time-stats lines written alone because those of more than [`MAX_PENDING_STATS`] requests were waiting.
    stats_written_alone: u64,
}

impl Default for OpenRequests {
    fn default() -> Self {
        Self {
            open: HashMap::default(),
            order: VecDeque::new(),
            stats: LruCache::unbounded_with_hasher(ahash::RandomState::new()),
            finished: HashSet::default(),
            finished_order: VecDeque::new(),
            stats_lines: 0,
            stats_unusable: 0,
            stats_written_alone: 0,
        }
    }
}

impl OpenRequests {
    fn receive(
        &mut self,
        facts: RequestFacts,
        time: Option<i64>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let Some(rid) = facts.rid else { return Ok(()) };
        let row = RequestRow {
            request_id: rid.clone(),
            source: SglangLog::ID.to_owned(),
            arrival_time: facts.received_time.and_then(seconds_to_nanos).or(time),
            input_tokens: facts.input_ids,
            max_tokens: facts.max_new_tokens,
            status: Status::Unknown,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };
        if self.open.insert(rid.clone(), row).is_none() {
            self.order.push_back(rid);
        }
        while self.open.len() > MAX_OPEN_REQUESTS {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(row) = self.open.remove(&oldest) {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!(
                        "more than {MAX_OPEN_REQUESTS} requests received and not finished: the oldest was written early"
                    ),
                ));
                sink.request(row)?;
            }
        }
        Ok(())
    }

    fn finish(
        &mut self,
        facts: RequestFacts,
        time: Option<i64>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let meta = facts.meta.unwrap_or_default();
        let Some(id) = meta.id.clone().or(facts.rid.clone()) else {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "a finished request without an id"));
            return Ok(());
        };
        let received = facts.rid.as_ref().and_then(|rid| self.open.remove(rid)).or_else(|| self.open.remove(&id));
        let completion = meta.finished_ts.and_then(seconds_to_nanos).or(time);
        let arrival = meta
            .received_ts
            .and_then(seconds_to_nanos)
            .or_else(|| facts.received_time.and_then(seconds_to_nanos))
            .or(received.as_ref().and_then(|r| r.arrival_time))
            .or_else(|| Some(completion? - seconds_to_nanos(meta.e2e_latency?)?));
        let status = match meta.finish_reason.as_deref() {
            Some("abort") => Status::Aborted,
            Some(_) => Status::Ok,
            None => Status::Unknown,
        };
        let stats = facts.rid.as_ref().and_then(|rid| self.stats.pop(rid)).or_else(|| self.stats.pop(&id));
        self.remember_finished(&id);
        let mut row = RequestRow {
            request_id: id,
            source: SglangLog::ID.to_owned(),
            arrival_time: arrival,
            completion_time: completion,
            queue_s: meta.queue_time,
            e2e_s: meta.e2e_latency,
            input_tokens: meta.prompt_tokens.or(received.as_ref().and_then(|r| r.input_tokens)),
            cached_tokens: meta.cached_tokens,
            cached_tokens_gpu: meta.cached_device,
            cached_tokens_cpu: meta.cached_host,
            cached_tokens_disk: meta.cached_storage,
            output_tokens: meta.completion_tokens,
            reasoning_tokens: meta.reasoning_tokens,
            max_tokens: facts.max_new_tokens.or(received.as_ref().and_then(|r| r.max_tokens)),
            status,
            finish_reason: meta.finish_reason,
            http_status: meta.status_code,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };
        if let Some(pending) = stats {
            pending.apply(&mut row);
        }
        sink.request(row)
    }

    fn remember_finished(&mut self, id: &str) {
        if self.finished.insert(id.to_owned()) {
            self.finished_order.push_back(id.to_owned());
        }
        while self.finished_order.len() > FINISHED_MEMORY {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }

    /// Holds a time-stats line until its request's `Finish` line, which the tokenizer writes just after.
    fn time_stats(
        &mut self,
        stats: TimeStats,
        time: Option<i64>,
        instance: Option<&str>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        self.stats_lines += 1;
        self.stats_unusable += u64::from(!stats.usable);
        if self.finished.contains(&stats.rid) {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                "time stats logged after their request's Finish line were not joined to it",
            ));
            return Ok(());
        }
        let rid = stats.rid.clone();
        let stage = (stats, instance.map(str::to_owned));
        match self.stats.peek_mut(&rid) {
            Some(pending) if pending.stages.len() < 8 => {
                pending.stages.push(stage);
                (pending.time, pending.line) = (time.or(pending.time), line);
            }
            Some(_) => sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                "more than 8 time-stats lines for one request: this one was not joined",
            )),
            None => {
                self.stats.push(rid, PendingStats { stages: vec![stage], time, line });
            }
        }
        while self.stats.len() > MAX_PENDING_STATS {
            let Some((rid, pending)) = self.stats.pop_lru() else { break };
            if self.stats_written_alone == 0 {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!(
                        "the time-stats lines of more than {MAX_PENDING_STATS} requests wait for their Finish \
                         line: the oldest are written alone (a later Finish line gives such a request a second row)"
                    ),
                ));
            }
            self.stats_written_alone += pending.stages.len() as u64;
            sink.request(standalone(rid, pending, ctx))?;
        }
        Ok(())
    }

    /// Writes the requests that never finished in the log, in arrival order, with status `unknown`, then the
    /// time stats of requests whose `Finish` line is not in this file (request logging off, or on stdout).
    fn flush_all(&mut self, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        while let Some(rid) = self.order.pop_front() {
            if let Some(mut row) = self.open.remove(&rid) {
                if let Some(pending) = self.stats.pop(&rid) {
                    pending.apply(&mut row);
                }
                sink.request(row)?;
            }
        }
        while let Some((rid, pending)) = self.stats.pop_lru() {
            sink.request(standalone(rid, pending, ctx))?;
        }
        Ok(())
    }
}

/// The row of a request known only from its time-stats line: status `unknown` (the line does not say how the
/// request ended), completion at the line's time unless the wall-clock entry time places it exactly.
fn standalone(rid: String, pending: PendingStats, ctx: &ParseContext<'_>) -> RequestRow {
    let mut row = RequestRow {
        request_id: rid,
        source: SglangLog::ID.to_owned(),
        status: Status::Unknown,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(pending.line),
        ..RequestRow::default()
    };
    pending.apply(&mut row);
    row.completion_time = row.completion_time.or(pending.time);
    row
}

/// Turns envelope times into UTC instants.
struct Clock {
    offset: UtcOffset,
    /// For time-only envelopes: the date in use, and the last time of day seen.
    date: Option<(i32, u32, u32)>,
    last_seconds: u32,
    assumed: Option<YearAssumption>,
    fallback_date: (i32, u32, u32, YearSource),
}

impl Clock {
    fn new(ctx: &ParseContext<'_>) -> Self {
        let fallback_date = match (ctx.options.year, ctx.modified) {
            (_, Some(ns)) => {
                let (y, m, d) = utc_date(ns);
                let source = if ctx.options.year.is_some() { YearSource::Option } else { YearSource::FileModified };
                (ctx.options.year.unwrap_or(y), m, d, source)
            }
            (Some(year), None) => (year, 1, 1, YearSource::Option),
            (None, None) => (1970, 1, 1, YearSource::Unknown),
        };
        Self { offset: ctx.options.utc_offset, date: None, last_seconds: 0, assumed: None, fallback_date }
    }

    fn instant(&mut self, stamp: &Stamp, line: u64, sink: &mut dyn Sink) -> Option<i64> {
        let (h, m, s) = stamp.hms;
        let (y, mo, d) = match stamp.date {
            Some(date) => date,
            None => {
                let seconds = h * 3600 + m * 60 + s;
                let date = match self.date {
                    None => {
                        let (y, mo, d, source) = self.fallback_date;
                        self.assumed = Some(YearAssumption { year: y, source });
                        if source == YearSource::Unknown {
                            sink.diagnostic(Diagnostic::new(
                                line,
                                DiagnosticKind::MissingField,
                                "time-only SGLang timestamps and no file date: 1970-01-01 is used; pass --year",
                            ));
                        }
                        (y, mo, d)
                    }
                    // The time of day went backwards by hours: midnight passed.
                    Some(date) if seconds + 6 * 3600 < self.last_seconds => next_date(date).unwrap_or(date),
                    Some(date) => date,
                };
                self.date = Some(date);
                self.last_seconds = seconds;
                date
            }
        };
        match civil_to_nanos(y, mo, d, stamp.hms, self.offset) {
            // Within a second of the end of 2262 the milliseconds would overflow: such a time is out of range too.
            Ok(ns) => ns.checked_add(i64::from(stamp.millis.unwrap_or(0)) * 1_000_000).or_else(|| {
                sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, "time out of range"));
                None
            }),
            Err(_) => {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    "the envelope's date does not exist",
                ));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_read_by_hand() {
        let line = r#"INFO:     127.0.0.1:46600 - "POST /generate?x=1 HTTP/1.1" 200 OK"#;
        assert_eq!(access_ascii(line), Some(("POST", "/generate", "200")));
        assert_eq!(access(line).as_deref(), Some("POST /generate 200"));
        for declined in [
            r#"INFO:127.0.0.1:1 - "GET / HTTP/1.1" 200"#,
            r#"INFO:  127.0.0.1:1 - "get / HTTP/1.1" 200"#,
            r#"INFO:  127.0.0.1:1 - "GET / HTTP/1.1" 2000"#,
            r#"INFO:  127.0.0.1:1 - "GET / HTTP/1.1" 20"#,
            "INFO:  127.0.0.1:1 - \"GET /a?\tb HTTP/1.1\" 200",
            "INFO:  127.0.0.1\x0b:1 - \"GET / HTTP/1.1\" 200",
            r#"INFO:  127.0.0.1:1 - "GET / HTTP/" 200"#,
        ] {
            assert_eq!(access_ascii(declined), None, "{declined}");
            assert_eq!(access_by_regex(declined), None, "{declined}");
        }
        // A status followed by a non-word byte, a path up to a quote, the query kept out.
        assert_eq!(access_ascii(r#"INFO: a - "GET /v1/x"y?q HTTP/1.0" 404-"#), Some(("GET", "/v1/x", "404")));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// On ASCII lines made of the pattern's pieces, each mostly as an access line has it and sometimes not (a
        /// tab, vertical tab or quote where it changes the match, a piece missing or another), the hand-written
        /// reader captures what the regex captures. About one line in fifty is an access line.
        #[test]
        fn access_lines_read_by_hand_as_by_the_regex(
            line in concat!(
                r#"INFO:( {1,3}| {1,3}| {1,3}| {1,3}|\t|)"#,
                r#"([0-9.:a]{1,5}|[0-9.:a]{1,5}|[0-9.:a]{1,5}|[0-9]\x0b[0-9]|[0-9]\t[0-9])"#,
                r#"( - "| - "| - "| -")"#,
                r#"(GET|POST|[A-Z]{1,4}|GET|get|)( | | | |\t)"#,
                r#"(/[a-z]{0,4}|/[a-z]{0,4}|/a\tb|/a"b|/a\x0cb)"#,
                r#"(\?[a-z=]{0,3}|x|"||\?\t|\?\x0b)"#,
                r#"( HTTP/| HTTP/| HTTP/| HTTP/|HTTP/|\x0bHTTP/)"#,
                r#"([0-9.]{1,3}|[0-9.]{1,3}|[0-9.]{1,3}|x|)"( | | | |)"#,
                r#"([0-9]{3}|[0-9]{3}|[0-9]{3}|[0-9]{2,4})( OK| OK| OK|-|\x0b||_|a)"#,
            )
        ) {
            proptest::prop_assert_eq!(access_ascii(&line), access_by_regex(&line));
        }
    }
}
