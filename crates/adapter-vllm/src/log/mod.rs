//! `vllm-log`: vLLM server and engine logs, 0.2.7 to 0.33, as text records or (0.32+) JSON records.
//!
//! Two stages, as in every adapter: [`envelope`] and [`line`] turn one line into a typed, borrowing value with pure
//! functions; [`events`] folds those into rows. Statistics lines become `samples` (percentages as fractions, with
//! `instance` naming the engine or process); `Received`/`Added`/`Finished`/`Aborted` lines become one `requests` row
//! per request, joined on the request id (the internal `-<8 hex>` suffix of 0.14+ stripped). Prompts are never
//! copied: when token ids are logged, only their count and chained 16-token block hashes are kept.
//!
//! Decided where the reference is silent: a request without an end line (every V1 request) is written ten minutes
//! of log time after it was first seen, or at the end of the input, with status `unknown`; uvicorn access lines
//! carry no request id and no time: each is counted by endpoint and status in the manifest's
//! `details.http_responses`, and its status goes to a request row only when exactly one open request still lacks
//! one (so sequential traffic is joined and concurrent traffic is not guessed at).

mod envelope;
mod events;
mod fingerprint;
mod json_record;
mod line;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::drift::EnvelopeSets;
use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Drift, Head, LineReader, ParseContext, ParseError, ParseReport,
    Sink, utf8_line,
};

use envelope::Envelope;
use events::{Clock, Event, Fields, Instances, OpenRequests, SampleSource};
use line::Line;

/// The vLLM text log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmLog;

impl VllmLog {
    /// Format id.
    pub const ID: &'static str = "vllm-log";
}

/// A Dynamo (Rust `tracing` compact) record: `<ISO time>  LEVEL target: message`, as opposed to vLLM's own
/// `LEVEL MM-DD HH:MM:SS` header (which a docker timestamp may precede).
static DYNAMO_RECORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"^\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d) +(?:TRACE|DEBUG|INFO|WARN|ERROR) +[A-Za-z_][\w.:]*: ",
    )
    .expect("valid regex")
});

impl Adapter for VllmLog {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM server/engine text log, 0.2.7-0.33: stats lines to samples, Received/Added/Finished/Aborted to requests"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let mut records = 0;
        let mut vllm_specific = false;
        let mut dynamo_records = 0;
        for raw in text.lines().take(64) {
            let clean = envelope::strip_ansi(raw);
            dynamo_records += usize::from(DYNAMO_RECORD.is_match(&clean));
            if clean.starts_with('{') && clean.contains("\"levelname\"") && clean.contains("\"vllm") {
                records += 1;
                vllm_specific = true;
            }
            if envelope::has_vllm_process_prefix(&clean) {
                records += 1;
                vllm_specific = true;
            }
            let parsed = envelope::parse(&clean);
            if let Envelope::Access { path, .. } = parsed {
                // uvicorn access lines of an OpenAI-compatible server: vLLM's, or another engine's.
                records += usize::from(path.starts_with("/v1/"));
            }
            if let Envelope::Record(record) = parsed {
                records += 1;
                vllm_specific |= fingerprint::is_vllm_file(record.file)
                    || record.message.contains("Avg prompt throughput:")
                    || record.message.starts_with("Received request ")
                    || record.message.contains("vLLM");
            }
        }
        match (records, vllm_specific) {
            (0, _) => None,
            // A Dynamo worker's log holds vLLM's own lines among Dynamo's records: it is Dynamo's to read.
            (_, true) if dynamo_records > records => Some(Confidence::Low),
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
        let mut state = State {
            ctx,
            clock: Clock::new(ctx),
            requests: OpenRequests::default(),
            version: fingerprint::Fingerprint::default(),
            instances: Instances::default(),
            http: BTreeMap::new(),
            joined_http: 0,
            drift: Drift::default(),
            envelopes: EnvelopeSets::new(envelope::WRAPPER_NAMES.len()),
            json_records: 0,
            used: false,
            lines_used: 0,
        };
        map_lines(&mut lines, prepare, |line_no, bytes, prepared| {
            let Some(text) = utf8_line(line_no, bytes, sink) else { return Ok(()) };
            if text.trim_ascii().is_empty() {
                return Ok(());
            }
            // What `prepare` already found on this very line is not searched for again: its long lines (prompts of
            // tens of thousands of token ids) would be scanned twice more.
            let (mut prepared, mut glued_first, plain) = match prepared {
                Some(p) => (Some(p.fields), p.glued, p.plain),
                None => (None, None, false),
            };
            let (clean, colour) = if plain { (Cow::Borrowed(text), 0) } else { envelope::strip_colour(text) };
            if let Some(json) = json_record::parse(&clean) {
                match json {
                    Ok(record) => {
                        state.json_records += 1;
                        let time = state.clock.json_instant(&record, line_no, sink);
                        let process = record.process_name.as_deref();
                        state.message(&record.message, process, time, line_no, &mut prepared, sink)?;
                    }
                    Err(message) => sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, message)),
                }
                return Ok(());
            }
            let mut rest: &str = &clean;
            // Records pasted together without a newline are split and handled one after the other.
            loop {
                let envelope = envelope::parse(rest);
                if let Envelope::Access { method, path, status, .. } = &envelope {
                    *state.http.entry(format!("{method} {path} {status}")).or_default() += 1;
                    if *method == "POST" && INFERENCE_PATHS.contains(path) {
                        state.joined_http += u64::from(state.requests.http_status(*status));
                    }
                }
                let Envelope::Record(mut record) = envelope else {
                    if rest.len() == clean.len() && matches!(envelope, Envelope::Foreign) {
                        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a vLLM log record"));
                    }
                    break;
                };
                // The first record is the one `prepare` read, from the same text.
                let glued = glued_first.take().unwrap_or_else(|| envelope::glued_record(record.message));
                let next = glued.map(|at| &record.message[at..]);
                if let Some(at) = glued {
                    record.message = &record.message[..at];
                }
                state.version.observe(&record);
                state.envelopes.count(record.wrappers | colour);
                let time = state.clock.instant(&record, line_no, sink);
                state.message(record.message, record.process, time, line_no, &mut prepared, sink)?;
                match next {
                    Some(next) => rest = next,
                    None => break,
                }
            }
            state.lines_used += u64::from(std::mem::take(&mut state.used));
            Ok::<_, ParseError>(())
        })?;
        state.requests.finish(sink)?;
        let mut drift = std::mem::take(&mut state.drift);
        state.envelopes.report(&envelope::WRAPPER_NAMES, &mut drift);
        drift.envelope("json-record", state.json_records);
        drift.times_from = state.clock.times_from();
        drift.lines_used = Some(state.lines_used);
        sink.drift(drift);
        let mut details = BTreeMap::new();
        if !state.http.is_empty() {
            details.insert("http_responses".to_owned(), serde_json::json!(state.http));
            details.insert("http_statuses_joined".to_owned(), serde_json::json!(state.joined_http));
        }
        Ok(ParseReport {
            format_version: state.version.version(),
            clock_domain: state.clock.clock_domain(),
            year: state.clock.year(),
            lines: lines.lines_read(),
            details,
        })
    }
}

