//! Trace segments in the formats load generators read, so that a production segment can be replayed for real
//! against a staging deployment.
//!
//! [`Exporter`] takes canonical request rows and writes one of the [`Format`]s, one JSON object per line. Each
//! format's fields come from the reader's own source, cited at [`Format::readers`]:
//!
//! - [`Format::Mooncake`]: `{"session_id"?, "timestamp", "input_length", "output_length", "hash_ids"}`, rows in
//!   arrival order, every prompt whole. `timestamp` is milliseconds from the segment's start and `hash_ids` are the
//!   prompt's blocks at the export's block size, as dense integers (see below). Rows of a session carry its id and
//!   their own timestamp. Read by Dynamo's replay and mocker (`mooncake`: rows sharing a `session_id` are
//!   closed-loop turns), vLLM's `bench serve --dataset-name timed_trace`, SGLang's `bench_serving --dataset-name
//!   mooncake` and infertrace's own `mooncake` adapter, which gives back the same arrivals, lengths, sessions and
//!   block reuse.
//! - [`Format::AiperfMooncake`]: AIPerf's `mooncake_trace` with its multi-turn meaning. AIPerf sends a session's
//!   turns as one growing conversation (each turn's prompt is appended to the history and the live responses), so
//!   a later turn carries only its new tokens (`input_length` = its prompt less the previous prompt and output) and
//!   a `delay`: the time from the previous turn's completion to its arrival, which AIPerf waits after the previous
//!   response. A first turn has a `timestamp` and `hash_ids`. Rows come grouped by session.
//! - [`Format::AiperfMultiTurn`]: AIPerf's `multi_turn` custom dataset, `{"session_id", "turns": [{"text",
//!   "timestamp" | "delay", "output_length"}]}`, one line per session, with the same turn semantics and synthetic
//!   text ([`prompt`]).
//! - [`Format::VllmCustom`]: vLLM `bench serve`'s `custom` dataset, `{"prompt", "output_tokens"}`, in arrival
//!   order, with synthetic text. It has no times: vLLM sends it at `--request-rate`.
//!
//! Key decisions:
//! - **Block ids.** The dataset's `prefix_hashes` are chained: hash `i` stands for blocks `0..=i`. The output block
//!   that ends at token `e` is named by the dataset hash of the block holding token `e − 1` (which fixes every token
//!   before it) and by its length, numbered in the order first seen. An output block size that is a multiple of
//!   the dataset's keeps all its reuse; another size keeps what it can and never invents any. Blocks the dataset
//!   did not hash (vLLM and WEKA hash full blocks only) get ids of their own, never shared, so every row has
//!   `ceil(input_length / block_size)` ids as Mooncake requires.
//! - **Rows left out.** A row without a prompt length, or without an output length and an output limit, cannot be
//!   replayed: it is counted in [`Counts`], never written.
//! - **Clipping.** `max_input_tokens` keeps the first tokens of a longer prompt (the blocks that hold them, the
//!   last one partial), counted in [`Counts`].
//! - **Session turns.** When a later turn's prompt is not the previous prompt and output followed by at least one
//!   new token (the context was cut or compacted), AIPerf cannot express it as a continuation: the turn starts a
//!   session of its own, `<session>~<turn>`, counted in [`Counts::sessions_restarted`].
//!
//! Nothing here reads user content: rows carry counts and hashes only, and the text formats' prompts are made of
//! [`prompt::WORDS`].

mod blocks;
pub mod prompt;

use std::collections::HashSet;
use std::io::{self, Write};

use infertrace_schema::RequestRow;
use serde::Serialize;
use xxhash_rust::xxh3::xxh3_64;

use blocks::{BlockCounts, DenseIds};
use prompt::{PromptText, mix};

