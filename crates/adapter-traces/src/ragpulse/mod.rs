//! RAGPulse (flashserve/RAGPulse, arXiv 2511.12979): a RAG Q&A service's requests with content-chunk ids.
//!
//! # Format
//!
//! `data/0_trace.jsonl`, one request per line (the one generation published, November 2025):
//!
//! ```text
//! {"timestamp": "82", "input_length": 3112, "output_length": 192, "hash_ids": {"sys_prompt": [8302, 14332, 15199],
//!  "passages_ids": [7398, 7370, 7098, 6967, 7405, 7298], "history": [15200], "web_search": [], "user_input": [26923]},
//!  "session_id": "1757476916095-afhwfadnh5ew"}
//! ```
//!
//! `timestamp` is a *string* of whole seconds from the start of the trace (12:00:00 local time, no date),
//! `input_length` and `output_length` are tokens, and `hash_ids` names the prompt's content chunks by component:
//! system prompt, retrieved passages, chat history, web-search results and the user's question. Chunk ids are
//! remapped content ids of variable token length (not fixed KV blocks, not chained). Their lengths are in five
//! separate files, one `{"<component>_id": <id>, "token_length": <tokens>}` object per line:
//! `1_sys_prompt.jsonl` (`sys_prompt_id`), `2_passages.jsonl` (`passage_id`), `3_history.jsonl` (`history_id`),
//! `4_user_input.jsonl` (`user_input_id`) and `5_web_search.jsonl` (`web_search_id`). Every file ends with an extra
//! blank line.
//!
//! # Mapping and decisions
//!
//! - One row per trace line: `request_id` `<file stem>:<line>` (the trace has no ids), `session_id` as written,
//!   `turn` the row's position among its session's rows in file order, `arrival_time` = `--start` + `timestamp`
//!   seconds (clock domain `relative`; a number is accepted as well as a string), `input_tokens` = `input_length`,
//!   `output_tokens` = `output_length`, `retrieved_docs` = the number of `passages_ids`, `workload_class` `rag`,
//!   `status` `unknown`.
//! - The trace lines carry the prompt length themselves, so rows never need the maps. An adapter reads one input
//!   and nothing else (it cannot open sibling files), so the maps are inputs of their own: a map file is detected
//!   as `ragpulse` too, writes no rows and reports per component the ids and tokens it lists
//!   (`details.maps`). Map lines *before* trace lines in one input (`cat 1_*.jsonl … 5_*.jsonl 0_trace.jsonl`)
//!   are remembered (at most 1,000,000 ids; more are counted in `map_ids_dropped`) and give the run's token split:
//!   `details.component_tokens` sums each component's chunk lengths over the rows whose every chunk has a length
//!   (`rows_with_component_lengths`; the others are counted in `rows_without_component_lengths`), and
//!   `tokens_outside_components` sums what `input_length` holds beyond its chunks (the chat template: 6 to 12
//!   tokens per row in the published trace). The schema has no per-component column, so the split per row is
//!   not kept.
//! - `prefix_hashes` are the chunk ids in prompt order (system prompt, passages, history, web search, user input,
//!   the order of the `hash_ids` keys, which is how RAGPulse's replayer concatenates them), *chained* as the schema
//!   requires: `h[i] = xxh3_64([component index] ++ id as 8 little-endian bytes, seed h[i-1])`, `h[-1] = 0`, the
//!   component index counting from 0 in that order. Equal `h[i]` thus means the same chunks `0..=i`, so a replay
//!   finds prefix reuse (two system-prompt chunks are shared by most rows; the third varies). Chunks vary in
//!   length, so `block_size` is null; reuse of chunks outside the prefix (passages re-retrieved in another order)
//!   is not visible in chained hashes, only the per-component chunk counts are kept (`details.chunks`).
//! - The published trace holds two sorted runs (lines 1–3,800 and 3,801–7,106, each starting near 0 s; the session
//!   ids, which begin with a Unix time in ms, put the second a week after the first). Times are kept as written, not
//!   shifted: rows whose timestamp is below the previous row's are counted in `details.timestamp_regressions`.
//! - `details.sessions` counts distinct sessions. Sessions are remembered for turn numbers, at most 100,000 (least
//!   recently used forgotten, counted in `sessions_evicted`; a forgotten session that comes back restarts at
//!   turn 0).
//! - A line with trace keys but some missing gets its row with what is there and one `missing-field` diagnostic
//!   naming what is absent (a missing component list counts as empty).

