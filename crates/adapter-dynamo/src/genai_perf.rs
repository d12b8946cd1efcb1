//! `genai-perf`: what GenAI-Perf (triton-inference-server/perf_analyzer, `genai-perf` 0.0.x) leaves in its artifact
//! directory: perf_analyzer's per-request `profile_export.json`, and GenAI-Perf's summaries
//! `profile_export_genai_perf.json` and `profile_export_genai_perf.csv`.
//!
//! `profile_export.json` is written by perf_analyzer's C++ `ProfileDataExporter` (RapidJSON, one line, keys in this
//! order; `sequence_id` only when non-zero; timestamps are `system_clock` nanoseconds since the epoch):
//!
//! ```text
//! 2023-08   {"experiments":[{"experiment":{"mode":"concurrency"|"request_rate","value":N},
//!                            "requests":[{"timestamp":ns,"sequence_id"?:N,"response_timestamps":[ns,…]}],
//!                            "window_boundaries":[ns,…]}],
//!            "version":"<perf_analyzer version>"}
//! 2024-02   + per request "response_outputs":[{<output name>:<value>},…] after "response_timestamps"
//! 2024-03   + per request "request_inputs":{<input name>:<value>} before "response_timestamps"
//!             (OpenAI: {"payload":"<request JSON>"}; Triton: {"text_input":…,"max_tokens":N,…})
//! 2024-05   + top-level "service_kind" (triton|tfserving|torchserve|triton_c_api|openai|dynamic_grpc) and "endpoint"
//! ```
//!
//! Each request becomes one row: `arrival_time` = `timestamp`, `first_token_time` = the first response timestamp,
//! `completion_time` = the last; `ttft_s` and `e2e_s` follow from them; `tpot_s` = (last − first) / (responses − 1)
//! is the mean time *per response chunk* after the first, which equals the time per output token only when every
//! chunk carries one token. `request_id` is `<file stem>:<experiment index>:<request index>` (both from 0, in file
//! order), `session_id` is the Triton `sequence_id` when written, `input_tokens` the length of a `request_inputs`
//! `input_ids` tensor (triton_c_api), `max_tokens` a numeric `request_inputs.max_tokens`. A request without response
//! timestamps keeps its arrival and gets status `unknown` (GenAI-Perf skips such requests); any other request is
//! `ok`, because perf_analyzer stops on a failed request instead of recording it.
//!
//! Deliberately not read: `request_inputs` texts and payloads and every `response_outputs` value are skipped unread
//! (privacy), so `output_tokens` is always null and `model` is not known. GenAI-Perf counts output tokens by
//! re-tokenizing the outputs and, for OpenAI streams, first drops the chunks without content (the role-only first
//! chunk, empty deltas, `data: [DONE]`) together with their timestamps. This adapter uses the timestamps as written,
//! so its TTFT can be earlier, and its end-to-end latency later, than GenAI-Perf's report by the time of those
//! chunks. The document is read as a stream and each request's row is written as soon as its object closes; only
//! per-experiment counts are kept, so memory does not grow with the number of requests.
//!
//! Experiments (`mode`, `value`, request count, `window_boundaries`) and `version`, `service_kind`, `endpoint` go to
//! the manifest's `details`.
//!
//! The summaries have no per-request data and write no rows; their numbers go to `details`:
//! - `profile_export_genai_perf.json` (`json.dump(indent=2)`): `{<metric>: {"unit", "avg", "p1"…"p99", "min",
//!   "max", "std"}, …, "input_config": {…}, "sessions"?: {…}, "telemetry_stats"?: {…}}` → `details.statistics`
//!   (numbers and units only), `details.model_names` from `input_config`, `details.sessions` (a count),
//!   `details.telemetry_stats`. AIPerf's summary JSON copies this shape; a head with AIPerf's own keys is left to
//!   the `aiperf` adapter, and a head with neither is claimed with low confidence only.
//! - `profile_export_genai_perf.csv` (Python `csv`, CRLF, values `{:,.2f}` so thousands are quoted as `"1,234.50"`,
//!   `N/A` when missing): a `Metric,avg,min,max,p99,p95,p90,p75,p50,p25` table (`,p10,p5,p1` from 0.0.14), a blank
//!   line, a `Metric,Value` table, then optionally `Metric,GPU,avg,…` and `Metric,GPU,Value` telemetry tables →
//!   `details.statistics`, `details.system`, `details.telemetry`, `details.telemetry_constants`, keyed by the
//!   row labels as written (`Time To First Token (ms)`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::BufRead;

use infertrace_adapter::json::Scalar;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The GenAI-Perf / perf_analyzer adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenaiPerf;

impl GenaiPerf {
    /// Format id.
    pub const ID: &'static str = "genai-perf";
}

