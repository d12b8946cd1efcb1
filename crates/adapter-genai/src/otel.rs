//! `otel-genai`: OpenTelemetry spans under the GenAI semantic conventions, as an application, an agent framework or
//! an LLM observability SDK emits them, saved as OTLP/JSON or OTLP protobuf ([`infertrace_adapter::otlp`]).
//!
//! # Spans
//!
//! A span's role comes from `gen_ai.operation.name` (or OpenInference's `openinference.span.kind`, or the Vercel
//! AI SDK's `ai.operationId`, whose provider calls `….doGenerate` and `….doStream` are the LLM calls):
//!
//! - **an LLM call**: `chat`, `text_completion`, `generate_content` (`LLM`); a span with no operation that
//!   records `gen_ai.usage.*` token counts, or `llm.request.type` `chat`/`completion` (OpenLLMetry before the
//!   operation name existed). A call that encloses another call (an agent framework's span around the client
//!   library's) is not a request: the innermost call is, so no call is counted twice.
//! - **a tool execution**: `execute_tool` (`TOOL`), or a span named `execute_tool …`.
//! - **an agent**: `invoke_agent` (`AGENT`), or a span named `invoke_agent …`.
//! - anything else (`embeddings`, `retrieval`, HTTP, framework internals) is counted by operation in `details`.
//!
//! # Rows
//!
//! Each LLM call becomes one `requests` row:
//!
//! - times: arrival at the span's start, completion at its end; the first token at the start plus
//!   `gen_ai.response.time_to_first_chunk` (seconds), else at an event named `gen_ai.first_token`, `first_token`
//!   or `ai.stream.firstChunk`, else at the start plus `ai.response.msToFirstChunk` (milliseconds);
//! - tokens ([`INPUT`], [`OUTPUT`], [`CACHED`], [`REASONING`], the names of each generation of the conventions and
//!   of OpenInference): input includes cached tokens and output includes reasoning tokens, as the conventions
//!   say; where a call's cached tokens exceed its input (or its reasoning tokens its output), the instrumentation
//!   counted them apart (as Anthropic's and Gemini's APIs do), and the row's count is the sum;
//! - `request_id` is `gen_ai.response.id` (the id the serving engine logs, so `merge` joins on it), else the
//!   span id; `model` the response model, else the request model; `instance` `server.address[:server.port]`;
//!   `finish_reason` the first of `gen_ai.response.finish_reasons`; an error status or `error.type` makes the
//!   row an error, with `error.type` as its error when it is a name (no spaces, at most 64 bytes);
//! - `session_id` is `gen_ai.conversation.id` (or `session.id`) of the call or its nearest ancestor having one;
//!   else, under an agent span, the first one recorded within that agent's spans (frameworks that chain the
//!   Responses API record it from the second call on); else the trace id when an agent or tool span encloses the
//!   call; `turn` numbers a session's calls in order of start,
//!   across traces (a table of the last 100,000 sessions);
//! - `workload_class` is `agent` when an agent or tool span encloses the call;
//! - `tool_calls` counts the tool spans of the same session (else trace) that start after the call and before
//!   the session's next call: the tools the call asked for. It is recorded for calls of traces that have agent or
//!   tool spans, and unknown otherwise.
//!
//! No attribute or event that carries content (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, `gen_ai.prompt*`, `gen_ai.completion*`, tool arguments and results, message
//! events) is read.
//!
//! # Streaming
//!
//! A span is exported when it ends, so a trace's spans arrive over several exports, its root last (or nearly: a
//! span that ends with the root may come in the next export). Spans wait in a table by trace; a trace is written
//! once its root has come and an export has passed without a span of it, or, without its root, when more than
//! [`MAX_OPEN_SPANS`] spans wait (oldest trace first) or at the end of the input. A trace written without its root
//! is counted in `details` (`traces_without_root`).

use std::collections::{BTreeMap, HashMap, VecDeque};

use std::io::BufRead;
use std::num::NonZeroUsize;

use infertrace_adapter::otlp::{self, AnyValue, Export, Number, Span};
use infertrace_adapter::time::{millis_to_nanos, seconds_to_nanos};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status, WorkloadClass};

use crate::error_name;
use crate::usage::Tokens;

/// The GenAI-span adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct OtelGenai;

impl OtelGenai {
    /// Format id.
    pub const ID: &'static str = "otel-genai";
}

/// Spans waiting for their trace's root before the oldest trace is written without it.
const MAX_OPEN_SPANS: usize = 100_000;

