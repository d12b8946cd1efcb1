//! Qwen Bailian usage traces (`alibaba-edu/qwen-bailian-usagetraces-anon`, "KVCache Cache in the Wild", ATC'25).
//!
//! # Format
//!
//! JSON Lines, one request per line (the repository's README; AIPerf's `bailian_trace` loader):
//!
//! ```text
//! {"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 521, "output_length": 132,
//!  "type": "text", "turn": 2, "hash_ids": [1089, 1090, 1091, 6326, …, 13148]}
//! ```
//!
//! `chat_id` is a randomized sequential integer, `parent_chat_id` the request this one follows up (`-1` for a root),
//! `timestamp` seconds from the start of the trace file, `input_length` and `output_length` tokens, `type` the
//! request type (`text`, `search`, `image`, `file`; the later `qwen_thinking`/`qwen_coder` files add `thinking`),
//! `turn` the conversation turn from 1, and `hash_ids` one id per 16-token block of the prompt (salted SipHash-2-4 of
//! each block, remapped to sequential integers per file), the trailing partial block included:
//! `len(hash_ids) == ceil(input_length / 16)`. A follow-up's `input_length` and `hash_ids` cover its whole prompt,
//! history included. AIPerf reads a missing `parent_chat_id` as `-1` and a missing `turn` as 1; so does this adapter.
//! Files: `qwen_traceA_blksz_16.jsonl` (to-C), `qwen_traceB_blksz_16.jsonl` (to-B, API calls),
//! `qwen_thinking_blksz_16.jsonl`, `qwen_coder_blksz_16.jsonl` (all Git LFS objects).
//!
//! # Mapping and decisions
//!
//! - `request_id` is `chat_id` in decimal; `session_id` is the chain's root `chat_id` (follow `parent_chat_id` until
//!   `-1`), and `turn` the depth in the chain from 0 (a root is 0, its follow-up 1). Chat ids are numbered per file,
//!   so ids of two trace files must not be joined without `source_file`.
//! - The chain is remembered as `chat_id → (root, turn)`, at most 1,000,000 chats (the oldest forgotten first, with
//!   one diagnostic and the count `chats_forgotten`). A follow-up whose parent was not seen (before the trace's
//!   window, forgotten, or later in the file) starts a session named after the parent, with the turn the row writes
//!   minus 1; the parent is remembered with the turn before, so its other follow-ups join the same session
//!   (`parents_unseen` counts them). When the chain is known and `turn - 1` differs from it, the chain wins and the
//!   row gets an `inconsistent` diagnostic. A `parent_chat_id` equal to `chat_id`, or negative but not `-1`, is read
//!   as a root with a diagnostic; a repeated `chat_id` keeps its first chain, with a diagnostic.
//! - `arrival_time` is `--start` plus `timestamp`. `model` is null (one unnamed Qwen model per file).
//! - `prefix_hashes` are the `hash_ids` chained as WEKA's (`h[i] = xxh3_64(id_i as 8 little-endian bytes,
//!   seed = h[i-1])`, `h[-1] = 0`): the ids stand for single blocks, and chaining makes hash `i` stand for the
//!   prefix, as the schema requires. The trailing partial block is kept, as Mooncake's is. `block_size` is 16. A
//!   length other than `ceil(input_length / 16)` is an `inconsistent` diagnostic; the hashes are kept.
//! - `workload_class` is `rag` for `search` requests (answers grounded in retrieved results) and null otherwise;
//!   the counts of every `type` go to `details.request_types` (unknown types as `other`, never copied).
//! - `chat_id` and `input_length` are required: a line without them is a `missing-field` diagnostic and no row.

pub mod generate;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::BufRead;
use std::sync::LazyLock;

use infertrace_adapter::parallel::map_json_lines;
use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};
use regex::bytes::Regex;
use serde::Deserialize;

use crate::weka::{chain_block_ids, vocabulary};

/// Tokens per `hash_ids` block in every Bailian trace.
pub const BLOCK_SIZE: u32 = 16;
/// Chats remembered for their session root and turn.
pub const MAX_CHATS: usize = 1_000_000;
/// Request types the traces write.
const REQUEST_TYPES: &[&str] = &["text", "search", "image", "file", "thinking"];

