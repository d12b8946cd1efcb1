//! Mooncake JSONL traces and the Mooncake-style variants NVIDIA Dynamo's replay tooling reads.
//!
//! # Formats
//!
//! **Mooncake** (FAST25-release/README.md and the paper's appendix A), one request per line:
//!
//! ```text
//! {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, …, 2354]}
//! ```
//!
//! `timestamp` is the arrival in milliseconds from the start of the trace, `input_length` and `output_length` are
//! tokens, and `hash_ids` are 512-token blocks, each id standing for the block *and all blocks before it* (chained
//! prefix hashes remapped to small integers), so they are stored as `prefix_hashes` unchanged with `block_size` 512.
//! A trailing partial block has an id too: `len(hash_ids) == ceil(input_length / 512)`.
//! Dynamo (`MooncakeRow`, `lib/data-gen/src/mooncake.rs`) and AIPerf (`mooncake_trace`) replay the same lines with
//! optional `request_id`, `session_id`, `delay` (ms; alias `delay_ms`), `priority`, `strict_priority`,
//! `policy_class` and `output_token_ids`, and accept the aliases `input_tokens`, `output_tokens` and
//! `created_time`; NVIDIA srt-slurm's fixtures add `group_id` (ignored).
//!
//! **mooncake-delta** (Dynamo `--trace-format mooncake-delta`): the same lines, but a session's later rows carry
//! only the *new* input, and replay feeds each turn the previous prompt, its output and the delta. Its lines cannot
//! be told from Mooncake's, so it has its own adapter, [`MooncakeDelta`] (`mooncake-delta`), chosen by `--format`
//! and never by detection.
//!
//! **agentic_mooncake v2** (Dynamo `AGENTIC_MOONCAKE_SCHEMA`, version 2): a header line, then request rows:
//!
//! ```text
//! {"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,"hash_id_scope":"local",
//!  "source":{"format":…,"digest":…}}
//! {"request_id":"agent-child","play_id":"agent-play","session_id":"child","model":"tiny-model","input_length":4,
//!  "output_length":2,"hash_ids":[302],"not_before_ms":0,"recorded_api_time_ms":…,
//!  "dependencies":[{"request_id":"agent-root","trigger":"dispatch","delay_ms":5,"relation":"spawn"}]}
//! ```
//!
//! `trigger` is `dispatch` or `completion` (of the named request), `relation` `sequence`, `spawn`, `join` or
//! `replay_barrier`; a row is dispatched once every dependency has fired, `delay_ms` after it, and not before
//! `not_before_ms`.
//!
//! **agentic_mooncake, legacy** (headerless, Dynamo `AgenticMooncakeRow`): Mooncake rows plus `wait_for` (request ids
//! whose completion the row waits for), `tool_wait_ms` (waited after them, with `delay`) and `tool_events`.
//!
//! **applied_compute_agentic** (Applied Compute TRIE workload format), one agent session per line:
//!
//! ```text
//! {"num_turns":2,"input_prompt_length":16,"assistant_response_length":[4,4],"tool_call_output_length":[8,8],
//!  "tool_call_latency":[0.01,0.02],"final_assistant_response_length":4}
//! ```
//!
//! The three arrays have `num_turns` entries; the session is `num_turns + 1` requests: one per tool-calling turn,
//! then the final answer. `tool_call_latency` is in seconds.
//!
//! # Which variant
//!
//! The first record decides, and `format_version` names it: a `dynamo.agentic_mooncake` header line is
//! `agentic_mooncake-v2`, Applied Compute keys are `applied_compute_agentic`; otherwise the file is Mooncake
//! (`format_version` null, as before these variants) and becomes `agentic_mooncake` from the first row carrying
//! `wait_for`, `tool_wait_ms` or `tool_events` (rows before it cannot be told from Mooncake rows).
//! [`MooncakeDelta`] always reads `mooncake-delta`. A header line anywhere but first is not a row: it is reported as
//! missing `input_length`, as before.
//!
//! # Mapping and decisions
//!
//! - `request_id` and `session_id` are kept as strings; without a `request_id` the id is `<file stem>:<line>`
//!   (Applied Compute: `<file stem>:<line>:<turn>`, session `<file stem>:<line>`).
//! - `turn` is the 0-based position of the row among the rows of its `session_id` (the schema's convention), in file
//!   order. Rows without `session_id` have no turn.
//! - Arrival, in this order: a v2 row is dispatched at the latest of `not_before_ms` and, for each dependency, the
//!   named request's arrival plus `delay_ms` (for a `completion` trigger, plus the named request's
//!   `recorded_api_time_ms` when it has one). A legacy row with `wait_for` arrives at the latest arrival of the
//!   requests it waits for plus `delay` plus `tool_wait_ms`. Otherwise `timestamp` (plus `--start`) when present,
//!   else for a later turn of a session the previous turn's arrival plus `delay` (+ `tool_wait_ms`), else none.
//!   Replay waits for the previous request's *completion*, which the trace does not record (only v2's
//!   `recorded_api_time_ms` gives a duration), so derived arrivals are lower bounds: the manifest counts them
//!   (`arrivals_derived`). Dependencies on requests not seen earlier in the file (or forgotten, see below) are
//!   ignored and counted (`dependencies_unresolved`).
//! - `input_tokens` is the prompt the server sees. For mooncake-delta that is the accumulated context: a session's
//!   first row is read as is, a later row's prompt is the previous prompt plus the previous output plus its own
//!   `input_length`; if an earlier turn's lengths are unknown the prompt is null (`delta_context_unknown`). A later
//!   delta row's `hash_ids` cover only the delta, not the prompt, so its `prefix_hashes` are null
//!   (`delta_hash_ids_dropped`).
//! - `output_tokens` is `output_length`, else the number of `output_token_ids` (never the ids themselves).
//! - `prefix_hashes` are `hash_ids` with `block_size` 512 (`--block-size` when given), or the v2 header's
//!   `block_size`. With `"hash_id_scope":"local"` the ids are numbered per play (one Weka/AgentX trace): the
//!   same id in two plays is a different block. Those ids are stored as `xxh3_64(id as 8 little-endian bytes,
//!   seed = xxh3_64(play_id))`, so equal ids stay equal within a play and stop colliding across plays (the scope
//!   is `play_id`, else `session_id`, else the file). Without a header (global scope) the ids are stored unchanged.
//! - v2 `model` is the `model` column; `recorded_api_time_ms` (the latency the source recorded) is `e2e_s`.
//! - `workload_class` is `agent` for v2 and Applied Compute rows and for legacy rows with agentic keys.
//! - `tool_calls`: 1 for each Applied Compute tool-calling turn, 0 for its final turn; the number of `tool_events`
//!   of a legacy row.
//! - Applied Compute has no times: turn `k`'s prompt is `input_prompt_length` plus every earlier turn's assistant
//!   response and tool output, its output the turn's `assistant_response_length` (the last turn:
//!   `final_assistant_response_length`); every session's first turn arrives at `--start` and turn `k` at the previous
//!   turn's arrival plus the previous tool call's latency (again a lower bound: service time is not in the trace).
//! - The schema has no dependency column: dependencies, their triggers and relations, `wait_for`, tool waits,
//!   priorities and policy classes are counted in the manifest's details, never stored per row.
//! - Sessions are remembered for turn numbers, delays and delta contexts, at most 100,000 of them (least recently
//!   used forgotten, with one diagnostic and the count `sessions_evicted`; a forgotten session that comes back
//!   restarts at turn 0); request arrivals for dependencies, at most 100,000 (oldest forgotten).

