//! The mapping file (its format is documented on [`Mapping`]): parsed with serde and the `toml` crate, checked
//! column by column against the kinds of the canonical columns, and applied to one value at a time.
//!
//! Everything is checked when the file is read, so a mapping that loads can only meet problems of the input's
//! content, which become diagnostics.

use std::collections::BTreeMap;

use infertrace_adapter::ParseOptions;
use infertrace_adapter::time::{NANOS_PER_SEC, millis_to_nanos, parse_datetime, seconds_to_nanos};
use infertrace_schema::{RequestRow, Status, WorkloadClass};
use serde::Deserialize;

/// Why a mapping file was refused. Messages name the mapping's own keys and values (the user's configuration),
/// never input content, and fit on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingError {
    /// The file is not TOML, or has a key the mapping does not know.
    #[error("line {line}: {message}")]
    Toml {
        /// 1-based line of the problem.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// One column of `[requests]` cannot be used as written.
    #[error("[requests] {column}: {message}")]
    Column {
        /// The canonical column as the mapping spells it.
        column: String,
        /// What was wrong.
        message: String,
    },
    /// The mapping as a whole cannot be used.
    #[error("{0}")]
    Mapping(String),
}

/// How a column's text becomes a value: what the canonical column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Text copied as it is (trimmed): ids, names, finish reasons.
    Text,
    /// A non-negative integer no larger than the bound.
    Count(u64),
    /// An instant, converted to UTC nanoseconds by the column's clock.
    Time,
    /// A duration, converted to seconds from the column's unit.
    Duration,
    /// A request outcome (the `Status` vocabulary, or through the column's `map`).
    Status,
    /// A workload class (the `WorkloadClass` vocabulary, or through the column's `map`).
    Class,
}

macro_rules! targets {
    ($($variant:ident: $field:ident as $kind:expr,)*) => {
        /// A canonical column of `requests` that a mapping can fill.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub(crate) enum Target {
            $($variant,)*
        }

        impl Target {
            /// Every target, in schema order.
            pub(crate) const ALL: &'static [Target] = &[$(Target::$variant,)*];

            /// The column name, as in the schema.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Target::$variant => stringify!($field),)*
                }
            }

            fn kind(self) -> Kind {
                match self {
                    $(Target::$variant => $kind,)*
                }
            }

            /// Stores `value` in this column of `row`.
            pub(crate) fn assign(self, row: &mut RequestRow, value: Value) {
                match self {
                    $(Target::$variant => Slot::put(&mut row.$field, value),)*
                }
            }
        }
    };
}

targets! {
    RequestId: request_id as Kind::Text,
    Model: model as Kind::Text,
    SessionId: session_id as Kind::Text,
    Turn: turn as Kind::Count(u32::MAX as u64),
    Instance: instance as Kind::Text,
    PrefillInstance: prefill_instance as Kind::Text,
    DecodeInstance: decode_instance as Kind::Text,
    ArrivalTime: arrival_time as Kind::Time,
    ScheduledTime: scheduled_time as Kind::Time,
    FirstTokenTime: first_token_time as Kind::Time,
    PrefillEndTime: prefill_end_time as Kind::Time,
    DecodeStartTime: decode_start_time as Kind::Time,
    LastTokenTime: last_token_time as Kind::Time,
    CompletionTime: completion_time as Kind::Time,
    QueueS: queue_s as Kind::Duration,
    PrefillS: prefill_s as Kind::Duration,
    TtftS: ttft_s as Kind::Duration,
    TpotS: tpot_s as Kind::Duration,
    DecodeS: decode_s as Kind::Duration,
    E2eS: e2e_s as Kind::Duration,
    KvTransferS: kv_transfer_s as Kind::Duration,
    KvTransferBytes: kv_transfer_bytes as Kind::Count(u64::MAX),
    InputTokens: input_tokens as Kind::Count(u32::MAX as u64),
    CachedTokens: cached_tokens as Kind::Count(u32::MAX as u64),
    CachedTokensGpu: cached_tokens_gpu as Kind::Count(u32::MAX as u64),
    CachedTokensCpu: cached_tokens_cpu as Kind::Count(u32::MAX as u64),
    CachedTokensDisk: cached_tokens_disk as Kind::Count(u32::MAX as u64),
    CachedTokensRemote: cached_tokens_remote as Kind::Count(u32::MAX as u64),
    OutputTokens: output_tokens as Kind::Count(u32::MAX as u64),
    ReasoningTokens: reasoning_tokens as Kind::Count(u32::MAX as u64),
    MaxTokens: max_tokens as Kind::Count(u32::MAX as u64),
    BlockSize: block_size as Kind::Count(u32::MAX as u64),
    RetrievedDocs: retrieved_docs as Kind::Count(u32::MAX as u64),
    ToolCalls: tool_calls as Kind::Count(u32::MAX as u64),
    WorkloadClass: workload_class as Kind::Class,
    Status: status as Kind::Status,
    FinishReason: finish_reason as Kind::Text,
    HttpStatus: http_status as Kind::Count(u16::MAX as u64),
}