pub mod generate;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::hash_map::{Entry, HashMap};
use std::io::BufRead;
use std::sync::LazyLock;

use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use regex::bytes::Regex;
use serde::Deserialize;
use serde_json::{Value, json};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::sessions::{Digest, MAX_SESSIONS, RESTARTS_AT_TURN_0, Sessions};

/// The RAGPulse trace adapter (trace lines and id→length map lines).
#[derive(Debug, Clone, Copy, Default)]
pub struct RagPulse;

/// At most this many map ids are remembered for the token split.
const MAX_MAP_IDS: usize = 1_000_000;

/// The prompt's components, in prompt order: `(hash_ids key, map id key, name in details)`.
const COMPONENTS: [(&str, &str, &str); 5] = [
    ("sys_prompt", "sys_prompt_id", "sys_prompt"),
    ("passages_ids", "passage_id", "passages"),
    ("history", "history_id", "history"),
    ("web_search", "web_search_id", "web_search"),
    ("user_input", "user_input_id", "user_input"),
];
const PASSAGES: usize = 1;

static TRACE_LINE: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        Regex::new(r#""input_length"\s*:\s*\d"#).expect("valid regex"),
        // Mooncake's `hash_ids` is a list; RAGPulse's is an object of lists.
        Regex::new(r#""hash_ids"\s*:\s*\{"#).expect("valid regex"),
    ]
});
static MAP_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"^\{\s*"(?:sys_prompt_id|passage_id|history_id|user_input_id|web_search_id)"\s*:\s*\d+\s*,"#,
        r#"\s*"token_length"\s*:\s*\d"#
    ))
    .expect("valid regex")
});

/// One line of either kind; unknown keys are ignored.
#[derive(Debug, Default, Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    timestamp: Option<Text<'a>>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    hash_ids: Option<HashIds>,
    #[serde(borrow)]
    session_id: Option<Text<'a>>,
    token_length: Option<u64>,
    sys_prompt_id: Option<u64>,
    passage_id: Option<u64>,
    history_id: Option<u64>,
    user_input_id: Option<u64>,
    web_search_id: Option<u64>,
}

impl Record<'_> {
    fn is_trace_row(&self) -> bool {
        self.timestamp.is_some()
            || self.input_length.is_some()
            || self.output_length.is_some()
            || self.hash_ids.is_some()
            || self.session_id.is_some()
    }

    /// The map ids present, by component index.
    fn map_ids(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        [self.sys_prompt_id, self.passage_id, self.history_id, self.web_search_id, self.user_input_id]
            .into_iter()
            .enumerate()
            .filter_map(|(i, id)| Some((i, id?)))
    }
}

/// A string (as RAGPulse writes timestamps and session ids) or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Text<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Number(serde_json::Number),
}

impl Text<'_> {
    fn to_key(&self) -> Cow<'_, str> {
        match self {
            Text::Text(text) => Cow::Borrowed(text),
            Text::Number(n) => Cow::Owned(n.to_string()),
        }
    }

    fn seconds(&self) -> Option<f64> {
        match self {
            Text::Text(text) => text.trim().parse::<f64>().ok(),
            Text::Number(n) => n.as_f64(),
        }
    }
}

/// The chunk ids of one request by component.
#[derive(Debug, Default, Deserialize)]
struct HashIds {
    sys_prompt: Option<Vec<u64>>,
    passages_ids: Option<Vec<u64>>,
    history: Option<Vec<u64>>,
    web_search: Option<Vec<u64>>,
    user_input: Option<Vec<u64>>,
}

