//! `vllm-kv-events`: KV-cache events published by vLLM's engine core (`vllm/distributed/kv_events.py`, V1, 0.9+),
//! as a subscriber stores them: the msgpack payloads one after another (msgpack values delimit themselves), or one
//! JSON document per line with the same structure (`msgspec.json.encode(batch)`).
//!
//! ```text
//! batch       [ts, [event, …]]                    0.9.0      (array_like; ts = time.time(), seconds)
//!             [ts, [event, …], data_parallel_rank] 0.9.2+
//! event ≤0.23 ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, …]
//!             ["BlockRemoved", block_hashes, medium, group_idx]      ["AllBlocksCleared"]
//! event 0.24+ {"type": "BlockStored", "block_hashes": […], "parent_block_hash": …, "block_size": 16, "medium": "GPU", …}
//! hashes      signed 64-bit Python hash() (≤0.10.1), unsigned 64-bit (0.10.2+ default), or raw bytes
//! medium      "GPU" | "CPU" | "cpu" | "STORAGE" | absent (≤0.10.1: GPU)
//! ```
//!
//! Each block becomes one `cache_events` row (`block_hash`, `parent_hash` = the block before it in the chain,
//! `blocks` 1, `tokens` = block size), so the trace can be replayed block by block. Hashes given as bytes become
//! `int.from_bytes(bytes, "big") & (2^64 - 1)`, as vLLM itself converts them, and signed hashes keep their bits.
//! `token_ids` are never read into an output. Trailing array elements and unknown map keys are ignored.

use std::io::{BufRead, ErrorKind};

use infertrace_adapter::time::seconds_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line,
};
use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, ClockDomain, DatasetError};
use rmpv::Value;

/// The vLLM KV-cache event adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmKvEvents;

impl VllmKvEvents {
    /// Format id.
    pub const ID: &'static str = "vllm-kv-events";
}

/// msgpack markers a batch starts with: fixarray of 2 or 3, then a float64 or float32 timestamp.
fn looks_like_msgpack_batch(head: &[u8]) -> bool {
    matches!(head, [0x92 | 0x93, 0xcb | 0xca, ..])
}

