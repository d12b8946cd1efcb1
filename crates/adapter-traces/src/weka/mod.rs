//! WEKA kv-cache-tester traces: real Claude Code sessions, one JSON document per conversation.
//!
//! # Format
//!
//! `callanjfox/kv-cache-tester` `traces/trace_NNNN.json` ("weka trace" v1; AIPerf's Pydantic model
//! `weka_trace_models.py`, Dynamo's replay `--trace-format weka`), one object per file, written on one line:
//!
//! ```text
//! {"id":"trace_0504","models":["claude-sonnet-4-20250514"],"block_size":64,"hash_id_scope":"local",
//!  "tool_tokens":9545,"system_tokens":1212,
//!  "requests":[{"t":0.0,"type":"n","model":"claude-sonnet-4-20250514","in":11133,"out":139,"hash_ids":[1,2,…,173],
//!               "input_types":["text"],"output_types":["text","tool_use"],"stop":"tool_use","api_time":8.79,
//!               "think_time":0.0},
//!              {"t":3075.0,"type":"s",…,"api_time":3.38,"ttft":1.75,"think_time":3058.0},
//!              {"t":1148.013,"type":"subagent","agent_id":"agent_001","subagent_type":"Explore",
//!               "duration_ms":46656,"total_tokens":71361,"tool_use_count":7,"status":"completed",
//!               "requests":[{"t":0.0,"type":"n",…},…],"models":[…],"tool_tokens":7401,"system_tokens":1465}],
//!  "totals":{"parent_tokens":{"input":…,"output":…},"subagent_tokens":{…},"combined_tokens":{…},
//!            "subagent_count":2}}
//! ```
//!
//! `t` is seconds since the conversation started, `in`/`out` tokens, `hash_ids` one id per full `block_size`-token
//! block of the prompt (`len(hash_ids) == floor(in / block_size)` in every corpus file), numbered per trace when
//! `hash_id_scope` is `local` and across traces when `global`. `type` is `n` (non-streaming) or `s` (streaming, which
//! may add `ttft`, seconds); `api_time` is the call's duration (s), `think_time` the client's delay before the call
//! (s), `stop` Anthropic's stop reason. A `subagent` marker holds the sub-agent's own calls in `requests`, whose `t`
//! counts from the marker's `t` (the first nested call is at 0.0 in every corpus file).
//! The kv-cache-tester documentation shows an earlier form without `hash_id_scope`, timings or `totals`
//! (`format_version` `v0`); files with `hash_id_scope` are `v1`.
//!
//! # Mapping and decisions
//!
//! - One row per call (`n` or `s`), written as soon as its object closes; sub-agent markers write no row.
//!   `workload_class` is `agent`, `status` `unknown` (the trace records no outcome), `model` as written.
//! - `session_id` is the trace `id` (the file stem when `id` is absent). A sub-agent's calls have their own session,
//!   `<parent session>/<agent_id>` (e.g. `trace_0291/agent_001`): the schema has no parent column, so the parent is
//!   the part before the last `/`. `turn` is the call's position among its session's calls, from 0 (markers do not
//!   count), and `request_id` is `<session_id>:<turn>`.
//! - `arrival_time` is `--start` plus `t`, plus the marker's `t` for a sub-agent's calls (nested markers add up).
//! - `ttft` → `ttft_s` and `api_time` → `e2e_s`; no instant is derived from them (`t` is rounded to whole seconds
//!   after the first call, `api_time` is not). `stop` → `finish_reason` when it is one of Anthropic's stop reasons
//!   (`end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `pause_turn`, `refusal`); `""` is null.
//! - `think_time` has no column: it is the gap between the previous call's end and this call's `t`, which the
//!   arrivals already hold. Its count, sum and maximum go to `details.think_time_s`.
//! - `prefix_hashes` are the `hash_ids` chained: `h[i] = xxh3_64(id_i as 8 little-endian bytes, seed = h[i-1])`
//!   with `h[-1] = xxh3_64(trace id)` for the `local` scope (so `h[0]` is what the Mooncake adapter stores for the
//!   same id under `play_id` = trace id, and equal ids of two traces never give equal hashes) and `h[-1] = 0` for
//!   `global`. Chaining makes hash `i` stand for the whole prefix, as the schema requires, whatever the ids meant.
//!   Sub-agents share their trace's scope (their ids continue the trace's numbering, and two sub-agents with the
//!   same prompt start share ids). A file without `hash_id_scope` (v0) is read as `local`, which never invents
//!   sharing between traces. `block_size` is the file's (64 when absent). A `hash_ids` length other than
//!   `floor(in / block_size)` or `ceil(in / block_size)` is an `inconsistent` diagnostic; the hashes are kept.
//! - `details`: `trace_id`, `block_size`, `hash_id_scope`, `models`, `tool_tokens`, `system_tokens`, counts of
//!   calls, streaming calls, sub-agents and their calls, sub-agent types (`Explore`, `Plan`, `general-purpose`,
//!   others as `other`: custom agent names are not copied) and statuses, their `tool_use_count` sum, stop reasons,
//!   `think_time_s`, and the numbers of `totals`. `totals` are checked against the calls read (input and output
//!   tokens of the parent and of the sub-agents, the sub-agent count): a difference is an `inconsistent` diagnostic.
//! - Never read: `input_types`, `output_types` and every key not named here are skipped unread; `subagent_type`,
//!   `status` and `stop` are only compared with their vocabularies.
//!
//! # Streaming
//!
//! The document is read with a serde visitor: each call keeps its numbers and its `hash_ids` until its object
//! closes, then its row is written, so memory is bounded by the largest call, not by the file. Rows need the
//! trace's `id`, `block_size` and `hash_id_scope`, which every known writer puts before `requests`; should
//! `requests` come first, the file stem, 64 and `local` are used and a later key that differs is an `inconsistent`
//! diagnostic. Likewise a marker's `agent_id` and `t` must precede its `requests`: otherwise the sub-agent's session
//! is named `<parent>/subagent-<k>` (its 1-based position among the parent's markers) or its arrivals are null,
//! with a diagnostic. Files are one line, so `source_line` is the line where the call's object closes.

