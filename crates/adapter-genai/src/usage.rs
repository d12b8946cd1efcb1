//! `openai-usage`: any JSONL of OpenAI-compatible responses, or summaries of them, that carry a `usage` object:
//! the simplest thing a team logs at its gateway.
//!
//! One line is one of (the OpenAI API reference; vLLM and SGLang return the same shapes):
//!
//! - a Chat Completions or Completions response (`object` `chat.completion`, `text_completion`, or the last
//!   `chat.completion.chunk` of a stream with `stream_options.include_usage`): `id`, `created` (Unix seconds),
//!   `model`, `choices[].finish_reason`, `choices[].message.tool_calls`, and `usage` {`prompt_tokens`,
//!   `completion_tokens`, `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`};
//! - a Responses API response (`object` `response`): `id`, `created_at`, `completed_at`, `model`, `status`,
//!   `incomplete_details.reason`, `error.code`, `output[]` items (a `…_call` item is a tool call),
//!   `previous_response_id`, `conversation.id`, and `usage` {`input_tokens`, `output_tokens`,
//!   `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`};
//! - a Batch API output line: `{"id", "custom_id", "response": {"status_code", "request_id", "body": <one of the
//!   above>}, "error": {"code", "message"} | null}`;
//! - a summary of one of these: any object with `id`, `model`, `created` or `created_at`, and `usage`.
//!
//! Each becomes one request row: `request_id` the response `id` (what vLLM logs as its request id, so `merge`
//! joins a gateway's log to the engine's), arrival at `created`/`created_at` (whole seconds for Chat
//! Completions), completion at `completed_at`. Usage details are optional in every generation: older responses
//! have none, SGLang puts `reasoning_tokens` at the top of `usage`, Anthropic-style usage has
//! `cache_read_input_tokens`. A Responses API conversation is a session (`conversation.id`, else the first
//! response of the `previous_response_id` chain, remembered for the last 100,000 responses), its turn the
//! position in the chain.
//!
//! Streamed chunks without `usage` carry no request and are counted in `details`. Choices' messages, output
//! items' content and error messages are never read.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::num::NonZeroUsize;

use infertrace_adapter::time::{UtcOffset, parse_datetime, seconds_to_nanos};
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::error_name;

/// The OpenAI usage-log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenaiUsage;

impl OpenaiUsage {
    /// Format id.
    pub const ID: &'static str = "openai-usage";
}

/// A token count as JSON writes one (some gateways write `12.0`); null is absent.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Count {
    Int(u64),
    Float(f64),
    Text(String),
}