impl HashIds {
    /// The lists in prompt order (`None` for an absent key).
    fn lists(&self) -> [Option<&[u64]>; 5] {
        [&self.sys_prompt, &self.passages_ids, &self.history, &self.web_search, &self.user_input]
            .map(|list| list.as_deref())
    }
}

/// The chained hashes of `(component index, chunk id)` pairs in prompt order (see the module documentation).
pub(crate) fn chain(chunks: impl IntoIterator<Item = (u8, u64)>) -> Vec<u64> {
    let mut previous = 0;
    chunks
        .into_iter()
        .map(|(component, id)| {
            let mut bytes = [0u8; 9];
            bytes[0] = component;
            bytes[1..].copy_from_slice(&id.to_le_bytes());
            previous = xxh3_64_with_seed(&bytes, previous);
            previous
        })
        .collect()
}

impl Adapter for RagPulse {
    fn id(&self) -> &'static str {
        "ragpulse"
    }

    fn description(&self) -> &'static str {
        "RAGPulse RAG-service trace JSONL (string second timestamps, component chunk ids, session_id) and its \
         id→token_length map files"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        if !line.starts_with(b"{") {
            return None;
        }
        (MAP_LINE.is_match(line) || TRACE_LINE.iter().all(|re| re.is_match(line))).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut parser = Parser::new(self.id(), ctx);
        let mut lines = LineReader::new(input);
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            if line.trim_ascii().is_empty() {
                continue;
            }
            match serde_json::from_str::<Record<'_>>(line) {
                Ok(record) => parser.record(line_no, record, sink)?,
                Err(e) => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, json::error_message(&e)))
                }
            }
        }
        let format_version = match (parser.map_rows > 0, parser.trace_rows > 0) {
            (true, true) => Some("maps+trace"),
            (true, false) => Some("maps"),
            (false, true) => Some("trace"),
            (false, false) => None,
        };
        Ok(ParseReport {
            format_version: format_version.map(str::to_owned),
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: lines.lines_read(),
            details: parser.into_details(),
        })
    }
}

/// Per-component totals; `[u64; 5]` in prompt order.
type PerComponent = [u64; 5];

fn per_component(values: PerComponent) -> Value {
    let map: BTreeMap<&str, u64> = COMPONENTS.iter().zip(values).map(|((_, _, name), v)| (*name, v)).collect();
    json!(map)
}

/// Where a parse is.
struct Parser<'c> {
    source: &'static str,
    ctx: &'c ParseContext<'c>,
    stem: String,
    /// Keys `sessions`.
    digest: Digest,
    /// The next turn of each session.
    sessions: Sessions<u32>,
    /// Token length by (component, id), from map lines.
    lengths: HashMap<(usize, u64), u32>,
    map_full_reported: bool,
    late_maps_reported: bool,
    map_rows: u64,
    trace_rows: u64,
    previous_arrival: Option<i64>,
    timestamp_regressions: u64,
    chunks: PerComponent,
    map_ids: PerComponent,
    map_tokens: PerComponent,
    map_ids_dropped: u64,
    component_tokens: PerComponent,
    tokens_outside_components: u64,
    rows_with_lengths: u64,
    rows_without_lengths: u64,
}

impl<'c> Parser<'c> {
    fn new(source: &'static str, ctx: &'c ParseContext<'c>) -> Self {
        Self {
            source,
            ctx,
            stem: ctx.source_stem().to_owned(),
            digest: Digest::default(),
            sessions: Sessions::new(MAX_SESSIONS),
            lengths: HashMap::new(),
            map_full_reported: false,
            late_maps_reported: false,
            map_rows: 0,
            trace_rows: 0,
            previous_arrival: None,
            timestamp_regressions: 0,
            chunks: [0; 5],
            map_ids: [0; 5],
            map_tokens: [0; 5],
            map_ids_dropped: 0,
            component_tokens: [0; 5],
            tokens_outside_components: 0,
            rows_with_lengths: 0,
            rows_without_lengths: 0,
        }
    }