/// Columns of `requests` that exist but cannot be mapped, and why.
const NOT_MAPPABLE: &[(&str, &str)] = &[
    ("source", "it is always the format id (csv or jsonl)"),
    ("column_sources", "it is written by infertrace merge, for rows joined from several sources"),
    ("source_file", "it is always the input path"),
    ("source_line", "it is always the record's line"),
    ("error", "error messages can quote user content; map the outcome to status instead"),
    ("prefix_hashes", "block hashes need a block size and a chaining rule no mapping states"),
];

/// A value of a canonical column, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Text(String),
    Count(u64),
    Nanos(i64),
    Seconds(f64),
    Status(Status),
    Class(WorkloadClass),
}

/// A row field that takes a [`Value`] of its column's kind (the kind decides which variant arrives).
trait Slot {
    fn put(&mut self, value: Value);
}

impl Slot for String {
    fn put(&mut self, value: Value) {
        if let Value::Text(text) = value {
            *self = text;
        }
    }
}

impl Slot for Option<String> {
    fn put(&mut self, value: Value) {
        if let Value::Text(text) = value {
            *self = Some(text);
        }
    }
}

impl Slot for Option<u16> {
    fn put(&mut self, value: Value) {
        if let Value::Count(n) = value {
            *self = u16::try_from(n).ok();
        }
    }
}

impl Slot for Option<u32> {
    fn put(&mut self, value: Value) {
        if let Value::Count(n) = value {
            *self = u32::try_from(n).ok();
        }
    }
}

impl Slot for Option<u64> {
    fn put(&mut self, value: Value) {
        if let Value::Count(n) = value {
            *self = Some(n);
        }
    }
}

impl Slot for Option<i64> {
    fn put(&mut self, value: Value) {
        if let Value::Nanos(n) = value {
            *self = Some(n);
        }
    }
}

impl Slot for Option<f64> {
    fn put(&mut self, value: Value) {
        if let Value::Seconds(s) = value {
            *self = Some(s);
        }
    }
}

impl Slot for Status {
    fn put(&mut self, value: Value) {
        if let Value::Status(status) = value {
            *self = status;
        }
    }
}

impl Slot for Option<WorkloadClass> {
    fn put(&mut self, value: Value) {
        if let Value::Class(class) = value {
            *self = Some(class);
        }
    }
}

/// The unit of a duration or of a numeric time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Unit {
    S,
    Ms,
    Us,
    Ns,
}

impl Unit {
    fn nanos(self) -> i64 {
        match self {
            Unit::S => NANOS_PER_SEC,
            Unit::Ms => 1_000_000,
            Unit::Us => 1_000,
            Unit::Ns => 1,
        }
    }

    fn per_second(self) -> f64 {
        match self {
            Unit::S => 1.0,
            Unit::Ms => 1e3,
            Unit::Us => 1e6,
            Unit::Ns => 1e9,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Unit::S => "s",
            Unit::Ms => "ms",
            Unit::Us => "us",
            Unit::Ns => "ns",
        }
    }

    /// A number of this unit as nanoseconds: integers exactly, fractions rounded to the nanosecond.
    fn to_nanos(self, text: &str) -> Option<i64> {
        if let Ok(n) = text.parse::<i64>() {
            return n.checked_mul(self.nanos());
        }
        let x: f64 = text.parse().ok()?;
        match self {
            Unit::S => seconds_to_nanos(x),
            Unit::Ms => millis_to_nanos(x),
            Unit::Us | Unit::Ns => {
                let ns = (x * self.nanos() as f64).round();
                (ns.is_finite() && ns >= i64::MIN as f64 && ns < i64::MAX as f64).then_some(ns as i64)
            }
        }
    }
}