mod applied;
mod plain;
mod record;
mod state;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::LazyLock;

use infertrace_adapter::parallel::map_lines_ahead;
use infertrace_adapter::time::millis_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use regex::bytes::Regex;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::sessions::{Digest, MAX_SESSIONS, RESTARTS_AT_TURN_0};
use record::{Id, Prepared, Record};
use state::{MAX_REQUESTS, Requests, Session, Sessions, Timing};

/// Tokens per `hash_ids` block in every Mooncake trace without a header that says otherwise.
pub(crate) const BLOCK_SIZE: u32 = 512;

/// The schema name of the agentic Mooncake header line.
const AGENTIC_SCHEMA: &str = "dynamo.agentic_mooncake";

/// The Mooncake JSONL trace adapter: Mooncake, agentic Mooncake (v2 and legacy) and Applied Compute agentic.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mooncake;

/// Mooncake lines read as Dynamo's `mooncake-delta`: a session's later rows carry only their new input.
#[derive(Debug, Clone, Copy, Default)]
pub struct MooncakeDelta;

/// The variant a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Mooncake,
    Delta,
    AgenticV2,
    AgenticLegacy,
    AppliedCompute,
}

impl Variant {
    fn format_version(self) -> Option<String> {
        let name = match self {
            Variant::Mooncake => return None,
            Variant::Delta => "mooncake-delta",
            Variant::AgenticV2 => "agentic_mooncake-v2",
            Variant::AgenticLegacy => "agentic_mooncake",
            Variant::AppliedCompute => "applied_compute_agentic",
        };
        Some(name.to_owned())
    }
}

