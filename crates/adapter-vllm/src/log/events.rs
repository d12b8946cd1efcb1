//! Folding typed lines into rows: the clock (year, offset, roll-over), engine samples, and request lifecycles.

use std::collections::VecDeque;
use std::sync::Arc;

use ahash::{HashMap, HashSet};

use infertrace_adapter::hash::chained_block_hashes;
use infertrace_adapter::time::{NANOS_PER_SEC, civil_to_nanos, parse_datetime};
use infertrace_adapter::{Diagnostic, DiagnosticKind, ParseContext, Sink, UtcOffset};
use infertrace_schema::{
    ClockDomain, DatasetError, EngineSample, RequestRow, Status, YearAssumption, YearSource, metrics,
};

use super::envelope::{PrefixTime, Record};
use super::line::{Received, Stats};

/// Tokens per block of vLLM's prefix cache, the block size of the `prefix_hashes` this adapter writes.
pub(crate) const BLOCK_SIZE: u32 = 16;
/// A request with no end event is written once the log is this far past its first line (V1 never logs an end).
pub(crate) const OPEN_REQUEST_GRACE_NS: i64 = 600 * NANOS_PER_SEC;
/// At most this many requests are held open; past it the oldest is written early, with a diagnostic.
pub(crate) const MAX_OPEN_REQUESTS: usize = 100_000;
/// At most this many bytes of prefix hashes are held in open requests (4 M prompt blocks, 64 M tokens); past it
/// the oldest is written early, with a diagnostic, so memory stays bounded whatever the prompts' length.
pub(crate) const MAX_OPEN_HASH_BYTES: usize = 32 << 20;
/// Ids of requests already written, remembered to recognise repeated abort lines (0.8.5+ logs two per abort).
const RECENTLY_CLOSED: usize = 4096;

/// Turns `MM-DD HH:MM:SS` into UTC instants.
#[derive(Debug)]
pub(crate) struct Clock {
    offset: UtcOffset,
    fallback: YearAssumption,
    year: i32,
    last_month: u32,
    first: Option<YearAssumption>,
    warned: bool,
    with_zone: u64,
    without_zone: u64,
    /// Records timed by a prefix's stamp, and by their own (for the manifest's `times_from`).
    from_prefix: u64,
    from_record: u64,
    /// Whether any record had a prefix with a date.
    dated_prefix: bool,
}

impl Clock {
    pub(crate) fn new(ctx: &ParseContext<'_>) -> Self {
        let fallback = match (ctx.options.year, ctx.modified_year()) {
            (Some(year), _) => YearAssumption { year, source: YearSource::Option },
            (None, Some(year)) => YearAssumption { year, source: YearSource::FileModified },
            (None, None) => YearAssumption { year: 1970, source: YearSource::Unknown },
        };
        Self {
            offset: ctx.options.utc_offset,
            year: fallback.year,
            fallback,
            last_month: 0,
            first: None,
            warned: false,
            with_zone: 0,
            without_zone: 0,
            from_prefix: 0,
            from_record: 0,
            dated_prefix: false,
        }
    }