pub mod generate;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, Read};
use std::sync::LazyLock;

use infertrace_adapter::json::Scalar;
use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, ParseContext, ParseError, ParseReport, Sink, json,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use regex::Regex;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Tokens per `hash_ids` block when the file does not say.
pub const DEFAULT_BLOCK_SIZE: u32 = 64;

/// Anthropic's stop reasons, kept as `finish_reason`.
const STOP_REASONS: &[&str] = &["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"];
/// Claude Code's built-in sub-agent types; custom agents are counted as `other`.
const SUBAGENT_TYPES: &[&str] = &["Explore", "Plan", "general-purpose", "statusline-setup", "output-style-setup"];
/// Sub-agent statuses the traces write.
const SUBAGENT_STATUSES: &[&str] = &["completed", "async_launched"];

/// The WEKA kv-cache-tester trace adapter (`weka-trace`).
#[derive(Debug, Clone, Copy, Default)]
pub struct WekaTrace;

impl WekaTrace {
    /// Format id.
    pub const ID: &'static str = "weka-trace";
}

/// `"in": <digits>`, the key only WEKA calls have.
static CALL_KEYS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r#""in"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""out"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""hash_ids"\s*:\s*\["#).expect("valid regex"),
    ]
});

impl Adapter for WekaTrace {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "WEKA kv-cache-tester Claude Code traces (one JSON per conversation, v0 and v1 with nested sub-agents): \
         64-token hash_ids, recorded ttft and api_time"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if !text.starts_with('{') || !text.contains("\"requests\"") || text.contains("\"dynamo.agentic_mooncake\"") {
            return None;
        }
        let header = text.contains("\"block_size\"")
            && ["\"hash_id_scope\"", "\"tool_tokens\"", "\"system_tokens\""].iter().any(|k| text.contains(k));
        if header {
            return Some(Confidence::High);
        }
        CALL_KEYS.iter().all(|re| re.is_match(text)).then_some(Confidence::Low)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        parse(input, ctx, sink)
    }
}

