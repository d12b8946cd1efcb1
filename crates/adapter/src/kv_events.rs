//! KV-cache event batches in the msgspec encoding vLLM introduced and SGLang adopted (both publish them over ZMQ
//! for NVIDIA Dynamo's router), as a subscriber stores them: msgpack payloads one after another (msgpack values
//! delimit themselves), or one JSON document per line with the same structure.
//!
//! ```text
//! batch       [ts, [event, …]] | [ts, [event, …], dp_rank]         (array_like; ts = time.time(), seconds)
//!             or a map {"ts", "events", <rank key>}
//! event       ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, …]
//!             ["BlockRemoved", block_hashes, medium, …]             ["AllBlocksCleared"]
//!             or tagged maps {"type": "BlockStored", "block_hashes": […], "medium": …, …}
//! hashes      signed or unsigned 64-bit integers, or raw bytes
//! ```
//!
//! The framework differences (the medium vocabulary, how a rank is named, which source id rows carry) are a
//! [`Dialect`]. Each block becomes one `cache_events` row (`block_hash`, `parent_hash` = the block before it in the
//! chain, `blocks` 1, `tokens` = block size), so the trace can be replayed block by block. Hashes given as bytes
//! become `int.from_bytes(bytes, "big") & (2^64 - 1)`, as vLLM itself converts them, and signed hashes keep their
//! bits. `token_ids` are never read into an output. Trailing array elements and unknown map keys are ignored.

use std::io::{BufRead, ErrorKind};
use std::sync::Arc;

use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, ClockDomain, DatasetError};
use rmpv::Value;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::parallel::map_lines;
use crate::shared::SharedText;

use crate::time::seconds_to_nanos;
use crate::{Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line};

/// What differs between the frameworks that write this encoding.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The `source` of every row.
    pub source: &'static str,
    /// The tier of an event's `medium`: `None` for an absent medium, `Err` for a value the framework never writes.
    pub tier: fn(Option<&str>) -> Result<CacheTier, ()>,
    /// The `instance` of the batch's data-parallel rank.
    pub instance: fn(u64) -> String,
    /// The batch's rank key in the map form.
    pub rank_key: &'static str,
}

/// msgpack markers a batch starts with: fixarray of 2 or 3, then a float64 or float32 timestamp.
pub fn looks_like_msgpack_batch(head: &[u8]) -> bool {
    matches!(head, [0x92 | 0x93, 0xcb | 0xca, ..])
}

/// Whether the first line of `head` is a JSON batch naming one of the event types.
pub fn looks_like_json_batch(head: &Head<'_>) -> bool {
    let first = head.text().lines().next().unwrap_or_default().trim_start();
    let json = first.starts_with('[') || first.starts_with('{');
    json && [r#""BlockStored""#, r#""BlockRemoved""#, r#""AllBlocksCleared""#].iter().any(|t| first.contains(t))
}

/// Whether `head` shows vocabulary only SGLang's events carry (its medium names `CPU_PINNED` and `EXTERNAL`, its
/// rank key `attn_dp_rank`). Batches without a medium or a map form are byte for byte the same in both frameworks.
pub fn speaks_sglang(head: &Head<'_>) -> bool {
    ["CPU_PINNED", "EXTERNAL", "attn_dp_rank"]
        .iter()
        .any(|m| memchr::memmem::find(head.bytes(), m.as_bytes()).is_some())
}

/// Reads every batch of `input` into `sink`.
pub fn parse(
    dialect: &Dialect,
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    let binary = looks_like_msgpack_batch(input.fill_buf()?);
    let mut batches = 0;
    let mut shared = SharedText::default();
    if binary {
        loop {
            if input.fill_buf()?.is_empty() {
                break;
            }
            batches += 1;
            match rmpv::decode::read_value(&mut &mut *input) {
                Ok(value) => emit(dialect, interpret(dialect, &value), batches, ctx, &mut shared, sink)?,
                Err(rmpv::decode::Error::InvalidMarkerRead(e) | rmpv::decode::Error::InvalidDataRead(e))
                    if e.kind() != ErrorKind::UnexpectedEof =>
                {
                    return Err(ParseError::Read(e));
                }
                Err(_) => {
                    // A binary stream cannot be resynchronised: report where it broke and stop.
                    sink.diagnostic(Diagnostic::new(
                        batches,
                        DiagnosticKind::MalformedRecord,
                        "msgpack payload cut short or invalid; the rest of the file was not read",
                    ));
                    break;
                }
            }
        }
    } else {
        // Each line is parsed and its batch read on the pool (straight into the msgpack value the batch reader
        // reads, which is dropped there: handing the values, a few allocations an event, to the fold's thread made
        // the file slower on two threads than on one); the rows are written in order.
        let mut lines = LineReader::new(input);
        let prepare = |bytes: &[u8]| {
            let line = crate::utf8(bytes)?;
            let read = |line| json_value(line).map(|value| interpret(dialect, &value));
            (!line.trim_ascii().is_empty()).then(|| read(line).map_err(|e| crate::json::error_message(&e)))
        };
        map_lines(&mut lines, prepare, |line_no, bytes, batch| {
            match batch {
                Some(Ok(batch)) => emit(dialect, batch, line_no, ctx, &mut shared, sink)?,
                Some(Err(message)) => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, message));
                }
                // Blank, or not UTF-8 (which `utf8_line` reports).
                None => drop(utf8_line(line_no, bytes, sink)),
            }
            Ok::<_, ParseError>(())
        })?;
        batches = lines.lines_read();
    }
    Ok(ParseReport {
        format_version: Some(if binary { "msgpack" } else { "json lines" }.to_owned()),
        clock_domain: ClockDomain::Utc,
        year: None,
        lines: batches,
        details: Default::default(),
    })
}