    /// The instant of `record`, or `None` (with a diagnostic) when its date does not exist.
    pub(crate) fn instant(&mut self, record: &Record<'_>, line: u64, sink: &mut dyn Sink) -> Option<i64> {
        // docker --timestamps (UTC with sub-second precision, better than the record's own time), or the local time
        // of a program that re-emitted a record without a stamp of its own.
        let from_prefix = match record.prefix_time {
            Some(PrefixTime::Rfc3339(text)) => parse_datetime(text, UtcOffset::UTC).ok().map(|i| (text, i)),
            Some(PrefixTime::Local(text)) => {
                parse_datetime(&text.replacen(',', ".", 1), self.offset).ok().map(|i| (text, i))
            }
            _ => None,
        };
        if let Some((text, instant)) = from_prefix {
            if instant.had_zone {
                self.with_zone += 1;
            } else {
                self.without_zone += 1;
            }
            self.from_prefix += 1;
            self.dated_prefix = true;
            let year = text.get(..4).and_then(|y| y.parse().ok()).unwrap_or(self.year);
            self.note_year(YearAssumption { year, source: YearSource::Prefix }, record.month);
            return Some(instant.nanos);
        }
        self.from_record += 1;
        self.dated_prefix |= matches!(record.prefix_time, Some(PrefixTime::Wrapper { .. }));
        let assumption = match record.prefix_time {
            // `--year` outranks a wrapper's year; only the file's modification time is outranked by it.
            Some(PrefixTime::Wrapper { year }) if self.fallback.source != YearSource::Option => {
                YearAssumption { year, source: YearSource::Prefix }
            }
            _ => {
                if self.last_month == 12 && record.month == 1 {
                    self.year += 1; // 12-31 → 01-01 inside one file.
                }
                YearAssumption { year: self.year, source: self.current_source() }
            }
        };
        if assumption.source == YearSource::Unknown && !self.warned {
            self.warned = true;
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MissingField,
                "vLLM timestamps have no year and none was found: 1970 is used; pass --year",
            ));
        }
        self.note_year(assumption, record.month);
        self.without_zone += 1;
        match civil_to_nanos(assumption.year, record.month, record.day, record.hms, self.offset) {
            Ok(nanos) => Some(nanos),
            Err(_) => {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    format!("{:02}-{:02} is not a date in {}", record.month, record.day, assumption.year),
                ));
                None
            }
        }
    }

    /// The instant of a JSON record, whose `asctime` carries its year (local time, `--utc-offset` applied).
    pub(crate) fn json_instant(
        &mut self,
        record: &super::json_record::JsonRecord,
        line: u64,
        sink: &mut dyn Sink,
    ) -> Option<i64> {
        let text = record.asctime.replacen(',', ".", 1);
        match parse_datetime(&text, self.offset) {
            Ok(instant) => {
                let year = text.get(..4).and_then(|y| y.parse().ok()).unwrap_or(self.year);
                self.first.get_or_insert(YearAssumption { year, source: YearSource::Record });
                if instant.had_zone {
                    self.with_zone += 1
                } else {
                    self.without_zone += 1
                }
                Some(instant.nanos)
            }
            Err(_) => {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    "`asctime` is not YYYY-MM-DD HH:MM:SS,mmm",
                ));
                None
            }
        }
    }

    fn current_source(&self) -> YearSource {
        self.first.filter(|f| f.source == YearSource::Prefix).map_or(self.fallback.source, |_| YearSource::Prefix)
    }

    fn note_year(&mut self, assumption: YearAssumption, month: u32) {
        if assumption.source != YearSource::Prefix || self.fallback.source != YearSource::Option {
            self.year = assumption.year;
        }
        self.last_month = month;
        self.first.get_or_insert(assumption);
    }

    /// The year the input's first timestamp got, for the manifest.
    pub(crate) fn year(&self) -> Option<YearAssumption> {
        self.first
    }

    /// Records timed by a prefix's stamp and by their own, when a prefix carried a date (else nothing to say).
    pub(crate) fn times_from(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut from = std::collections::BTreeMap::new();
        if self.dated_prefix {
            for (name, n) in [("prefix", self.from_prefix), ("record", self.from_record)] {
                if n > 0 {
                    from.insert(name, n);
                }
            }
        }
        from
    }

    /// How the input's times were made absolute.
    pub(crate) fn clock_domain(&self) -> ClockDomain {
        if self.with_zone > 0 && self.without_zone == 0 { ClockDomain::Utc } else { ClockDomain::AssumedOffset }
    }
}

/// Where a sample comes from.
pub(crate) struct SampleSource<'a> {
    pub(crate) source: &'static str,
    pub(crate) ctx: &'a ParseContext<'a>,
    pub(crate) process: Option<&'a str>,
    pub(crate) line: u64,
    pub(crate) time: i64,
}

/// Names the engine statistics belong to.
///
/// Companion lines (`SpecDecoding metrics`, the V0 prefix-cache line) carry no engine index: they belong to the
/// engine of the statistics line the same process logged just before.
#[derive(Debug, Default)]
pub(crate) struct Instances {
    last: Option<(Option<String>, String)>,
}

impl Instances {
    fn of(&mut self, stats: &Stats<'_>, process: Option<&str>) -> Option<String> {
        let named = match (stats.engine, stats.aggregated) {
            (Some(engine), _) => Some(format!("engine-{engine}")),
            (None, Some(n)) => Some(format!("aggregated-{n}-engines")),
            (None, None) => None,
        };
        if let Some(name) = named {
            self.last = Some((process.map(str::to_owned), name.clone()));
            return Some(name);
        }
        match &self.last {
            Some((last_process, name)) if last_process.as_deref() == process => Some(name.clone()),
            _ => process.map(str::to_owned),
        }
    }
}