/// The chained prefix hashes of per-block ids: `h[i] = xxh3_64(id_i as 8 little-endian bytes, seed = h[i-1])`,
/// `h[-1] = seed`. Equal hashes mean equal ids at every position up to there.
pub(crate) fn chain_block_ids(ids: &[u64], seed: u64) -> Vec<u64> {
    let mut previous = seed;
    ids.iter()
        .map(|id| {
            previous = xxh3_64_with_seed(&id.to_le_bytes(), previous);
            previous
        })
        .collect()
}

/// `value` if it is one of `known`, else `other`, so that details never carry free text.
pub(crate) fn vocabulary(value: Option<&str>, known: &[&'static str]) -> &'static str {
    match value {
        Some(value) => known.iter().copied().find(|k| *k == value).unwrap_or("other"),
        None => "missing",
    }
}

/// Counts the newlines of what passes through; serde_json reads one byte at a time, so the count is the parser's
/// line.
struct CountingReader<'r> {
    inner: &'r mut dyn BufRead,
    newlines: &'r Cell<u64>,
    last: Option<u8>,
}

impl Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = &buf[..n];
        self.newlines.set(self.newlines.get() + memchr::memchr_iter(b'\n', read).count() as u64);
        if let Some(&last) = read.last() {
            self.last = Some(last);
        }
        Ok(n)
    }
}

/// The settings every row of the trace uses, fixed when `requests` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    trace_id: String,
    block_size: u32,
    local: bool,
}

impl Settings {
    fn seed(&self) -> u64 {
        if self.local { xxh3_64(self.trace_id.as_bytes()) } else { 0 }
    }
}

/// Sums checked against `totals`.
#[derive(Debug, Default, Clone, Copy)]
struct Tokens {
    input: u64,
    output: u64,
}

/// Run-level facts for the manifest.
#[derive(Debug, Default)]
struct Counts {
    values: BTreeMap<&'static str, u64>,
    subagent_types: BTreeMap<&'static str, u64>,
    subagent_statuses: BTreeMap<&'static str, u64>,
    stop_reasons: BTreeMap<&'static str, u64>,
    think: (u64, f64, f64),
    parent: Tokens,
    subagents: Tokens,
    markers: u64,
}

impl Counts {
    fn add(&mut self, key: &'static str, n: u64) {
        *self.values.entry(key).or_default() += n;
    }
}

/// Everything the streamed document leaves behind besides the rows it wrote.
struct State<'a> {
    sink: &'a mut dyn Sink,
    ctx: &'a ParseContext<'a>,
    newlines: &'a Cell<u64>,
    /// The first failure to write a row; the parse stops and returns it.
    write_error: Option<DatasetError>,
    trace_id: Option<String>,
    block_size: Option<u32>,
    scope: Option<&'static str>,
    /// Set when `requests` starts.
    settings: Option<Settings>,
    saw_requests: bool,
    header: BTreeMap<&'static str, Value>,
    /// The numbers of `totals`, and the line it ended on.
    totals: Option<(u64, Value)>,
    counts: Counts,
}

impl State<'_> {
    fn line(&self) -> u64 {
        self.newlines.get() + 1
    }

    fn diagnostic(&mut self, kind: DiagnosticKind, message: impl Into<String>) {
        let line = self.line();
        self.sink.diagnostic(Diagnostic::new(line, kind, message));
    }

    /// The settings rows use, fixed on first use from what the header said so far.
    fn settings(&mut self) -> Settings {
        if let Some(settings) = &self.settings {
            return settings.clone();
        }
        let settings = Settings {
            trace_id: self.trace_id.clone().unwrap_or_else(|| self.ctx.source_stem().to_owned()),
            block_size: self.block_size.unwrap_or(DEFAULT_BLOCK_SIZE),
            local: self.scope != Some("global"),
        };
        self.settings = Some(settings.clone());
        settings
    }

    /// Reports a header key read after the rows were written with another value.
    fn check_late(&mut self, key: &str, differs: bool) {
        if self.saw_requests && differs {
            self.diagnostic(
                DiagnosticKind::Inconsistent,
                format!("`{key}` follows `requests` and differs from the value the rows used"),
            );
        }
    }
}