/// The Qwen Bailian trace adapter (`bailian-trace`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BailianTrace;

impl BailianTrace {
    /// Format id.
    pub const ID: &'static str = "bailian-trace";
}

static SIGNATURE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r#""chat_id"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""parent_chat_id"\s*:\s*-?\d"#).expect("valid regex"),
        Regex::new(r#""input_length"\s*:\s*\d"#).expect("valid regex"),
    ]
});

impl Adapter for BailianTrace {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "Qwen Bailian usage trace JSONL (qwen-bailian-usagetraces-anon, ATC'25): chat_id/parent_chat_id sessions, \
         seconds, 16-token hash_ids"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        (line.starts_with(b"{") && SIGNATURE.iter().all(|re| re.is_match(line))).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut parser = Parser::new(ctx, MAX_CHATS);
        let mut lines = LineReader::new(input);
        map_json_lines(&mut lines, sink, |line_no, record: Record, sink| parser.record(line_no, record, sink))?;
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: lines.lines_read(),
            details: parser.details(),
        })
    }
}

/// One line; unknown keys are ignored.
#[derive(Debug, Deserialize)]
struct Record {
    chat_id: Option<u64>,
    parent_chat_id: Option<i64>,
    timestamp: Option<f64>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    #[serde(rename = "type")]
    kind: Option<String>,
    turn: Option<u64>,
    hash_ids: Option<Vec<u64>>,
}

/// Where a chat sits in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chat {
    root: u64,
    turn: u32,
    /// Remembered as an unseen parent rather than read from its own row.
    unseen: bool,
}

/// The bounded `chat_id → (root, turn)` table; the oldest chats are forgotten first.
#[derive(Debug)]
struct Chats {
    chats: HashMap<u64, Chat>,
    order: VecDeque<u64>,
    cap: usize,
    forgotten: u64,
}

impl Chats {
    fn get(&self, chat: u64) -> Option<Chat> {
        self.chats.get(&chat).copied()
    }

    /// Remembers `chat`, keeping an existing entry read from a row (an unseen parent's only gets marked as seen);
    /// returns whether an older chat was forgotten to make room.
    fn insert(&mut self, chat: u64, entry: Chat) -> bool {
        if let Some(existing) = self.chats.get_mut(&chat) {
            existing.unseen &= entry.unseen;
            return false;
        }
        self.chats.insert(chat, entry);
        self.order.push_back(chat);
        let mut forgot = false;
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.chats.remove(&old);
                self.forgotten += 1;
                forgot = true;
            }
        }
        forgot
    }
}

struct Parser<'c> {
    ctx: &'c ParseContext<'c>,
    chats: Chats,
    forgetting_reported: bool,
    counts: BTreeMap<&'static str, u64>,
    types: BTreeMap<&'static str, u64>,
}

impl<'c> Parser<'c> {
    fn new(ctx: &'c ParseContext<'c>, cap: usize) -> Self {
        Self {
            ctx,
            chats: Chats { chats: HashMap::new(), order: VecDeque::new(), cap: cap.max(1), forgotten: 0 },
            forgetting_reported: false,
            counts: BTreeMap::new(),
            types: BTreeMap::new(),
        }
    }

    fn count(&mut self, key: &'static str) {
        *self.counts.entry(key).or_default() += 1;
    }