/// Writes one sample per value present in `stats`, in a fixed order.
pub(crate) fn emit_stats(
    stats: &Stats<'_>,
    at: &SampleSource<'_>,
    instances: &mut Instances,
    sink: &mut dyn Sink,
) -> Result<(), DatasetError> {
    let instance: Option<Arc<str>> = instances.of(stats, at.process).map(Into::into);
    let (kv_waiting, kv_in_progress, kv_done) = match stats.kv_fetch {
        Some((a, b, c)) => (Some(a), Some(b), Some(c)),
        None => (None, None, None),
    };
    let values = [
        (metrics::PROMPT_THROUGHPUT_TPS, stats.prompt_tps),
        (metrics::GENERATION_THROUGHPUT_TPS, stats.generation_tps),
        (metrics::REQUESTS_RUNNING, stats.running),
        (metrics::REQUESTS_WAITING, stats.waiting),
        (metrics::REQUESTS_SWAPPED, stats.swapped),
        (metrics::REQUESTS_DEFERRED, stats.deferred),
        (metrics::KV_FETCH_WAITING, kv_waiting),
        (metrics::KV_FETCH_IN_PROGRESS, kv_in_progress),
        (metrics::KV_FETCH_COMPLETED_WAITING, kv_done),
        (metrics::PREEMPTIONS, stats.preemptions),
        (metrics::KV_CACHE_USAGE, stats.kv_usage),
        (metrics::CPU_KV_CACHE_USAGE, stats.cpu_kv_usage),
        (metrics::PREFIX_CACHE_HIT_RATE, stats.prefix_hit),
        (metrics::CPU_PREFIX_CACHE_HIT_RATE, stats.cpu_prefix_hit),
        (metrics::REQUESTS_CORRUPTED, stats.corrupted),
        (metrics::EXTERNAL_PREFIX_CACHE_HIT_RATE, stats.external_hit),
        (metrics::MM_CACHE_HIT_RATE, stats.mm_hit),
        (metrics::SPEC_ACCEPT_RATE, stats.spec_accept_rate),
        (metrics::SPEC_ACCEPT_LENGTH, stats.spec_accept_length),
        (metrics::SPEC_ACCEPTED_TOKENS, stats.spec_accepted),
        (metrics::SPEC_DRAFTED_TOKENS, stats.spec_drafted),
        (metrics::SPEC_ACCEPTED_TPS, stats.spec_accepted_tps),
        (metrics::SPEC_DRAFTED_TPS, stats.spec_drafted_tps),
    ];
    for (metric, value) in values {
        if let Some(value) = value {
            sink.sample(EngineSample {
                time: at.time,
                source: at.source.into(),
                instance: instance.clone(),
                metric: metric.into(),
                value,
                source_file: Some(at.ctx.source_file.into()),
                source_line: Some(at.line),
            })?;
        }
    }
    Ok(())
}

/// Requests seen but not yet written, in the order they were first seen.
#[derive(Debug)]
pub(crate) struct OpenRequests {
    /// Bytes of prefix hashes held open past which the oldest request is written ([`MAX_OPEN_HASH_BYTES`]).
    hash_budget: usize,
    /// Bytes of prefix hashes in `open`.
    hash_bytes: usize,
    open: HashMap<String, RequestRow>,
    /// Open requests that no access line has been given to yet.
    without_http: HashSet<String>,
    order: VecDeque<(String, i64)>,
    closed: HashSet<String>,
    closed_order: VecDeque<String>,
}

/// What happened to a request on one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// `Received request` (and its DEBUG `details` line).
    Received,
    /// `Added request`.
    Added,
    /// `Finished request`.
    Finished,
    /// `Aborted request`, `Aborted request(s)`, `Request … aborted`.
    Aborted,
}

impl Default for OpenRequests {
    fn default() -> Self {
        Self {
            hash_budget: MAX_OPEN_HASH_BYTES,
            hash_bytes: 0,
            open: HashMap::default(),
            without_http: HashSet::default(),
            order: VecDeque::new(),
            closed: HashSet::default(),
            closed_order: VecDeque::new(),
        }
    }
}