fn parse(input: &mut dyn BufRead, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let newlines = Cell::new(0);
    // Leading whitespace and a byte-order mark are skipped; an input with nothing else holds no trace.
    let mut bom_checked = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(report(newlines.get(), None, BTreeMap::new()));
        }
        let mut skip = 0;
        if !bom_checked && buf.starts_with(b"\xef\xbb\xbf") {
            skip = 3;
        }
        bom_checked = true;
        let rest = &buf[skip..];
        let blank = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        newlines.set(newlines.get() + rest[..blank].iter().filter(|&&b| b == b'\n').count() as u64);
        let done = blank < rest.len();
        input.consume(skip + blank);
        if done {
            break;
        }
    }

    let mut state = State {
        sink,
        ctx,
        newlines: &newlines,
        write_error: None,
        trace_id: None,
        block_size: None,
        scope: None,
        settings: None,
        saw_requests: false,
        header: BTreeMap::new(),
        totals: None,
        counts: Counts::default(),
    };
    let mut reader = CountingReader { inner: input, newlines: &newlines, last: None };
    let mut de = serde_json::Deserializer::from_reader(&mut reader);
    let result = Document(&mut state).deserialize(&mut de).and_then(|object| {
        de.end()?;
        Ok(object)
    });
    drop(de);
    let lines = newlines.get() + u64::from(reader.last.is_some_and(|b| b != b'\n'));
    if let Some(e) = state.write_error.take() {
        return Err(ParseError::Write(e));
    }
    match result {
        Ok(true) => finish(&mut state, lines.max(1)),
        Ok(false) => {}
        Err(e) if e.is_io() => return Err(ParseError::Read(e.into())),
        Err(e) => {
            let line = e.line() as u64;
            let message = match e.classify() {
                serde_json::error::Category::Syntax if e.to_string().starts_with("trailing characters") => {
                    "content after the JSON document is ignored".to_owned()
                }
                _ => json::error_message(&e),
            };
            state.sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedJson, message));
        }
    }
    let version = state.saw_requests.then(|| if state.scope.is_some() { "v1" } else { "v0" });
    let details = details(state);
    Ok(report(lines, version, details))
}

fn report(lines: u64, version: Option<&str>, details: BTreeMap<String, Value>) -> ParseReport {
    ParseReport {
        format_version: version.map(str::to_owned),
        clock_domain: ClockDomain::Relative,
        year: None,
        lines,
        details,
    }
}

/// End-of-document checks: `requests` present, `totals` matching the calls read. `last_line` is the document's.
fn finish(state: &mut State<'_>, last_line: u64) {
    if !state.saw_requests {
        let line = state.line().min(last_line);
        state.sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "missing field `requests`"));
        return;
    }
    let Some((line, totals)) = state.totals.take() else { return };
    let counts = &state.counts;
    let checks = [
        ("parent_tokens", "input", counts.parent.input),
        ("parent_tokens", "output", counts.parent.output),
        ("subagent_tokens", "input", counts.subagents.input),
        ("subagent_tokens", "output", counts.subagents.output),
    ];
    let mut differ: Vec<String> = checks
        .iter()
        .filter_map(|&(group, key, read)| {
            let written = totals.get(group)?.get(key)?.as_u64()?;
            (written != read).then(|| format!("totals.{group}.{key} is {written} but the calls sum to {read}"))
        })
        .collect();
    if let Some(written) = totals.get("subagent_count").and_then(Value::as_u64)
        && written != counts.markers
    {
        differ.push(format!("totals.subagent_count is {written} but {} sub-agents were read", counts.markers));
    }
    state.header.insert("totals", totals);
    for message in differ {
        state.sink.diagnostic(Diagnostic::new(line, DiagnosticKind::Inconsistent, message));
    }
}