    fn record(&mut self, line: u64, record: Record, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let diagnostic = |kind, message: &str| Diagnostic::new(line, kind, message);
        let (Some(chat), Some(input)) = (record.chat_id, record.input_length) else {
            let missing = if record.chat_id.is_none() { "chat_id" } else { "input_length" };
            sink.diagnostic(diagnostic(DiagnosticKind::MissingField, &format!("missing field `{missing}`")));
            return Ok(());
        };

        // The session: the chain's root and the depth in it.
        let written_turn = record.turn;
        let parent = record.parent_chat_id.unwrap_or(-1);
        let position = if parent == -1 {
            // An unseen parent named by an earlier follow-up already counted as a session.
            if !self.chats.get(chat).is_some_and(|c| c.unseen) {
                self.count("sessions");
            }
            Chat { root: chat, turn: 0, unseen: false }
        } else if parent < 0 || parent.unsigned_abs() == chat {
            sink.diagnostic(diagnostic(
                DiagnosticKind::InvalidValue,
                "`parent_chat_id` is neither -1 nor another chat's id; the row is read as a root",
            ));
            self.count("sessions");
            Chat { root: chat, turn: 0, unseen: false }
        } else {
            let parent = parent.unsigned_abs();
            match self.chats.get(parent) {
                Some(p) => {
                    let position = Chat { root: p.root, turn: p.turn.saturating_add(1), unseen: false };
                    if let Some(t) = written_turn
                        && t != u64::from(position.turn) + 1
                    {
                        sink.diagnostic(Diagnostic::new(
                            line,
                            DiagnosticKind::Inconsistent,
                            format!("`turn` is {t} but the parent chain makes it {}", position.turn + 1),
                        ));
                    }
                    position
                }
                None => {
                    // The parent is outside what was read: it names the session, and the row's own turn places it.
                    self.count("parents_unseen");
                    self.count("sessions");
                    let turn = u32::try_from(written_turn.unwrap_or(2).saturating_sub(1)).unwrap_or(u32::MAX).max(1);
                    let forgot = self.chats.insert(parent, Chat { root: parent, turn: turn - 1, unseen: true });
                    self.report_forgetting(forgot, line, sink);
                    Chat { root: parent, turn, unseen: false }
                }
            }
        };
        if self.chats.get(chat).is_some_and(|c| !c.unseen) {
            sink.diagnostic(diagnostic(
                DiagnosticKind::Inconsistent,
                "`chat_id` repeats an earlier row's; the earlier row's session is kept for its follow-ups",
            ));
        }
        let forgot = self.chats.insert(chat, position);
        self.report_forgetting(forgot, line, sink);

        let kind = vocabulary(record.kind.as_deref(), REQUEST_TYPES);
        *self.types.entry(kind).or_default() += 1;

        let mut row = RequestRow {
            request_id: chat.to_string(),
            source: BailianTrace::ID.to_owned(),
            session_id: Some(position.root.to_string()),
            turn: Some(position.turn),
            status: Status::Unknown,
            workload_class: (kind == "search").then_some(WorkloadClass::Rag),
            source_file: Some(self.ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };
        row.input_tokens = crate::token_count(input, "input_length", line, sink);
        row.output_tokens = record.output_length.and_then(|n| crate::token_count(n, "output_length", line, sink));
        match record.timestamp {
            Some(seconds) => {
                row.arrival_time = seconds_to_nanos(seconds).and_then(|ns| ns.checked_add(self.ctx.options.start_ns));
                if row.arrival_time.is_none() {
                    sink.diagnostic(diagnostic(DiagnosticKind::InvalidValue, "`timestamp` is out of range"));
                }
            }
            None => sink.diagnostic(diagnostic(DiagnosticKind::MissingField, "missing field `timestamp`")),
        }
        if let Some(ids) = record.hash_ids {
            let needed = input.div_ceil(u64::from(BLOCK_SIZE));
            if ids.len() as u64 != needed {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!(
                        "`hash_ids` has {} blocks but input_length {input} spans {needed} blocks of {BLOCK_SIZE} \
                         tokens",
                        ids.len()
                    ),
                ));
            }
            row.prefix_hashes = Some(chain_block_ids(&ids, 0));
            row.block_size = Some(BLOCK_SIZE);
        }
        sink.request(row)
    }

    fn report_forgetting(&mut self, forgot: bool, line: u64, sink: &mut dyn Sink) {
        if forgot && !self.forgetting_reported {
            self.forgetting_reported = true;
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                format!(
                    "more than {} chats: the oldest are forgotten (a later follow-up of one starts a session of \
                     its own)",
                    self.chats.cap
                ),
            ));
        }
    }

    fn details(self) -> BTreeMap<String, serde_json::Value> {
        let mut details: BTreeMap<String, serde_json::Value> =
            self.counts.into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect();
        if self.chats.forgotten > 0 {
            details.insert("chats_forgotten".into(), self.chats.forgotten.into());
        }
        if !self.types.is_empty() {
            details.insert("request_types".into(), serde_json::to_value(self.types).unwrap_or_default());
        }
        details
    }
}

#[cfg(test)]
mod tests;