/// Ancestors looked at above a span: real traces nest a few levels; a deeper chain (or a cycle in bad input) is
/// cut there, so a trace costs at most this many steps per span.
const MAX_DEPTH: usize = 256;

/// Sessions whose next turn is remembered across traces.
const MAX_SESSIONS: usize = 100_000;

/// Input-token counts, newest name first: the conventions (1.28+, then 1.26–1.27), OpenInference.
const INPUT: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
];
/// Output-token counts.
const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
];
/// Cached input tokens: the conventions (1.37+), their earlier spellings by instrumentations, OpenInference.
const CACHED: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.cache_read_tokens",
    "gen_ai.usage.details.cache_read_tokens",
    "gen_ai.usage.details.cache_read_input_tokens",
    "gen_ai.usage.cached_tokens",
    "gen_ai.usage.input_tokens_details.cached_tokens",
    "gen_ai.usage.prompt_tokens_details.cached_tokens",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.cachedInputTokens",
];
/// Reasoning output tokens.
const REASONING: &[&str] = &[
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "gen_ai.usage.details.reasoning_tokens",
    "gen_ai.usage.details.thoughts_tokens",
    "gen_ai.usage.output_tokens_details.reasoning_tokens",
    "gen_ai.usage.completion_tokens_details.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
    "ai.usage.reasoningTokens",
];
/// Input tokens written to the cache, counted apart from the input by some instrumentations.
const CACHE_WRITE: &[&str] = &[
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_write_input_tokens",
];
/// Session ids: the conventions' conversation, OpenTelemetry's session, OpenInference's session.
const SESSION: &[&str] = &["gen_ai.conversation.id", "session.id"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    Call,
    Tool,
    Agent,
    Other,
}

/// What a parse keeps of one span.
#[derive(Debug)]
struct Record {
    span_id: Option<String>,
    parent: Option<String>,
    role: Role,
    start: Option<i64>,
    session: Option<String>,
    /// The row of a call, all but session, turn, tool calls and class.
    row: Option<Box<RequestRow>>,
}

fn first<'s>(span: &'s Span<'_>, keys: &[&str]) -> Option<&'s AnyValue<'s>> {
    keys.iter().find_map(|key| span.attribute(key))
}

fn count(span: &Span<'_>, keys: &[&str]) -> Option<u32> {
    first(span, keys).and_then(AnyValue::as_u32)
}

fn text<'s>(span: &'s Span<'_>, key: &str) -> Option<&'s str> {
    span.attribute(key).and_then(AnyValue::as_str).filter(|s| !s.is_empty())
}

/// The operation a span performs, as `details` counts it, and its role.
fn role(span: &Span<'_>) -> (String, Role) {
    let operation = text(span, "gen_ai.operation.name").map(str::to_owned);
    let kind = text(span, "openinference.span.kind");
    if operation.is_none()
        && let Some(id) = text(span, "ai.operationId")
    {
        // The Vercel AI SDK: `ai.generateText` wraps the provider call `ai.generateText.doGenerate` (each step),
        // `ai.streamText` wraps `….doStream`; `ai.toolCall` runs a tool.
        let role = match id {
            _ if id.ends_with(".doGenerate") || id.ends_with(".doStream") => Role::Call,
            "ai.toolCall" => Role::Tool,
            _ => Role::Other,
        };
        return (id.to_owned(), role);
    }
    let role = match (operation.as_deref(), kind) {
        (Some("chat" | "text_completion" | "generate_content" | "completion"), _) | (None, Some("LLM")) => Role::Call,
        (Some("execute_tool"), _) | (None, Some("TOOL")) => Role::Tool,
        (Some("invoke_agent"), _) | (None, Some("AGENT")) => Role::Agent,
        // An operation of a framework's own naming (`call_llm`) that records token counts is a call.
        (Some("embeddings"), _) => Role::Other,
        (Some(_), _) if count(span, INPUT).is_some() || count(span, OUTPUT).is_some() => Role::Call,
        (Some(_), _) => Role::Other,
        (None, _) if span.name.starts_with("execute_tool") => Role::Tool,
        (None, _) if span.name.starts_with("invoke_agent") => Role::Agent,
        (None, _) => match text(span, "llm.request.type") {
            Some("chat" | "completion") => Role::Call,
            Some(_) => Role::Other,
            None if count(span, INPUT).is_some() || count(span, OUTPUT).is_some() => Role::Call,
            None => Role::Other,
        },
    };
    let name = match (operation, kind, role) {
        (Some(op), _, _) => op,
        (None, Some(kind), _) => kind.to_ascii_lowercase(),
        (None, None, Role::Call) => "chat".to_owned(),
        (None, None, Role::Tool) => "execute_tool".to_owned(),
        (None, None, Role::Agent) => "invoke_agent".to_owned(),
        (None, None, _) => "other".to_owned(),
    };
    (name, role)
}