/// Bytes the prefix hashes of `row` take.
/// What a request row takes from a `Received request` (or `Request … details`) line: the prompt already reduced
/// to its token count and block hashes, so that this work happens where lines are prepared, in parallel.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fields {
    pub(crate) max_tokens: Option<u32>,
    pub(crate) prompt: Option<Prompt>,
    /// Names of the line's fields the parser does not know, for the drift report.
    pub(crate) unknown: Vec<String>,
}

/// A logged prompt, as counts and hashes only.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompt {
    /// Token count (`None` past `u32::MAX`).
    pub(crate) tokens: Option<u32>,
    /// Chained hashes of its full 16-token blocks.
    pub(crate) hashes: Vec<u64>,
}

impl From<&Received> for Fields {
    fn from(received: &Received) -> Self {
        Self {
            max_tokens: received.max_tokens,
            prompt: received.prompt_token_ids.as_ref().map(|ids| Prompt {
                tokens: u32::try_from(ids.len()).ok(),
                hashes: chained_block_hashes(ids, BLOCK_SIZE as usize),
            }),
            unknown: received.unknown.clone(),
        }
    }
}

fn hash_bytes(row: &RequestRow) -> usize {
    row.prefix_hashes.as_ref().map_or(0, |h| h.len() * size_of::<u64>())
}