fn details(state: State<'_>) -> BTreeMap<String, Value> {
    let mut details: BTreeMap<String, Value> = state.header.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    if let Some(settings) = &state.settings {
        details.insert("trace_id".into(), settings.trace_id.clone().into());
        details.insert("block_size".into(), settings.block_size.into());
        details.insert("hash_id_scope".into(), if settings.local { "local" } else { "global" }.into());
    }
    let counts = state.counts;
    for (key, value) in counts.values {
        details.insert(key.to_owned(), value.into());
    }
    if counts.markers > 0 {
        details.insert("subagents".into(), counts.markers.into());
    }
    for (key, map) in [
        ("subagent_types", counts.subagent_types),
        ("subagent_statuses", counts.subagent_statuses),
        ("stop_reasons", counts.stop_reasons),
    ] {
        if !map.is_empty() {
            details.insert(key.into(), serde_json::to_value(map).unwrap_or_default());
        }
    }
    let (n, sum, max) = counts.think;
    if n > 0 {
        details.insert("think_time_s".into(), serde_json::json!({"count": n, "sum": sum, "max": max}));
    }
    details
}

/// The numbers of `value`, nested objects included; `None` when nothing is left (strings are never copied).
fn numbers(value: Value) -> Option<Value> {
    match value {
        Value::Number(_) => Some(value),
        Value::Object(map) => {
            let kept: serde_json::Map<String, Value> =
                map.into_iter().filter_map(|(k, v)| numbers(v).map(|v| (k, v))).collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        _ => None,
    }
}

/// The whole document; yields whether it was an object.
struct Document<'s, 'a>(&'s mut State<'a>);

impl<'de> DeserializeSeed<'de> for Document<'_, '_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Document<'_, '_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a WEKA trace object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let state = self.0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => {
                    let id = match map.next_value::<Scalar>()?.0 {
                        Some(Value::String(id)) => Some(id),
                        Some(Value::Number(n)) => Some(n.to_string()),
                        _ => {
                            state.diagnostic(
                                DiagnosticKind::InvalidValue,
                                "`id` is not a string; the file stem is used",
                            );
                            None
                        }
                    };
                    if let Some(id) = id {
                        let differs = state.settings.as_ref().is_some_and(|s| s.trace_id != id);
                        state.check_late("id", differs);
                        state.trace_id = Some(id);
                    }
                }
                "block_size" => {
                    let size = map.next_value::<Scalar>()?.0.and_then(|v| v.as_u64());
                    match size.and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0) {
                        Some(size) => {
                            let differs = state.settings.as_ref().is_some_and(|s| s.block_size != size);
                            state.check_late("block_size", differs);
                            state.block_size = Some(size);
                        }
                        None => state.diagnostic(
                            DiagnosticKind::InvalidValue,
                            format!("`block_size` is not a positive integer; {DEFAULT_BLOCK_SIZE} is used"),
                        ),
                    }
                }
                "hash_id_scope" => {
                    let scope = match map.next_value::<Scalar>()?.0 {
                        Some(Value::String(s)) if s == "local" => "local",
                        Some(Value::String(s)) if s == "global" => "global",
                        _ => {
                            state.diagnostic(
                                DiagnosticKind::InvalidValue,
                                "`hash_id_scope` is neither `local` nor `global`; `local` is used",
                            );
                            "local"
                        }
                    };
                    let differs = state.settings.as_ref().is_some_and(|s| s.local != (scope == "local"));
                    state.check_late("hash_id_scope", differs);
                    state.scope = Some(scope);
                }
                "tool_tokens" | "system_tokens" => {
                    if let Some(n @ Value::Number(_)) = map.next_value::<Scalar>()?.0 {
                        state.header.insert(if key == "tool_tokens" { "tool_tokens" } else { "system_tokens" }, n);
                    }
                }
                "models" => {
                    // Model names, as the `model` column has them; anything else in the list is dropped.
                    if let Value::Array(models) = map.next_value::<Value>()? {
                        let models: Vec<Value> = models.into_iter().filter(Value::is_string).take(64).collect();
                        state.header.insert("models", Value::Array(models));
                    }
                }
                "requests" => {
                    let session = state.settings().trace_id;
                    state.saw_requests = true;
                    map.next_value_seed(Requests { state: &mut *state, session: &session, offset: Some(0), depth: 0 })?;
                }
                "totals" => {
                    let totals = numbers(map.next_value::<Value>()?);
                    state.totals = totals.map(|t| (state.line(), t));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(true)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.0.diagnostic(DiagnosticKind::NotARecord, "the document is not a JSON object");
        Ok(false)
    }
    infertrace_adapter::scalars_as_unit!(bool);
}