static SIGNATURE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r#""input_length"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""output_length"\s*:\s*\d"#).expect("valid regex"),
        // RAGPulse uses the same keys but a map of hash ids and string timestamps; Mooncake has a list.
        Regex::new(r#""hash_ids"\s*:\s*\["#).expect("valid regex"),
    ]
});
static NUMERIC_TIMESTAMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""timestamp"\s*:\s*-?\d"#).expect("valid regex"));
/// Keys only agentic rows have: the v2 `not_before_ms` and the legacy `wait_for`/`tool_wait_ms`.
static AGENTIC_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""(?:not_before_ms|wait_for|tool_wait_ms)"\s*:"#).expect("valid regex"));
static AGENTIC_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\{\s*"schema"\s*:\s*"dynamo\.agentic_mooncake""#).expect("valid regex"));
static APPLIED_COMPUTE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r#""num_turns"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""input_prompt_length"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""assistant_response_length"\s*:\s*\["#).expect("valid regex"),
    ]
});

impl Adapter for Mooncake {
    fn id(&self) -> &'static str {
        "mooncake"
    }

    fn description(&self) -> &'static str {
        "Mooncake/Kimi JSONL trace (FAST'25, arXiv; Dynamo/AIPerf replay form, agentic_mooncake v2 and legacy, \
         applied_compute_agentic): ms arrivals, 512-token hash_ids"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        if !line.starts_with(b"{") {
            return None;
        }
        // Bailian lines carry Mooncake's keys too; their parent links are their own.
        if memchr::memmem::find(line, b"\"parent_chat_id\"").is_some() {
            return None;
        }
        if AGENTIC_HEADER.is_match(line) || APPLIED_COMPUTE.iter().all(|re| re.is_match(line)) {
            return Some(Confidence::High);
        }
        if !SIGNATURE.iter().all(|re| re.is_match(line)) {
            return None;
        }
        Some(if NUMERIC_TIMESTAMP.is_match(line) || AGENTIC_KEY.is_match(line) {
            Confidence::High
        } else {
            Confidence::Low
        })
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        parse(self.id(), false, input, ctx, sink)
    }
}

impl Adapter for MooncakeDelta {
    fn id(&self) -> &'static str {
        "mooncake-delta"
    }

    fn description(&self) -> &'static str {
        "Mooncake JSONL read as Dynamo's mooncake-delta (later session rows carry only new input; \
         prompts accumulated); chosen with --format, never detected"
    }

    fn detect_head(&self, _head: &Head<'_>) -> Option<Confidence> {
        // Delta lines are byte-for-byte Mooncake lines: only the user can say which reading is meant.
        None
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        parse(self.id(), true, input, ctx, sink)
    }
}