impl Adapter for VllmKvEvents {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM KV-cache events (BlockStored/BlockRemoved/AllBlocksCleared): msgpack payloads or JSON lines"
    }

    fn detect(&self, head: &[u8]) -> Option<Confidence> {
        if looks_like_msgpack_batch(head) {
            return Some(Confidence::High);
        }
        let text = String::from_utf8_lossy(head);
        let first = text.lines().next().unwrap_or_default().trim_start();
        let json = first.starts_with('[') || first.starts_with('{');
        let events =
            ["BlockStored", "BlockRemoved", "AllBlocksCleared"].iter().any(|t| first.contains(&format!("\"{t}\"")));
        (json && events).then_some(Confidence::High)
    }

    fn parse(
        &self,
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
                    Ok(value) => batch(&value, batches, ctx, sink)?,
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
                    Ok(json) => batch(&from_json(&json), line_no, ctx, sink)?,
                    Err(e) => sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::MalformedJson,
                        infertrace_adapter::json::error_message(&e),
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

/// A block hash as vLLM's integer form: signed hashes keep their bits, bytes keep their low 64 bits (big-endian).
fn hash(value: &Value) -> Option<u64> {
    match value {
        Value::Integer(n) => n.as_u64().or_else(|| n.as_i64().map(|i| i as u64)),
        Value::Binary(bytes) => {
            let tail = &bytes[bytes.len().saturating_sub(8)..];
            Some(tail.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        }
        _ => None,
    }
}

fn tier(medium: Option<&Value>) -> Result<Option<CacheTier>, ()> {
    match medium {
        None | Some(Value::Nil) => Ok(Some(CacheTier::Gpu)), // Before 0.10.2 every event came from the GPU pool.
        Some(value) => match value.as_str().map(str::to_ascii_uppercase).as_deref() {
            Some("GPU") => Ok(Some(CacheTier::Gpu)),
            Some("CPU") => Ok(Some(CacheTier::Cpu)),
            Some("STORAGE" | "DISK") => Ok(Some(CacheTier::Disk)),
            _ => Err(()),
        },
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

fn batch(value: &Value, line: u64, ctx: &ParseContext<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
    let bad = |sink: &mut dyn Sink, what: &str| {
        sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedRecord, format!("not a KV event batch: {what}")))
    };
    let (ts, events, rank) = match value {
        Value::Array(items) => (items.first(), items.get(1), items.get(2)),
        Value::Map(_) => (field(value, 0, "ts"), field(value, 1, "events"), field(value, 2, "data_parallel_rank")),
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
    let instance = rank.and_then(Value::as_u64).map(|r| format!("engine-{r}"));
    let row = |event: CacheEventKind, tier, block_hash, parent_hash, blocks, tokens| CacheEvent {
        time: Some(time),
        source: VllmKvEvents::ID.to_owned(),
        instance: instance.clone(),
        tier,
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
                let Ok(tier) = tier(field(event, 6, "medium")) else {
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
                let Ok(tier) = tier(field(event, 2, "medium")) else {
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
                sink.cache_event(row(CacheEventKind::Cleared, Some(CacheTier::Gpu), None, None, None, None))?;
            }
            _ => bad(sink, "an event of unknown type"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(bytes: &[u8]) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "kv.bin", options: &options, modified: None };
        let mut sink = CollectSink::default();
        let report = VllmKvEvents.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn hand_encoded_msgpack_batch() {
        // [1.5, [["BlockStored", [-1, 7], nil, [1, 2], 2, nil], ["AllBlocksCleared"]], 3], encoded by hand:
        let mut bytes = vec![0x93, 0xcb];
        bytes.extend_from_slice(&1.5f64.to_be_bytes());
        bytes.push(0x92); // two events
        bytes.extend_from_slice(&[0x96, 0xab]);
        bytes.extend_from_slice(b"BlockStored");
        bytes.extend_from_slice(&[0x92, 0xff, 0x07, 0xc0, 0x92, 0x01, 0x02, 0x02, 0xc0]);
        bytes.extend_from_slice(&[0x91, 0xb0]);
        bytes.extend_from_slice(b"AllBlocksCleared");
        bytes.push(0x03);
        let (sink, report) = parse(&bytes);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.lines, 1);
        let rows: Vec<_> =
            sink.cache_events.iter().map(|e| (e.event, e.tier, e.block_hash, e.parent_hash, e.tokens)).collect();
        assert_eq!(
            rows,
            [
                (CacheEventKind::Stored, Some(CacheTier::Gpu), Some(u64::MAX), None, Some(2)),
                (CacheEventKind::Stored, Some(CacheTier::Gpu), Some(7), Some(u64::MAX), Some(2)),
                (CacheEventKind::Cleared, Some(CacheTier::Gpu), None, None, None),
            ]
        );
        assert!(
            sink.cache_events
                .iter()
                .all(|e| e.time == Some(1_500_000_000) && e.instance.as_deref() == Some("engine-3"))
        );
    }

    #[test]
    fn json_lines_in_both_event_encodings() {
        let text = r#"[1761816192.5, [["BlockStored", [10, 11], 9, [1, 2, 3, 4], 2, null, "CPU"], ["BlockRemoved", [10], "GPU", null]]]
{"ts": 1761816193.0, "events": [{"type": "BlockStored", "block_hashes": [12], "parent_block_hash": null, "token_ids": [5, 6], "block_size": 2, "medium": "STORAGE"}, {"type": "Mystery"}], "data_parallel_rank": 0}
not json
"#;
        let (sink, report) = parse(text.as_bytes());
        assert_eq!(report.format_version.as_deref(), Some("json lines"));
        let rows: Vec<_> =
            sink.cache_events.iter().map(|e| (e.source_line, e.event, e.tier, e.block_hash, e.parent_hash)).collect();
        assert_eq!(
            rows,
            [
                (Some(1), CacheEventKind::Stored, Some(CacheTier::Cpu), Some(10), Some(9)),
                (Some(1), CacheEventKind::Stored, Some(CacheTier::Cpu), Some(11), Some(10)),
                (Some(1), CacheEventKind::Removed, Some(CacheTier::Gpu), Some(10), None),
                (Some(2), CacheEventKind::Stored, Some(CacheTier::Disk), Some(12), None),
            ]
        );
        let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(kinds, [(2, DiagnosticKind::MalformedRecord), (3, DiagnosticKind::MalformedJson)]);
    }

    #[test]
    fn byte_hashes_keep_their_low_64_bits_and_truncation_is_reported() {
        assert_eq!(
            hash(&Value::Binary(vec![0xaa; 24].into_iter().chain([0, 0, 0, 0, 0, 0, 1, 2]).collect())),
            Some(258)
        );
        assert_eq!(hash(&Value::from(-2i64)), Some(u64::MAX - 1));
        let mut bytes = vec![0x93, 0xcb];
        bytes.extend_from_slice(&1.0f64.to_be_bytes());
        bytes.extend_from_slice(&[0x91, 0x93]); // cut inside the event list
        let (sink, _) = parse(&bytes);
        assert_eq!(sink.diagnostics.len(), 1);
        assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MalformedRecord);
    }
}