fn call_row(span: &Span<'_>, line: u64, ctx: &ParseContext<'_>) -> RequestRow {
    let start = span.start_time_unix_nano.as_ref().and_then(Number::as_i64).filter(|&t| t > 0);
    let end = span.end_time_unix_nano.as_ref().and_then(Number::as_i64).filter(|&t| t > 0);
    let ttft = span
        .attribute("gen_ai.response.time_to_first_chunk")
        .and_then(AnyValue::as_f64)
        .and_then(seconds_to_nanos)
        .and_then(|d| Some(start? + d));
    let first_token = ttft
        .or_else(|| {
            let is_first = |name: &str| matches!(name, "gen_ai.first_token" | "first_token" | "ai.stream.firstChunk");
            span.events.iter().find(|e| is_first(&e.name))?.time_unix_nano.as_ref()?.as_i64()
        })
        .or_else(|| {
            let ms = first(span, &["ai.response.msToFirstChunk", "ai.stream.msToFirstChunk"])?.as_f64()?;
            Some(start? + millis_to_nanos(ms)?)
        });
    let read = Tokens {
        input: count(span, INPUT),
        cached: count(span, CACHED),
        output: count(span, OUTPUT),
        reasoning: count(span, REASONING),
    };
    let tokens = read.totals(count(span, CACHE_WRITE));
    let error_type = text(span, "error.type");
    let instance =
        text(span, "server.address").map(|address| match span.attribute("server.port").and_then(AnyValue::as_u32) {
            Some(port) => format!("{address}:{port}"),
            None => address.to_owned(),
        });
    RequestRow {
        request_id: text(span, "gen_ai.response.id")
            .or_else(|| text(span, "ai.response.id"))
            .or(span.span_id.as_deref())
            .map_or_else(|| infertrace_adapter::line_id(ctx.source_stem(), line), str::to_owned),
        source: OtelGenai::ID.to_owned(),
        model: text(span, "gen_ai.response.model")
            .or_else(|| text(span, "gen_ai.request.model"))
            .or_else(|| text(span, "llm.model_name"))
            .or_else(|| text(span, "ai.response.model"))
            .or_else(|| text(span, "ai.model.id"))
            .map(str::to_owned),
        instance,
        arrival_time: start,
        first_token_time: first_token,
        completion_time: end,
        input_tokens: tokens.input,
        cached_tokens: tokens.cached,
        output_tokens: tokens.output,
        reasoning_tokens: tokens.reasoning,
        max_tokens: count(span, &["gen_ai.request.max_tokens"]),
        finish_reason: text(span, "gen_ai.response.finish_reasons").map(str::to_owned),
        status: if span.is_error() || error_type.is_some() { Status::Error } else { Status::Ok },
        error: error_type.map(|e| error_name(e).to_owned()),
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    }
}

/// The spans of one trace waiting for its root.
#[derive(Debug, Default)]
struct Trace {
    records: Vec<Record>,
    /// Its root span has come.
    rooted: bool,
    /// The last export that held one of its spans.
    touched: u64,
    /// Its place in the order traces began.
    begun: u64,
}

/// The state of one parse.
struct State<'c> {
    ctx: &'c ParseContext<'c>,
    traces: HashMap<String, Trace>,
    /// Waiting traces by the order their first span came.
    order: BTreeMap<u64, String>,
    /// Traces begun so far.
    begun: u64,
    /// Traces whose root has come, in that order.
    rooted: VecDeque<String>,
    /// Exports read so far.
    exports: u64,
    open_spans: usize,
    turns: lru::LruCache<String, u32>,
    operations: BTreeMap<String, u64>,
    nested_calls: u64,
    without_root: u64,
    tools_before_a_call: u64,
}