/// A `requests` list: the trace's, or a sub-agent's.
struct Requests<'s, 'a, 'p> {
    state: &'s mut State<'a>,
    session: &'p str,
    /// When the list's `t` counts from, in nanoseconds after `--start`; `None` when unknown.
    offset: Option<i64>,
    /// 0 for the trace's own calls.
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for Requests<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Requests<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of requests")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut list = List { session: self.session, offset: self.offset, depth: self.depth, calls: 0, markers: 0 };
        while seq.next_element_seed(Element { state: &mut *self.state, list: &mut list })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.state.diagnostic(DiagnosticKind::MalformedRecord, "`requests` is not a list");
        Ok(())
    }
    infertrace_adapter::scalars_as_unit!(());
}

/// Where one `requests` list is.
struct List<'p> {
    session: &'p str,
    offset: Option<i64>,
    depth: u32,
    /// Calls seen so far: the next call's turn.
    calls: u32,
    /// Sub-agent markers seen so far.
    markers: u32,
}

/// A present field: `None` when it was null, a list or an object.
type Field = Option<Option<Value>>;

/// The keys kept of one element of `requests`.
#[derive(Debug, Default)]
struct Fields {
    t: Field,
    kind: Field,
    model: Field,
    input: Field,
    output: Field,
    api_time: Field,
    think_time: Field,
    ttft: Field,
    stop: Field,
    agent_id: Field,
    subagent_type: Field,
    status: Field,
    tool_use_count: Field,
    hash_ids: Option<Ids>,
    /// Whether the element had a nested `requests` list (a sub-agent marker).
    nested: bool,
}

/// One element of a `requests` list: a call or a sub-agent marker.
struct Element<'s, 'a, 'l, 'p> {
    state: &'s mut State<'a>,
    list: &'l mut List<'p>,
}

impl<'de> DeserializeSeed<'de> for Element<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Element<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.state;
        let list = self.list;
        let mut f = Fields::default();
        while let Some(key) = map.next_key::<String>()? {
            let slot = match key.as_str() {
                "t" => &mut f.t,
                "type" => &mut f.kind,
                "model" => &mut f.model,
                "in" => &mut f.input,
                "out" => &mut f.output,
                "api_time" => &mut f.api_time,
                "think_time" => &mut f.think_time,
                "ttft" => &mut f.ttft,
                "stop" => &mut f.stop,
                "agent_id" => &mut f.agent_id,
                "subagent_type" => &mut f.subagent_type,
                "status" => &mut f.status,
                "tool_use_count" => &mut f.tool_use_count,
                "hash_ids" => {
                    f.hash_ids = Some(map.next_value::<Ids>()?);
                    continue;
                }
                "requests" if !f.nested => {
                    f.nested = true;
                    list.markers += 1;
                    let (session, offset) = subagent_session(state, list, &f);
                    map.next_value_seed(Requests {
                        state: &mut *state,
                        session: &session,
                        offset,
                        depth: list.depth.saturating_add(1),
                    })?;
                    continue;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<Scalar>()?.0);
        }
        let kind = match &f.kind {
            Some(Some(Value::String(kind))) => Some(kind.as_str()),
            _ => None,
        };
        if f.nested || kind == Some("subagent") {
            if !f.nested {
                list.markers += 1;
                state.diagnostic(DiagnosticKind::MissingField, "missing field `requests` in a sub-agent marker");
            }
            subagent(state, &f);
            return Ok(());
        }
        match kind {
            Some("n" | "s") => {}
            None if f.kind.is_none() && f.input.is_some() => {
                state.diagnostic(DiagnosticKind::MissingField, "missing field `type`; read as a call");
            }
            None if f.kind.is_none() => {
                state.diagnostic(DiagnosticKind::MalformedRecord, "missing fields `type` and `in`");
                return Ok(());
            }
            _ => {
                state.diagnostic(DiagnosticKind::MalformedRecord, "`type` is not `n`, `s` or `subagent`");
                return Ok(());
            }
        }
        let turn = list.calls;
        list.calls = list.calls.saturating_add(1);
        let row = call(state, list, turn, kind == Some("s"), f);
        if let Some(row) = row
            && let Err(e) = state.sink.request(row)
        {
            state.write_error = Some(e);
            return Err(de::Error::custom("writing rows failed"));
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.state.diagnostic(DiagnosticKind::NotARecord, "an element of `requests` is not an object");
        Ok(())
    }
    infertrace_adapter::scalars_as_unit!(());
}

