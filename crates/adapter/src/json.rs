//! Describing JSON errors without quoting the input, and streaming readers for large documents.
//!
//! serde_json's own messages quote offending values (`invalid type: string "…"`), and a value in a log line can be
//! a user's prompt, so diagnostics are built from the error's category and column only.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::error::Category;

/// Whether a key names free text a user or a model wrote (a prompt, a completion, a message, an error text).
///
/// Adapters that copy a document's scalar members into the manifest's `details` (benchmark summaries, run
/// metadata) drop string values under such keys: the copy is for configuration and figures, never for text.
pub fn is_free_text_key(key: &str) -> bool {
    const WORDS: &[&str] = &[
        "prompt",
        "text",
        "completion",
        "content",
        "message",
        "error",
        "response",
        "question",
        "answer",
        "query",
        "argument",
        "reasoning",
        "instruction",
    ];
    let key = key.to_ascii_lowercase();
    WORDS.iter().any(|word| key.contains(word))
}

#[cfg(test)]
mod free_text_tests {
    #[test]
    fn text_keys_are_recognised_and_figures_are_not() {
        for key in ["prompt", "system_prompt", "generated_text", "errorMessage", "Completion", "tool_arguments"] {
            assert!(super::is_free_text_key(key), "{key}");
        }
        for key in ["backend", "dataset_name", "request_rate", "model", "tag", "vllm_version"] {
            assert!(!super::is_free_text_key(key), "{key}");
        }
    }
}

/// A diagnostic message for `error` that names no input content (field names are kept, values are not).
pub fn error_message(error: &serde_json::Error) -> String {
    let column = error.column();
    match error.classify() {
        Category::Syntax => format!("invalid JSON syntax at column {column}"),
        Category::Eof => format!("JSON ends early at column {column}"),
        Category::Io => "JSON could not be read".to_owned(),
        Category::Data => {
            let text = error.to_string();
            // `missing field `x`` and `unknown field `x`` name only the field, which is safe to repeat.
            match text.split_once(" at line ") {
                Some((message, _))
                    if message.starts_with("missing field") || message.starts_with("duplicate field") =>
                {
                    format!("{message} (column {column})")
                }
                _ => format!("a field has the wrong type or an out-of-range value (column {column})"),
            }
        }
    }
}

/// A JSON scalar, or `None` for null, arrays and objects (skipped without being kept): for reading the summary
/// of a document whose other members are large.
#[derive(Debug)]
pub struct Scalar(pub Option<Value>);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(v))))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(v))))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(v))))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(v))))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar(None))
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar(None))
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
                Scalar::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One list of numbers, deserialized as its sum without keeping the list.
#[derive(Debug)]
pub struct SumOf(pub f64);

impl<'de> Deserialize<'de> for SumOf {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SumOf;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of numbers")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<SumOf, A::Error> {
                let mut total = 0.0;
                while let Some(x) = seq.next_element::<f64>()? {
                    total += x;
                }
                Ok(SumOf(total))
            }
        }
        deserializer.deserialize_seq(V)
    }
}

/// Python's `json.dumps` writes the non-standard tokens `NaN`, `Infinity` and `-Infinity` (an unbounded request
/// rate is `Infinity`). Returns `text` with each such token outside strings replaced by the same word as a JSON
/// string, so a strict parser reads the document and the value survives as text.
pub fn quote_python_floats(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("Infinity") && !text.contains("NaN") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(word) = ["-Infinity", "Infinity", "NaN"].into_iter().find(|w| rest.starts_with(w)) {
            out.push('"');
            out.push_str(word);
            out.push('"');
            rest = &rest[word.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// The scalar `visit_*` methods of a serde visitor, each answering `self.visit_unit()`: for visitors that want a
/// list or an object and treat any scalar like `null` (skipped without being kept). `$value` is the visitor's
/// `Value` type.
#[macro_export]
macro_rules! scalars_as_unit {
    ($value:ty) => {
        fn visit_bool<E: ::serde::de::Error>(self, _: bool) -> Result<$value, E> {
            self.visit_unit()
        }
        fn visit_u64<E: ::serde::de::Error>(self, _: u64) -> Result<$value, E> {
            self.visit_unit()
        }
        fn visit_i64<E: ::serde::de::Error>(self, _: i64) -> Result<$value, E> {
            self.visit_unit()
        }
        fn visit_f64<E: ::serde::de::Error>(self, _: f64) -> Result<$value, E> {
            self.visit_unit()
        }
        fn visit_str<E: ::serde::de::Error>(self, _: &str) -> Result<$value, E> {
            self.visit_unit()
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Probe {
        n: u32,
    }

    fn message(text: &str) -> String {
        error_message(&serde_json::from_str::<Probe>(text).unwrap_err())
    }

    #[test]
    fn python_float_tokens_become_strings_outside_strings_only() {
        assert_eq!(
            quote_python_floats(r#"{"rate": Infinity, "x": -Infinity, "y": [NaN], "s": "NaN \" Infinity"}"#),
            r#"{"rate": "Infinity", "x": "-Infinity", "y": ["NaN"], "s": "NaN \" Infinity"}"#
        );
        assert!(matches!(quote_python_floats(r#"{"a": 1}"#), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn messages_never_quote_values() {
        assert_eq!(
            message(r#"{"n": "secret prompt"}"#),
            "a field has the wrong type or an out-of-range value (column 21)"
        );
        assert_eq!(message(r#"{"n": 99999999999}"#), "a field has the wrong type or an out-of-range value (column 17)");
        assert_eq!(message(r#"{"m": 1}"#), "missing field `n` (column 8)");
        assert_eq!(message(r#"{"n": 1"#), "JSON ends early at column 7");
        assert_eq!(message("secret prompt"), "invalid JSON syntax at column 1");
    }
}

/// What [`read_lines_or_document`] calls with each record's text, its line and the sink.
pub type EachRecord<'f> =
    dyn FnMut(&str, u64, &mut dyn crate::Sink) -> Result<(), infertrace_schema::DatasetError> + 'f;

/// Reads JSON records one per line, or one document spread over many lines (its first line `{` or `[` alone, or
/// an array left open), and hands each record's text to `each` with its line (a document's first line). Blank
/// lines are skipped; a line that is not UTF-8 is one diagnostic. Returns the lines read.
///
/// A document is held whole: it is one record (a saved HTTP body, a bucket object, a test fixture), not a stream.
pub fn read_lines_or_document(
    input: &mut dyn std::io::BufRead,
    sink: &mut dyn crate::Sink,
    each: &mut EachRecord<'_>,
) -> Result<u64, crate::ParseError> {
    let mut lines = crate::LineReader::new(input);
    let mut document: Option<(u64, String)> = None;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = crate::utf8_line(line_no, bytes, sink) else { continue };
        if let Some((_, text)) = document.as_mut() {
            text.push_str(line);
            text.push('\n');
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "{" || trimmed == "[" || (trimmed.starts_with('[') && !trimmed.ends_with(']')) {
            document = Some((line_no, format!("{line}\n")));
            continue;
        }
        each(trimmed, line_no, sink)?;
    }
    if let Some((line_no, text)) = document {
        each(&text, line_no, sink)?;
    }
    Ok(lines.lines_read())
}