/// The first columns of every GenAI-Perf request-metrics CSV table (AIPerf's start `Metric,avg,min,max,p1` or
/// `…,max,sum`).
const CSV_HEADER: &str = "Metric,avg,min,max,p99,p95,p90,p75,p50,p25";
/// The first columns of the GPU telemetry table, which older releases wrote to a file of its own.
const CSV_TELEMETRY_HEADER: &str = "Metric,GPU,avg,min,max,p99,p95,p90,p75,p50,p25";
/// Keys only AIPerf's summary JSON has at its start.
const AIPERF_KEYS: &[&str] = &["\"schema_version\"", "\"aiperf_version\"", "\"benchmark_id\"", "\"records\""];
/// Metrics GenAI-Perf writes first in its summary JSON (`request_throughput`, `request_latency`, …).
const SUMMARY_KEYS: &[&str] = &["\"request_throughput\"", "\"request_latency\"", "\"time_to_first_token\""];

impl Adapter for GenaiPerf {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "GenAI-Perf / perf_analyzer profile_export.json (2023-08+, per-request rows), and the GenAI-Perf summary \
         JSON and CSV"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if text.starts_with(CSV_HEADER) || text.starts_with(CSV_TELEMETRY_HEADER) {
            return Some(Confidence::High);
        }
        if !text.starts_with('{') {
            return None;
        }
        let has = |key: &str| text.contains(key);
        let profile = has("\"experiments\"")
            && ((has("\"experiment\"") && has("\"mode\""))
                || has("\"response_timestamps\"")
                || has("\"service_kind\""));
        if profile {
            return Some(Confidence::High);
        }
        let summary = has("\"unit\"") && has("\"avg\"") && SUMMARY_KEYS.iter().any(|k| has(k));
        (summary && !AIPERF_KEYS.iter().any(|k| has(k))).then_some(Confidence::Low)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let first = input.fill_buf()?.iter().copied().find(|b| !b.is_ascii_whitespace());
        if first == Some(b'{') { parse_json(input, ctx, sink) } else { parse_csv(input, sink) }
    }
}

/// Counts the newlines of what passes through. serde_json reads a reader one byte at a time, so the count is the
/// line the parser is on.
struct CountingReader<'r> {
    inner: &'r mut dyn BufRead,
    newlines: &'r Cell<u64>,
    last: Option<u8>,
}

impl std::io::Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let newlines = memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        self.newlines.set(self.newlines.get() + newlines);
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

/// What the streamed document leaves behind besides the rows it wrote.
struct State<'a> {
    sink: &'a mut dyn Sink,
    source_file: &'a str,
    stem: String,
    newlines: &'a Cell<u64>,
    /// The first failure to write a row; the parse stops and returns it.
    write_error: Option<DatasetError>,
    experiments: Vec<Value>,
    requests: u64,
    without_responses: u64,
    saw_outputs: bool,
    saw_inputs: bool,
    /// Top-level scalars (`version`, `service_kind`, `endpoint`, …).
    scalars: BTreeMap<String, Value>,
    /// Summary metrics, numbers and units only.
    statistics: BTreeMap<String, Value>,
    model_names: Option<Value>,
    sessions: Option<u64>,
    telemetry: Option<Value>,
}

impl State<'_> {
    fn line(&self) -> u64 {
        self.newlines.get() + 1
    }

    fn diagnostic(&mut self, kind: DiagnosticKind, message: impl Into<String>) {
        let line = self.line();
        self.sink.diagnostic(Diagnostic::new(line, kind, message));
    }
}

fn parse_json(input: &mut dyn BufRead, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let newlines = Cell::new(0);
    let mut state = State {
        sink,
        source_file: ctx.source_file,
        stem: ctx.source_stem().to_owned(),
        newlines: &newlines,
        write_error: None,
        experiments: Vec::new(),
        requests: 0,
        without_responses: 0,
        saw_outputs: false,
        saw_inputs: false,
        scalars: BTreeMap::new(),
        statistics: BTreeMap::new(),
        model_names: None,
        sessions: None,
        telemetry: None,
    };
    let mut reader = CountingReader { inner: input, newlines: &newlines, last: None };
    let mut de = serde_json::Deserializer::from_reader(&mut reader);
    let result = Document(&mut state).deserialize(&mut de).and_then(|saw_experiments| {
        de.end()?;
        Ok(saw_experiments)
    });
    drop(de);
    let lines = newlines.get() + u64::from(reader.last.is_some_and(|b| b != b'\n'));
    if let Some(e) = state.write_error.take() {
        return Err(ParseError::Write(e));
    }
    let saw_experiments = match result {
        Ok(saw) => saw,
        Err(e) if e.is_io() => return Err(ParseError::Read(e.into())),
        Err(e) => {
            state.sink.diagnostic(Diagnostic::new(
                e.line() as u64,
                DiagnosticKind::MalformedJson,
                json::error_message(&e),
            ));
            !state.experiments.is_empty() || state.requests > 0
        }
    };
    let mut details = std::mem::take(&mut state.scalars);
    let format_version = if saw_experiments {
        if !state.experiments.is_empty() {
            details.insert("experiments".to_owned(), Value::Array(std::mem::take(&mut state.experiments)));
        }
        if state.without_responses > 0 {
            details.insert("requests_without_responses".to_owned(), Value::from(state.without_responses));
        }
        if details.contains_key("service_kind") || details.contains_key("endpoint") {
            "profile_export.json 2024-05+ (service_kind, endpoint)"
        } else if state.saw_inputs {
            "profile_export.json 2024-03+ (request_inputs)"
        } else if state.saw_outputs {
            "profile_export.json 2024-02+ (response_outputs)"
        } else {
            "profile_export.json 2023-08+"
        }
    } else {
        if !state.statistics.is_empty() {
            details.insert(
                "statistics".to_owned(),
                Value::Object(std::mem::take(&mut state.statistics).into_iter().collect()),
            );
        }
        if let Some(names) = state.model_names.take() {
            details.insert("model_names".to_owned(), names);
        }
        if let Some(sessions) = state.sessions {
            details.insert("sessions".to_owned(), Value::from(sessions));
        }
        if let Some(telemetry) = state.telemetry.take() {
            details.insert("telemetry_stats".to_owned(), telemetry);
        }
        "profile_export_genai_perf.json"
    };
    Ok(ParseReport {
        format_version: Some(format_version.to_owned()),
        clock_domain: if saw_experiments { ClockDomain::Utc } else { ClockDomain::Relative },
        year: None,
        lines,
        details,
    })
}

