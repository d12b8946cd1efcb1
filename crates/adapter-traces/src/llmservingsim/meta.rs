//! `meta.json`: one document whose scalars go to `details`, read as a stream.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read};

use infertrace_adapter::json::{Scalar, error_message, is_free_text_key};
use infertrace_adapter::{Diagnostic, DiagnosticKind, ParseError, ParseReport, Sink};
use infertrace_schema::ClockDomain;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

/// Entries kept per object (top level and each kept sub-object).
const MAX_ENTRIES: usize = 64;
/// Sub-objects whose scalars are kept.
const OBJECTS: &[&str] = &["engine_kwargs", "kv_cache", "hardware"];
/// Skipped unread: vLLM's whole resolved configuration.
const SKIPPED: &[&str] = &["resolved_config"];

/// The top-level scalars and the kept sub-objects' scalars.
#[derive(Debug, Default)]
struct Meta(BTreeMap<String, Value>);

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Meta;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if SKIPPED.contains(&key.as_str()) || kept.len() >= MAX_ENTRIES {
                        map.next_value::<IgnoredAny>()?;
                    } else if OBJECTS.contains(&key.as_str()) {
                        let ScalarMap(entries) = map.next_value()?;
                        kept.insert(key, Value::Object(entries.into_iter().collect()));
                    } else if let Scalar(Some(value)) = map.next_value()? {
                        let value = match (key.as_str(), value) {
                            ("dataset_path", Value::String(path)) => Value::String(file_name(&path).to_owned()),
                            // Text under a text key could quote a request: not copied.
                            (_, Value::String(_)) if is_free_text_key(&key) => continue,
                            (_, value) => value,
                        };
                        kept.insert(key, value);
                    }
                }
                Ok(Meta(kept))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The scalar entries of an object (nested values skipped), at most [`MAX_ENTRIES`]; empty for `null`.
struct ScalarMap(BTreeMap<String, Value>);

impl<'de> Deserialize<'de> for ScalarMap {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ScalarMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object or null")
            }
            fn visit_unit<E>(self) -> Result<ScalarMap, E> {
                Ok(ScalarMap(BTreeMap::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ScalarMap, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if kept.len() >= MAX_ENTRIES {
                        map.next_value::<IgnoredAny>()?;
                    } else if let Scalar(Some(value)) = map.next_value()?
                        && !(value.is_string() && is_free_text_key(&key))
                    {
                        kept.insert(key, value);
                    }
                }
                Ok(ScalarMap(kept))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The last component of a path written on another machine.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Counts the lines of what passes through, for the report.
struct LineCounter<R> {
    inner: R,
    newlines: u64,
    last: Option<u8>,
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.newlines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        if n > 0 {
            self.last = buf.get(n - 1).copied();
        }
        Ok(n)
    }
}

impl<R> LineCounter<R> {
    fn lines(&self) -> u64 {
        self.newlines + u64::from(self.last.is_some_and(|b| b != b'\n'))
    }
}

pub(super) fn parse(input: &mut dyn BufRead, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let mut counter = LineCounter { inner: input, newlines: 0, last: None };
    let mut details = BTreeMap::new();
    let result = {
        let mut de = serde_json::Deserializer::from_reader(&mut counter);
        Meta::deserialize(&mut de).and_then(|meta| de.end().map(|()| meta))
    };
    match result {
        Ok(Meta(kept)) => details = kept,
        Err(e) if e.is_io() => return Err(ParseError::Read(io::Error::other(e))),
        Err(e) => {
            sink.diagnostic(Diagnostic::new(e.line() as u64, DiagnosticKind::MalformedJson, error_message(&e)));
            // The rest is not read as JSON, only counted.
            io::copy(&mut counter, &mut io::sink())?;
        }
    }
    Ok(ParseReport {
        format_version: Some("bench-meta".to_owned()),
        clock_domain: ClockDomain::Utc,
        year: None,
        lines: counter.lines(),
        details,
    })
}