impl State<'_> {
    fn export(&mut self, export: &Export<'_>, line: u64, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        for span in export.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
            let (operation, role) = role(span);
            *self.operations.entry(operation).or_default() += 1;
            let session = SESSION.iter().find_map(|key| text(span, key)).map(str::to_owned);
            let record = Record {
                span_id: span.span_id.as_deref().filter(|s| !s.is_empty()).map(str::to_owned),
                parent: span.parent_span_id.as_deref().filter(|s| !s.is_empty()).map(str::to_owned),
                role,
                start: span.start_time_unix_nano.as_ref().and_then(Number::as_i64),
                session,
                row: (role == Role::Call).then(|| Box::new(call_row(span, line, self.ctx))),
            };
            let Some(trace_id) = span.trace_id.as_deref().filter(|s| !s.is_empty()) else {
                // A span outside any trace is a trace of its own.
                let root = record.parent.is_none();
                self.without_root += u64::from(!root);
                let trace = Trace { records: vec![record], ..Trace::default() };
                self.write(None, trace, sink)?;
                continue;
            };
            let root = record.parent.is_none();
            let export_no = self.exports;
            let trace = self.traces.entry(trace_id.to_owned()).or_insert_with(|| {
                self.order.insert(self.begun, trace_id.to_owned());
                self.begun += 1;
                Trace { begun: self.begun - 1, ..Trace::default() }
            });
            trace.records.push(record);
            trace.touched = export_no;
            if root && !trace.rooted {
                trace.rooted = true;
                self.rooted.push_back(trace_id.to_owned());
            }
            self.open_spans += 1;
        }
        // A trace whose root has come is written once an export has passed without a span of it: a span that ends
        // with its root may be exported after it.
        for _ in 0..self.rooted.len() {
            let Some(id) = self.rooted.pop_front() else { break };
            match self.traces.get(&id) {
                Some(trace) if trace.touched == self.exports => self.rooted.push_back(id),
                Some(_) => {
                    let trace = self.traces.remove(&id).expect("present");
                    self.order.remove(&trace.begun);
                    self.open_spans -= trace.records.len();
                    self.write(Some(id), trace, sink)?;
                }
                None => {}
            }
        }
        self.exports += 1;
        while self.open_spans > MAX_OPEN_SPANS {
            self.flush_oldest(sink)?;
        }
        Ok(())
    }

    /// Writes the oldest waiting trace without its root; false when none waits.
    fn flush_oldest(&mut self, sink: &mut dyn Sink) -> Result<bool, DatasetError> {
        let Some((_, id)) = self.order.pop_first() else { return Ok(false) };
        let trace = self.traces.remove(&id).expect("every waiting trace is in the order");
        self.open_spans -= trace.records.len();
        self.without_root += u64::from(!trace.rooted);
        self.write(Some(id), trace, sink)?;
        Ok(true)
    }

    /// Writes the rows of a trace's calls.
    fn write(&mut self, trace_id: Option<String>, trace: Trace, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let records = trace.records;
        // Tool calls are counted (0 included) only in traces that show tools or agents at all.
        let agentic = records.iter().any(|r| matches!(r.role, Role::Tool | Role::Agent));
        let index: HashMap<&str, usize> =
            records.iter().enumerate().filter_map(|(i, r)| Some((r.span_id.as_deref()?, i))).collect();
        let parent = |i: usize| records[i].parent.as_deref().and_then(|p| index.get(p).copied());
        // Ancestors of each span, nearest first, at most `MAX_DEPTH` of them (a cycle in bad input stops there).
        let ancestors = |i: usize| {
            let mut out = Vec::new();
            let mut at = parent(i);
            while let Some(p) = at {
                if out.len() >= MAX_DEPTH || p == i {
                    break;
                }
                out.push(p);
                at = parent(p);
            }
            out
        };
        let mut wraps_a_call = vec![false; records.len()];
        for i in (0..records.len()).filter(|&i| records[i].role == Role::Call) {
            for p in ancestors(i) {
                if records[p].role == Role::Call {
                    wraps_a_call[p] = true;
                }
            }
        }
        // Every call and tool, with its session: the conversation id of the span or its nearest ancestor having
        // one; else, under an agent, the first conversation id (by start) recorded within that agent's spans (an
        // agent framework may record it on its later calls only), else the trace id.
        struct Item {
            group: String,
            session: Option<String>,
            start: Option<i64>,
            at: usize,
            agent: bool,
        }
        let mut found = Vec::new();
        for (i, record) in records.iter().enumerate() {
            let is_call = record.role == Role::Call && !wraps_a_call[i];
            if !is_call && record.role != Role::Tool {
                continue;
            }
            let up = ancestors(i);
            let own = std::iter::once(i).chain(up.iter().copied()).find_map(|j| records[j].session.clone());
            let anchor = up.iter().copied().find(|&j| records[j].role == Role::Agent);
            let agent = up.iter().any(|&j| matches!(records[j].role, Role::Agent | Role::Tool));
            found.push((is_call, own, anchor, agent, i));
        }
        let mut by_anchor: HashMap<usize, (Option<i64>, usize, String)> = HashMap::new();
        for (_, own, anchor, _, i) in &found {
            if let (Some(conversation), Some(anchor)) = (own, anchor) {
                let key = (records[*i].start, *i, conversation.clone());
                let entry = by_anchor.entry(*anchor).or_insert_with(|| key.clone());
                if (key.0.is_none(), key.0, key.1) < (entry.0.is_none(), entry.0, entry.1) {
                    *entry = key;
                }
            }
        }
        let (mut calls, mut tools) = (Vec::new(), Vec::new());
        for (is_call, own, anchor, agent, i) in found {
            let shared = anchor.and_then(|a| by_anchor.get(&a)).map(|(_, _, c)| c.clone());
            let session = own.or(shared).or_else(|| agent.then(|| trace_id.clone()).flatten());
            let group = session.clone().or_else(|| trace_id.clone()).unwrap_or_default();
            let item = Item { group, session, start: records[i].start, at: i, agent };
            if is_call { calls.push(item) } else { tools.push(item) }
        }
        self.nested_calls += wraps_a_call.iter().filter(|&&w| w).count() as u64;
        calls.sort_by_key(|c| (c.start.is_none(), c.start, c.at));
        // Each tool goes to the last call of its group that started at or before it.
        let mut tool_counts = vec![0u32; calls.len()];
        let mut by_group: HashMap<&str, Vec<(i64, usize)>> = HashMap::new();
        for (k, call) in calls.iter().enumerate() {
            if let Some(start) = call.start {
                by_group.entry(call.group.as_str()).or_default().push((start, k));
            }
        }
        for tool in &tools {
            let group = by_group.get(tool.group.as_str()).map(Vec::as_slice).unwrap_or_default();
            let before = tool.start.map_or(0, |t| group.partition_point(|&(start, _)| start <= t));
            match before.checked_sub(1) {
                Some(i) => tool_counts[group[i].1] += 1,
                None => self.tools_before_a_call += 1,
            }
        }
        let mut records = records;
        for (k, call) in calls.iter().enumerate() {
            let Some(mut row) = records[call.at].row.take() else { continue };
            if let Some(session) = &call.session {
                let turn = crate::next_turn(&mut self.turns, session);
                row.session_id = Some(session.clone());
                row.turn = Some(turn);
            }
            if agentic {
                row.tool_calls = Some(tool_counts[k]);
            }
            if call.agent {
                row.workload_class = Some(WorkloadClass::Agent);
            }
            sink.request(*row)?;
        }
        Ok(())
    }
}

