//! Mapped JSONL: one JSON object per line, one request per object.
//!
//! Each line is parsed on its own (Python's `NaN` and `Infinity` read as text, so they become invalid values,
//! not malformed lines); a source name is a key, or a dotted path into nested objects and arrays
//! (`usage.prompt_tokens`, `choices.0.finish_reason`). At each level a key equal to the whole remaining path wins,
//! so a flat key that contains dots (`"timing.ttft"`) is found too.

use std::borrow::Cow;
use std::io::BufRead;

use infertrace_adapter::json::{error_message, quote_python_floats};
use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::{Diagnostic, DiagnosticKind, LineReader, ParseError, Sink, utf8_line};
use serde_json::Value;

use crate::mapping::{Mapping, Source};
use crate::record::{Cell, Rows};

pub(crate) fn parse(
    mapping: &Mapping,
    rows: &mut Rows<'_>,
    input: &mut dyn BufRead,
    sink: &mut dyn Sink,
) -> Result<u64, ParseError> {
    let mut lines = LineReader::new(input);
    // Parsed on any thread, folded in order. A byte-order mark is dropped from any line, not only the first: files
    // joined with `cat` carry one at each join.
    let prepare = |bytes: &[u8]| {
        let line = infertrace_adapter::utf8(bytes)?;
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        if line.trim_ascii().is_empty() {
            return None;
        }
        Some(match serde_json::from_str::<Value>(&quote_python_floats(line)) {
            // The mapped columns' cells are taken here, so the parsed object is dropped on this thread too.
            Ok(object @ Value::Object(_)) => Ok(cells(&object, mapping)),
            Ok(_) => Err((DiagnosticKind::NotARecord, "JSON but not an object".to_owned())),
            Err(error) => Err((DiagnosticKind::MalformedJson, error_message(&error))),
        })
    };
    map_lines(&mut lines, prepare, |line_no, bytes, object| {
        let cells = match object {
            Some(Ok(cells)) => cells,
            Some(Err((kind, message))) => {
                sink.diagnostic(Diagnostic::new(line_no, kind, message));
                return Ok(());
            }
            None => {
                // Blank (nothing to lose), or not UTF-8 (which `utf8_line` reports).
                let _ = utf8_line(line_no, bytes, sink);
                return Ok(());
            }
        };
        let cell = |i: usize| match &cells[i] {
            Cell::Text(text) => Cell::Text(Cow::Borrowed(text.as_ref())),
            Cell::Absent => Cell::Absent,
            Cell::Null => Cell::Null,
            Cell::NotScalar => Cell::NotScalar,
            Cell::NotUtf8 => Cell::NotUtf8,
        };
        rows.record(line_no, cell, sink)?;
        Ok::<_, ParseError>(())
    })?;
    Ok(lines.lines_read())
}

/// The cell of every mapped column in `object`, owned.
fn cells(object: &Value, mapping: &Mapping) -> Vec<Cell<'static>> {
    let cell = |source: &Source| {
        let Source::From(path) = source else { return Cell::Null };
        match lookup(object, path) {
            None => Cell::Absent,
            Some(Value::Null) => Cell::Null,
            Some(Value::String(text)) => Cell::Text(text.clone().into()),
            Some(Value::Number(n)) => Cell::Text(n.to_string().into()),
            Some(Value::Bool(b)) => Cell::Text(if *b { "true" } else { "false" }.into()),
            Some(Value::Array(_) | Value::Object(_)) => Cell::NotScalar,
        }
    };
    mapping.columns().iter().map(|column| cell(&column.source)).collect()
}

/// The value at `path` in `value`: a key equal to the whole path first, else the first dotted segment as a key
/// (or an index into an array) and the rest below it.
fn lookup<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => {
            if let Some(found) = map.get(path) {
                return Some(found);
            }
            let (head, rest) = path.split_once('.')?;
            lookup(map.get(head)?, rest)
        }
        Value::Array(items) => {
            let (head, rest) = match path.split_once('.') {
                Some((head, rest)) => (head, Some(rest)),
                None => (path, None),
            };
            let item = items.get(head.parse::<usize>().ok()?)?;
            match rest {
                Some(rest) => lookup(item, rest),
                None => Some(item),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_reach_nested_values() {
        let value: Value = serde_json::from_str(
            r#"{"a": {"b": {"c": 1}}, "timing.ttft": 2, "choices": [{"finish_reason": "stop"}], "x": 3}"#,
        )
        .unwrap();
        let cases: &[(&str, Option<Value>)] = &[
            ("a.b.c", Some(1.into())),
            ("timing.ttft", Some(2.into())),
            ("choices.0.finish_reason", Some("stop".into())),
            ("choices.1.finish_reason", None),
            ("choices.first", None),
            ("x", Some(3.into())),
            ("x.y", None),
            ("a.b", Some(serde_json::json!({"c": 1}))),
            ("missing", None),
        ];
        for (path, expected) in cases {
            assert_eq!(lookup(&value, path), expected.as_ref(), "{path}");
        }
    }
}
