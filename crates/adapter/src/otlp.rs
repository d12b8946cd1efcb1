//! OpenTelemetry trace exports (OTLP), as the adapters of span formats read them: the JSON encoding, borrowed from
//! the text, and the protobuf encoding, viewed through the same types.
//!
//! Files come in three shapes, all read by [`read_exports`]:
//!
//! - **OTLP/JSON lines**: one `ExportTraceServiceRequest` per line, as the OpenTelemetry Collector's `file`
//!   exporter writes with `format: json` (the default).
//! - **One JSON document**, pretty-printed over many lines (a first line that is `{` alone), as a test fixture or a
//!   saved HTTP body is.
//! - **OTLP protobuf**: the `file` exporter's `format: proto`, each `ExportTraceServiceRequest` after its length as a
//!   4-byte big-endian integer; or one message alone (a saved `application/x-protobuf` body). A "line" of a
//!   protobuf file is the position of its message, from 1.
//!
//! Only the members span adapters read are modelled; the rest (links, trace state, dropped counts) is skipped,
//! and so is every attribute's content until an adapter asks for it by key.

use std::borrow::Cow;
use std::io::{BufRead, Read as _};

use infertrace_schema::DatasetError;
use serde::Deserialize;

use crate::{Diagnostic, DiagnosticKind, ParseError, Sink, json};

/// One `ExportTraceServiceRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Export<'a> {
    /// Spans grouped by the resource (service, host) that emitted them.
    #[serde(borrow, default, alias = "resource_spans")]
    pub resource_spans: Vec<ResourceSpans<'a>>,
}

/// The spans of one resource.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpans<'a> {
    /// The resource's attributes (`service.name`, `host.name`, …).
    #[serde(borrow, default)]
    pub resource: Option<Resource<'a>>,
    /// Spans by instrumentation scope (`instrumentationLibrarySpans` before OTLP 0.15).
    #[serde(borrow, default, alias = "scope_spans", alias = "instrumentationLibrarySpans")]
    pub scope_spans: Vec<ScopeSpans<'a>>,
}

/// A resource: its attributes.
#[derive(Debug, Default, Deserialize)]
pub struct Resource<'a> {
    /// Attributes.
    #[serde(borrow, default)]
    pub attributes: Vec<KeyValue<'a>>,
}

/// The spans of one instrumentation scope.
#[derive(Debug, Default, Deserialize)]
pub struct ScopeSpans<'a> {
    /// Spans.
    #[serde(borrow, default)]
    pub spans: Vec<Span<'a>>,
}

/// One span.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span<'a> {
    /// Trace id: 32 hex digits in OTLP/JSON.
    #[serde(borrow, default, alias = "trace_id")]
    pub trace_id: Option<Cow<'a, str>>,
    /// Span id: 16 hex digits.
    #[serde(borrow, default, alias = "span_id")]
    pub span_id: Option<Cow<'a, str>>,
    /// Parent span id; empty or absent for a root span.
    #[serde(borrow, default, alias = "parent_span_id")]
    pub parent_span_id: Option<Cow<'a, str>>,
    /// Span name.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// Start, in UTC nanoseconds.
    #[serde(borrow, default, alias = "start_time_unix_nano")]
    pub start_time_unix_nano: Option<Number<'a>>,
    /// End, in UTC nanoseconds.
    #[serde(borrow, default, alias = "end_time_unix_nano")]
    pub end_time_unix_nano: Option<Number<'a>>,
    /// Attributes.
    #[serde(borrow, default)]
    pub attributes: Vec<KeyValue<'a>>,
    /// Events (timed annotations).
    #[serde(borrow, default)]
    pub events: Vec<Event<'a>>,
    /// Status.
    #[serde(default)]
    pub status: Option<SpanStatus>,
}

impl Span<'_> {
    /// The attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&AnyValue<'_>> {
        attribute(&self.attributes, key)
    }

    /// Whether the status is an error: code 2, `STATUS_CODE_ERROR` (JSON writes the number or the enum name).
    pub fn is_error(&self) -> bool {
        self.status.as_ref().and_then(|s| s.code.as_ref()).is_some_and(|c| {
            c.as_i64() == Some(2) || c.as_str() == Some("STATUS_CODE_ERROR") || c.as_str() == Some("ERROR")
        })
    }
}