    fn record(&mut self, line: u64, record: Record<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        if record.is_trace_row() {
            return self.trace_row(line, record, sink);
        }
        let mut ids = record.map_ids();
        match (ids.next(), ids.next(), record.token_length) {
            (Some((component, id)), None, Some(tokens)) => self.map_row(line, component, id, tokens, sink),
            (Some(_), Some(_), _) => sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MalformedRecord,
                "a map row names ids of two components",
            )),
            (Some(_), None, None) => {
                sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "missing field `token_length`"))
            }
            (None, _, _) => sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::UnrecognizedLine,
                "neither a trace row (`timestamp`, `input_length`, `hash_ids`, …) nor a map row \
                 (`<component>_id`, `token_length`)",
            )),
        }
        Ok(())
    }

    fn map_row(&mut self, line: u64, component: usize, id: u64, tokens: u64, sink: &mut dyn Sink) {
        let Ok(tokens) = u32::try_from(tokens) else {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("`token_length` exceeds {} tokens", u32::MAX),
            ));
            return;
        };
        self.map_rows += 1;
        if self.trace_rows > 0 && !self.late_maps_reported {
            self.late_maps_reported = true;
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                "map rows after trace rows give lengths to later trace rows only",
            ));
        }
        let full = self.lengths.len() >= MAX_MAP_IDS;
        match self.lengths.entry((component, id)) {
            Entry::Occupied(known) => {
                if *known.get() != tokens {
                    sink.diagnostic(Diagnostic::new(
                        line,
                        DiagnosticKind::Inconsistent,
                        "id listed again with another `token_length`; the first is kept",
                    ));
                }
                return;
            }
            Entry::Vacant(slot) if !full => {
                slot.insert(tokens);
            }
            Entry::Vacant(_) => {
                self.map_ids_dropped += 1;
                if !self.map_full_reported {
                    self.map_full_reported = true;
                    sink.diagnostic(Diagnostic::new(
                        line,
                        DiagnosticKind::Inconsistent,
                        format!("more than {MAX_MAP_IDS} map ids: later ones are counted, not remembered"),
                    ));
                }
            }
        }
        self.map_ids[component] += 1;
        self.map_tokens[component] += u64::from(tokens);
    }

    fn trace_row(&mut self, line: u64, record: Record<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        self.trace_rows += 1;
        let mut missing: Vec<&str> = Vec::new();
        for (present, name) in [
            (record.timestamp.is_some(), "timestamp"),
            (record.input_length.is_some(), "input_length"),
            (record.output_length.is_some(), "output_length"),
            (record.hash_ids.is_some(), "hash_ids"),
            (record.session_id.is_some(), "session_id"),
        ] {
            if !present {
                missing.push(name);
            }
        }
        let lists = record.hash_ids.as_ref().map(HashIds::lists);
        if let Some(lists) = &lists {
            for (list, (key, _, _)) in lists.iter().zip(COMPONENTS) {
                if list.is_none() {
                    missing.push(key);
                }
            }
        }
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|name| format!("`{name}`")).collect();
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MissingField,
                format!("missing field(s) {}", names.join(", ")),
            ));
        }

        let session = record.session_id.as_ref().map(|id| id.to_key().into_owned());
        let turn = match &session {
            Some(id) => {
                let key = self.digest.key(id);
                let turn = self.sessions.touch_reporting(key, line, RESTARTS_AT_TURN_0, sink).unwrap_or(0);
                self.sessions.set(key, turn.saturating_add(1));
                Some(turn)
            }
            None => None,
        };

        let arrival = record.timestamp.as_ref().and_then(|ts| {
            let instant =
                ts.seconds().and_then(seconds_to_nanos).and_then(|ns| ns.checked_add(self.ctx.options.start_ns));
            if instant.is_none() {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    "`timestamp` is not a number of seconds in range",
                ));
            }
            instant
        });
        if let Some(arrival) = arrival {
            if self.previous_arrival.is_some_and(|previous| arrival < previous) {
                self.timestamp_regressions += 1;
            }
            self.previous_arrival = Some(arrival);
        }

        let input_tokens = record.input_length.and_then(|n| crate::token_count(n, "input_length", line, sink));
        let mut row = RequestRow {
            request_id: infertrace_adapter::line_id(&self.stem, line),
            source: self.source.to_owned(),
            session_id: session,
            turn,
            arrival_time: arrival,
            input_tokens,
            output_tokens: record.output_length.and_then(|n| crate::token_count(n, "output_length", line, sink)),
            workload_class: Some(WorkloadClass::Rag),
            status: Status::Unknown,
            source_file: Some(self.ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };
        if let Some(lists) = lists {
            let ids = |i: usize| lists[i].unwrap_or_default();
            row.retrieved_docs = Some(u32::try_from(ids(PASSAGES).len()).unwrap_or(u32::MAX));
            let chunks = (0..COMPONENTS.len()).flat_map(|i| ids(i).iter().map(move |&id| (i as u8, id)));
            row.prefix_hashes = Some(chain(chunks));
            for (i, total) in self.chunks.iter_mut().enumerate() {
                *total += ids(i).len() as u64;
            }
            if !self.lengths.is_empty() {
                self.split(line, input_tokens, &lists, sink);
            }
        }
        sink.request(row)
    }

    /// Adds the row's per-component tokens to the run's split, when every chunk has a length.
    fn split(&mut self, line: u64, input: Option<u32>, lists: &[Option<&[u64]>; 5], sink: &mut dyn Sink) {
        let mut row_tokens: PerComponent = [0; 5];
        for (i, list) in lists.iter().enumerate() {
            for id in list.unwrap_or_default() {
                match self.lengths.get(&(i, *id)) {
                    Some(&n) => row_tokens[i] += u64::from(n),
                    None => {
                        self.rows_without_lengths += 1;
                        return;
                    }
                }
            }
        }
        let sum: u64 = row_tokens.iter().sum();
        if let Some(input) = input {
            match u64::from(input).checked_sub(sum) {
                Some(outside) => self.tokens_outside_components += outside,
                None => sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    "`input_length` is below the sum of its chunks' token lengths",
                )),
            }
        }
        self.rows_with_lengths += 1;
        for (total, n) in self.component_tokens.iter_mut().zip(row_tokens) {
            *total += n;
        }
    }

    fn into_details(self) -> BTreeMap<String, Value> {
        let mut details = BTreeMap::new();
        let mut put = |key: &str, value: Value| {
            details.insert(key.to_owned(), value);
        };
        if self.trace_rows > 0 {
            put("sessions", self.sessions.started.into());
            put("chunks", per_component(self.chunks));
        }
        if self.sessions.evicted > 0 {
            put("sessions_evicted", self.sessions.evicted.into());
        }
        if self.timestamp_regressions > 0 {
            put("timestamp_regressions", self.timestamp_regressions.into());
        }
        if self.map_rows > 0 {
            let maps: BTreeMap<&str, Value> = COMPONENTS
                .iter()
                .enumerate()
                .map(|(i, (_, _, name))| (*name, json!({"ids": self.map_ids[i], "tokens": self.map_tokens[i]})))
                .collect();
            put("maps", json!(maps));
        }
        if self.map_ids_dropped > 0 {
            put("map_ids_dropped", self.map_ids_dropped.into());
        }
        if self.rows_with_lengths + self.rows_without_lengths > 0 {
            put("component_tokens", per_component(self.component_tokens));
            put("tokens_outside_components", self.tokens_outside_components.into());
            put("rows_with_component_lengths", self.rows_with_lengths.into());
            put("rows_without_component_lengths", self.rows_without_lengths.into());
        }
        details
    }
}

#[cfg(test)]
mod tests;
