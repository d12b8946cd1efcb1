//! Applied Compute agentic sessions: one line, `num_turns + 1` request rows.

use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{Diagnostic, DiagnosticKind, Sink};
use infertrace_schema::{DatasetError, RequestRow, Status, WorkloadClass};

use super::Parser;
use super::record::Record;

/// Expands one session line into its turns (see the module documentation of `mooncake` for the rules).
pub(super) fn expand(
    parser: &mut Parser<'_>,
    line: u64,
    record: &Record<'_>,
    sink: &mut dyn Sink,
) -> Result<(), DatasetError> {
    let missing = |field: &str| Diagnostic::new(line, DiagnosticKind::MissingField, format!("missing field `{field}`"));
    let (Some(num_turns), Some(prompt), Some(final_length)) =
        (record.num_turns, record.input_prompt_length, record.final_assistant_response_length)
    else {
        let field = if record.num_turns.is_none() {
            "num_turns"
        } else if record.input_prompt_length.is_none() {
            "input_prompt_length"
        } else {
            "final_assistant_response_length"
        };
        sink.diagnostic(missing(field));
        return Ok(());
    };
    let (Some(responses), Some(tool_outputs), Some(latencies)) =
        (&record.assistant_response_length, &record.tool_call_output_length, &record.tool_call_latency)
    else {
        let field = if record.assistant_response_length.is_none() {
            "assistant_response_length"
        } else if record.tool_call_output_length.is_none() {
            "tool_call_output_length"
        } else {
            "tool_call_latency"
        };
        sink.diagnostic(missing(field));
        return Ok(());
    };
    for (field, len) in [
        ("assistant_response_length", responses.len()),
        ("tool_call_output_length", tool_outputs.len()),
        ("tool_call_latency", latencies.len()),
    ] {
        if len as u64 != num_turns {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::Inconsistent,
                format!("`{field}` has {len} entries but num_turns is {num_turns}; the session is skipped"),
            ));
            return Ok(());
        }
    }
    if latencies.iter().any(|s| *s < 0.0 || seconds_to_nanos(*s).is_none()) {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            "`tool_call_latency` has a negative or out-of-range entry; the session is skipped",
        ));
        return Ok(());
    }

    let session = format!("{}:{line}", parser.stem);
    parser.counts.add("sessions", 1);
    let mut context = Some(prompt);
    let mut arrival = Some(parser.ctx.options.start_ns);
    let mut overflow_reported = false;
    for turn in 0..=responses.len() {
        let tool_turn = turn < responses.len();
        let output = responses.get(turn).copied().unwrap_or(final_length);
        let input = context.and_then(|n| u32::try_from(n).ok());
        if input.is_none() && !overflow_reported {
            overflow_reported = true;
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("the prompt of turn {turn} exceeds {} tokens", u32::MAX),
            ));
        }
        let output_tokens = u32::try_from(output).ok();
        if output_tokens.is_none() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidValue,
                format!("the output of turn {turn} exceeds {} tokens", u32::MAX),
            ));
        }
        sink.request(RequestRow {
            request_id: format!("{session}:{turn}"),
            source: parser.source.to_owned(),
            session_id: Some(session.clone()),
            turn: u32::try_from(turn).ok(),
            arrival_time: arrival,
            input_tokens: input,
            output_tokens,
            tool_calls: Some(u32::from(tool_turn)),
            workload_class: Some(WorkloadClass::Agent),
            status: Status::Unknown,
            source_file: Some(parser.ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        })?;
        if tool_turn {
            let tool_output = tool_outputs.get(turn).copied().unwrap_or_default();
            context = context.and_then(|n| n.checked_add(output)).and_then(|n| n.checked_add(tool_output));
            let latency = latencies.get(turn).copied().unwrap_or_default();
            arrival = arrival.zip(seconds_to_nanos(latency)).and_then(|(a, l)| a.checked_add(l));
        }
    }
    parser.counts.add("tool_calls", responses.len() as u64);
    Ok(())
}