/// How a time column's text becomes an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Clock {
    /// `YYYY-MM-DD[T ]HH:MM:SS[.f]` with `Z` or an offset; a value without a zone is invalid.
    Rfc3339,
    /// The same shape with an optional zone; a zoneless value takes `--utc-offset`.
    Datetime,
    EpochS,
    EpochMs,
    EpochUs,
    EpochNs,
    /// A number of seconds (etc.) since `--start`.
    RelativeS,
    RelativeMs,
    RelativeUs,
    RelativeNs,
}

impl Clock {
    fn as_str(self) -> &'static str {
        match self {
            Clock::Rfc3339 => "rfc3339",
            Clock::Datetime => "datetime",
            Clock::EpochS => "epoch_s",
            Clock::EpochMs => "epoch_ms",
            Clock::EpochUs => "epoch_us",
            Clock::EpochNs => "epoch_ns",
            Clock::RelativeS => "relative_s",
            Clock::RelativeMs => "relative_ms",
            Clock::RelativeUs => "relative_us",
            Clock::RelativeNs => "relative_ns",
        }
    }

    fn split(self) -> (Option<bool>, Unit) {
        match self {
            Clock::Rfc3339 | Clock::Datetime => (None, Unit::S),
            Clock::EpochS => (Some(false), Unit::S),
            Clock::EpochMs => (Some(false), Unit::Ms),
            Clock::EpochUs => (Some(false), Unit::Us),
            Clock::EpochNs => (Some(false), Unit::Ns),
            Clock::RelativeS => (Some(true), Unit::S),
            Clock::RelativeMs => (Some(true), Unit::Ms),
            Clock::RelativeUs => (Some(true), Unit::Us),
            Clock::RelativeNs => (Some(true), Unit::Ns),
        }
    }
}

/// Which clock domains the times of one input turned out to be in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClocksSeen {
    /// Instants with a zone, or epoch numbers.
    pub(crate) utc: bool,
    /// Zoneless instants that took `--utc-offset`.
    pub(crate) assumed: bool,
    /// Offsets from `--start`.
    pub(crate) relative: bool,
}

/// How one column's text becomes its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Convert {
    Text,
    Count(u64),
    Time(Clock),
    Duration(Unit),
    Status(BTreeMap<String, Status>),
    Class(BTreeMap<String, WorkloadClass>),
}

impl Convert {
    /// `text` (trimmed, not empty) as this column's value, or a phrase saying what was expected.
    pub(crate) fn apply(
        &self,
        text: &str,
        options: &ParseOptions,
        seen: &mut ClocksSeen,
    ) -> Result<Value, &'static str> {
        match self {
            Convert::Text => Ok(Value::Text(text.to_owned())),
            Convert::Count(max) => parse_count(text, *max).map(Value::Count).ok_or(match *max {
                m if m == u64::from(u16::MAX) => "a whole number from 0 to 65535",
                m if m == u64::from(u32::MAX) => "a whole number from 0 to 4294967295",
                _ => "a whole number from 0 to 18446744073709551615",
            }),
            Convert::Time(clock) => time(*clock, text, options, seen).map(Value::Nanos),
            Convert::Duration(unit) => match text.parse::<f64>() {
                // Division of exact values rounds once: 125 ms is exactly 0.125 s.
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(Value::Seconds(x / unit.per_second())),
                _ => Err("a non-negative number"),
            },
            Convert::Status(map) => map
                .get(text)
                .copied()
                .or_else(|| Status::parse(text))
                .map(Value::Status)
                .ok_or("a status of the mapping's map or one of ok, error, aborted, timeout, unknown"),
            Convert::Class(map) => map
                .get(text)
                .copied()
                .or_else(|| WorkloadClass::parse(text))
                .map(Value::Class)
                .ok_or("a class of the mapping's map or one of chat, rag, agent, batch"),
        }
    }
}

/// A whole number up to `max`: integer text, or a float with no fraction (as pandas writes integer columns that
/// hold a missing value). Floats are accepted only below 2^53, where they are exact.
fn parse_count(text: &str, max: u64) -> Option<u64> {
    if let Ok(n) = text.parse::<u64>() {
        return (n <= max).then_some(n);
    }
    let x: f64 = text.parse().ok()?;
    let exact = x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 9_007_199_254_740_992.0;
    (exact && x as u64 <= max).then_some(x as u64)
}