/// A load generator's input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Mooncake trace JSONL, whole prompts, in arrival order.
    Mooncake,
    /// AIPerf's `mooncake_trace` with sessions as growing conversations.
    AiperfMooncake,
    /// AIPerf's `multi_turn` custom dataset, with synthetic text.
    AiperfMultiTurn,
    /// vLLM `bench serve`'s `custom` dataset, with synthetic text.
    VllmCustom,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 4] =
        [Format::Mooncake, Format::AiperfMooncake, Format::AiperfMultiTurn, Format::VllmCustom];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Mooncake => "mooncake",
            Format::AiperfMooncake => "aiperf-mooncake",
            Format::AiperfMultiTurn => "aiperf-multi-turn",
            Format::VllmCustom => "vllm-custom",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether rows must come grouped by session (sessions by first arrival, turns by arrival, ties in input order)
    /// rather than in arrival order.
    pub fn by_session(self) -> bool {
        matches!(self, Format::AiperfMooncake | Format::AiperfMultiTurn)
    }

    /// Whether the format carries prompt text (made up by [`prompt`]) rather than lengths and block ids.
    pub fn has_text(self) -> bool {
        matches!(self, Format::AiperfMultiTurn | Format::VllmCustom)
    }

    /// The programs that read the format, and the source their fields were taken from.
    pub fn readers(self) -> &'static str {
        match self {
            Format::Mooncake => {
                "Dynamo replay and mocker (`mooncake`), vLLM `bench serve --dataset-name timed_trace` (vllm 0.34.0, \
                 vllm/benchmarks/datasets/datasets.py, TimedTrace), SGLang `bench_serving --dataset-name mooncake` \
                 (sglang 0.5.23, python/sglang/benchmark/datasets/mooncake.py at 17481b4e), AIPerf `mooncake_trace` \
                 without sessions"
            }
            Format::AiperfMooncake => {
                "AIPerf `--custom-dataset-type mooncake_trace` (aiperf 0.13.0, aiperf/dataset/loader/models.py \
                 MooncakeTrace, mooncake_trace.py)"
            }
            Format::AiperfMultiTurn => {
                "AIPerf `--custom-dataset-type multi_turn` (aiperf 0.13.0, aiperf/dataset/loader/models.py \
                 MultiTurn and SingleTurn, multi_turn.py)"
            }
            Format::VllmCustom => {
                "vLLM `bench serve --dataset-name custom --custom-output-len -1` (vllm 0.34.0, \
                 vllm/benchmarks/datasets/datasets.py, CustomDataset)"
            }
        }
    }
}

/// How rows become lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The format to write.
    pub format: Format,
    /// Tokens per `hash_ids` block (the formats with block ids).
    pub block_size: u32,
    /// Factor on every time from the segment's start and every delay: 0.5 replays twice as fast.
    pub time_scale: f64,
    /// Longer prompts keep their first this many tokens.
    pub max_input_tokens: Option<u32>,
    /// The instant (UTC nanoseconds) that timestamps count from: the segment's start.
    pub start_ns: i64,
    /// Seed of the text of blocks the dataset did not hash.
    pub seed: u64,
}

/// What an export wrote and left out. Every row handed to [`Exporter::push`] is counted once in `requests` or in
/// one of the `without_*` counts.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Requests written.
    pub requests: u64,
    /// Distinct sessions written (sessions restarted count again); rows without a session count none.
    pub sessions: u64,
    /// Rows left out: no arrival time.
    pub without_arrival: u64,
    /// Rows left out: no prompt length.
    pub without_input_tokens: u64,
    /// Rows left out: neither an output length nor an output limit.
    pub without_output_tokens: u64,
    /// Rows written with their output limit (`max_tokens`) as output length.
    pub output_from_max_tokens: u64,
    /// Prompts clipped to `max_input_tokens`.
    pub clipped: u64,
    /// Tokens removed by clipping.
    pub clipped_tokens: u64,
    /// Blocks written with an id from the dataset's hashes (formats with block ids).
    pub blocks_shared: u64,
    /// Blocks the dataset did not hash, written with ids of their own.
    pub blocks_own: u64,
    /// Later turns that were not a continuation of the previous turn and started a session of their own.
    pub sessions_restarted: u64,
    /// Later turns whose delay is the time from the previous turn's arrival, its completion being unknown.
    pub delays_from_arrivals: u64,
}

/// The previous turn of the session being written (formats grouped by session).
#[derive(Debug)]
struct Previous {
    /// The session as written (with `~<turn>` after a restart).
    session: String,
    /// The session as the dataset names it.
    dataset_session: String,
    /// Prompt tokens after clipping, and output tokens.
    tokens: u32,
    output: u32,
    arrival_ns: i64,
    end_ns: Option<i64>,
    turn: u32,
}

impl Previous {
    fn new(session: String, dataset_session: &str, request: &Request<'_>, end_ns: Option<i64>, turn: u32) -> Self {
        Self {
            session,
            dataset_session: dataset_session.to_owned(),
            tokens: request.tokens,
            output: request.output,
            arrival_ns: request.arrival_ns,
            end_ns,
            turn,
        }
    }
}

/// One Mooncake line.
#[derive(Debug, Serialize)]
struct MooncakeLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay: Option<i64>,
    input_length: u32,
    output_length: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash_ids: Option<Vec<u64>>,
}

