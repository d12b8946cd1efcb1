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

use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, ClockDomain, DatasetError};
use rmpv::Value;

use crate::time::seconds_to_nanos;
use crate::{Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line};

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
pub fn looks_like_json_batch(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().next().unwrap_or_default().trim_start();
    let json = first.starts_with('[') || first.starts_with('{');
    json && ["BlockStored", "BlockRemoved", "AllBlocksCleared"].iter().any(|t| first.contains(&format!("\"{t}\"")))
}

/// Whether `head` shows vocabulary only SGLang's events carry (its medium names `CPU_PINNED` and `EXTERNAL`, its
/// rank key `attn_dp_rank`). Batches without a medium or a map form are byte for byte the same in both frameworks.
pub fn speaks_sglang(head: &[u8]) -> bool {
    ["CPU_PINNED", "EXTERNAL", "attn_dp_rank"].iter().any(|m| head.windows(m.len()).any(|w| w == m.as_bytes()))
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
    if binary {
        loop {
            if input.fill_buf()?.is_empty() {
                break;
            }
            batches += 1;
            match rmpv::decode::read_value(&mut &mut *input) {
                Ok(value) => batch(dialect, &value, batches, ctx, sink)?,
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
        let mut lines = LineReader::new(input);
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            if line.trim_ascii().is_empty() {
                continue;
            }
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(json) => batch(dialect, &from_json(&json), line_no, ctx, sink)?,
                Err(e) => sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MalformedJson,
                    crate::json::error_message(&e),
                )),
            }
        }
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

/// JSON as msgpack values, so both encodings share one interpreter.
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

fn batch(
    dialect: &Dialect,
    value: &Value,
    line: u64,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<(), DatasetError> {
    let bad = |sink: &mut dyn Sink, what: &str| {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedRecord, format!("not a KV event batch: {what}")))
    };
    let (ts, events, rank) = match value {
        Value::Array(items) => (items.first(), items.get(1), items.get(2)),
        Value::Map(_) => (field(value, 0, "ts"), field(value, 1, "events"), field(value, 2, dialect.rank_key)),
        _ => {
            bad(sink, "neither an array nor a map");
            return Ok(());
        }
    };
    let Some(time) = ts.and_then(Value::as_f64).and_then(seconds_to_nanos) else {
        bad(sink, "no timestamp");
        return Ok(());
    };
    let Some(events) = events.and_then(Value::as_array) else {
        bad(sink, "no event list");
        return Ok(());
    };
    let instance = rank.and_then(Value::as_u64).map(dialect.instance);
    let row = |event: CacheEventKind, tier, block_hash, parent_hash, blocks, tokens| CacheEvent {
        time: Some(time),
        source: dialect.source.to_owned(),
        instance: instance.clone(),
        tier: Some(tier),
        event,
        block_hash,
        parent_hash,
        blocks,
        tokens,
        source_file: Some(ctx.source_file.to_owned()),
        source_line: Some(line),
        ..CacheEvent::default()
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
                    bad(sink, "BlockStored without block_hashes");
                    continue;
                };
                let mut parent = field(event, 2, "parent_block_hash").and_then(hash);
                let block_size =
                    field(event, 4, "block_size").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
                let Ok(tier) = tier(dialect, field(event, 6, "medium")) else {
                    bad(sink, "unknown medium");
                    continue;
                };
                for h in hashes {
                    let Some(h) = hash(h) else {
                        bad(sink, "a block hash that is neither an integer nor bytes");
                        break;
                    };
                    sink.cache_event(row(CacheEventKind::Stored, tier, Some(h), parent, Some(1), block_size))?;
                    parent = Some(h);
                }
            }
            Some("BlockRemoved") => {
                let Some(hashes) = hashes() else {
                    bad(sink, "BlockRemoved without block_hashes");
                    continue;
                };
                let Ok(tier) = tier(dialect, field(event, 2, "medium")) else {
                    bad(sink, "unknown medium");
                    continue;
                };
                for h in hashes {
                    match hash(h) {
                        Some(h) => {
                            sink.cache_event(row(CacheEventKind::Removed, tier, Some(h), None, Some(1), None))?
                        }
                        None => {
                            bad(sink, "a block hash that is neither an integer nor bytes");
                            break;
                        }
                    }
                }
            }
            Some("AllBlocksCleared") => {
                let Ok(tier) = (dialect.tier)(None) else { continue };
                sink.cache_event(row(CacheEventKind::Cleared, tier, None, None, None, None))?;
            }
            _ => bad(sink, "an event of unknown type"),
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

    #[test]
    fn detection_helpers() {
        assert!(looks_like_msgpack_batch(&[0x93, 0xcb, 0, 0]));
        assert!(!looks_like_msgpack_batch(&[0x94, 0xcb]));
        assert!(looks_like_json_batch(br#"[1.0, [["AllBlocksCleared"]]]"#));
        assert!(!looks_like_json_batch(br#"{"type": "BlockStoredLater"}"#));
    }
}