/// The fields of a line's first record when it is a `Received request` or `Request … details` line (prompt hashed),
/// or why they are malformed.
type PreparedFields = Result<Fields, &'static str>;

/// What [`prepare`] made of a request line.
struct Prepared {
    fields: PreparedFields,
    /// `glued_record` of the first record's message, when that record is a text record (not JSON).
    glued: Option<Option<usize>>,
    /// Whether the line has no colour codes to strip.
    plain: bool,
}

/// The pure, heavy part of reading a line, done by [`map_lines`] on any thread: the fields of the line's first
/// record when that is a `Received request` or `Request … details` line, found exactly as the fold finds that
/// record. `None` for every other line; the fold then parses the line itself.
fn prepare(bytes: &[u8]) -> Option<Prepared> {
    // Most lines are not requests, and a request line says so within its first few dozen bytes.
    let head = &bytes[..bytes.len().min(512)];
    if memchr::memmem::find(head, b"Received request ").is_none() && memchr::memmem::find(head, b"Request ").is_none() {
        return None;
    }
    let clean = envelope::strip_ansi(infertrace_adapter::utf8(bytes)?);
    let plain = matches!(clean, Cow::Borrowed(_));
    let owned;
    let (message, glued) = match json_record::parse(&clean) {
        Some(json) => {
            owned = json.ok()?.message;
            (owned.as_str(), None)
        }
        None => {
            let Envelope::Record(record) = envelope::parse(&clean) else { return None };
            let glued = envelope::glued_record(record.message);
            (&record.message[..glued.unwrap_or(record.message.len())], Some(glued))
        }
    };
    if !line::may_carry_fields(message) {
        return None;
    }
    let fields = match line::parse_message_with(message, parse_fields) {
        Line::Received { fields, .. } | Line::Details { fields, .. } => Ok(fields),
        Line::Malformed { what } => Err(what),
        _ => return None,
    };
    Some(Prepared { fields, glued, plain })
}

/// Parses a request line's fields and hashes its prompt.
fn parse_fields(text: &str) -> Result<Fields, &'static str> {
    PROMPT_IDS.with_borrow_mut(|spare| {
        let mut received = line::parse_received(text, spare)?;
        let fields = Fields::from(&received);
        if let Some(ids) = received.prompt_token_ids.take()
            && ids.capacity() <= KEPT_PROMPT_IDS
        {
            *spare = ids;
        }
        Ok(fields)
    })
}