/// One turn of an AIPerf `multi_turn` line.
#[derive(Debug, Serialize)]
struct Turn {
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_length: Option<u32>,
}

/// One AIPerf `multi_turn` line: a session.
#[derive(Debug, Serialize)]
struct Session {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    turns: Vec<Turn>,
}

/// One vLLM `custom` line.
#[derive(Debug, Serialize)]
struct CustomLine {
    prompt: String,
    output_tokens: u32,
}

/// Writes rows as lines of one format. Rows come in arrival order, or grouped by session when the format says so
/// ([`Format::by_session`]); each row with its ordinal (its position in the dataset), which seeds its own text.
#[derive(Debug)]
pub struct Exporter<W: Write> {
    out: W,
    options: Options,
    ids: DenseIds,
    counts: Counts,
    /// Hashes of the sessions written, to count them.
    sessions: HashSet<u64>,
    previous: Option<Previous>,
    /// The AIPerf `multi_turn` session being gathered.
    pending: Option<Session>,
}

impl<W: Write> Exporter<W> {
    /// An exporter writing to `out`.
    pub fn new(out: W, options: Options) -> Self {
        Self {
            out,
            options,
            ids: DenseIds::default(),
            counts: Counts::default(),
            sessions: HashSet::new(),
            previous: None,
            pending: None,
        }
    }

    /// Writes `row` (or counts why it cannot be).
    pub fn push(&mut self, row: &RequestRow, ordinal: u64) -> io::Result<()> {
        let Some(arrival_ns) = row.arrival_time else {
            self.counts.without_arrival += 1;
            return Ok(());
        };
        let Some(original) = row.input_tokens else {
            self.counts.without_input_tokens += 1;
            return Ok(());
        };
        let output = match (row.output_tokens, row.max_tokens) {
            (Some(output), _) => output,
            (None, Some(limit)) => {
                self.counts.output_from_max_tokens += 1;
                limit
            }
            (None, None) => {
                self.counts.without_output_tokens += 1;
                return Ok(());
            }
        };
        let tokens = match self.options.max_input_tokens {
            Some(max) if original > max => {
                self.counts.clipped += 1;
                self.counts.clipped_tokens += u64::from(original - max);
                max
            }
            _ => original,
        };
        self.counts.requests += 1;
        let request = Request { row, ordinal, arrival_ns, original, tokens, output };
        match self.options.format {
            Format::Mooncake => self.mooncake(&request),
            Format::VllmCustom => {
                let text = self.text(&request).text(0..tokens);
                self.line(&CustomLine { prompt: text, output_tokens: output })
            }
            Format::AiperfMooncake | Format::AiperfMultiTurn => self.turn(&request),
        }
    }

    /// Writes what is pending and returns the counts.
    pub fn finish(mut self) -> io::Result<Counts> {
        if let Some(session) = self.pending.take() {
            self.line(&session)?;
        }
        self.out.flush()?;
        Ok(self.counts)
    }

    fn mooncake(&mut self, request: &Request<'_>) -> io::Result<()> {
        let session = request.row.session_id.as_deref();
        if let Some(session) = session {
            self.count_session(session);
        }
        let line = MooncakeLine {
            session_id: session,
            timestamp: Some(self.offset_ms(request.arrival_ns)),
            delay: None,
            input_length: request.tokens,
            output_length: request.output,
            hash_ids: Some(self.hash_ids(request)),
        };
        self.line(&line)
    }

    /// A row of a format grouped by session: a first turn, or a later turn of the session before it.
    fn turn(&mut self, request: &Request<'_>) -> io::Result<()> {
        let row = request.row;
        let end_ns = end_ns(row);
        let Some(dataset_session) = row.session_id.as_deref() else {
            // A row without a session: a conversation of one turn.
            self.previous = None;
            return self.first_turn(request, None);
        };
        let continued = self.previous.as_ref().filter(|p| p.dataset_session == dataset_session);
        let Some(previous) = continued else {
            self.previous = Some(Previous::new(dataset_session.to_owned(), dataset_session, request, end_ns, 0));
            self.count_session(dataset_session);
            return self.first_turn(request, Some(dataset_session.to_owned()));
        };
        let turn = previous.turn + 1;
        let context = u64::from(previous.tokens) + u64::from(previous.output);
        if u64::from(request.tokens) <= context {
            // Not a continuation: a session of its own from here.
            let session = format!("{dataset_session}~{turn}");
            self.counts.sessions_restarted += 1;
            self.count_session(&session);
            self.previous = Some(Previous::new(session.clone(), dataset_session, request, end_ns, turn));
            return self.first_turn(request, Some(session));
        }
        let delay_ns = match previous.end_ns {
            Some(end) => request.arrival_ns.saturating_sub(end),
            None => {
                self.counts.delays_from_arrivals += 1;
                request.arrival_ns.saturating_sub(previous.arrival_ns)
            }
        };
        let delay = self.scaled_ms(delay_ns.max(0));
        let session = previous.session.clone();
        let new_tokens = request.tokens - context as u32;
        self.previous = Some(Previous::new(session.clone(), dataset_session, request, end_ns, turn));
        match self.options.format {
            Format::AiperfMultiTurn => {
                let text = self.text(request).text(context as u32..request.tokens);
                let turn = Turn { text, timestamp: None, delay: Some(delay), output_length: positive(request.output) };
                self.pending
                    .get_or_insert_with(|| Session { session_id: Some(session), turns: Vec::new() })
                    .turns
                    .push(turn);
                Ok(())
            }
            _ => self.line(&MooncakeLine {
                session_id: Some(&session),
                timestamp: None,
                delay: Some(delay),
                input_length: new_tokens,
                output_length: request.output,
                hash_ids: None,
            }),
        }
    }