fn time(clock: Clock, text: &str, options: &ParseOptions, seen: &mut ClocksSeen) -> Result<i64, &'static str> {
    match clock {
        Clock::Rfc3339 => match parse_datetime(text, options.utc_offset) {
            Ok(instant) if instant.had_zone => {
                seen.utc = true;
                Ok(instant.nanos)
            }
            _ => Err("a timestamp YYYY-MM-DD[T ]HH:MM:SS[.f] with Z or ±HH:MM"),
        },
        Clock::Datetime => match parse_datetime(text, options.utc_offset) {
            Ok(instant) => {
                if instant.had_zone {
                    seen.utc = true
                } else {
                    seen.assumed = true
                }
                Ok(instant.nanos)
            }
            Err(_) => Err("a timestamp YYYY-MM-DD[T ]HH:MM:SS[.f][Z|±HH:MM]"),
        },
        numeric => {
            let (relative, unit) = numeric.split();
            let nanos = unit.to_nanos(text).ok_or(match unit {
                Unit::S => "a number of seconds",
                Unit::Ms => "a number of milliseconds",
                Unit::Us => "a number of microseconds",
                Unit::Ns => "a number of nanoseconds",
            })?;
            if relative == Some(true) {
                seen.relative = true;
                nanos.checked_add(options.start_ns).ok_or("a time within 1677..2262 after --start")
            } else {
                seen.utc = true;
                Ok(nanos)
            }
        }
    }
}

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    /// A CSV header name or a JSON key (dotted path for nested objects).
    From(String),
    /// The same value for every row.
    Constant(Value),
}

/// One mapped canonical column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    pub(crate) target: Target,
    pub(crate) source: Source,
    pub(crate) convert: Convert,
    /// Whether a missing CSV column or JSON key is expected (no diagnostic).
    pub(crate) optional: bool,
}

impl Column {
    /// How the manifest describes this column.
    fn describe(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        match &self.source {
            Source::From(name) => out.insert("from".into(), name.clone().into()),
            Source::Constant(value) => out.insert(
                "value".into(),
                match value {
                    Value::Text(text) => text.clone().into(),
                    Value::Count(n) => (*n).into(),
                    Value::Nanos(n) => (*n).into(),
                    Value::Seconds(s) => (*s).into(),
                    Value::Status(status) => status.as_str().into(),
                    Value::Class(class) => class.as_str().into(),
                },
            ),
        };
        match &self.convert {
            Convert::Time(clock) => {
                out.insert("clock".into(), clock.as_str().into());
            }
            Convert::Duration(unit) => {
                out.insert("unit".into(), unit.as_str().into());
            }
            Convert::Status(map) if !map.is_empty() => {
                let map: serde_json::Map<_, _> = map.iter().map(|(k, v)| (k.clone(), v.as_str().into())).collect();
                out.insert("map".into(), map.into());
            }
            Convert::Class(map) if !map.is_empty() => {
                let map: serde_json::Map<_, _> = map.iter().map(|(k, v)| (k.clone(), v.as_str().into())).collect();
                out.insert("map".into(), map.into());
            }
            _ => {}
        }
        if self.optional {
            out.insert("optional".into(), true.into());
        }
        out.into()
    }
}