/// One JSON batch as the msgpack value [`from_json`] makes of its `serde_json::Value`, read without building that
/// value first, and with each event's token ids (never read: position 3 of an event array, `token_ids` of an event
/// map) parsed but not kept: a `Value` per token id, then an `rmpv` value per token id, and dropping them, were most
/// of reading a JSON Lines file. Property tests compare the two: the values (token ids aside) and the errors.
fn json_value(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = JsonAsMsgpack(Place::Batch).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Where in a batch a value is, for what [`JsonAsMsgpack`] keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The document.
    Batch,
    /// The batch's event list.
    Events,
    /// One event.
    Event,
    /// An event's token ids: read (so that a document is refused exactly where serde_json refuses it) and dropped.
    TokenIds,
    /// Anything else.
    Other,
}

impl Place {
    /// The place of an array's element at `index`.
    fn element(self, index: usize) -> Place {
        match (self, index) {
            (Place::Batch, 1) => Place::Events,
            (Place::Events, _) => Place::Event,
            (Place::Event, 3) => Place::TokenIds,
            (Place::TokenIds, _) => Place::TokenIds,
            _ => Place::Other,
        }
    }

    /// The place of a map's value under `key`.
    fn value(self, key: &str) -> Place {
        match (self, key) {
            (Place::Batch, "events") => Place::Events,
            (Place::Event, "token_ids") | (Place::TokenIds, _) => Place::TokenIds,
            _ => Place::Other,
        }
    }
}

/// Reads a JSON value as [`from_json`] converts it (token ids as `Nil`).
struct JsonAsMsgpack(Place);

impl<'de> DeserializeSeed<'de> for JsonAsMsgpack {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JsonAsMsgpack {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(if self.0 == Place::TokenIds { Value::Nil } else { Value::Boolean(value) })
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(if self.0 == Place::TokenIds { Value::Nil } else { Value::from(value) })
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        // Only for negative numbers: serde_json reads the others as `u64`, and `rmpv` keeps either the same way.
        Ok(if self.0 == Place::TokenIds { Value::Nil } else { Value::from(value) })
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // Always finite: serde_json refuses a number out of range.
        Ok(if self.0 == Place::TokenIds { Value::Nil } else { Value::F64(value) })
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(if self.0 == Place::TokenIds { Value::Nil } else { Value::from(value) })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let place = self.0;
        if place == Place::TokenIds {
            while seq.next_element_seed(JsonAsMsgpack(Place::TokenIds))?.is_some() {}
            return Ok(Value::Nil);
        }
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(JsonAsMsgpack(place.element(items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let place = self.0;
        let mut entries: Vec<(String, Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(JsonAsMsgpack(place.value(&key)))?;
            entries.push((key, value));
        }
        if place == Place::TokenIds {
            return Ok(Value::Nil);
        }
        // As a `serde_json::Map` (a `BTreeMap`) iterates: by key, a repeated key's last value.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sorted: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
        let mut entries = entries.into_iter().peekable();
        while let Some((key, value)) = entries.next() {
            if entries.peek().is_some_and(|(next, _)| *next == key) {
                continue;
            }
            sorted.push((Value::from(key), value));
        }
        Ok(Value::Map(sorted))
    }
}

/// JSON as msgpack values, so both encodings share one interpreter.
#[cfg(test)]
fn from_json(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::from(u),
            (None, Some(i), _) => Value::from(i),
            (_, _, Some(f)) => Value::F64(f),
            _ => Value::Nil,
        },
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(from_json).collect()),
        serde_json::Value::Object(map) => {
            Value::Map(map.iter().map(|(k, v)| (Value::from(k.as_str()), from_json(v))).collect())
        }
    }
}