impl Adapter for OtelGenai {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "OpenTelemetry GenAI spans (LLM calls, agents, tools; OpenInference, Vercel AI SDK) as OTLP/JSON or protobuf"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let bytes = head.bytes();
        let genai = |t: &str| {
            [
                "gen_ai.operation.name",
                "gen_ai.request.model",
                "gen_ai.usage.",
                "gen_ai.system",
                "openinference.",
                "llm.",
            ]
            .iter()
            .any(|k| t.contains(k))
        };
        if text.trim_start().starts_with('{')
            && (text.contains("\"resourceSpans\"") || text.contains("\"resource_spans\""))
        {
            // vLLM's own request spans use the old names too: those are `vllm-otlp`'s.
            return match (text.contains("\"llm_request\""), genai(text)) {
                (true, _) => None,
                (false, true) => Some(Confidence::High),
                // GenAI attributes may start past the head, behind a span's content.
                (false, false) => Some(Confidence::Low),
            };
        }
        (otlp::looks_like_proto(bytes) && genai(text)).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut state = State {
            ctx,
            traces: HashMap::new(),
            order: BTreeMap::new(),
            begun: 0,
            rooted: VecDeque::new(),
            exports: 0,
            open_spans: 0,
            turns: lru::LruCache::new(NonZeroUsize::new(MAX_SESSIONS).expect("not zero")),
            operations: BTreeMap::new(),
            nested_calls: 0,
            without_root: 0,
            tools_before_a_call: 0,
        };
        let lines = otlp::read_exports(input, sink, &mut |export, line, sink| state.export(export, line, sink))?;
        while state.flush_oldest(sink)? {}
        let mut details = BTreeMap::new();
        details.insert("spans_by_operation".to_owned(), serde_json::to_value(&state.operations).unwrap_or_default());
        for (key, value) in [
            ("calls_enclosing_calls", state.nested_calls),
            ("traces_without_root", state.without_root),
            ("tools_before_any_call", state.tools_before_a_call),
        ] {
            if value > 0 {
                details.insert(key.to_owned(), value.into());
            }
        }
        Ok(ParseReport { format_version: None, clock_domain: ClockDomain::Utc, year: None, lines, details })
    }
}