fn parse(
    source: &'static str,
    delta: bool,
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let mut parser = Parser::new(source, delta, ctx);
    let mut lines = LineReader::new(input);
    let digest = parser.digest.clone();
    let mut until_ahead = 0;
    map_lines_ahead(
        &mut lines,
        |bytes| prepare(bytes, &digest),
        |line_no, bytes, prepared, upcoming| {
            if until_ahead == 0 {
                parser.look_ahead(upcoming);
                until_ahead = LOOK_AHEAD;
            }
            until_ahead -= 1;
            // `prepare` read every line that is UTF-8 and not blank; the rest are reported (not UTF-8) or skipped.
            let Some(prepared) = prepared else {
                let _ = utf8_line(line_no, bytes, sink);
                return Ok(());
            };
            match prepared {
                Ok(record) => parser.record(line_no, record, sink)?,
                Err(message) => sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, message)),
            }
            Ok::<_, ParseError>(())
        },
    )?;
    let variant = parser.variant.unwrap_or(if delta { Variant::Delta } else { Variant::Mooncake });
    parser.counts.add("sessions", parser.sessions.started);
    parser.counts.add("sessions_evicted", parser.sessions.evicted);
    Ok(ParseReport {
        format_version: variant.format_version(),
        clock_domain: ClockDomain::Relative,
        year: None,
        lines: lines.lines_read(),
        details: parser.counts.into_details(),
    })
}

/// Rows whose table slots [`Parser::look_ahead`] reads at once.
const LOOK_AHEAD: usize = 16;

/// The pure part of reading a line, done by [`map_lines_ahead`] on any thread: the JSON record with its ids' digests, or
/// the message of why it is not one. `None` for lines that are not UTF-8 or blank, which the fold reports or skips.
fn prepare(bytes: &[u8], digest: &Digest) -> Option<Result<Prepared, String>> {
    let line = infertrace_adapter::utf8(bytes)?;
    (!line.trim_ascii().is_empty()).then(|| {
        // The common row by hand; anything else, and every error, as serde_json reads it.
        let record = match plain::read(line) {
            Some(record) => record,
            None => serde_json::from_str::<Record<'_>>(line).map_err(|e| json::error_message(&e))?,
        };
        Ok(record.prepare(digest))
    })
}

/// Run-level facts for the manifest; only non-zero counts are written.
#[derive(Debug, Default)]
struct Counts {
    values: BTreeMap<&'static str, u64>,
    relations: BTreeMap<&'static str, u64>,
    triggers: BTreeMap<&'static str, u64>,
    header: BTreeMap<&'static str, serde_json::Value>,
}

impl Counts {
    fn add(&mut self, key: &'static str, n: u64) {
        if n > 0 {
            *self.values.entry(key).or_default() += n;
        }
    }

    fn into_details(self) -> BTreeMap<String, serde_json::Value> {
        let mut details: BTreeMap<String, serde_json::Value> =
            self.values.into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect();
        if !self.relations.is_empty() {
            details.insert("dependency_relations".into(), serde_json::to_value(self.relations).unwrap_or_default());
        }
        if !self.triggers.is_empty() {
            details.insert("dependency_triggers".into(), serde_json::to_value(self.triggers).unwrap_or_default());
        }
        if !self.header.is_empty() {
            details.insert("header".into(), serde_json::to_value(self.header).unwrap_or_default());
        }
        details
    }
}

/// Where a parse is: the variant, the header's settings and the bounded cross-line state.
struct Parser<'c> {
    source: &'static str,
    ctx: &'c ParseContext<'c>,
    stem: String,
    delta: bool,
    variant: Option<Variant>,
    block_size: u32,
    local_scope: bool,
    /// Keys the two tables; a copy computes the keys of each line where it is parsed.
    digest: Digest,
    sessions: Sessions,
    requests: Requests,
    counts: Counts,
}

impl<'c> Parser<'c> {
    fn new(source: &'static str, delta: bool, ctx: &'c ParseContext<'c>) -> Self {
        Self {
            source,
            ctx,
            stem: ctx.source_stem().to_owned(),
            delta,
            variant: None,
            block_size: ctx.options.block_size.filter(|&b| b > 0).unwrap_or(BLOCK_SIZE),
            local_scope: false,
            digest: Digest::default(),
            sessions: Sessions::new(MAX_SESSIONS),
            requests: Requests::new(MAX_REQUESTS),
            counts: Counts::default(),
        }
    }

