//! TraceLab round traces: one LLM round per JSON line (see the parent module for the format and mapping).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::time::parse_datetime;
use infertrace_adapter::{
    Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, UtcOffset, json, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status, WorkloadClass};
use serde::Deserialize;

use crate::sessions::{Digest, MAX_SESSIONS, Sessions};

/// One round; only the keys used are read, texts and the other counters are skipped.
#[derive(Debug, Default, Deserialize)]
struct Round<'a> {
    #[serde(borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session_id: Option<Cow<'a, str>>,
    round_index: Option<u64>,
    #[serde(borrow)]
    round_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    input_tokens_total: Option<u64>,
    prefix_tokens: Option<u64>,
    newly_append_tokens: Option<u64>,
    claude_uncached_input_tokens: Option<u64>,
    claude_cache_creation_input_tokens: Option<u64>,
    claude_cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    reasoning_output_tokens: Option<u64>,
    #[serde(borrow)]
    timing_events: Option<Vec<Event<'a>>>,
    tools: Option<Vec<Tool>>,
}

#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    event_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    timestamp: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Tool {
    is_error: Option<bool>,
}

/// Run-level counts.
#[derive(Debug, Default)]
struct Counts {
    providers: BTreeMap<&'static str, u64>,
    tool_calls: u64,
    tool_errors: u64,
    cache_creation_tokens: u64,
    rows_without_span: u64,
}

pub(super) fn parse(
    source: &'static str,
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let stem = ctx.source_stem();
    let digest = Digest::default();
    let mut sessions = Sessions::<()>::new(MAX_SESSIONS);
    let mut counts = Counts::default();
    let mut lines = LineReader::new(input);
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let line = if line_no == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
        if line.trim_ascii().is_empty() {
            continue;
        }
        let round: Round<'_> = match serde_json::from_str(line) {
            Ok(round) => round,
            Err(e) => {
                sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, json::error_message(&e)));
                continue;
            }
        };
        if let Some(id) = &round.session_id {
            sessions.touch(digest.key(id));
        }
        let row = row(source, stem, ctx, line_no, round, &mut counts, sink);
        sink.request(row)?;
    }
    let mut details: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    details.insert("sessions".into(), sessions.started.into());
    if sessions.evicted > 0 {
        details.insert("sessions_evicted".into(), sessions.evicted.into());
    }
    details.insert("providers".into(), serde_json::to_value(&counts.providers).unwrap_or_default());
    details.insert("tool_calls".into(), counts.tool_calls.into());
    details.insert("tool_errors".into(), counts.tool_errors.into());
    details.insert("cache_creation_tokens".into(), counts.cache_creation_tokens.into());
    if counts.rows_without_span > 0 {
        details.insert("rows_without_span".into(), counts.rows_without_span.into());
    }
    Ok(ParseReport {
        format_version: Some("round-trace".to_owned()),
        clock_domain: ClockDomain::Utc,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

fn row(
    source: &'static str,
    stem: &str,
    ctx: &ParseContext<'_>,
    line: u64,
    round: Round<'_>,
    counts: &mut Counts,
    sink: &mut dyn Sink,
) -> RequestRow {
    let inconsistent = |sink: &mut dyn Sink, message: &str| {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::Inconsistent, message));
    };
    let provider = match round.provider.as_deref() {
        Some("claude") => "claude",
        Some("codex") => "codex",
        _ => "other",
    };
    *counts.providers.entry(provider).or_default() += 1;

    let appended_sum = round.prefix_tokens.zip(round.newly_append_tokens).and_then(|(p, a)| p.checked_add(a));
    if let (Some(total), Some(sum)) = (round.input_tokens_total, appended_sum)
        && total != sum
    {
        inconsistent(sink, "`input_tokens_total` is not `prefix_tokens` + `newly_append_tokens`");
    }
    let input = round.input_tokens_total.or(appended_sum);
    if input.is_none() {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MissingField, "missing field `input_tokens_total`"));
    }
    if provider == "claude" {
        if let (Some(read), Some(prefix)) = (round.claude_cache_read_input_tokens, round.prefix_tokens)
            && read != prefix
        {
            inconsistent(sink, "`claude_cache_read_input_tokens` is not `prefix_tokens`");
        }
        let parts = [
            round.claude_uncached_input_tokens,
            round.claude_cache_creation_input_tokens,
            round.claude_cache_read_input_tokens,
        ];
        let parts_sum = parts.iter().try_fold(0u64, |sum, part| sum.checked_add((*part)?));
        if let (Some(sum), Some(total)) = (parts_sum, round.input_tokens_total)
            && sum != total
        {
            inconsistent(sink, "Claude's uncached, cache-creation and cache-read tokens do not add up to the total");
        }
    }
    counts.cache_creation_tokens += round.claude_cache_creation_input_tokens.unwrap_or(0);
    if let (Some(reasoning), Some(output)) = (round.reasoning_output_tokens, round.output_tokens)
        && reasoning > output
    {
        inconsistent(sink, "`reasoning_output_tokens` exceeds `output_tokens`");
    }

    let (arrival, completion, tool_call_events) = span(line, round.timing_events.as_deref().unwrap_or_default(), sink);
    if arrival.is_none() || completion.is_none() {
        counts.rows_without_span += 1;
    }
    let tool_calls = match &round.tools {
        Some(tools) => {
            counts.tool_errors += tools.iter().filter(|t| t.is_error == Some(true)).count() as u64;
            Some(tools.len() as u64)
        }
        None => round.timing_events.as_ref().map(|_| tool_call_events),
    };
    counts.tool_calls += tool_calls.unwrap_or(0);

    RequestRow {
        request_id: match round.round_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => id.to_owned(),
            None => infertrace_adapter::line_id(stem, line),
        },
        source: source.to_owned(),
        model: round.model.map(Cow::into_owned),
        session_id: round.session_id.map(Cow::into_owned),
        turn: round.round_index.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        arrival_time: arrival,
        completion_time: completion,
        input_tokens: input.and_then(|n| crate::token_count(n, "input_tokens_total", line, sink)),
        cached_tokens: round.prefix_tokens.and_then(|n| crate::token_count(n, "prefix_tokens", line, sink)),
        output_tokens: round.output_tokens.and_then(|n| crate::token_count(n, "output_tokens", line, sink)),
        reasoning_tokens: round
            .reasoning_output_tokens
            .and_then(|n| crate::token_count(n, "reasoning_output_tokens", line, sink)),
        tool_calls: tool_calls.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        workload_class: Some(WorkloadClass::Agent),
        status: Status::Unknown,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..RequestRow::default()
    }
}

