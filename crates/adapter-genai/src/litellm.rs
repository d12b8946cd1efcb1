//! `litellm-spend`: LiteLLM proxy's request logs.
//!
//! Two record shapes, read by the same names (LiteLLM 1.53 to 1.110; `litellm/proxy/schema.prisma`,
//! `litellm/types/utils.py`):
//!
//! - **a row of the `LiteLLM_SpendLogs` table**: `request_id`, `call_type`, `startTime`, `endTime`,
//!   `completionStartTime`, `model`, `model_group`, `api_base`, `prompt_tokens`, `completion_tokens`,
//!   `session_id` (1.74+), `status` (1.74+), `cache_hit`, and `metadata` with `usage_object` and
//!   `additional_usage_values` (the response's usage: `prompt_tokens_details.cached_tokens`,
//!   `completion_tokens_details.reasoning_tokens`) and `error_information`;
//! - **the standard logging payload** its callbacks write (S3, GCS, Pub/Sub, a generic API logger): `id`,
//!   `trace_id`, `startTime`/`endTime`/`completionStartTime` in Unix seconds, the same token counts, the
//!   `response` with its `usage`, `hidden_params.usage_object`, `model_parameters.max_tokens`,
//!   `error_information`.
//!
//! As files: a CSV with a header (`psql \copy "LiteLLM_SpendLogs" TO … CSV HEADER`: columns by name, since the
//! table's column order depends on its migrations; times `2025-01-24 09:20:46.847` in UTC; JSON columns as JSON
//! text), JSONL, one JSON object (a bucket object, pretty-printed or not), or the `/spend/logs` answer (a JSON array
//! of rows, or `{"data": […]}` pages; read whole, as the API caps it at 10,000 rows). `metadata` and `response`
//! may be objects or JSON text.
//!
//! Each completion-like call (`call_type` with `completion`, `responses`, `messages`, `generate_content`, `chat`,
//! or none) becomes one row: `request_id` (the provider's response id, so `merge` joins the engine's log on it),
//! arrival at `startTime`, first token at `completionStartTime` (LiteLLM sets it to `endTime` for a call that was
//! not streamed), completion at `endTime`; `session_id` the row's `session_id`, else `trace_id`, and `turn` the
//! order of the session's rows in the file (a table of the last 100,000 sessions); `instance` the host and port
//! of `api_base`; `error` the error class. Other calls (embeddings, images, MCP tools, …) are counted by call
//! type in `details`, as are LiteLLM's own response-cache hits (ids ending `_cache_hit…`), which are kept.
//! `messages`, `response` text, `proxy_server_request` and error messages are never read.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::num::NonZeroUsize;

use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, ParseContext, ParseError, ParseReport, Sink, json,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error_name;
use crate::usage::{Count, Tokens, Usage, When};

/// The LiteLLM spend-log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct LitellmSpend;

impl LitellmSpend {
    /// Format id.
    pub const ID: &'static str = "litellm-spend";
}

/// A member that is an object or the JSON text of one (a database column exported as text).
#[derive(Debug)]
struct Embedded<T>(Option<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Embedded<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Embedded(match value {
            serde_json::Value::String(text) => serde_json::from_str(&text).ok(),
            serde_json::Value::Null => None,
            other => serde_json::from_value(other).ok(),
        }))
    }
}

#[derive(Debug, Default, Deserialize)]
struct ErrorInformation {
    #[serde(default)]
    error_class: Option<String>,
    #[serde(default)]
    error_code: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    usage_object: Option<Usage>,
    #[serde(default)]
    additional_usage_values: Option<Usage>,
    #[serde(default)]
    error_information: Option<ErrorInformation>,
}

#[derive(Debug, Default, Deserialize)]
struct Response {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Hidden {
    #[serde(default)]
    usage_object: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Parameters {
    #[serde(default)]
    max_tokens: Option<Count>,
    #[serde(default)]
    max_completion_tokens: Option<Count>,
}

/// A spend-log row or a standard logging payload.
#[derive(Debug, Deserialize)]
struct Record<'a> {
    #[serde(borrow, default, alias = "id")]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    call_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "startTime")]
    start: Option<When<'a>>,
    #[serde(borrow, default, rename = "endTime")]
    end: Option<When<'a>>,
    #[serde(borrow, default, rename = "completionStartTime")]
    first_token: Option<When<'a>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model_group: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    api_base: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_tokens: Option<Count>,
    #[serde(default)]
    completion_tokens: Option<Count>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    trace_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    metadata: Option<Embedded<Metadata>>,
    #[serde(default)]
    response: Option<Embedded<Response>>,
    #[serde(default)]
    hidden_params: Option<Embedded<Hidden>>,
    #[serde(default)]
    model_parameters: Option<Embedded<Parameters>>,
    #[serde(default)]
    error_information: Option<Embedded<ErrorInformation>>,
}

/// Sessions whose next turn is remembered.
const MAX_SESSIONS: usize = 100_000;

struct State {
    turns: lru::LruCache<String, u32>,
    other_calls: BTreeMap<String, u64>,
    cache_hits: u64,
}

fn text<'s>(value: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    value.as_deref().map(str::trim).filter(|s| !s.is_empty() && *s != "None" && *s != "null")
}