    /// Reads, all at once, the slots of the session and request tables that the next [`LOOK_AHEAD`] records will
    /// look up or forget. With 100,000 entries each the tables are larger than the cache, and every lookup misses
    /// it twice (the control bytes, then the entry); one after another, those misses were a third of the fold's
    /// time. Read together they overlap, and the lookups that follow find the slots in the cache. Only reads: the
    /// rows written do not depend on it (nor on which records `upcoming` holds).
    fn look_ahead(&self, upcoming: &[Option<Result<Prepared, String>>]) {
        let records = || upcoming.iter().take(LOOK_AHEAD).flatten().flatten();
        let found = self.sessions.look_ahead(records().filter_map(|r| r.session_key), LOOK_AHEAD)
            + self.requests.look_ahead(records().filter_map(|r| r.request_key), LOOK_AHEAD);
        std::hint::black_box(found);
    }

    /// One record, as [`prepare`] made it.
    fn record(&mut self, line: u64, record: Prepared, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let variant = match self.variant {
            Some(variant) => variant,
            None => {
                let variant = if self.delta {
                    Variant::Delta
                } else if record.rest().schema.as_deref() == Some(AGENTIC_SCHEMA) {
                    self.variant = Some(Variant::AgenticV2);
                    self.header(line, record.rest(), sink);
                    return Ok(());
                } else if record.rest().has_applied_compute_keys() {
                    Variant::AppliedCompute
                } else if record.rest().has_agentic_keys() {
                    Variant::AgenticLegacy
                } else {
                    Variant::Mooncake
                };
                *self.variant.insert(variant)
            }
        };
        match variant {
            Variant::AppliedCompute => applied::expand(self, line, record.rest(), sink),
            Variant::Mooncake if record.rest().has_agentic_keys() => {
                self.variant = Some(Variant::AgenticLegacy);
                self.row(line, variant, record, sink)
            }
            _ => self.row(line, variant, record, sink),
        }
    }

    /// The agentic v2 header: block size and hash-id scope for every later row.
    fn header(&mut self, line: u64, record: &Record<'_>, sink: &mut dyn Sink) {
        let diagnostic = |kind, message: &str| Diagnostic::new(line, kind, message);
        match record.version {
            Some(2) => {}
            Some(_) => sink.diagnostic(diagnostic(
                DiagnosticKind::Inconsistent,
                "header `version` is not 2; rows are read as version 2",
            )),
            None => sink.diagnostic(diagnostic(DiagnosticKind::MissingField, "missing field `version` in the header")),
        }
        if let Some(version) = record.version {
            self.counts.header.insert("version", version.into());
        }
        match record.block_size.map(u32::try_from) {
            Some(Ok(size)) if size > 0 => self.block_size = size,
            Some(_) => sink.diagnostic(diagnostic(
                DiagnosticKind::InvalidValue,
                "header `block_size` is zero or too large; 512 is used",
            )),
            None => sink.diagnostic(diagnostic(
                DiagnosticKind::MissingField,
                "missing field `block_size` in the header; 512 is used",
            )),
        }
        self.counts.header.insert("block_size", self.block_size.into());
        match record.hash_id_scope.as_deref() {
            Some("local") => self.local_scope = true,
            Some(_) => sink.diagnostic(diagnostic(
                DiagnosticKind::InvalidValue,
                "header `hash_id_scope` is not `local`; hash ids are kept unscoped",
            )),
            None => sink.diagnostic(diagnostic(
                DiagnosticKind::MissingField,
                "missing field `hash_id_scope` in the header; hash ids are kept unscoped",
            )),
        }
        self.counts.header.insert("hash_id_scope", if self.local_scope { "local" } else { "global" }.into());
    }