/// The most token ids whose buffer a thread keeps for its next prompt (1 MiB).
const KEPT_PROMPT_IDS: usize = 1 << 17;

thread_local! {
    /// The buffer the last prompt's token ids were read into, for the next prompt read on this thread (at most
    /// [`KEPT_PROMPT_IDS`] ids, 1 MiB, per thread). A prompt of 30,000 tokens needs about 240 KiB for its ids, only
    /// until its blocks are hashed; a new buffer for each such line, on whichever pool thread prepared it, made the
    /// peak memory of a 1 GiB vLLM log grow with the thread count (`docs/performance-history.md`, seventeenth pass),
    /// since memory a thread frees is seldom what the next thread allocates (see the adapter crate's `spare` module).
    static PROMPT_IDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What folding one input needs besides the line at hand.
struct State<'c> {
    ctx: &'c ParseContext<'c>,
    clock: Clock,
    requests: OpenRequests,
    version: fingerprint::Fingerprint,
    instances: Instances,
    /// uvicorn access lines by `METHOD path status`.
    http: BTreeMap<String, u64>,
    /// Access lines whose status went to a request row.
    joined_http: u64,
    /// Unknown fields (and the rest of the drift report, filled at the end).
    drift: Drift,
    /// Records by their set of [`envelope::wrapper`] bits, and JSON records.
    envelopes: EnvelopeSets,
    json_records: u64,
    /// Whether the line at hand made a row or part of one, and how many lines did.
    used: bool,
    lines_used: u64,
}

/// Endpoints whose POSTs are inference requests.
const INFERENCE_PATHS: &[&str] =
    &["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/generate", "/v1/generate"];

impl State<'_> {
    /// Handles one record's message, logged by `process` at `time`. `prepared` is what [`prepare`] made of the
    /// line's first record, taken by the first message that needs it.
    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        message: &str,
        process: Option<&str>,
        time: Option<i64>,
        line_no: u64,
        prepared: &mut Option<PreparedFields>,
        sink: &mut dyn Sink,
    ) -> Result<(), ParseError> {
        let ctx = self.ctx;
        if let Some(now) = time {
            self.requests.expire(now, line_no, sink)?;
        }
        let fields = |text: &str| prepared.take().unwrap_or_else(|| parse_fields(text));
        match line::parse_message_with(message, fields) {
            Line::Stats(stats) => match time {
                Some(time) => {
                    for name in &stats.unknown {
                        self.drift.unknown_field(name);
                    }
                    self.used = true;
                    let at = SampleSource { source: VllmLog::ID, ctx, process, line: line_no, time };
                    events::emit_stats(&stats, &at, &mut self.instances, sink)?;
                }
                None => sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::InvalidValue,
                    "statistics without a usable time were skipped",
                )),
            },
            Line::Received { id, mut fields } | Line::Details { id, mut fields } => {
                self.used = true;
                for name in std::mem::take(&mut fields.unknown) {
                    self.drift.unknown_field(&name);
                }
                self.requests.apply(Event::Received, id, Some(fields), time, line_no, ctx, sink)?;
            }
            Line::Added { id } => {
                self.used = true;
                self.requests.apply(Event::Added, id, None, time, line_no, ctx, sink)?
            }
            Line::Finished { id } => {
                self.used = true;
                self.requests.apply(Event::Finished, id, None, time, line_no, ctx, sink)?
            }
            Line::Aborted { ids } => {
                self.used = true;
                for id in ids {
                    self.requests.apply(Event::Aborted, id, None, time, line_no, ctx, sink)?;
                }
            }
            Line::Malformed { what } => {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, what));
            }
            Line::Other => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_read_after_a_longer_one_on_the_same_thread_hashes_only_its_own_ids() {
        let ids = |n: u64| (0..n).map(|i| (i * 7919 % 50_000).to_string()).collect::<Vec<_>>().join(", ");
        let line = |n| format!("prompt: None, params: SamplingParams(max_tokens=9), prompt_token_ids: [{}].", ids(n));
        let (long, short) = (line(100), line(40));
        let alone = Fields::from(&line::parse_received(&short, &mut Vec::new()).unwrap());
        let prompt = alone.prompt.as_ref().unwrap();
        assert_eq!((prompt.tokens, prompt.hashes.len()), (Some(40), 2), "two full blocks of 16");
        assert_eq!(parse_fields(&long).unwrap().prompt.unwrap().hashes.len(), 6);
        assert_eq!(parse_fields(&short).unwrap(), alone);
        assert_eq!(parse_fields(&short).unwrap(), alone);
    }
}