/// A span event.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event<'a> {
    /// Event name.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// When it happened, in UTC nanoseconds.
    #[serde(borrow, default, alias = "time_unix_nano")]
    pub time_unix_nano: Option<Number<'a>>,
    /// Attributes.
    #[serde(borrow, default)]
    pub attributes: Vec<KeyValue<'a>>,
}

/// A span's status.
#[derive(Debug, Default, Deserialize)]
pub struct SpanStatus {
    /// The code: a number or the enum's name.
    #[serde(default)]
    pub code: Option<serde_json::Value>,
}

/// One attribute.
#[derive(Debug, Deserialize)]
pub struct KeyValue<'a> {
    /// Attribute name.
    #[serde(borrow)]
    pub key: Cow<'a, str>,
    /// Attribute value.
    #[serde(borrow, default)]
    pub value: AnyValue<'a>,
}

/// OTLP `AnyValue`; 64-bit integers are JSON strings in OTLP/JSON, but some exporters write numbers.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnyValue<'a> {
    /// A string.
    #[serde(borrow, default, alias = "string_value")]
    pub string_value: Option<Cow<'a, str>>,
    /// A 64-bit integer.
    #[serde(borrow, default, alias = "int_value")]
    pub int_value: Option<Number<'a>>,
    /// A double.
    #[serde(default, alias = "double_value")]
    pub double_value: Option<f64>,
    /// A boolean.
    #[serde(default, alias = "bool_value")]
    pub bool_value: Option<bool>,
    /// An array of values.
    #[serde(borrow, default, alias = "array_value")]
    pub array_value: Option<ArrayValue<'a>>,
}

/// An array attribute.
#[derive(Debug, Default, Deserialize)]
pub struct ArrayValue<'a> {
    /// The values.
    #[serde(borrow, default)]
    pub values: Vec<AnyValue<'a>>,
}

/// A number as OTLP/JSON writes one: an integer, a float or (64-bit integers) a string of digits.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Number<'a> {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Digits in a string.
    Text(#[serde(borrow)] Cow<'a, str>),
}

impl Number<'_> {
    /// The number as an integer (a float truncated).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Number::Int(n) => Some(*n),
            Number::Float(x) => Some(*x as i64),
            Number::Text(t) => t.parse().ok(),
        }
    }
}

impl AnyValue<'_> {
    /// A number: a double, or an integer (also one written as a string value of digits).
    pub fn as_f64(&self) -> Option<f64> {
        self.double_value
            .or_else(|| self.int_value.as_ref()?.as_i64().map(|n| n as f64))
            .or_else(|| self.string_value.as_deref()?.trim().parse().ok())
    }

    /// A non-negative count that fits 32 bits: an integer, a whole double, or a string of digits.
    pub fn as_u32(&self) -> Option<u32> {
        let n = match (&self.int_value, self.double_value, self.string_value.as_deref()) {
            (Some(n), _, _) => n.as_i64()?,
            (None, Some(x), _) if x.fract() == 0.0 => x as i64,
            (None, None, Some(text)) => text.trim().parse().ok()?,
            _ => return None,
        };
        u32::try_from(n).ok()
    }

    /// The string value, or the first string of an array.
    pub fn as_str(&self) -> Option<&str> {
        self.string_value.as_deref().or_else(|| self.array_value.as_ref()?.values.first()?.string_value.as_deref())
    }
}

/// The attribute `key` of `attributes`.
pub fn attribute<'s, 'a>(attributes: &'s [KeyValue<'a>], key: &str) -> Option<&'s AnyValue<'a>> {
    attributes.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

/// What [`read_exports`] calls with each export, its line (or message position) and the sink.
pub type EachExport<'f> = dyn FnMut(&Export<'_>, u64, &mut dyn Sink) -> Result<(), DatasetError> + 'f;