/// The whole document; yields whether it had `experiments` (a profile export rather than a summary).
struct Document<'s, 'a>(&'s mut State<'a>);

impl<'de> DeserializeSeed<'de> for Document<'_, '_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Document<'_, '_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a GenAI-Perf profile export or summary object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let state = self.0;
        let mut saw_experiments = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "experiments" => {
                    saw_experiments = true;
                    map.next_value_seed(Experiments(state))?;
                }
                "version" | "service_kind" | "endpoint" => {
                    if let Scalar(Some(value)) = map.next_value()? {
                        state.scalars.insert(key, value);
                    }
                }
                "input_config" => {
                    let config: Value = map.next_value()?;
                    state.model_names =
                        ["model_names", "model"].iter().filter_map(|k| config.get(k)).find_map(model_names);
                }
                "sessions" => {
                    let sessions: BTreeMap<String, IgnoredAny> = map.next_value()?;
                    state.sessions = Some(sessions.len() as u64);
                }
                "telemetry_stats" => {
                    let telemetry: Value = map.next_value()?;
                    state.telemetry = numbers_and_units(telemetry);
                }
                _ => {
                    // A summary metric; anything else is kept only as far as it is numbers and units.
                    let value: Value = map.next_value()?;
                    if let Some(value) = numbers_and_units(value) {
                        state.statistics.insert(key, value);
                    }
                }
            }
        }
        Ok(saw_experiments)
    }
}

/// `value` as model names: a string or a list of strings.
fn model_names(value: &Value) -> Option<Value> {
    match value {
        Value::String(_) => Some(value.clone()),
        Value::Array(items) if items.iter().all(Value::is_string) && !items.is_empty() => Some(value.clone()),
        _ => None,
    }
}

/// The numbers of `value`, nested objects included, and the strings under a `unit` key; `None` when nothing is left.
/// Other strings are dropped: a summary has no text of its own, and a file that does is not trusted with ours.
fn numbers_and_units(value: Value) -> Option<Value> {
    match value {
        Value::Number(_) => Some(value),
        Value::Object(map) => {
            let kept: serde_json::Map<String, Value> = map
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(_) if k == "unit" => Some((k, v)),
                    v => numbers_and_units(v).map(|v| (k, v)),
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        _ => None,
    }
}

/// The `experiments` array.
struct Experiments<'s, 'a>(&'s mut State<'a>);

impl<'de> DeserializeSeed<'de> for Experiments<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Experiments<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of experiments")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while seq.next_element_seed(Experiment { state: self.0, index })?.is_some() {
            index += 1;
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.diagnostic(DiagnosticKind::MalformedRecord, "`experiments` is not a list");
        Ok(())
    }
    infertrace_adapter::scalars_as_unit!(());
}

/// One element of `experiments`.
struct Experiment<'s, 'a> {
    state: &'s mut State<'a>,
    index: u64,
}

impl<'de> DeserializeSeed<'de> for Experiment<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Experiment<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an experiment object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.state;
        let mut summary = serde_json::Map::new();
        let mut requests = 0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "experiment" => {
                    // `{"mode": "concurrency", "value": 4}`; anything else in it is not kept.
                    let mode: Value = map.next_value()?;
                    if let Some(v @ Value::String(_)) = mode.get("mode") {
                        summary.insert("mode".to_owned(), v.clone());
                    }
                    if let Some(v @ Value::Number(_)) = mode.get("value") {
                        summary.insert("value".to_owned(), v.clone());
                    }
                }
                "requests" => {
                    requests = map.next_value_seed(Requests { state: &mut *state, experiment: self.index })?;
                }
                "window_boundaries" => {
                    if let Value::Array(bounds) = map.next_value()? {
                        let bounds = bounds.into_iter().filter(Value::is_number).collect();
                        summary.insert(key, Value::Array(bounds));
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        summary.insert("requests".to_owned(), Value::from(requests));
        state.experiments.push(Value::Object(summary));
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.state.diagnostic(DiagnosticKind::NotARecord, format!("experiment {} is not an object", self.index));
        Ok(())
    }
    infertrace_adapter::scalars_as_unit!(());
}