impl OpenRequests {
    /// The key of the open request `id` refers to: itself, or (0.14+) the external id it extends with `-<8 hex>`.
    fn key(&self, id: &str) -> Option<String> {
        if self.open.contains_key(id) {
            return Some(id.to_owned());
        }
        let (base, suffix) = id.rsplit_once('-')?;
        let internal = suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit());
        (internal && self.open.contains_key(base)).then(|| base.to_owned())
    }

    fn was_closed(&self, id: &str) -> bool {
        self.closed.contains(id)
            || id.rsplit_once('-').is_some_and(|(base, suffix)| suffix.len() == 8 && self.closed.contains(base))
    }

    /// Applies `event` on request `id` at `time`, writing the row when it ends.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn apply(
        &mut self,
        event: Event,
        id: &str,
        received: Option<Fields>,
        time: Option<i64>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let key = match self.key(id) {
            Some(key) => key,
            None if matches!(event, Event::Aborted | Event::Finished | Event::Added) && self.was_closed(id) => {
                return Ok(()); // A repeated end line, or an Added line after an abort: nothing new.
            }
            None => {
                let row = RequestRow {
                    request_id: id.to_owned(),
                    source: super::VllmLog::ID.to_owned(),
                    arrival_time: if matches!(event, Event::Received | Event::Added) { time } else { None },
                    status: Status::Unknown,
                    source_file: Some(ctx.source_file.to_owned()),
                    source_line: Some(line),
                    ..RequestRow::default()
                };
                self.open.insert(id.to_owned(), row);
                self.without_http.insert(id.to_owned());
                self.order.push_back((id.to_owned(), time.unwrap_or(i64::MIN)));
                id.to_owned()
            }
        };
        let row = self.open.get_mut(&key).expect("the key is open");
        if let Some(fields) = received {
            if fields.max_tokens.is_some() {
                row.max_tokens = fields.max_tokens;
            }
            if let Some(prompt) = fields.prompt {
                self.hash_bytes -= hash_bytes(row);
                row.input_tokens = prompt.tokens;
                row.prefix_hashes = Some(prompt.hashes);
                row.block_size = Some(BLOCK_SIZE);
                self.hash_bytes += hash_bytes(row);
            }
        }
        row.source_line = Some(line);
        match event {
            Event::Received | Event::Added => {
                if row.arrival_time.is_none() {
                    row.arrival_time = time;
                }
                Ok(())
            }
            Event::Finished | Event::Aborted => {
                row.completion_time = time;
                row.status = match event {
                    _ if row.status == Status::Error => Status::Error,
                    Event::Finished => Status::Ok,
                    _ => Status::Aborted,
                };
                self.close(&key, sink)
            }
        }
    }

    /// Gives an access line's HTTP status to the request it must belong to: the only open request without one.
    /// With several candidates the line names none of them, and nothing is guessed. Returns whether it was given.
    pub(crate) fn http_status(&mut self, status: u16) -> bool {
        if self.without_http.len() != 1 {
            return false;
        }
        let key = self.without_http.drain().next().expect("one element");
        let row = self.open.get_mut(&key).expect("requests without a status are open");
        row.http_status = Some(status);
        if status >= 400 {
            row.status = Status::Error;
        }
        true
    }

    fn close(&mut self, key: &str, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let Some(row) = self.open.remove(key) else { return Ok(()) };
        self.hash_bytes -= hash_bytes(&row);
        self.without_http.remove(key);
        if self.closed_order.len() == RECENTLY_CLOSED
            && let Some(old) = self.closed_order.pop_front()
        {
            self.closed.remove(&old);
        }
        self.closed.insert(key.to_owned());
        self.closed_order.push_back(key.to_owned());
        sink.request(row)
    }

    /// Writes requests first seen more than the grace period before `now`, and the oldest past the open limit.
    pub(crate) fn expire(&mut self, now: i64, line: u64, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        while let Some((key, seen)) = self.order.front() {
            let stale = *seen != i64::MIN && now.saturating_sub(*seen) > OPEN_REQUEST_GRACE_NS;
            let over = self.open.len() > MAX_OPEN_REQUESTS || self.hash_bytes > self.hash_budget;
            if !self.open.contains_key(key) {
                self.order.pop_front(); // Already closed.
                continue;
            }
            if !stale && !over {
                break;
            }
            let (key, _) = self.order.pop_front().expect("front exists");
            if over && !stale {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!(
                        "more than {MAX_OPEN_REQUESTS} requests or {} MiB of prefix hashes open: the oldest was \
                         written before its end",
                        self.hash_budget >> 20
                    ),
                ));
            }
            self.close(&key, sink)?;
        }
        Ok(())
    }

    /// Writes every request still open, in the order first seen.
    pub(crate) fn finish(&mut self, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        while let Some((key, _)) = self.order.pop_front() {
            self.close(&key, sink)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    /// Received lines of `tokens`-token prompts, one a second, none ever finishing.
    fn receive(open: &mut OpenRequests, requests: u64, tokens: u64, sink: &mut CollectSink) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "x.log", options: &options, modified: None, sidecars: None };
        for n in 0..requests {
            let fields =
                Received { max_tokens: None, prompt_token_ids: Some((0..tokens).collect()), unknown: Vec::new() };
            let time = i64::try_from(n).unwrap() * NANOS_PER_SEC;
            let fields = Some(Fields::from(&fields));
            open.apply(Event::Received, &format!("r{n}"), fields, Some(time), n + 1, &ctx, sink).unwrap();
            open.expire(time, n + 1, sink).unwrap();
        }
    }

    #[test]
    fn open_prefix_hashes_stay_within_their_budget() {
        // 1,600-token prompts hold 100 hashes, 800 bytes each; a budget of 2,000 bytes keeps two open.
        let mut open = OpenRequests { hash_budget: 2_000, ..OpenRequests::default() };
        let mut sink = CollectSink::default();
        receive(&mut open, 5, 1_600, &mut sink);
        assert_eq!(open.open.len(), 2);
        assert_eq!(open.hash_bytes, 1_600);
        // r0, r1, r2 written early, each when a third request went over the budget, each with a diagnostic.
        let written: Vec<&str> = sink.requests.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(written, ["r0", "r1", "r2"]);
        assert_eq!(sink.diagnostics.iter().map(|d| d.line).collect::<Vec<_>>(), [3, 4, 5]);
        assert!(sink.diagnostics[0].message.contains("MiB of prefix hashes open"), "{:?}", sink.diagnostics[0]);
        open.finish(&mut sink).unwrap();
        assert_eq!(open.hash_bytes, 0);
        assert_eq!(sink.requests.len(), 5);
    }

    #[test]
    fn short_prompts_never_touch_the_budget() {
        let mut open = OpenRequests::default();
        let mut sink = CollectSink::default();
        receive(&mut open, 50, 30_000, &mut sink);
        // 50 prompts of 30,000 tokens: 50 × 1,875 hashes × 8 bytes = 750,000 bytes, far below 32 MiB.
        assert_eq!((open.open.len(), open.hash_bytes), (50, 750_000));
        assert!(sink.diagnostics.is_empty() && sink.requests.is_empty());
    }
}