/// Reads every export of an OTLP trace file (any of the shapes in the module documentation) and hands each to
/// `each` with its line (JSON) or message position (protobuf). A line or message that is no export is one
/// `malformed-json` or `malformed-record` diagnostic. Returns the lines or messages read.
pub fn read_exports(
    input: &mut dyn BufRead,
    sink: &mut dyn Sink,
    each: &mut EachExport<'_>,
) -> Result<u64, ParseError> {
    if looks_like_proto(input.fill_buf()?) {
        return read_proto(input, sink, each);
    }
    json::read_lines_or_document(input, sink, &mut |text, line, sink| json_export(text, line, sink, each))
}

fn json_export(text: &str, line: u64, sink: &mut dyn Sink, each: &mut EachExport<'_>) -> Result<(), DatasetError> {
    match serde_json::from_str::<Export<'_>>(text) {
        Ok(export) => each(&export, line, sink),
        Err(e) => {
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedJson, json::error_message(&e)));
            Ok(())
        }
    }
}

/// Largest protobuf message read (the collector's default batch is far smaller); a larger length prefix is taken
/// as the sign of a file that is one message without prefixes, or not protobuf at all.
const MAX_MESSAGE_BYTES: usize = 256 << 20;

fn read_proto(input: &mut dyn BufRead, sink: &mut dyn Sink, each: &mut EachExport<'_>) -> Result<u64, ParseError> {
    let head = input.fill_buf()?;
    if !framed(head) {
        // One message without a length prefix: the whole input.
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes)?;
        decode_one(&bytes, 1, sink, each)?;
        return Ok(1);
    }
    let mut position = 0;
    loop {
        if input.fill_buf()?.is_empty() {
            return Ok(position);
        }
        position += 1;
        let mut prefix = [0u8; 4];
        let cut = match input.read_exact(&mut prefix) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => true,
            other => {
                other?;
                false
            }
        };
        let length = u32::from_be_bytes(prefix) as usize;
        if cut || length > MAX_MESSAGE_BYTES {
            let what = if cut { "the file ends inside a length prefix" } else { "a length prefix past 256 MiB" };
            sink.diagnostic(Diagnostic::new(
                position,
                DiagnosticKind::MalformedRecord,
                format!("{what}: the rest of the protobuf file is not read"),
            ));
            return Ok(position);
        }
        let mut bytes = Vec::with_capacity(length.min(1 << 20));
        input.take(length as u64).read_to_end(&mut bytes)?;
        if bytes.len() < length {
            sink.diagnostic(Diagnostic::new(
                position,
                DiagnosticKind::MalformedRecord,
                format!("the file ends inside a message ({} of {length} bytes)", bytes.len()),
            ));
            return Ok(position);
        }
        decode_one(&bytes, position, sink, each)?;
    }
}

/// Whether `head` starts with a 4-byte big-endian length followed by an `ExportTraceServiceRequest`'s first field
/// (`resource_spans`, field 1, length-delimited: byte 0x0A).
fn framed(head: &[u8]) -> bool {
    let length = |h: &[u8]| u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
    head.len() >= 5 && head[4] == 0x0A && (1..=MAX_MESSAGE_BYTES).contains(&length(head))
}

fn decode_one(bytes: &[u8], position: u64, sink: &mut dyn Sink, each: &mut EachExport<'_>) -> Result<(), DatasetError> {
    use prost::Message as _;
    match proto::ExportTraceServiceRequest::decode(bytes) {
        Ok(message) => each(&message.view(), position, sink),
        Err(_) => {
            // prost's message names fields and wire types only, but is kept out anyway: a fixed text suffices.
            sink.diagnostic(Diagnostic::new(
                position,
                DiagnosticKind::MalformedRecord,
                "not an OTLP ExportTraceServiceRequest protobuf message",
            ));
            Ok(())
        }
    }
}