/// A block hash as an unsigned 64-bit integer: signed hashes keep their bits, bytes keep their low 64 bits
/// (big-endian).
pub fn hash(value: &Value) -> Option<u64> {
    match value {
        Value::Integer(n) => n.as_u64().or_else(|| n.as_i64().map(|i| i as u64)),
        Value::Binary(bytes) => {
            let tail = &bytes[bytes.len().saturating_sub(8)..];
            Some(tail.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        }
        _ => None,
    }
}

fn tier(dialect: &Dialect, medium: Option<&Value>) -> Result<CacheTier, ()> {
    match medium {
        None | Some(Value::Nil) => (dialect.tier)(None),
        Some(value) => (dialect.tier)(Some(value.as_str().ok_or(())?)),
    }
}

/// A field of an event: by position in the array form, by name in the map form.
fn field<'v>(event: &'v Value, position: usize, name: &str) -> Option<&'v Value> {
    match event {
        Value::Array(items) => items.get(position),
        Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v),
        _ => None,
    }
}

/// What one batch says, read without a sink: the batch's time and instance and, in order, each block's row or why
/// an event could not be read.
#[derive(Debug)]
struct Batch {
    time: i64,
    instance: Option<String>,
    items: Vec<Result<Block, &'static str>>,
}

/// One `cache_events` row of a batch, without what every row of the batch shares.
#[derive(Debug)]
struct Block {
    event: CacheEventKind,
    tier: CacheTier,
    block_hash: Option<u64>,
    parent_hash: Option<u64>,
    blocks: Option<u32>,
    tokens: Option<u32>,
}

/// Reads one batch (on any thread: JSON Lines batches are read on the pool, and their values dropped there).
fn interpret(dialect: &Dialect, value: &Value) -> Result<Batch, &'static str> {
    let (ts, events, rank) = match value {
        Value::Array(items) => (items.first(), items.get(1), items.get(2)),
        Value::Map(_) => (field(value, 0, "ts"), field(value, 1, "events"), field(value, 2, dialect.rank_key)),
        _ => return Err("neither an array nor a map"),
    };
    let time = ts.and_then(Value::as_f64).and_then(seconds_to_nanos).ok_or("no timestamp")?;
    let events = events.and_then(Value::as_array).ok_or("no event list")?;
    let instance = rank.and_then(Value::as_u64).map(dialect.instance);
    let mut items = Vec::new();
    let block = |event, tier, block_hash, parent_hash, blocks, tokens| {
        Ok(Block { event, tier, block_hash, parent_hash, blocks, tokens })
    };
    for event in events {
        let tag = match event {
            Value::Array(items) => items.first().and_then(Value::as_str),
            _ => field(event, 0, "type").and_then(Value::as_str),
        };
        let hashes = || field(event, 1, "block_hashes").and_then(Value::as_array);
        match tag {
            Some("BlockStored") => {
                let Some(hashes) = hashes() else {
                    items.push(Err("BlockStored without block_hashes"));
                    continue;
                };
                let mut parent = field(event, 2, "parent_block_hash").and_then(hash);
                let block_size =
                    field(event, 4, "block_size").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
                let Ok(tier) = tier(dialect, field(event, 6, "medium")) else {
                    items.push(Err("unknown medium"));
                    continue;
                };
                for h in hashes {
                    let Some(h) = hash(h) else {
                        items.push(Err("a block hash that is neither an integer nor bytes"));
                        break;
                    };
                    items.push(block(CacheEventKind::Stored, tier, Some(h), parent, Some(1), block_size));
                    parent = Some(h);
                }
            }
            Some("BlockRemoved") => {
                let Some(hashes) = hashes() else {
                    items.push(Err("BlockRemoved without block_hashes"));
                    continue;
                };
                let Ok(tier) = tier(dialect, field(event, 2, "medium")) else {
                    items.push(Err("unknown medium"));
                    continue;
                };
                for h in hashes {
                    let Some(h) = hash(h) else {
                        items.push(Err("a block hash that is neither an integer nor bytes"));
                        break;
                    };
                    items.push(block(CacheEventKind::Removed, tier, Some(h), None, Some(1), None));
                }
            }
            Some("AllBlocksCleared") => {
                let Ok(tier) = (dialect.tier)(None) else { continue };
                items.push(block(CacheEventKind::Cleared, tier, None, None, None, None));
            }
            _ => items.push(Err("an event of unknown type")),
        }
    }
    Ok(Batch { time, instance, items })
}