/// The session and time offset of the sub-agent whose `requests` start now.
fn subagent_session(state: &mut State<'_>, list: &List<'_>, f: &Fields) -> (String, Option<i64>) {
    let agent = match &f.agent_id {
        Some(Some(Value::String(id))) if !id.is_empty() => Some(id.clone()),
        Some(Some(Value::Number(n))) => Some(n.to_string()),
        _ => None,
    };
    let session = match agent {
        Some(agent) => format!("{}/{agent}", list.session),
        None => {
            state.diagnostic(
                DiagnosticKind::Inconsistent,
                "a sub-agent's `requests` come before a usable `agent_id`; the session is named by position",
            );
            format!("{}/subagent-{}", list.session, list.markers)
        }
    };
    let t = match &f.t {
        Some(Some(value)) => value.as_f64().and_then(seconds_to_nanos),
        _ => None,
    };
    if t.is_none() {
        state.diagnostic(
            DiagnosticKind::Inconsistent,
            "a sub-agent's `requests` come before a usable `t`; its calls have no arrival",
        );
    }
    (session, list.offset.zip(t).and_then(|(a, b)| a.checked_add(b)))
}

/// Counts of a sub-agent marker, once its object has closed.
fn subagent(state: &mut State<'_>, f: &Fields) {
    let counts = &mut state.counts;
    counts.markers += 1;
    let text = |field: &Field| match field {
        Some(Some(Value::String(s))) => Some(s.clone()),
        _ => None,
    };
    let kind = vocabulary(text(&f.subagent_type).as_deref(), SUBAGENT_TYPES);
    *counts.subagent_types.entry(kind).or_default() += 1;
    let status = vocabulary(text(&f.status).as_deref(), SUBAGENT_STATUSES);
    *counts.subagent_statuses.entry(status).or_default() += 1;
    if let Some(Some(n)) = &f.tool_use_count
        && let Some(n) = n.as_u64()
    {
        counts.add("subagent_tool_uses", n);
    }
}

/// What `field` holds as a non-negative finite number: `Ok(None)` when absent, `Err` (with a diagnostic) when it is
/// present but unusable.
fn non_negative(state: &mut State<'_>, field: &Field, name: &str) -> Result<Option<f64>, ()> {
    match field {
        None => Ok(None),
        Some(value) => match value.as_ref().and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0) {
            Some(x) => Ok(Some(x)),
            None => {
                state.diagnostic(DiagnosticKind::InvalidValue, format!("`{name}` is not a non-negative number"));
                Err(())
            }
        },
    }
}

/// A token count, or `None` with a diagnostic.
fn tokens(state: &mut State<'_>, field: &Field, name: &str) -> Option<u32> {
    match field {
        None => {
            state.diagnostic(DiagnosticKind::MissingField, format!("missing field `{name}`"));
            None
        }
        Some(value) => {
            let tokens = value.as_ref().and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
            if tokens.is_none() {
                state.diagnostic(
                    DiagnosticKind::InvalidValue,
                    format!("`{name}` is not a token count (a non-negative integer below 2^32)"),
                );
            }
            tokens
        }
    }
}