/// `host:port` of a base URL (`http://10.0.0.5:8000/v1` → `10.0.0.5:8000`).
fn host(api_base: &str) -> &str {
    let rest = api_base.split_once("://").map_or(api_base, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// Whether a call type generates text (a request an inference engine served).
fn generates(call_type: &str) -> bool {
    ["completion", "responses", "messages", "generate_content", "chat"].iter().any(|k| call_type.contains(k))
}

impl State {
    fn record(
        &mut self,
        record: &Record<'_>,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        if let Some(call_type) = text(&record.call_type)
            && !generates(call_type)
        {
            *self.other_calls.entry(call_type.to_owned()).or_default() += 1;
            return Ok(());
        }
        let Some(id) = text(&record.request_id) else {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "a record without request_id or id"));
            return Ok(());
        };
        self.cache_hits += u64::from(id.contains("_cache_hit"));
        let metadata = record.metadata.as_ref().and_then(|m| m.0.as_ref());
        let usages = [
            metadata.and_then(|m| m.usage_object.as_ref()),
            metadata.and_then(|m| m.additional_usage_values.as_ref()),
            record.response.as_ref().and_then(|r| r.0.as_ref()?.usage.as_ref()),
            record.hidden_params.as_ref().and_then(|h| h.0.as_ref()?.usage_object.as_ref()),
        ];
        let details = usages.iter().flatten().map(|u| u.tokens()).fold(Tokens::default(), Tokens::or);
        let input = record.prompt_tokens.as_ref().and_then(Count::get).or(details.input);
        let output = record.completion_tokens.as_ref().and_then(Count::get).or(details.output);
        let error = record
            .error_information
            .as_ref()
            .and_then(|e| e.0.as_ref())
            .or_else(|| metadata?.error_information.as_ref());
        let status = match text(&record.status) {
            Some("success") => Status::Ok,
            Some("failure") => Status::Error,
            _ if output.is_some_and(|o| o > 0) => Status::Ok,
            _ => Status::Unknown,
        };
        let http_status = error.and_then(|e| match e.error_code.as_ref()? {
            serde_json::Value::Number(n) => u16::try_from(n.as_u64()?).ok(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        });
        let session = text(&record.session_id).or_else(|| text(&record.trace_id));
        let turn = session.map(|session| crate::next_turn(&mut self.turns, session));
        let parameters = record.model_parameters.as_ref().and_then(|p| p.0.as_ref());
        sink.request(RequestRow {
            request_id: id.to_owned(),
            source: LitellmSpend::ID.to_owned(),
            model: text(&record.model).or_else(|| text(&record.model_group)).map(str::to_owned),
            session_id: session.map(str::to_owned),
            turn,
            instance: text(&record.api_base).map(host).filter(|h| !h.is_empty()).map(str::to_owned),
            arrival_time: record.start.as_ref().and_then(When::nanos),
            first_token_time: record.first_token.as_ref().and_then(When::nanos),
            completion_time: record.end.as_ref().and_then(When::nanos),
            input_tokens: input,
            cached_tokens: details.cached,
            output_tokens: output,
            reasoning_tokens: details.reasoning,
            max_tokens: parameters
                .and_then(|p| p.max_tokens.as_ref().or(p.max_completion_tokens.as_ref()))
                .and_then(Count::get),
            status,
            http_status: http_status.filter(|s| *s >= 100),
            error: (status == Status::Error)
                .then(|| error.and_then(|e| e.error_class.as_deref()).map_or("error", error_name).to_owned()),
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        })
    }

    fn json(&mut self, text: &str, line: u64, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        /// A record, an array of records, or a page of them.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Document<'a> {
            Many(#[serde(borrow)] Vec<Record<'a>>),
            Page {
                #[serde(borrow)]
                data: Vec<Record<'a>>,
            },
            One(#[serde(borrow)] Box<Record<'a>>),
        }
        match serde_json::from_str::<Document<'_>>(text) {
            Ok(Document::One(record)) => self.record(&record, line, ctx, sink),
            Ok(Document::Many(records) | Document::Page { data: records }) => {
                records.iter().try_for_each(|record| self.record(record, line, ctx, sink))
            }
            Err(_) => {
                // The untagged error says nothing; the plain record's error says where.
                let e = serde_json::from_str::<serde::de::IgnoredAny>(text).err();
                let message =
                    e.map_or_else(|| "not a LiteLLM spend-log record".to_owned(), |e| json::error_message(&e));
                sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedJson, message));
                Ok(())
            }
        }
    }
}