/// A checked mapping from an input's columns to canonical `requests` columns, read from TOML.
///
/// ```toml
/// name = "in-house-gateway"                # optional: the input's format_version in the manifest
///
/// [csv]                                    # optional
/// delimiter = ","                          # one ASCII character ("\t" for TSV); default ","
///
/// [requests]                               # canonical column = source
/// output_tokens = "GeneratedTokens"        # shorthand for { from = "GeneratedTokens" }
/// arrival_time = { from = "TIMESTAMP", clock = "rfc3339" }
/// first_token_time = { from = "t.first_token", clock = "epoch_us" }
/// ttft_s = { from = "latency.ttft", unit = "ms", optional = true }
/// status = { from = "result", map = { success = "ok", failed = "error" } }
/// model = { value = "llama-3.1-8b" }       # a constant
/// ```
///
/// Each entry of `[requests]` names a canonical column (see `infertrace schema`) and takes:
///
/// - `from`: the CSV header name, or the JSON key; a dotted path reaches into nested objects and arrays
///   (`usage.prompt_tokens`, `choices.0.finish_reason`), a key equal to the whole remaining path winning;
/// - or `value`: a string, number or boolean given to every row (not for times, nor `request_id`);
/// - `clock` (time columns `*_time`, required): `rfc3339` (`YYYY-MM-DD[T ]HH:MM:SS[.f]` with `Z` or `±HH:MM`; a
///   zoneless value is invalid), `datetime` (the same, a zoneless value taking `--utc-offset`), `epoch_s`,
///   `epoch_ms`, `epoch_us`, `epoch_ns` (a number since 1970-01-01T00:00:00Z), `relative_s`, `relative_ms`,
///   `relative_us`, `relative_ns` (a number since `--start`);
/// - `unit` (duration columns `*_s`): `s` (default), `ms`, `us` or `ns`;
/// - `map` (`status`, `workload_class`): source spelling → canonical value; canonical spellings are accepted
///   without a map, and other values are invalid;
/// - `optional = true`: a missing CSV column or JSON key is expected, not a diagnostic.
///
/// Token counts, `turn`, `http_status` and `kv_transfer_bytes` take whole numbers (integer text, or a float with
/// no fraction below 2^53, as pandas writes integer columns that have gaps); `kv_transfer_bytes` keeps all 64
/// bits. Numbers may be JSON numbers or strings. Integer times convert exactly; fractional ones to the nearest
/// nanosecond.
///
/// Not mappable: `source`, `source_file` and `source_line` (set by the adapter), `error` (error messages can quote
/// user content) and `prefix_hashes` (hashes need a block size and chaining rule a mapping does not state).
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    name: Option<String>,
    delimiter: u8,
    columns: Vec<Column>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMapping {
    name: Option<String>,
    csv: Option<RawCsv>,
    requests: Option<BTreeMap<String, toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCsv {
    delimiter: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumn {
    from: Option<String>,
    value: Option<toml::Value>,
    unit: Option<Unit>,
    clock: Option<Clock>,
    map: Option<BTreeMap<String, String>>,
    #[serde(default)]
    optional: bool,
}

impl Mapping {
    /// Reads and checks a mapping written in TOML.
    pub fn from_toml(text: &str) -> Result<Self, MappingError> {
        let raw: RawMapping = toml::from_str(text).map_err(|e| MappingError::Toml {
            line: e.span().map_or(1, |span| text[..span.start.min(text.len())].matches('\n').count() + 1),
            message: one_line(e.message()),
        })?;
        let delimiter = match raw.csv.and_then(|csv| csv.delimiter) {
            None => b',',
            Some(d) if d.len() == 1 && d.is_ascii() && d != "\"" && d != "\n" && d != "\r" => d.as_bytes()[0],
            Some(_) => {
                return Err(MappingError::Mapping(
                    "[csv] delimiter must be one ASCII character other than a quote or a line break".into(),
                ));
            }
        };
        let mut columns = Vec::new();
        for (name, value) in raw.requests.unwrap_or_default() {
            let error = |message: String| MappingError::Column { column: name.clone(), message };
            let target = Target::ALL.iter().copied().find(|t| t.name() == name).ok_or_else(|| {
                match NOT_MAPPABLE.iter().find(|(n, _)| *n == name) {
                    Some((_, why)) => error(format!("cannot be mapped: {why}")),
                    None => error(format!(
                        "unknown canonical column; expected one of: {}",
                        Target::ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                    )),
                }
            })?;
            let raw = match value {
                toml::Value::String(from) => {
                    RawColumn { from: Some(from), value: None, unit: None, clock: None, map: None, optional: false }
                }
                table @ toml::Value::Table(_) => {
                    table.try_into().map_err(|e: toml::de::Error| error(one_line(e.message())))?
                }
                _ => return Err(error("expected a source column name or a table such as { from = \"…\" }".into())),
            };
            columns.push(column(target, raw).map_err(error)?);
        }
        if columns.is_empty() {
            return Err(MappingError::Mapping("[requests] maps no column".into()));
        }
        columns.sort_by_key(|c| c.target);
        Ok(Mapping { name: raw.name, delimiter, columns })
    }

    /// The mapping's `name`, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The CSV field delimiter.
    pub fn delimiter(&self) -> u8 {
        self.delimiter
    }

    /// The mapped columns, in schema order.
    pub(crate) fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The mapping as recorded in the manifest's `details`: `name` and one entry per canonical column.
    pub fn describe(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        if let Some(name) = &self.name {
            out.insert("name".into(), name.clone().into());
        }
        let columns: serde_json::Map<_, _> =
            self.columns.iter().map(|c| (c.target.name().to_owned(), c.describe())).collect();
        out.insert("requests".into(), columns.into());
        out.into()
    }

    /// The clock domain the mapping's time columns imply, for an input none of whose times could be read.
    pub(crate) fn declared_clocks(&self) -> ClocksSeen {
        let mut seen = ClocksSeen::default();
        for column in &self.columns {
            if let Convert::Time(clock) = column.convert {
                match clock {
                    Clock::Datetime => seen.assumed = true,
                    c if c.split().0 == Some(true) => seen.relative = true,
                    _ => seen.utc = true,
                }
            }
        }
        seen
    }
}

/// Checks one column's settings against its target's kind.
fn column(target: Target, raw: RawColumn) -> Result<Column, String> {
    let kind = target.kind();
    if raw.unit.is_some() && kind != Kind::Duration {
        return Err("`unit` applies only to duration columns (*_s); times take a `clock`".into());
    }
    if raw.clock.is_some() && kind != Kind::Time {
        return Err("`clock` applies only to time columns (*_time)".into());
    }
    if raw.map.is_some() && !matches!(kind, Kind::Status | Kind::Class) {
        return Err("`map` applies only to status and workload_class".into());
    }
    let convert = match kind {
        Kind::Text => Convert::Text,
        Kind::Count(max) => Convert::Count(max),
        Kind::Time => Convert::Time(raw.clock.ok_or(
            "a time column needs a `clock`: rfc3339, datetime, epoch_s, epoch_ms, epoch_us, epoch_ns, \
             relative_s, relative_ms, relative_us or relative_ns",
        )?),
        Kind::Duration => Convert::Duration(raw.unit.unwrap_or(Unit::S)),
        Kind::Status => Convert::Status(vocabulary(raw.map, Status::parse, "ok, error, aborted, timeout, unknown")?),
        Kind::Class => Convert::Class(vocabulary(raw.map, WorkloadClass::parse, "chat, rag, agent, batch")?),
    };
    let source = match (raw.from, raw.value) {
        (Some(from), None) if !from.is_empty() => Source::From(from),
        (None, Some(value)) => {
            if kind == Kind::Time {
                return Err("a time column cannot be a constant".into());
            }
            if target == Target::RequestId {
                return Err("request_id cannot be a constant: every row would share it".into());
            }
            let text = match value {
                toml::Value::String(text) => text,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => return Err("`value` must be a string, a number or a boolean".into()),
            };
            let value = convert
                .apply(text.trim(), &ParseOptions::default(), &mut ClocksSeen::default())
                .map_err(|expected| format!("`value` is not {expected}"))?;
            Source::Constant(value)
        }
        (Some(_), Some(_)) => return Err("give either `from` or `value`, not both".into()),
        _ => return Err("needs `from` (a non-empty source column name) or `value` (a constant)".into()),
    };
    Ok(Column { target, source, convert, optional: raw.optional })
}

/// A `map` of source spellings to a vocabulary, each target checked.
fn vocabulary<T>(
    map: Option<BTreeMap<String, String>>,
    parse: fn(&str) -> Option<T>,
    expected: &str,
) -> Result<BTreeMap<String, T>, String> {
    map.unwrap_or_default()
        .into_iter()
        .map(|(from, to)| match parse(&to) {
            Some(value) => Ok((from, value)),
            None => Err(format!("`map` value {to:?} is not one of {expected}")),
        })
        .collect()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        Mapping::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn targets_are_columns_of_requests() {
        let columns: Vec<String> = RequestRow::columns().into_iter().map(|c| c.name.to_owned()).collect();
        for target in Target::ALL {
            assert!(columns.iter().any(|c| c == target.name()), "{}", target.name());
        }
        // Every column is either mappable or refused with a reason.
        for column in &columns {
            let known = Target::ALL.iter().any(|t| t.name() == column) || NOT_MAPPABLE.iter().any(|(n, _)| n == column);
            assert!(known, "{column} is neither mappable nor listed as not mappable");
        }
    }

    #[test]
    fn a_mapping_reads_with_shorthand_tables_and_constants() {
        let mapping = Mapping::from_toml(
            r#"
            name = "in-house"
            [csv]
            delimiter = "\t"
            [requests]
            output_tokens = "out"
            arrival_time = { from = "ts", clock = "epoch_ms" }
            ttft_s = { from = "ttft", unit = "ms", optional = true }
            status = { from = "result", map = { success = "ok", failed = "error" } }
            model = { value = "llama" }
            block_size = { value = 64 }
            "#,
        )
        .unwrap();
        assert_eq!(mapping.name(), Some("in-house"));
        assert_eq!(mapping.delimiter(), b'\t');
        let targets: Vec<&str> = mapping.columns().iter().map(|c| c.target.name()).collect();
        assert_eq!(
            targets,
            ["model", "arrival_time", "ttft_s", "output_tokens", "block_size", "status"],
            "schema order"
        );
        let model = &mapping.columns()[0];
        assert_eq!(model.source, Source::Constant(Value::Text("llama".into())));
        assert_eq!(mapping.columns()[4].source, Source::Constant(Value::Count(64)));
        assert_eq!(mapping.columns()[2].convert, Convert::Duration(Unit::Ms));
        assert!(mapping.columns()[2].optional);
        assert_eq!(
            mapping.describe(),
            serde_json::json!({
                "name": "in-house",
                "requests": {
                    "model": {"value": "llama"},
                    "arrival_time": {"from": "ts", "clock": "epoch_ms"},
                    "ttft_s": {"from": "ttft", "unit": "ms", "optional": true},
                    "output_tokens": {"from": "out"},
                    "block_size": {"value": 64},
                    "status": {"from": "result", "map": {"failed": "error", "success": "ok"}},
                }
            })
        );
    }

    #[test]
    fn mistakes_are_one_line_errors_naming_the_key() {
        let cases: &[(&str, &str)] = &[
            ("[requests]\nttft = \"x\"", "[requests] ttft: unknown canonical column; expected one of: request_id, "),
            ("[requests]\nerror = \"msg\"", "[requests] error: cannot be mapped: error messages can quote user"),
            (
                "[requests]\nttft_s = { from = \"x\", unit = \"minutes\" }",
                "[requests] ttft_s: unknown variant `minutes`",
            ),
            ("[requests]\narrival_time = { from = \"t\" }", "[requests] arrival_time: a time column needs a `clock`"),
            ("[requests]\narrival_time = { from = \"t\", clock = \"unix\" }", "unknown variant `unix`"),
            ("[requests]\ninput_tokens = { from = \"t\", clock = \"epoch_s\" }", "`clock` applies only to time"),
            ("[requests]\narrival_time = { from = \"t\", clock = \"epoch_s\", unit = \"ms\" }", "`unit` applies only"),
            (
                "[requests]\nstatus = { from = \"r\", map = { yes = \"fine\" } }",
                "`map` value \"fine\" is not one of ok,",
            ),
            ("[requests]\nmodel = { from = \"m\", value = \"x\" }", "either `from` or `value`, not both"),
            ("[requests]\nmodel = {}", "needs `from`"),
            ("[requests]\nmodel = 3", "expected a source column name or a table"),
            ("[requests]\nmodel = { from = \"m\", colour = 1 }", "[requests] model: unknown field `colour`"),
            ("[requests]\ninput_tokens = { value = -1 }", "`value` is not a whole number"),
            ("[requests]\nrequest_id = { value = \"x\" }", "request_id cannot be a constant"),
            ("[requests]", "[requests] maps no column"),
            ("name = \"x\"", "[requests] maps no column"),
            ("[csv]\ndelimiter = \";;\"\n[requests]\nmodel = \"m\"", "delimiter must be one ASCII character"),
            ("\n\n[requests\nmodel = \"m\"", "line 3: "),
            ("[requests]\nmodel = \"m\"\n[extra]\n", "line 3: unknown field `extra`"),
        ];
        for (text, needle) in cases {
            let message = error_of(text);
            assert!(message.contains(needle), "{text:?}: {message:?} lacks {needle:?}");
            assert!(!message.contains('\n'), "{message:?}");
        }
    }

    #[test]
    fn values_convert_by_kind_and_unit() {
        let options = ParseOptions { start_ns: 1_000 * NANOS_PER_SEC, ..ParseOptions::default() };
        let convert = |convert: Convert, text: &str| convert.apply(text, &options, &mut ClocksSeen::default());
        // 2024-05-10T00:00:00Z is 1_715_299_200 s after the epoch (19_853 days × 86_400 s).
        let may_10 = 1_715_299_200 * NANOS_PER_SEC;
        let cases: &[(Convert, &str, Result<Value, ()>)] = &[
            (Convert::Count(u32::MAX.into()), "4808", Ok(Value::Count(4808))),
            (Convert::Count(u32::MAX.into()), "12.0", Ok(Value::Count(12))),
            (Convert::Count(u32::MAX.into()), "12.5", Err(())),
            (Convert::Count(u32::MAX.into()), "-3", Err(())),
            (Convert::Count(u32::MAX.into()), "4294967296", Err(())),
            (Convert::Count(u16::MAX.into()), "200", Ok(Value::Count(200))),
            (Convert::Count(u16::MAX.into()), "70000", Err(())),
            // A u64 id larger than 2^53 keeps every digit.
            (Convert::Count(u64::MAX), "7587888160958627596", Ok(Value::Count(7_587_888_160_958_627_596))),
            (Convert::Duration(Unit::Ms), "125", Ok(Value::Seconds(0.125))),
            (Convert::Duration(Unit::S), "1.5", Ok(Value::Seconds(1.5))),
            (Convert::Duration(Unit::Us), "2500", Ok(Value::Seconds(0.0025))),
            (Convert::Duration(Unit::Ns), "1e9", Ok(Value::Seconds(1.0))),
            (Convert::Duration(Unit::S), "-0.1", Err(())),
            (Convert::Duration(Unit::S), "NaN", Err(())),
            (Convert::Time(Clock::Rfc3339), "2024-05-10 00:00:00.009930+00:00", Ok(Value::Nanos(may_10 + 9_930_000))),
            (Convert::Time(Clock::Rfc3339), "2024-05-10T02:00:00+02:00", Ok(Value::Nanos(may_10))),
            (Convert::Time(Clock::Rfc3339), "2024-05-10 00:00:00", Err(())),
            (Convert::Time(Clock::Datetime), "2024-05-10 00:00:00", Ok(Value::Nanos(may_10))),
            (Convert::Time(Clock::EpochS), "1715299200.25", Ok(Value::Nanos(may_10 + 250_000_000))),
            (Convert::Time(Clock::EpochMs), "1715299200250", Ok(Value::Nanos(may_10 + 250_000_000))),
            (Convert::Time(Clock::EpochUs), "1715299200000001", Ok(Value::Nanos(may_10 + 1_000))),
            (Convert::Time(Clock::EpochNs), "1715299200000000001", Ok(Value::Nanos(may_10 + 1))),
            (Convert::Time(Clock::EpochS), "yesterday", Err(())),
            (Convert::Time(Clock::EpochNs), "99999999999999999999", Err(())),
            // Relative clocks count from --start (1,000 s here).
            (Convert::Time(Clock::RelativeS), "0.052", Ok(Value::Nanos(1_000_052_000_000))),
            (Convert::Time(Clock::RelativeMs), "27482", Ok(Value::Nanos(1_027_482_000_000))),
            (
                Convert::Status(BTreeMap::from([("success".into(), Status::Ok)])),
                "success",
                Ok(Value::Status(Status::Ok)),
            ),
            (Convert::Status(BTreeMap::new()), "timeout", Ok(Value::Status(Status::Timeout))),
            (Convert::Status(BTreeMap::new()), "SUCCESS", Err(())),
            (Convert::Class(BTreeMap::new()), "rag", Ok(Value::Class(WorkloadClass::Rag))),
            (Convert::Text, "req-1", Ok(Value::Text("req-1".into()))),
        ];
        for (conv, text, expected) in cases {
            assert_eq!(convert(conv.clone(), text).map_err(|_| ()), *expected, "{conv:?} {text:?}");
        }
    }

    #[test]
    fn zoneless_datetimes_take_the_assumed_offset_and_are_tracked() {
        let options = ParseOptions { utc_offset: "-07:00".parse().unwrap(), ..ParseOptions::default() };
        let mut seen = ClocksSeen::default();
        let value = Convert::Time(Clock::Datetime).apply("2024-05-09 17:00:00", &options, &mut seen);
        assert_eq!(value, Ok(Value::Nanos(1_715_299_200 * NANOS_PER_SEC)), "17:00 at -07:00 is midnight UTC");
        assert_eq!(seen, ClocksSeen { assumed: true, ..ClocksSeen::default() });
        let _ = Convert::Time(Clock::Datetime).apply("2024-05-10 00:00:00Z", &options, &mut seen);
        assert!(seen.utc && seen.assumed && !seen.relative);
    }
}