/// Writes what [`interpret`] read of the batch at `line`.
fn emit(
    dialect: &Dialect,
    batch: Result<Batch, &'static str>,
    line: u64,
    ctx: &ParseContext<'_>,
    shared: &mut SharedText,
    sink: &mut dyn Sink,
) -> Result<(), DatasetError> {
    let bad = |sink: &mut dyn Sink, what: &str| {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedRecord, format!("not a KV event batch: {what}")))
    };
    let batch = match batch {
        Ok(batch) => batch,
        Err(what) => {
            bad(sink, what);
            return Ok(());
        }
    };
    // Every row of the input shares these (one allocation each, not three a row).
    let source = shared.get(dialect.source);
    let file = shared.get(ctx.source_file);
    let instance = batch.instance.map(|instance| shared.get(&instance));
    for item in batch.items {
        match item {
            Ok(block) => sink.cache_event(CacheEvent {
                time: Some(batch.time),
                source: Arc::clone(&source),
                instance: instance.clone(),
                tier: Some(block.tier),
                event: block.event,
                block_hash: block.block_hash,
                parent_hash: block.parent_hash,
                blocks: block.blocks,
                tokens: block.tokens,
                source_file: Some(Arc::clone(&file)),
                source_line: Some(line),
                ..CacheEvent::default()
            })?,
            Err(what) => bad(sink, what),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_hashes_keep_their_low_64_bits_and_signed_hashes_their_bits() {
        assert_eq!(
            hash(&Value::Binary(vec![0xaa; 24].into_iter().chain([0, 0, 0, 0, 0, 0, 1, 2]).collect())),
            Some(258)
        );
        assert_eq!(hash(&Value::Binary(vec![1, 2])), Some(258));
        assert_eq!(hash(&Value::from(-2i64)), Some(u64::MAX - 1));
        assert_eq!(hash(&Value::from("x")), None);
    }

    /// `json` with each event's token ids replaced by `null`, as [`json_value`] drops them.
    fn without_token_ids(mut json: serde_json::Value) -> serde_json::Value {
        use serde_json::Value as J;
        let events = match &mut json {
            J::Array(items) => items.get_mut(1),
            J::Object(map) => map.get_mut("events"),
            _ => None,
        };
        if let Some(J::Array(events)) = events {
            for event in events {
                match event {
                    J::Array(fields) if fields.len() > 3 => fields[3] = J::Null,
                    J::Object(map) if map.contains_key("token_ids") => {
                        map.insert("token_ids".to_owned(), J::Null);
                    }
                    _ => {}
                }
            }
        }
        json
    }

    /// The same value (token ids aside), or the same error.
    fn agree(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let by_value = serde_json::from_str::<serde_json::Value>(text);
        match (json_value(text), by_value) {
            (Ok(direct), Ok(value)) => {
                proptest::prop_assert_eq!(&direct, &from_json(&without_token_ids(value.clone())), "{}", text);
                // And what a batch reader reads of it is what it reads of the whole value.
                let dialect = Dialect {
                    source: "s",
                    tier: |medium| if medium == Some("X") { Err(()) } else { Ok(CacheTier::Gpu) },
                    instance: |rank| rank.to_string(),
                    rank_key: "rank",
                };
                let read = |value: &Value| format!("{:?}", interpret(&dialect, value));
                proptest::prop_assert_eq!(read(&direct), read(&from_json(&value)), "{}", text);
            }
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string(), "{}", text),
            (direct, value) => proptest::prop_assert!(false, "{text}: {direct:?} against {value:?}"),
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// Documents of both forms, numbers of every kind (past `i64`, negative, `-0`, floats, exponents), repeated
        /// and unsorted keys, nested values, and broken documents.
        #[test]
        fn json_is_read_as_its_serde_json_value_converts(
            text in " ?(\\[|\\{)((\"(ts|events|b|a|type|é)\" ?: ?)?(-?[0-9]{1,21}(\\.[0-9]{1,2})?(e-?[0-9]{1,3})?|-0|true|false|null|\"[a-z\\\\\"é]{0,3}\"|\\[\\]|\\[1, ?-2\\]|\\{\"b\": ?1, ?\"a\": ?2, ?\"b\": ?3\\}|\\[|nul) ?,? ?){0,5}(\\]|\\})? ?x?"
        ) {
            agree(&text)?;
        }

        /// Batches, array and map forms, whose token ids (and the fields around them) are of every kind, broken
        /// ones included (`01`, `1e400`, a trailing comma), where serde_json must refuse them as before.
        #[test]
        fn batches_are_read_as_their_serde_json_values_are(
            text in "\\[1\\.5, ?\\[((\\[\"(BlockStored|BlockRemoved|AllBlocksCleared)\"|\\{\"type\": ?\"BlockStored\", ?\"token_ids\": ?\\[1\\], \"x\": ?0)\
                     (, ?(\\[[0-9]{1,3}(, ?-?[0-9]{1,3}){0,3}\\]|null|\"GPU\"|\"X\"|16|-1|1e400|01|\\[1,\\]|\\[\\[2\\]\\]|\\{\"a\": ?1\\}|\"t\"|\\[1, ?\"s\", ?true\\]|\\[1, ?1e400\\]|\\[2, ?01\\]|\"token_ids\": ?\\[3\\]|\"block_hashes\": ?\\[4, ?5\\])){0,7}(\\]|\\}),? ?){0,3}\\](, ?[0-9])?\\]"
        ) {
            agree(&text)?;
        }
    }

    #[test]
    fn json_values_convert_as_documented() {
        let value = json_value(r#"{"b":[1,-2,18446744073709551615,1.5],"a":null,"b":true,"s":"é"}"#).unwrap();
        assert_eq!(
            value,
            Value::Map(vec![
                (Value::from("a"), Value::Nil),
                (Value::from("b"), Value::Boolean(true)),
                (Value::from("s"), Value::from("é")),
            ])
        );
        let out_of_range = "[1,1e400]";
        assert_eq!(
            json_value(out_of_range).unwrap_err().to_string(),
            serde_json::from_str::<serde_json::Value>(out_of_range).unwrap_err().to_string()
        );
        assert_eq!(
            json_value("[0,-2,18446744073709551615,1.5]").unwrap(),
            Value::Array(vec![Value::from(0u64), Value::from(-2i64), Value::from(u64::MAX), Value::F64(1.5)])
        );
    }

    #[test]
    fn detection_helpers() {
        assert!(looks_like_msgpack_batch(&[0x93, 0xcb, 0, 0]));
        assert!(!looks_like_msgpack_batch(&[0x94, 0xcb]));
        assert!(looks_like_json_batch(&Head::new(br#"[1.0, [["AllBlocksCleared"]]]"#)));
        assert!(!looks_like_json_batch(&Head::new(br#"{"type": "BlockStoredLater"}"#)));
        assert!(speaks_sglang(&Head::new(br#"[1.0, [["BlockRemoved", [1], "CPU_PINNED"]], 0]"#)));
        assert!(!speaks_sglang(&Head::new(br#"[1.0, [["BlockRemoved", [1], "CPU"]], 0]"#)));
    }
}