/// The `requests` array of one experiment; yields how many elements it had.
struct Requests<'s, 'a> {
    state: &'s mut State<'a>,
    experiment: u64,
}

impl<'de> DeserializeSeed<'de> for Requests<'_, '_> {
    type Value = u64;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Requests<'_, '_> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of requests")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut index = 0;
        while seq.next_element_seed(Request { state: &mut *self.state, experiment: self.experiment, index })?.is_some()
        {
            index += 1;
        }
        Ok(index)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        self.state.diagnostic(DiagnosticKind::MalformedRecord, "`requests` is not a list");
        Ok(0)
    }
    infertrace_adapter::scalars_as_unit!(u64);
}

/// A non-negative integer, or `None` for any other JSON value (skipped without being kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lenient(Option<u64>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient(u64::try_from(v).ok()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Lenient, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The numbers kept of one `response_timestamps` list.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Responses {
    first: Option<u64>,
    last: Option<u64>,
    count: u64,
    /// Elements that are not non-negative integers (not counted in `count`).
    invalid: u64,
    /// Whether a timestamp was earlier than the one before it.
    unordered: bool,
    /// Whether the value was not a list at all.
    not_a_list: bool,
}

impl<'de> Deserialize<'de> for Responses {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Responses;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of timestamps")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Responses, A::Error> {
                let mut r = Responses::default();
                while let Some(Lenient(ts)) = seq.next_element()? {
                    let Some(ts) = ts else {
                        r.invalid += 1;
                        continue;
                    };
                    r.unordered |= r.last.is_some_and(|last| ts < last);
                    r.first.get_or_insert(ts);
                    r.last = Some(ts);
                    r.count += 1;
                }
                Ok(r)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Responses, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                self.visit_unit()
            }
            fn visit_unit<E: de::Error>(self) -> Result<Responses, E> {
                Ok(Responses { not_a_list: true, ..Responses::default() })
            }
            infertrace_adapter::scalars_as_unit!(Responses);
        }
        deserializer.deserialize_any(V)
    }
}

/// The numbers kept of one `request_inputs` object: texts and payloads are skipped unread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Inputs {
    input_ids: Option<u64>,
    max_tokens: Option<u64>,
}

impl<'de> Deserialize<'de> for Inputs {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Inputs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of request inputs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Inputs, A::Error> {
                let mut inputs = Inputs::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "input_ids" => inputs.input_ids = map.next_value::<TensorLength>()?.0,
                        "max_tokens" => inputs.max_tokens = map.next_value::<Lenient>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(inputs)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Inputs, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Inputs::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Inputs, E> {
                Ok(Inputs::default())
            }
            infertrace_adapter::scalars_as_unit!(Inputs);
        }
        deserializer.deserialize_any(V)
    }
}

/// The element count of a tensor as perf_analyzer writes it: a list, or one number for a one-element tensor.
struct TensorLength(Option<u64>);