/// Whether `head` looks like OTLP protobuf: framed as the collector's file exporter writes, or one message whose
/// first field is `resource_spans` (byte 0x0A, which is also a newline: a text file has no other control bytes
/// in its first 64, a span's ids and fixed-width times almost surely do).
pub fn looks_like_proto(head: &[u8]) -> bool {
    let binary = |b: &u8| *b < 0x09 || (0x0E..0x20).contains(b) || *b == 0x0B || *b == 0x0C;
    framed(head) || (head.first() == Some(&0x0A) && head.iter().take(64).any(binary))
}

/// The OTLP protobuf messages of a trace export, with the field numbers of `opentelemetry-proto`
/// (`opentelemetry/proto/collector/trace/v1/trace_service.proto`, `trace/v1/trace.proto`,
/// `common/v1/common.proto`, `resource/v1/resource.proto`). Fields not listed are skipped by the decoder.
pub mod proto {
    use std::borrow::Cow;
    use std::fmt::Write as _;

    /// `ExportTraceServiceRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportTraceServiceRequest {
        /// `resource_spans = 1`.
        #[prost(message, repeated, tag = "1")]
        pub resource_spans: Vec<ResourceSpans>,
    }

    /// `ResourceSpans`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceSpans {
        /// `resource = 1`.
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        /// `scope_spans = 2`.
        #[prost(message, repeated, tag = "2")]
        pub scope_spans: Vec<ScopeSpans>,
        /// `instrumentation_library_spans = 1000` (before OTLP 0.15, the same shape).
        #[prost(message, repeated, tag = "1000")]
        pub instrumentation_library_spans: Vec<ScopeSpans>,
    }

    /// `Resource`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        /// `attributes = 1`.
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }

    /// `ScopeSpans`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeSpans {
        /// `spans = 2`.
        #[prost(message, repeated, tag = "2")]
        pub spans: Vec<Span>,
    }

    /// `Span`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Span {
        /// `trace_id = 1`, 16 bytes.
        #[prost(bytes = "vec", tag = "1")]
        pub trace_id: Vec<u8>,
        /// `span_id = 2`, 8 bytes.
        #[prost(bytes = "vec", tag = "2")]
        pub span_id: Vec<u8>,
        /// `parent_span_id = 4`, empty for a root span.
        #[prost(bytes = "vec", tag = "4")]
        pub parent_span_id: Vec<u8>,
        /// `name = 5`.
        #[prost(string, tag = "5")]
        pub name: String,
        /// `start_time_unix_nano = 7`.
        #[prost(fixed64, tag = "7")]
        pub start_time_unix_nano: u64,
        /// `end_time_unix_nano = 8`.
        #[prost(fixed64, tag = "8")]
        pub end_time_unix_nano: u64,
        /// `attributes = 9`.
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        /// `events = 11`.
        #[prost(message, repeated, tag = "11")]
        pub events: Vec<Event>,
        /// `status = 15`.
        #[prost(message, optional, tag = "15")]
        pub status: Option<Status>,
    }

    /// `Span.Event`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Event {
        /// `time_unix_nano = 1`.
        #[prost(fixed64, tag = "1")]
        pub time_unix_nano: u64,
        /// `name = 2`.
        #[prost(string, tag = "2")]
        pub name: String,
        /// `attributes = 3`.
        #[prost(message, repeated, tag = "3")]
        pub attributes: Vec<KeyValue>,
    }

    /// `Status`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        /// `code = 3`: 0 unset, 1 ok, 2 error.
        #[prost(int32, tag = "3")]
        pub code: i32,
    }

    /// `KeyValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        /// `key = 1`.
        #[prost(string, tag = "1")]
        pub key: String,
        /// `value = 2`.
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }

    /// `AnyValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        /// The `value` one-of.
        #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5")]
        pub value: Option<Value>,
    }

    /// `AnyValue.value` (`kvlist_value = 6` and `bytes_value = 7` are skipped).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// `string_value = 1`.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// `bool_value = 2`.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// `int_value = 3`.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// `double_value = 4`.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// `array_value = 5`.
        #[prost(message, tag = "5")]
        ArrayValue(ArrayValue),
    }

    /// `ArrayValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ArrayValue {
        /// `values = 1`.
        #[prost(message, repeated, tag = "1")]
        pub values: Vec<AnyValue>,
    }

    fn hex(bytes: &[u8]) -> Option<Cow<'static, str>> {
        (!bytes.is_empty()).then(|| {
            let mut text = String::with_capacity(bytes.len() * 2);
            for b in bytes {
                let _ = write!(text, "{b:02x}");
            }
            Cow::Owned(text)
        })
    }

    fn nanos<'a>(ns: u64) -> Option<super::Number<'a>> {
        (ns != 0).then(|| super::Number::Int(i64::try_from(ns).unwrap_or(i64::MAX)))
    }

    fn any(value: &AnyValue) -> super::AnyValue<'_> {
        let mut out = super::AnyValue::default();
        match &value.value {
            Some(Value::StringValue(s)) => out.string_value = Some(Cow::Borrowed(s)),
            Some(Value::BoolValue(b)) => out.bool_value = Some(*b),
            Some(Value::IntValue(n)) => out.int_value = Some(super::Number::Int(*n)),
            Some(Value::DoubleValue(x)) => out.double_value = Some(*x),
            Some(Value::ArrayValue(a)) => {
                out.array_value = Some(super::ArrayValue { values: a.values.iter().map(any).collect() });
            }
            None => {}
        }
        out
    }

    fn attributes(list: &[KeyValue]) -> Vec<super::KeyValue<'_>> {
        list.iter()
            .map(|kv| super::KeyValue {
                key: Cow::Borrowed(&kv.key),
                value: kv.value.as_ref().map(any).unwrap_or_default(),
            })
            .collect()
    }

    impl ExportTraceServiceRequest {
        /// The message as the JSON model, borrowing its strings.
        pub fn view(&self) -> super::Export<'_> {
            let resource_spans = self
                .resource_spans
                .iter()
                .map(|r| super::ResourceSpans {
                    resource: r
                        .resource
                        .as_ref()
                        .map(|res| super::Resource { attributes: attributes(&res.attributes) }),
                    scope_spans: r
                        .scope_spans
                        .iter()
                        .chain(&r.instrumentation_library_spans)
                        .map(|s| super::ScopeSpans { spans: s.spans.iter().map(span).collect() })
                        .collect(),
                })
                .collect();
            super::Export { resource_spans }
        }
    }

    fn span(s: &Span) -> super::Span<'_> {
        super::Span {
            trace_id: hex(&s.trace_id),
            span_id: hex(&s.span_id),
            parent_span_id: hex(&s.parent_span_id),
            name: Cow::Borrowed(&s.name),
            start_time_unix_nano: nanos(s.start_time_unix_nano),
            end_time_unix_nano: nanos(s.end_time_unix_nano),
            attributes: attributes(&s.attributes),
            events: s
                .events
                .iter()
                .map(|e| super::Event {
                    name: Cow::Borrowed(&e.name),
                    time_unix_nano: nanos(e.time_unix_nano),
                    attributes: attributes(&e.attributes),
                })
                .collect(),
            status: s.status.as_ref().map(|st| super::SpanStatus { code: Some(st.code.into()) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::CollectSink;

    fn proto_export(trace: u8, name: &str) -> proto::ExportTraceServiceRequest {
        let kv = |key: &str, value: proto::Value| proto::KeyValue {
            key: key.to_owned(),
            value: Some(proto::AnyValue { value: Some(value) }),
        };
        proto::ExportTraceServiceRequest {
            resource_spans: vec![proto::ResourceSpans {
                resource: Some(proto::Resource {
                    attributes: vec![kv("service.name", proto::Value::StringValue("agent".into()))],
                }),
                scope_spans: vec![proto::ScopeSpans {
                    spans: vec![proto::Span {
                        trace_id: vec![trace; 16],
                        span_id: vec![0xab, 0, 0, 0, 0, 0, 0, 1],
                        parent_span_id: Vec::new(),
                        name: name.to_owned(),
                        start_time_unix_nano: 1_700_000_000_000_000_000,
                        end_time_unix_nano: 1_700_000_001_500_000_000,
                        attributes: vec![
                            kv("gen_ai.usage.input_tokens", proto::Value::IntValue(1200)),
                            kv("gen_ai.request.temperature", proto::Value::DoubleValue(0.5)),
                        ],
                        events: Vec::new(),
                        status: Some(proto::Status { code: 2 }),
                    }],
                }],
                instrumentation_library_spans: Vec::new(),
            }],
        }
    }

    /// `(line, trace id, span name, input tokens, error)` of a span.
    type Read = (u64, String, String, Option<u32>, bool);

    /// Every span read from `bytes`.
    fn spans(bytes: &[u8]) -> (Vec<Read>, CollectSink) {
        let mut sink = CollectSink::default();
        let mut out = Vec::new();
        read_exports(&mut &bytes[..], &mut sink, &mut |export, line, _| {
            for s in export.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
                let input = s.attribute("gen_ai.usage.input_tokens").and_then(AnyValue::as_u32);
                out.push((
                    line,
                    s.trace_id.as_deref().unwrap_or("").to_owned(),
                    s.name.to_string(),
                    input,
                    s.is_error(),
                ));
            }
            Ok(())
        })
        .unwrap();
        (out, sink)
    }

    #[test]
    fn length_prefixed_protobuf_messages_and_a_lone_message() {
        let mut file = Vec::new();
        for (trace, name) in [(1u8, "chat m"), (2, "execute_tool t")] {
            let bytes = proto_export(trace, name).encode_to_vec();
            file.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes());
            file.extend_from_slice(&bytes);
        }
        let (read, sink) = spans(&file);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(
            read,
            [
                (1, "01".repeat(16), "chat m".to_owned(), Some(1200), true),
                (2, "02".repeat(16), "execute_tool t".to_owned(), Some(1200), true)
            ]
        );
        let lone = proto_export(3, "chat m").encode_to_vec();
        assert_eq!(spans(&lone).0, [(1, "03".repeat(16), "chat m".to_owned(), Some(1200), true)]);
        // Cut inside the second message: the first is read, the cut is one diagnostic.
        let (read, sink) = spans(&file[..file.len() - 3]);
        assert_eq!((read.len(), sink.diagnostics.len()), (1, 1));
        assert_eq!(sink.diagnostics[0].line, 2);
        // Two bytes after the last message: a cut length prefix, the third message's.
        let mut cut = file.clone();
        cut.extend_from_slice(&[0, 0]);
        let (read, sink) = spans(&cut);
        assert_eq!((read.len(), sink.diagnostics.len(), sink.diagnostics[0].line), (2, 1, 3));
        assert!(sink.diagnostics[0].message.contains("inside a length prefix"), "{:?}", sink.diagnostics);
        // Garbage after a valid prefix is a diagnostic, not a panic.
        let mut garbage = vec![0, 0, 0, 3, 0x0A, 0xFF, 0xFF];
        garbage.extend_from_slice(&[0, 0, 0, 1]);
        let (read, sink) = spans(&garbage);
        assert_eq!((read.len(), sink.diagnostics.len()), (0, 2));
    }

    #[test]
    fn json_lines_documents_and_snake_case_names() {
        let line = r#"{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"aa","name":"chat m","attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":"7"}}],"status":{"code":"STATUS_CODE_ERROR"}}]}]}]}"#;
        let (read, sink) = spans(format!("{line}\nnot json\n").as_bytes());
        assert_eq!(read, [(1, "aa".to_owned(), "chat m".to_owned(), Some(7), true)]);
        assert_eq!(sink.diagnostics.len(), 1);
        assert_eq!((sink.diagnostics[0].line, sink.diagnostics[0].kind), (2, DiagnosticKind::MalformedJson));
        let doc =
            "{\n  \"resourceSpans\": [{\"instrumentationLibrarySpans\": [{\"spans\": [{\"name\": \"x\"}]}]}]\n}\n";
        assert_eq!(spans(doc.as_bytes()).0, [(1, String::new(), "x".to_owned(), None, false)]);
    }
}