/// The row of one call.
fn call(state: &mut State<'_>, list: &List<'_>, turn: u32, streaming: bool, f: Fields) -> Option<RequestRow> {
    let settings = state.settings();
    let line = state.line();
    let mut row = RequestRow {
        request_id: format!("{}:{turn}", list.session),
        source: WekaTrace::ID.to_owned(),
        model: match &f.model {
            Some(Some(Value::String(model))) => Some(model.clone()),
            _ => None,
        },
        session_id: Some(list.session.to_owned()),
        turn: Some(turn),
        status: Status::Unknown,
        workload_class: Some(WorkloadClass::Agent),
        source_file: Some(state.ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    };

    row.input_tokens = tokens(state, &f.input, "in");
    row.output_tokens = tokens(state, &f.output, "out");
    let (input, output) = (u64::from(row.input_tokens.unwrap_or(0)), u64::from(row.output_tokens.unwrap_or(0)));
    let counts = &mut state.counts;
    let sums = if list.depth == 0 { &mut counts.parent } else { &mut counts.subagents };
    sums.input += input;
    sums.output += output;
    counts.add("requests", 1);
    if list.depth > 0 {
        counts.add("subagent_requests", 1);
    }
    if streaming {
        counts.add("streaming_requests", 1);
    }

    match &f.t {
        None => state.diagnostic(DiagnosticKind::MissingField, "missing field `t`"),
        Some(t) => {
            let t = t.as_ref().and_then(Value::as_f64).and_then(seconds_to_nanos);
            let start = state.ctx.options.start_ns;
            match t {
                Some(t) => {
                    row.arrival_time =
                        list.offset.and_then(|offset| offset.checked_add(t)).and_then(|ns| ns.checked_add(start));
                }
                None => state.diagnostic(DiagnosticKind::InvalidValue, "`t` is not a number of seconds in range"),
            }
        }
    }
    row.ttft_s = non_negative(state, &f.ttft, "ttft").ok().flatten();
    row.e2e_s = non_negative(state, &f.api_time, "api_time").ok().flatten();
    if let Ok(Some(think)) = non_negative(state, &f.think_time, "think_time") {
        let (n, sum, max) = &mut state.counts.think;
        *n += 1;
        *sum += think;
        *max = max.max(think);
    }
    if let (Some(ttft), Some(e2e)) = (row.ttft_s, row.e2e_s)
        && ttft > e2e
    {
        state.diagnostic(DiagnosticKind::Inconsistent, "`ttft` is longer than `api_time`");
    }

    if let Some(stop) = &f.stop {
        let stop = match stop {
            Some(Value::String(s)) if s.is_empty() => "empty",
            Some(Value::String(s)) => vocabulary(Some(s), STOP_REASONS),
            _ => "other",
        };
        *state.counts.stop_reasons.entry(stop).or_default() += 1;
        if STOP_REASONS.contains(&stop) {
            row.finish_reason = Some(stop.to_owned());
        }
    }

    match f.hash_ids {
        None => {}
        Some(Ids { ids: Some(ids), invalid: false }) => {
            let block = u64::from(settings.block_size);
            let (floor, ceil) = (input / block, input.div_ceil(block));
            let n = ids.len() as u64;
            if row.input_tokens.is_some() && n != floor && n != ceil {
                state.diagnostic(
                    DiagnosticKind::Inconsistent,
                    format!("`hash_ids` has {n} blocks but `in` {input} holds {floor} full blocks of {block} tokens"),
                );
            }
            row.prefix_hashes = Some(chain_block_ids(&ids, settings.seed()));
            row.block_size = Some(settings.block_size);
        }
        Some(_) => state.diagnostic(
            DiagnosticKind::InvalidValue,
            "`hash_ids` is not a list of non-negative integers; no prefix hashes",
        ),
    }
    Some(row)
}

/// One `hash_ids` list, kept as numbers; anything else marks it invalid (and is skipped unread).
#[derive(Debug, Default)]
struct Ids {
    ids: Option<Vec<u64>>,
    invalid: bool,
}

impl<'de> Deserialize<'de> for Ids {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ids;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of block ids")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ids, A::Error> {
                let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                let mut invalid = false;
                while let Some(Scalar(value)) = seq.next_element()? {
                    match value.as_ref().and_then(Value::as_u64) {
                        Some(id) => ids.push(id),
                        None => invalid = true,
                    }
                }
                Ok(Ids { ids: Some(ids), invalid })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ids, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                self.visit_unit()
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ids, E> {
                Ok(Ids { ids: None, invalid: true })
            }
            infertrace_adapter::scalars_as_unit!(Ids);
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests;