impl Count {
    pub(crate) fn get(&self) -> Option<u32> {
        match self {
            Count::Int(n) => u32::try_from(*n).ok(),
            Count::Float(x) if *x >= 0.0 && x.fract() == 0.0 && *x <= f64::from(u32::MAX) => Some(*x as u32),
            Count::Float(_) => None,
            Count::Text(t) => t.trim().parse().ok(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Details {
    #[serde(default)]
    cached_tokens: Option<Count>,
    #[serde(default)]
    reasoning_tokens: Option<Count>,
}

/// An OpenAI-compatible `usage` object of any generation: Chat Completions and Completions (`prompt_tokens`, …),
/// the Responses API (`input_tokens`, …), SGLang's top-level `reasoning_tokens`, Anthropic-style cache counts.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Usage {
    #[serde(default, alias = "input_tokens")]
    prompt_tokens: Option<Count>,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<Count>,
    #[serde(default, alias = "input_tokens_details")]
    prompt_tokens_details: Option<Details>,
    #[serde(default, alias = "output_tokens_details")]
    completion_tokens_details: Option<Details>,
    #[serde(default)]
    reasoning_tokens: Option<Count>,
    #[serde(default)]
    cache_read_input_tokens: Option<Count>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Count>,
}

/// Token counts of a row: input, cached, output, reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub input: Option<u32>,
    pub cached: Option<u32>,
    pub output: Option<u32>,
    pub reasoning: Option<u32>,
}

impl Usage {
    /// The counts, input including cached tokens and output including reasoning tokens ([`Tokens::totals`]).
    pub(crate) fn tokens(&self) -> Tokens {
        let get = |c: &Option<Count>| c.as_ref().and_then(Count::get);
        let details = |d: &Option<Details>, f: fn(&Details) -> &Option<Count>| d.as_ref().and_then(|d| get(f(d)));
        let cached = details(&self.prompt_tokens_details, |d| &d.cached_tokens).or(get(&self.cache_read_input_tokens));
        let reasoning =
            details(&self.completion_tokens_details, |d| &d.reasoning_tokens).or(get(&self.reasoning_tokens));
        let read = Tokens { input: get(&self.prompt_tokens), cached, output: get(&self.completion_tokens), reasoning };
        read.totals(get(&self.cache_creation_input_tokens))
    }
}

impl Tokens {
    /// Each count from `self`, else from `other`: readings of one usage in several places, the first preferred.
    pub(crate) fn or(self, other: Tokens) -> Tokens {
        Tokens {
            input: self.input.or(other.input),
            cached: self.cached.or(other.cached),
            output: self.output.or(other.output),
            reasoning: self.reasoning.or(other.reasoning),
        }
    }

    /// The counts with input including cached tokens and output including reasoning tokens, as OpenAI and the
    /// OpenTelemetry conventions count them: where a source counted a part apart from its total (Anthropic's cache
    /// reads, Gemini's thoughts), so that the part exceeds the total, the total is their sum (with the tokens
    /// `cache_write` written to the cache, also counted apart there).
    pub(crate) fn totals(self, cache_write: Option<u32>) -> Tokens {
        let sum = |total: Option<u32>, part: Option<u32>, extra: u32| match (total, part) {
            (Some(t), Some(p)) if p > t => Some(t.saturating_add(p).saturating_add(extra)),
            _ => total,
        };
        Tokens {
            input: sum(self.input, self.cached, cache_write.unwrap_or(0)),
            output: sum(self.output, self.reasoning, 0),
            ..self
        }
    }
}

/// A time as JSON writes one: Unix seconds (integer or float) or an RFC 3339 text.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum When<'a> {
    Seconds(f64),
    Text(#[serde(borrow)] Cow<'a, str>),
}

impl When<'_> {
    pub(crate) fn nanos(&self) -> Option<i64> {
        match self {
            // Read to the microsecond, the precision of the Python `datetime` these come from: an f64 of Unix
            // seconds holds about 0.2 µs today, so finer digits would be noise.
            When::Seconds(s) if *s > 0.0 => seconds_to_nanos(*s).map(|ns| (ns + 500).div_euclid(1000) * 1000),
            When::Seconds(_) => None,
            When::Text(t) => parse_datetime(t, UtcOffset::UTC).ok().map(|i| i.nanos),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    tool_calls: Option<Vec<IgnoredAny>>,
}

#[derive(Debug, Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, alias = "delta")]
    message: Option<Message>,
}

#[derive(Debug, Deserialize)]
struct Item<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Code<'a> {
    #[serde(borrow, default)]
    code: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Incomplete<'a> {
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Conversation<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

/// A response, a summary of one, or (with `response`) a Batch API output line.
#[derive(Debug, Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    created: Option<When<'a>>,
    #[serde(borrow, default)]
    created_at: Option<When<'a>>,
    #[serde(borrow, default)]
    completed_at: Option<When<'a>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(borrow, default)]
    output: Option<Vec<Item<'a>>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    incomplete_details: Option<Incomplete<'a>>,
    #[serde(borrow, default)]
    error: Option<Code<'a>>,
    #[serde(borrow, default)]
    previous_response_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    conversation: Option<Conversation<'a>>,
    #[serde(borrow, default)]
    response: Option<Batch<'a>>,
    /// Present on Batch API output lines (the caller's own id: never read).
    #[serde(default)]
    custom_id: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
struct Batch<'a> {
    #[serde(default)]
    status_code: Option<u16>,
    #[serde(borrow, default)]
    body: Option<Box<Line<'a>>>,
}

/// Responses remembered to chain `previous_response_id`s into sessions.
const MAX_CHAINED: usize = 100_000;

struct State {
    /// Response id → (session, turn).
    chain: lru::LruCache<String, (String, u32)>,
    chunks_without_usage: u64,
}

impl State {
    fn row(&mut self, line: &Line<'_>, line_no: u64, ctx: &ParseContext<'_>) -> Result<RequestRow, Diagnostic> {
        let (body, http_status) = match &line.response {
            Some(batch) => match &batch.body {
                Some(body) => (&**body, batch.status_code),
                None => (line, batch.status_code),
            },
            None => (line, None),
        };
        let batch = line.response.is_some() || line.custom_id.is_some();
        let batch_error = batch.then_some(line.error.as_ref()).flatten();
        let Some(usage) = &body.usage else {
            if let Some(code) = batch_error.and_then(|e| e.code.as_deref()) {
                // A batch request that failed before a response: a row with its error and no tokens.
                return Ok(RequestRow {
                    request_id: line
                        .id
                        .as_deref()
                        .map_or_else(|| infertrace_adapter::line_id(ctx.source_stem(), line_no), str::to_owned),
                    source: OpenaiUsage::ID.to_owned(),
                    status: Status::Error,
                    error: Some(error_name(code).to_owned()),
                    source_file: Some(ctx.source_file.to_owned()),
                    source_line: Some(line_no),
                    ..RequestRow::default()
                });
            }
            return Err(Diagnostic::new(line_no, DiagnosticKind::MissingField, "no usage object"));
        };
        let tokens = usage.tokens();
        let choice = body.choices.as_deref().and_then(<[Choice<'_>]>::first);
        let tool_calls = match (&body.choices, &body.output) {
            (Some(choices), _) => {
                let calls = choices.iter().filter_map(|c| Some(c.message.as_ref()?.tool_calls.as_ref()?.len()));
                Some(calls.sum::<usize>())
            }
            (None, Some(items)) => {
                Some(items.iter().filter(|i| i.kind.as_deref().is_some_and(|k| k.ends_with("_call"))).count())
            }
            (None, None) => None,
        };
        let failed = http_status.is_some_and(|s| s >= 400);
        let (status, error) = match body.status.as_deref() {
            _ if failed => (Status::Error, body.error.as_ref().and_then(|e| e.code.as_deref().or(e.kind.as_deref()))),
            Some("failed") => (Status::Error, body.error.as_ref().and_then(|e| e.code.as_deref())),
            Some("cancelled") => (Status::Aborted, None),
            Some("queued" | "in_progress") => (Status::Unknown, None),
            _ => (Status::Ok, None),
        };
        let id = body.id.as_deref().or(line.id.as_deref());
        let request_id = id.map_or_else(|| infertrace_adapter::line_id(ctx.source_stem(), line_no), str::to_owned);
        let (session, turn) = self.session(body, id);
        Ok(RequestRow {
            request_id,
            source: OpenaiUsage::ID.to_owned(),
            model: body.model.as_deref().filter(|m| !m.is_empty()).map(str::to_owned),
            session_id: session,
            turn,
            arrival_time: body.created.as_ref().or(body.created_at.as_ref()).and_then(When::nanos),
            completion_time: body.completed_at.as_ref().and_then(When::nanos),
            input_tokens: tokens.input,
            cached_tokens: tokens.cached,
            output_tokens: tokens.output,
            reasoning_tokens: tokens.reasoning,
            tool_calls: tool_calls.and_then(|n| u32::try_from(n).ok()),
            finish_reason: choice
                .and_then(|c| c.finish_reason.as_deref())
                .or_else(|| body.incomplete_details.as_ref()?.reason.as_deref())
                .map(str::to_owned),
            status,
            http_status,
            error: error.map(|e| error_name(e).to_owned()),
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line_no),
            ..RequestRow::default()
        })
    }

    /// The session and turn of a Responses API response: its conversation, else its `previous_response_id` chain.
    fn session(&mut self, body: &Line<'_>, id: Option<&str>) -> (Option<String>, Option<u32>) {
        if let Some(conversation) = body.conversation.as_ref().and_then(|c| c.id.as_deref()) {
            return (Some(conversation.to_owned()), None);
        }
        let (session, turn) = match body.previous_response_id.as_deref() {
            Some(previous) => match self.chain.get(previous) {
                Some((root, turn)) => (root.clone(), Some(turn + 1)),
                None => (previous.to_owned(), None),
            },
            None if body.object.as_deref() == Some("response") => match id {
                Some(id) => (id.to_owned(), Some(0)),
                None => return (None, None),
            },
            None => return (None, None),
        };
        if let (Some(id), Some(turn)) = (id, turn) {
            self.chain.put(id.to_owned(), (session.clone(), turn));
        }
        // A response that starts no chain and continues none is a session of one: none is recorded.
        if body.previous_response_id.is_none() {
            return (None, None);
        }
        (Some(session), turn)
    }
}

impl Adapter for OpenaiUsage {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "OpenAI-compatible responses with a usage object, one per line (Chat Completions, Responses, Batch output)"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text().trim_start();
        let usage = text.contains("\"usage\"")
            && (text.contains("\"prompt_tokens\"") || text.contains("\"input_tokens\""))
            && (text.contains("\"created\"") || text.contains("\"created_at\""))
            && text.contains("\"model\"");
        // LiteLLM's payloads carry a response with its usage too, with keys of their own.
        let litellm = text.contains("\"call_type\"") || text.contains("\"startTime\"");
        (text.starts_with('{') && usage && !litellm && !text.contains("\"resourceSpans\"")).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut state = State {
            chain: lru::LruCache::new(NonZeroUsize::new(MAX_CHAINED).expect("not zero")),
            chunks_without_usage: 0,
        };
        let mut lines = LineReader::new(input);
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(text) = utf8_line(line_no, bytes, sink) else { continue };
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let line: Line<'_> = match serde_json::from_str(text) {
                Ok(line) => line,
                Err(e) => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, json::error_message(&e)));
                    continue;
                }
            };
            if line.usage.is_none() && line.object.as_deref() == Some("chat.completion.chunk") {
                state.chunks_without_usage += 1;
                continue;
            }
            match state.row(&line, line_no, ctx) {
                Ok(row) => sink.request(row)?,
                Err(diagnostic) => sink.diagnostic(diagnostic),
            }
        }
        let mut details = BTreeMap::new();
        if state.chunks_without_usage > 0 {
            details.insert("chunks_without_usage".to_owned(), state.chunks_without_usage.into());
        }
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Utc,
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}