impl Adapter for LitellmSpend {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "LiteLLM proxy spend logs (LiteLLM_SpendLogs rows as CSV/JSON) and standard logging payloads"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let first = text.lines().next().unwrap_or("");
        let csv = !first.trim_start().starts_with(['{', '['])
            && ["request_id", "call_type", "startTime"].iter().all(|k| first.contains(k));
        let json = text.trim_start().starts_with(['{', '['])
            && text.contains("\"call_type\"")
            && text.contains("\"startTime\"");
        (csv || json).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut state = State {
            turns: lru::LruCache::new(NonZeroUsize::new(MAX_SESSIONS).expect("not zero")),
            other_calls: BTreeMap::new(),
            cache_hits: 0,
        };
        let first = input.fill_buf()?.iter().copied().find(|b| !b.is_ascii_whitespace());
        let lines = match first {
            Some(b'{' | b'[') => {
                json::read_lines_or_document(input, sink, &mut |text, line, sink| state.json(text, line, ctx, sink))?
            }
            Some(_) => csv(input, ctx, sink, &mut state)?,
            None => 0,
        };
        let mut details = BTreeMap::new();
        if !state.other_calls.is_empty() {
            details.insert(
                "calls_not_generating".to_owned(),
                serde_json::to_value(&state.other_calls).unwrap_or_default(),
            );
        }
        if state.cache_hits > 0 {
            details.insert("response_cache_hits".to_owned(), state.cache_hits.into());
        }
        Ok(ParseReport { format_version: None, clock_domain: ClockDomain::Utc, year: None, lines, details })
    }
}

/// A CSV with a header, each row read by column name into a record.
fn csv(
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
    state: &mut State,
) -> Result<u64, ParseError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).has_headers(true).from_reader(input);
    let headers = match reader.headers() {
        Ok(headers) => headers.clone(),
        Err(e) => return csv_failure(e, 1, sink).map(|()| 1),
    };
    let mut record = csv::StringRecord::new();
    let mut last_line = 1;
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let line = record.position().map_or(last_line + 1, |p| p.line());
                last_line = line;
                if record.len() != headers.len() {
                    sink.diagnostic(Diagnostic::new(
                        line,
                        DiagnosticKind::MalformedCsv,
                        format!("{} fields where the header has {}", record.len(), headers.len()),
                    ));
                    continue;
                }
                let object: serde_json::Map<String, serde_json::Value> = headers
                    .iter()
                    .zip(record.iter())
                    .filter(|(_, value)| !value.is_empty())
                    .map(|(name, value)| {
                        // Counts are digits in a CSV; the record reads numbers, so they are given as numbers.
                        let value = match value.parse::<u64>() {
                            Ok(n) if name.ends_with("_tokens") => serde_json::Value::from(n),
                            _ => serde_json::Value::from(value),
                        };
                        (name.to_owned(), value)
                    })
                    .collect();
                let object = serde_json::Value::Object(object);
                match Record::deserialize(&object) {
                    Ok(parsed) => state.record(&parsed, line, ctx, sink)?,
                    Err(e) => {
                        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidValue, json::error_message(&e)))
                    }
                }
            }
            Err(e) => {
                let line = e.position().map_or(last_line + 1, |p| p.line());
                last_line = line;
                csv_failure(e, line, sink)?;
            }
        }
    }
    Ok(reader.position().line())
}

fn csv_failure(e: csv::Error, line: u64, sink: &mut dyn Sink) -> Result<(), ParseError> {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => Err(ParseError::Read(io)),
        csv::ErrorKind::Utf8 { .. } => {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::InvalidUtf8, "a field is not UTF-8"));
            Ok(())
        }
        _ => {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedCsv, "a record the CSV reader cannot read"));
            Ok(())
        }
    }
}