/// The round's generation span, `(arrival, completion, tool_call events)`: the latest input event at or before the
/// first model-output event, and the last model-output event.
fn span(line: u64, events: &[Event<'_>], sink: &mut dyn Sink) -> (Option<i64>, Option<i64>, u64) {
    let mut inputs: Vec<i64> = Vec::new();
    let (mut first_output, mut last_output): (Option<i64>, Option<i64>) = (None, None);
    let mut tool_calls = 0;
    let mut bad_time = false;
    for event in events {
        let kind = event.event_type.as_deref();
        if kind == Some("tool_call") {
            tool_calls += 1;
        }
        let input = matches!(kind, Some("user_message" | "tool_result"));
        let output = matches!(kind, Some("reasoning" | "text" | "tool_call"));
        if !input && !output {
            continue;
        }
        let Some(time) = event.timestamp.as_deref().and_then(|t| parse_datetime(t, UtcOffset::UTC).ok()) else {
            bad_time = true;
            continue;
        };
        if input {
            inputs.push(time.nanos);
        } else {
            first_output = Some(first_output.map_or(time.nanos, |t| t.min(time.nanos)));
            last_output = Some(last_output.map_or(time.nanos, |t| t.max(time.nanos)));
        }
    }
    if bad_time {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            "a `timing_events` entry has no ISO-8601 `timestamp`; it is left out of the span",
        ));
    }
    let arrival = first_output.and_then(|first| inputs.iter().copied().filter(|&t| t <= first).max());
    (arrival, last_output, tool_calls)
}