impl<'de> Deserialize<'de> for TensorLength {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TensorLength;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tensor")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TensorLength, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(TensorLength(Some(n)))
            }
            fn visit_u64<E>(self, _: u64) -> Result<TensorLength, E> {
                Ok(TensorLength(Some(1)))
            }
            fn visit_i64<E>(self, _: i64) -> Result<TensorLength, E> {
                Ok(TensorLength(Some(1)))
            }
            fn visit_f64<E>(self, _: f64) -> Result<TensorLength, E> {
                Ok(TensorLength(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<TensorLength, E> {
                Ok(TensorLength(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<TensorLength, E> {
                Ok(TensorLength(None))
            }
            fn visit_unit<E>(self) -> Result<TensorLength, E> {
                Ok(TensorLength(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TensorLength, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TensorLength(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One element of `requests`: read, then written as a row at once.
struct Request<'s, 'a> {
    state: &'s mut State<'a>,
    experiment: u64,
    index: u64,
}

impl<'de> DeserializeSeed<'de> for Request<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// The numbers kept of one request.
#[derive(Debug, Default)]
struct RequestNumbers {
    /// `None` when absent, `Some(None)` when not a non-negative integer.
    timestamp: Option<Option<u64>>,
    sequence_id: Option<u64>,
    inputs: Option<Inputs>,
    responses: Option<Responses>,
}

impl<'de> Visitor<'de> for Request<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut numbers = RequestNumbers::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "timestamp" => numbers.timestamp = Some(map.next_value::<Lenient>()?.0),
                "sequence_id" => numbers.sequence_id = map.next_value::<Lenient>()?.0,
                "request_inputs" => {
                    self.state.saw_inputs = true;
                    numbers.inputs = Some(map.next_value::<Inputs>()?);
                }
                "response_timestamps" => numbers.responses = map.next_value()?,
                "response_outputs" => {
                    self.state.saw_outputs = true;
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let row = request_row(self.state, self.experiment, self.index, &numbers);
        if let Err(e) = self.state.sink.request(row) {
            self.state.write_error = Some(e);
            return Err(de::Error::custom("writing a row failed"));
        }
        self.state.requests += 1;
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.visit_unit()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        let message = format!("request {} of experiment {} is not an object", self.index, self.experiment);
        self.state.diagnostic(DiagnosticKind::NotARecord, message);
        Ok(())
    }
    infertrace_adapter::scalars_as_unit!(());
}

/// The row of one request, reporting what is wrong with it.
fn request_row(state: &mut State<'_>, experiment: u64, index: u64, n: &RequestNumbers) -> RequestRow {
    let which = format!("request {index} of experiment {experiment}");
    let instant = |state: &mut State<'_>, field: &str, ns: u64| match i64::try_from(ns) {
        Ok(ns) => Some(ns),
        Err(_) => {
            state.diagnostic(DiagnosticKind::InvalidValue, format!("{which}: `{field}` is out of range"));
            None
        }
    };
    let arrival = match n.timestamp {
        Some(Some(ns)) => instant(state, "timestamp", ns),
        Some(None) => {
            state.diagnostic(DiagnosticKind::InvalidValue, format!("{which}: `timestamp` is not a nanosecond count"));
            None
        }
        None => {
            state.diagnostic(DiagnosticKind::MissingField, format!("{which} has no `timestamp`"));
            None
        }
    };
    let responses = n.responses.unwrap_or_default();
    if n.responses.is_none() {
        state.diagnostic(DiagnosticKind::MissingField, format!("{which} has no `response_timestamps`"));
    }
    if responses.not_a_list {
        state.diagnostic(DiagnosticKind::InvalidValue, format!("{which}: `response_timestamps` is not a list"));
    }
    if responses.invalid > 0 {
        let message = format!("{which}: {} `response_timestamps` are not nanosecond counts", responses.invalid);
        state.diagnostic(DiagnosticKind::InvalidValue, message);
    }
    if responses.unordered {
        state.diagnostic(DiagnosticKind::Inconsistent, format!("{which}: `response_timestamps` are not in order"));
    }
    if responses.count == 0 && n.responses.is_some() && !responses.not_a_list {
        state.without_responses += 1;
    }
    let first = responses.first.and_then(|ns| instant(state, "response_timestamps", ns));
    let last = responses.last.and_then(|ns| instant(state, "response_timestamps", ns));
    let inputs = n.inputs.unwrap_or_default();
    let tokens = |count: Option<u64>| count.and_then(|c| u32::try_from(c).ok());
    let mut row = RequestRow {
        request_id: format!("{}:{experiment}:{index}", state.stem),
        source: GenaiPerf::ID.to_owned(),
        session_id: n.sequence_id.map(|id| id.to_string()),
        arrival_time: arrival,
        first_token_time: first,
        completion_time: last,
        input_tokens: tokens(inputs.input_ids),
        max_tokens: tokens(inputs.max_tokens),
        status: if responses.count > 0 { Status::Ok } else { Status::Unknown },
        source_file: Some(state.source_file.to_owned()),
        source_line: Some(state.line()),
        ..RequestRow::default()
    };
    if let (Some(first), Some(last)) = (first, last)
        && responses.count >= 2
        && last >= first
    {
        row.tpot_s = Some((last - first) as f64 / 1e9 / (responses.count - 1) as f64);
    }
    let negative = row.fill_durations();
    if !negative.is_empty() {
        let message = format!("{which}: a response timestamp precedes `timestamp` ({})", negative.join(", "));
        state.diagnostic(DiagnosticKind::Inconsistent, message);
    }
    row
}

/// Which table of the summary CSV a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// `Metric,avg,min,…`: per-request statistics.
    Statistics,
    /// `Metric,Value`: run-level values.
    System,
    /// `Metric,GPU,avg,…`: per-GPU telemetry statistics.
    Telemetry,
    /// `Metric,GPU,Value`: per-GPU constants.
    TelemetryConstants,
}

/// The summary CSV: every table into `details`, keyed by row label (and GPU) and column.
fn parse_csv(input: &mut dyn BufRead, sink: &mut dyn Sink) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut header: Option<(Table, Vec<String>)> = None;
    let mut tables: BTreeMap<&'static str, serde_json::Map<String, Value>> = BTreeMap::new();
    let mut with_p1 = false;
    while let Some((line_no, bytes)) = lines.next_bytes()? {
        let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            header = None;
            continue;
        }
        let Some(fields) = crate::csv_record(line) else {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, "unterminated quoted field"));
            continue;
        };
        if fields.first().map(String::as_str) == Some("Metric") {
            let table = match fields.get(1..).unwrap_or_default() {
                [v] if v == "Value" => Table::System,
                [gpu, v] if gpu == "GPU" && v == "Value" => Table::TelemetryConstants,
                [gpu, ..] if gpu == "GPU" => Table::Telemetry,
                _ => Table::Statistics,
            };
            with_p1 |= table == Table::Statistics && fields.iter().any(|f| f == "p1");
            header = Some((table, fields));
            continue;
        }
        let Some((table, columns)) = &header else {
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "a row outside any table"));
            continue;
        };
        if fields.len() != columns.len() {
            let message = format!("{} fields where the table has {}", fields.len(), columns.len());
            sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedCsv, message));
            continue;
        }
        let first_value = match table {
            Table::Statistics | Table::System => 1,
            Table::Telemetry | Table::TelemetryConstants => 2,
        };
        let mut values = serde_json::Map::new();
        for (column, field) in columns.iter().zip(&fields).skip(first_value) {
            match csv_number(field) {
                Some(Some(value)) => {
                    values.insert(column.clone(), value);
                }
                Some(None) => {}
                None => {
                    let message = format!("column `{column}` is not a number");
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::InvalidValue, message));
                }
            }
        }
        let label = fields[0].clone();
        let (name, entry) = match table {
            Table::Statistics => ("statistics", Value::Object(values)),
            Table::System => ("system", values.remove("Value").unwrap_or(Value::Null)),
            Table::Telemetry => ("telemetry", Value::Object(values)),
            Table::TelemetryConstants => ("telemetry_constants", values.remove("Value").unwrap_or(Value::Null)),
        };
        let target = tables.entry(name).or_default();
        match table {
            Table::Statistics | Table::System => {
                target.insert(label, entry);
            }
            Table::Telemetry | Table::TelemetryConstants => {
                let per_gpu = target.entry(label).or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(per_gpu) = per_gpu {
                    per_gpu.insert(fields[1].clone(), entry);
                }
            }
        }
    }
    let details = tables.into_iter().map(|(k, v)| (k.to_owned(), Value::Object(v))).collect();
    let version = if with_p1 { "summary CSV 0.0.14+ (p10, p5, p1 columns)" } else { "summary CSV (p99…p25 columns)" };
    Ok(ParseReport {
        format_version: Some(version.to_owned()),
        clock_domain: ClockDomain::Relative,
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

/// A value as GenAI-Perf formats it (`1,234.50`): `Some(None)` for `N/A` or an empty cell, `None` when unreadable.
fn csv_number(field: &str) -> Option<Option<Value>> {
    let field = field.trim();
    if field.is_empty() || field == "N/A" {
        return Some(None);
    }
    let number: f64 = field.replace(',', "").parse().ok()?;
    Some(serde_json::Number::from_f64(number).map(Value::Number))
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext {
            source_file: "artifacts/run/profile_export.json",
            options: &options,
            modified: None,
            sidecars: None,
        };
        let mut sink = CollectSink::default();
        let report = GenaiPerf.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn profile_export_rows_from_timestamps() {
        // perf_analyzer's layout (2024-05+), with a sequence id, a triton_c_api-style input_ids tensor, a request
        // without responses and a one-response (non-streaming) request.
        let text = concat!(
            r#"{"experiments":[{"experiment":{"mode":"concurrency","value":4},"requests":["#,
            r#"{"timestamp":1700000000000000000,"sequence_id":7,"#,
            r#""request_inputs":{"input_ids":[1,2,3],"max_tokens":16,"text_input":"CANARY prompt"},"#,
            r#""response_timestamps":[1700000000100000000,1700000000150000000,1700000000250000000],"#,
            r#""response_outputs":[{"text_output":"CANARY a"},{"text_output":"b"},{"text_output":"c"}]},"#,
            r#"{"timestamp":1700000001000000000,"request_inputs":{"payload":"{\"messages\":\"CANARY\"}"},"#,
            r#""response_timestamps":[],"response_outputs":[]},"#,
            r#"{"timestamp":1700000002000000000,"response_timestamps":[1700000002500000000],"#,
            r#""response_outputs":[{"text_output":"x"}]}"#,
            r#"],"window_boundaries":[1700000000000000000,1700000003000000000]}],"#,
            r#""version":"2.45.0","service_kind":"triton_c_api","endpoint":""}"#
        );
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.lines, 1);
        assert_eq!(report.clock_domain, ClockDomain::Utc);
        assert_eq!(report.format_version.as_deref(), Some("profile_export.json 2024-05+ (service_kind, endpoint)"));
        assert_eq!(report.details["version"], "2.45.0");
        assert_eq!(report.details["service_kind"], "triton_c_api");
        assert_eq!(
            report.details["experiments"],
            serde_json::json!([{"mode": "concurrency", "value": 4, "requests": 3,
                "window_boundaries": [1_700_000_000_000_000_000u64, 1_700_000_003_000_000_000u64]}])
        );
        assert_eq!(report.details["requests_without_responses"], 1);
        let [a, b, c] = &sink.requests[..] else { panic!("{:?}", sink.requests) };
        assert_eq!(a.request_id, "profile_export:0:0");
        assert_eq!(a.session_id.as_deref(), Some("7"));
        assert_eq!((a.input_tokens, a.max_tokens, a.output_tokens), (Some(3), Some(16), None));
        assert_eq!(a.arrival_time, Some(1_700_000_000_000_000_000));
        assert_eq!(a.first_token_time, Some(1_700_000_000_100_000_000));
        assert_eq!(a.completion_time, Some(1_700_000_000_250_000_000));
        // ttft = 0.1 s, e2e = 0.25 s, tpot = (0.25 - 0.1) / 2 chunks.
        assert_eq!((a.ttft_s, a.e2e_s, a.status), (Some(0.1), Some(0.25), Status::Ok));
        assert!((a.tpot_s.unwrap() - 0.075).abs() < 1e-12);
        assert_eq!(
            (b.request_id.as_str(), b.status, b.ttft_s, b.e2e_s),
            ("profile_export:0:1", Status::Unknown, None, None)
        );
        assert_eq!(b.arrival_time, Some(1_700_000_001_000_000_000));
        assert_eq!((c.ttft_s, c.e2e_s, c.tpot_s), (Some(0.5), Some(0.5), None));
        assert!(!format!("{:?} {:?}", sink.requests, report.details).contains("CANARY"));
    }

    #[test]
    fn oldest_generation_and_broken_requests_are_reported() {
        let text = r#"{"experiments":[{"experiment":{"mode":"request_rate","value":2.5},"requests":[
            {"timestamp":10,"response_timestamps":[5,20]},
            {"response_timestamps":[30,"x",20]},
            "not a request",
            {"timestamp":-1,"response_timestamps":[18446744073709551615]}
        ]}],"version":"2.37"}"#;
        let (sink, report) = parse(text);
        assert_eq!(report.format_version.as_deref(), Some("profile_export.json 2023-08+"));
        assert_eq!(report.lines, 6);
        let got: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(
            got,
            [
                (2, DiagnosticKind::Inconsistent), // first response 5 ns before arrival 10: no ttft
                (3, DiagnosticKind::MissingField), // no timestamp
                (3, DiagnosticKind::InvalidValue), // "x"
                (3, DiagnosticKind::Inconsistent), // 30 then 20
                (4, DiagnosticKind::NotARecord),
                (5, DiagnosticKind::InvalidValue), // timestamp -1
                (5, DiagnosticKind::InvalidValue), // u64::MAX does not fit i64 (first)
                (5, DiagnosticKind::InvalidValue), // … and last
            ]
        );
        assert_eq!(sink.requests.len(), 3);
        let first = &sink.requests[0];
        assert_eq!((first.ttft_s, first.e2e_s), (None, Some(10e-9)));
        assert_eq!(first.tpot_s, Some(15e-9));
        let second = &sink.requests[1];
        assert_eq!((second.arrival_time, second.first_token_time, second.completion_time), (None, Some(30), Some(20)));
        assert_eq!(second.tpot_s, None, "last before first");
        assert_eq!(report.details["experiments"][0]["value"], 2.5);
    }

    #[test]
    fn odd_shapes_inside_a_request_spoil_only_that_request() {
        let text = r#"{"experiments":[{"experiment":"x","requests":[
            {"timestamp":1,"request_inputs":"CANARY","response_timestamps":{"a":1}},
            {"timestamp":2,"response_timestamps":[3]}
        ],"window_boundaries":"y"}]}"#;
        let (sink, report) = parse(text);
        let got: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(got, [(2, DiagnosticKind::InvalidValue)]);
        assert_eq!(sink.requests.len(), 2);
        assert_eq!(sink.requests[1].ttft_s, Some(1e-9));
        assert_eq!(report.details["experiments"], serde_json::json!([{"requests": 2}]));
    }

    #[test]
    fn truncated_document_keeps_the_rows_before_the_cut() {
        let text = concat!(
            r#"{"experiments":[{"experiment":{"mode":"concurrency","value":1},"requests":["#,
            r#"{"timestamp":1,"response_timestamps":[2]},{"timestamp":3,"resp"#
        );
        let (sink, report) = parse(text);
        assert_eq!(sink.requests.len(), 1);
        let [d] = &sink.diagnostics[..] else { panic!("{:?}", sink.diagnostics) };
        assert_eq!(d.kind, DiagnosticKind::MalformedJson);
        assert_eq!(report.format_version.as_deref(), Some("profile_export.json 2023-08+"));
    }

    #[test]
    fn summary_json_keeps_numbers_and_units() {
        let text = r#"{
  "request_throughput": {"unit": "requests/sec", "avg": 9.5},
  "request_latency": {"unit": "ms", "avg": 120.0, "p1": 100.0, "p99": 150.0, "min": 99.0, "max": 151.0, "std": 5.0},
  "note": "CANARY text",
  "sessions": {"s1": {"request_latency": {"unit": "ms", "avg": 1.0}}, "s2": {}},
  "telemetry_stats": {"gpu_power_usage": {"unit": "W", "gpu0": {"avg": 300.0, "label": "CANARY"}}},
  "input_config": {"model_names": ["m"], "input": {"prompt": "CANARY"}}
}"#;
        let (sink, report) = parse(text);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(sink.requests, []);
        assert_eq!(report.format_version.as_deref(), Some("profile_export_genai_perf.json"));
        assert_eq!(
            report.details["statistics"]["request_throughput"],
            serde_json::json!({"unit": "requests/sec", "avg": 9.5})
        );
        assert_eq!(report.details["statistics"]["request_latency"]["p99"], 150.0);
        assert_eq!(report.details["sessions"], 2);
        assert_eq!(report.details["model_names"], serde_json::json!(["m"]));
        assert_eq!(
            report.details["telemetry_stats"],
            serde_json::json!({"gpu_power_usage": {"unit": "W", "gpu0": {"avg": 300.0}}})
        );
        assert!(!format!("{:?}", report.details).contains("CANARY"));
    }

    #[test]
    fn summary_csv_tables() {
        let text = "Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1\r\n\
Time To First Token (ms),\"1,008.00\",7.00,9.00,8.98,8.90,8.80,8.50,8.00,7.50,7.20,7.10,N/A\r\n\
Bad Row,1\r\n\
\r\n\
Metric,Value\r\n\
Request Count (count),3.00\r\n\
\r\n\
Metric,GPU,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1\r\n\
Gpu Power Usage (W),gpu0,1.00,1.00,1.00,1.00,1.00,1.00,1.00,1.00,1.00,1.00,1.00,x\r\n\
\r\n\
Metric,GPU,Value\r\n\
Gpu Power Limit (W),gpu0,700.00\r\n";
        let (sink, report) = parse(text);
        let got: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(got, [(3, DiagnosticKind::MalformedCsv), (9, DiagnosticKind::InvalidValue)]);
        assert_eq!(report.lines, 12);
        assert_eq!(report.format_version.as_deref(), Some("summary CSV 0.0.14+ (p10, p5, p1 columns)"));
        let ttft = &report.details["statistics"]["Time To First Token (ms)"];
        assert_eq!((ttft["avg"].as_f64(), ttft["p5"].as_f64(), ttft.get("p1")), (Some(1008.0), Some(7.1), None));
        assert_eq!(report.details["system"]["Request Count (count)"], 3.0);
        assert_eq!(report.details["telemetry"]["Gpu Power Usage (W)"]["gpu0"]["avg"], 1.0);
        assert_eq!(report.details["telemetry_constants"]["Gpu Power Limit (W)"]["gpu0"], 700.0);
    }

    #[test]
    fn detection() {
        let yes = |s: &str| GenaiPerf.detect(s.as_bytes());
        assert_eq!(yes("Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1\r\nx"), Some(Confidence::High));
        assert_eq!(yes("Metric,avg,min,max,p99,p95,p90,p75,p50,p25\r\n"), Some(Confidence::High));
        assert_eq!(
            yes(r#"{"experiments":[{"experiment":{"mode":"concurrency","value":1},"requests":[{"ti"#),
            Some(Confidence::High)
        );
        assert_eq!(
            yes("{\n  \"service_kind\": \"openai\",\n  \"endpoint\": \"\",\n  \"experiments\": ["),
            Some(Confidence::High)
        );
        assert_eq!(
            yes("{\n  \"request_throughput\": {\n    \"unit\": \"requests/sec\",\n    \"avg\": 1.0"),
            Some(Confidence::Low)
        );
        // AIPerf's CSVs and summary JSONs.
        assert_eq!(yes("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"), None);
        assert_eq!(yes("Metric,avg,min,max,p1,p5,p25,p50,p75,p90,p95,p99,std\n"), None);
        assert_eq!(
            yes(r#"{"schema_version": "1.4", "request_throughput": {"unit": "requests/sec", "avg": 1.0}}"#),
            None
        );
        assert_eq!(yes(r#"{"records": {"ttft": {"tag": "ttft", "unit": "ms", "avg": 1.0}}}"#), None);
        // Other JSON.
        assert_eq!(yes(r#"{"ttfts": [0.1], "duration": 1.0}"#), None);
        assert_eq!(yes(r#"{"payload": "\"experiments\" \"mode\""}"#), None);
    }

    #[test]
    fn csv_fields() {
        assert_eq!(
            crate::csv_record("a,\"b,c\",\"d\"\"e\",\"\""),
            Some(vec!["a".into(), "b,c".into(), "d\"e".into(), "".into()])
        );
        assert_eq!(crate::csv_record(r#"a,"b"#), None);
        assert_eq!(csv_number("1,234.50"), Some(Some(Value::from(1234.5))));
        assert_eq!(csv_number("N/A"), Some(None));
        assert_eq!(csv_number("abc"), None);
    }
}