    /// One request row of every variant but Applied Compute.
    fn row(
        &mut self,
        line: u64,
        variant: Variant,
        mut record: Prepared,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let Some(input_length) = record.input_length else {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "missing field `input_length`"));
            return Ok(());
        };
        // The ids and hash ids are moved out of the record, which owns them, rather than copied.
        let session_id = record.session_id.take();
        let request_id = record.request_id.take();
        let hash_ids = record.hash_ids.take();
        let record = &record;
        let rest = record.rest();
        let agentic_row = rest.has_agentic_keys();
        self.counts.add("rows_with_priority", u64::from(record.prioritized));
        let output_length = match (record.output_length, record.output_token_ids) {
            (Some(n), _) => Some(n),
            (None, Some(ids)) => {
                self.counts.add("output_lengths_from_token_ids", 1);
                Some(ids.0)
            }
            (None, None) => None,
        };

        // The session: turn index, previous arrival and (delta) context.
        let session_key = record.session_key;
        let previous = session_key
            .map(|key| self.sessions.touch_reporting(key, line, RESTARTS_AT_TURN_0, sink).unwrap_or_default());

        let mut row = RequestRow {
            request_id: request_id.unwrap_or_else(|| format!("{}:{line}", self.stem)),
            source: self.source.to_owned(),
            model: rest.model.as_deref().map(str::to_owned),
            session_id,
            turn: previous.map(|s| s.turns),
            status: Status::Unknown,
            source_file: Some(self.ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };

        // Prompt: the accumulated context for a later delta turn, the row's length otherwise.
        let later_delta_turn = variant == Variant::Delta && previous.is_some_and(|s| s.turns > 0);
        let prompt = if later_delta_turn {
            let context = previous.and_then(|s| s.context).and_then(|c| c.checked_add(input_length));
            if context.is_none() {
                self.counts.add("delta_context_unknown", 1);
            }
            context
        } else {
            Some(input_length)
        };
        row.input_tokens = prompt.and_then(|n| crate::token_count(n, "input_length", line, sink));
        row.output_tokens = output_length.and_then(|n| crate::token_count(n, "output_length", line, sink));

        row.arrival_time = self.arrival(line, variant, record, previous, sink);
        if let Some(ms) = rest.recorded_api_time_ms {
            row.e2e_s = (ms.is_finite() && ms >= 0.0).then_some(ms / 1000.0);
            if row.e2e_s.is_none() {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    "`recorded_api_time_ms` is negative or not finite",
                ));
            }
        }

        if let Some(hash_ids) = hash_ids {
            let block = u64::from(self.block_size);
            let needed = input_length.div_ceil(block);
            if hash_ids.len() as u64 != needed {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!(
                        "`hash_ids` has {} blocks but input_length {input_length} spans {needed} blocks of {block} \
                         tokens",
                        hash_ids.len()
                    ),
                ));
            }
            if later_delta_turn {
                self.counts.add("delta_hash_ids_dropped", 1);
            } else {
                row.prefix_hashes = Some(if self.local_scope {
                    let scope = rest.play_id.as_ref().map(Id::to_key).or(row.session_id.as_deref().map(Cow::from));
                    let seed = xxh3_64(scope.as_deref().unwrap_or_default().as_bytes());
                    hash_ids.iter().map(|id| xxh3_64_with_seed(&id.to_le_bytes(), seed)).collect()
                } else {
                    hash_ids
                });
                row.block_size = Some(self.block_size);
            }
        }

        if variant == Variant::AgenticV2 || agentic_row {
            row.workload_class = Some(WorkloadClass::Agent);
        }
        if let Some(events) = rest.tool_events {
            row.tool_calls = Some(u32::try_from(events.0).unwrap_or(u32::MAX));
        }

        if let (Some(key), Some(session)) = (session_key, previous) {
            let context = prompt.zip(output_length).and_then(|(p, o)| p.checked_add(o));
            let next = Session { turns: session.turns.saturating_add(1), arrival: row.arrival_time, context };
            self.sessions.set(key, next);
        }
        if let Some(key) = record.request_key {
            // The row's id is the record's.
            let service = row.e2e_s.and_then(|s| millis_to_nanos(s * 1000.0));
            self.requests.insert(key, Timing { arrival: row.arrival_time, service });
        }
        sink.request(row)
    }

    /// When the row's request arrives (see the module documentation for the rules).
    fn arrival(
        &mut self,
        line: u64,
        variant: Variant,
        prepared: &Prepared,
        previous: Option<Session>,
        sink: &mut dyn Sink,
    ) -> Option<i64> {
        let record = prepared.rest();
        if variant == Variant::AgenticV2 {
            let not_before = match record.not_before_ms {
                Some(ms) => self.instant(ms, "not_before_ms", line, sink),
                None => {
                    sink.diagnostic(Diagnostic::new(
                        line,
                        DiagnosticKind::MissingField,
                        "missing field `not_before_ms`",
                    ));
                    None
                }
            };
            let mut latest: Option<i64> = None;
            for dependency in record.dependencies.iter().flatten() {
                self.counts.add("dependencies", 1);
                let trigger = vocabulary(dependency.trigger.as_deref(), &["dispatch", "completion"]);
                let relation =
                    vocabulary(dependency.relation.as_deref(), &["sequence", "spawn", "join", "replay_barrier"]);
                *self.counts.triggers.entry(trigger).or_default() += 1;
                *self.counts.relations.entry(relation).or_default() += 1;
                let timing =
                    dependency.request_id.as_ref().and_then(|id| self.requests.get(self.digest.key(&id.to_key())));
                let Some(Timing { arrival: Some(arrival), service }) = timing else {
                    self.counts.add("dependencies_unresolved", 1);
                    continue;
                };
                let after = if trigger == "completion" { service.unwrap_or(0) } else { 0 };
                let delay = self.duration(dependency.delay_ms, "delay_ms", line, sink);
                let fired = arrival.checked_add(after).and_then(|t| t.checked_add(delay));
                latest = latest.max(fired);
            }
            return match (not_before, latest) {
                (Some(n), Some(l)) if l > n => {
                    self.counts.add("arrivals_derived", 1);
                    Some(l)
                }
                (None, Some(l)) => {
                    self.counts.add("arrivals_derived", 1);
                    Some(l)
                }
                (n, _) => n,
            };
        }

        let wait = self.duration(prepared.delay, "delay", line, sink).checked_add(self.duration(
            record.tool_wait_ms,
            "tool_wait_ms",
            line,
            sink,
        ));
        if let Some(ids) = record.wait_for.as_ref().filter(|ids| !ids.is_empty()) {
            self.counts.add("wait_for", ids.len() as u64);
            let mut latest: Option<i64> = None;
            for id in ids {
                match self.requests.get(self.digest.key(&id.to_key())).and_then(|t| t.arrival) {
                    Some(arrival) => latest = latest.max(Some(arrival)),
                    None => self.counts.add("dependencies_unresolved", 1),
                }
            }
            if let Some(arrival) = latest.zip(wait).and_then(|(a, w)| a.checked_add(w)) {
                self.counts.add("arrivals_derived", 1);
                return Some(arrival);
            }
        }
        if let Some(ms) = prepared.timestamp {
            return self.instant(ms, "timestamp", line, sink);
        }
        let previous_arrival = previous.filter(|s| s.turns > 0).and_then(|s| s.arrival);
        let arrival = previous_arrival.zip(wait).and_then(|(a, w)| a.checked_add(w));
        if arrival.is_some() {
            self.counts.add("arrivals_derived", 1);
        }
        arrival
    }

    /// `ms` after `--start`, or a diagnostic naming `field`.
    fn instant(&self, ms: f64, field: &str, line: u64, sink: &mut dyn Sink) -> Option<i64> {
        let instant = millis_to_nanos(ms).and_then(|ns| ns.checked_add(self.ctx.options.start_ns));
        if instant.is_none() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("`{field}` is out of the representable range"),
            ));
        }
        instant
    }

    /// A delay in nanoseconds: 0 when absent, and 0 with a diagnostic when negative or out of range.
    fn duration(&self, ms: Option<f64>, field: &str, line: u64, sink: &mut dyn Sink) -> i64 {
        let Some(ms) = ms else { return 0 };
        match millis_to_nanos(ms).filter(|ns| *ns >= 0) {
            Some(ns) => ns,
            None => {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    format!("`{field}` is negative or out of range; 0 is used"),
                ));
                0
            }
        }
    }
}

/// `value` if it is one of `known`, else `other` (so that details never carry free text).
fn vocabulary(value: Option<&str>, known: &[&'static str]) -> &'static str {
    match value {
        Some(value) => known.iter().copied().find(|k| *k == value).unwrap_or("other"),
        None => "missing",
    }
}

#[cfg(test)]
mod tests;