    /// The first turn of a session (or a row without one), written with its timestamp and whole prompt.
    fn first_turn(&mut self, request: &Request<'_>, session: Option<String>) -> io::Result<()> {
        let timestamp = Some(self.offset_ms(request.arrival_ns));
        match self.options.format {
            Format::AiperfMultiTurn => {
                if let Some(done) = self.pending.take() {
                    self.line(&done)?;
                }
                let text = self.text(request).text(0..request.tokens);
                let turn = Turn { text, timestamp, delay: None, output_length: positive(request.output) };
                let session = Session { session_id: session, turns: vec![turn] };
                if session.session_id.is_some() {
                    self.pending = Some(session);
                    Ok(())
                } else {
                    self.line(&session)
                }
            }
            _ => {
                let hash_ids = Some(self.hash_ids(request));
                self.line(&MooncakeLine {
                    session_id: session.as_deref(),
                    timestamp,
                    delay: None,
                    input_length: request.tokens,
                    output_length: request.output,
                    hash_ids,
                })
            }
        }
    }

    fn hash_ids(&mut self, request: &Request<'_>) -> Vec<u64> {
        let mut counts = BlockCounts::default();
        let hashes = request.row.prefix_hashes.as_deref().unwrap_or_default();
        let ids = self.ids.ids(
            hashes,
            request.row.block_size,
            request.original,
            request.tokens,
            self.options.block_size,
            &mut counts,
        );
        self.counts.blocks_shared += counts.shared;
        self.counts.blocks_own += counts.own;
        ids
    }

    fn text<'r>(&self, request: &Request<'r>) -> PromptText<'r> {
        let hashes = request.row.prefix_hashes.as_deref().unwrap_or_default();
        PromptText::new(hashes, request.row.block_size, mix(self.options.seed ^ mix(request.ordinal)))
    }

    fn count_session(&mut self, session: &str) {
        if self.sessions.insert(xxh3_64(session.as_bytes())) {
            self.counts.sessions += 1;
        }
    }

    /// Milliseconds from the segment's start to `instant`, scaled.
    fn offset_ms(&self, instant: i64) -> i64 {
        self.scaled_ms(instant.saturating_sub(self.options.start_ns).max(0))
    }

    /// `ns` scaled, in whole milliseconds (rounded to the nearest).
    fn scaled_ms(&self, ns: i64) -> i64 {
        (ns as f64 * self.options.time_scale / 1e6).round() as i64
    }

    fn line(&mut self, value: &impl Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, value)?;
        self.out.write_all(b"\n")
    }
}

/// A row about to be written, with what `push` worked out.
#[derive(Debug)]
struct Request<'r> {
    row: &'r RequestRow,
    ordinal: u64,
    arrival_ns: i64,
    /// Prompt tokens in the dataset, and after clipping.
    original: u32,
    tokens: u32,
    output: u32,
}

/// When the response was complete: `completion_time`, else `last_token_time`, else arrival plus `e2e_s`.
fn end_ns(row: &RequestRow) -> Option<i64> {
    row.completion_time.or(row.last_token_time).or_else(|| {
        let e2e = row.e2e_s.filter(|s| s.is_finite() && *s >= 0.0)?;
        row.arrival_time?.checked_add((e2e * 1e9).round() as i64)
    })
}

fn positive(tokens: u32) -> Option<u32> {
    (tokens > 0).then_some(tokens)
}

#[cfg(test)]
mod tests;
