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

use std::io::BufRead;

use infertrace_adapter::kv_events::{self, Dialect};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::CacheTier;

/// The vLLM KV-cache event adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmKvEvents;

impl VllmKvEvents {
    /// Format id.
    pub const ID: &'static str = "vllm-kv-events";
}

const DIALECT: Dialect = Dialect {
    source: VllmKvEvents::ID,
    tier: |medium| match medium.map(str::to_ascii_uppercase).as_deref() {
        None | Some("GPU") => Ok(CacheTier::Gpu), // Before 0.10.2 every event came from the GPU pool.
        Some("CPU") => Ok(CacheTier::Cpu),
        Some("STORAGE" | "DISK") => Ok(CacheTier::Disk),
        Some(_) => Err(()),
    },
    instance: |rank| format!("engine-{rank}"),
    rank_key: "data_parallel_rank",
};

impl Adapter for VllmKvEvents {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM KV-cache events (BlockStored/BlockRemoved/AllBlocksCleared): msgpack payloads or JSON lines"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        if !(kv_events::looks_like_msgpack_batch(head.bytes()) || kv_events::looks_like_json_batch(head)) {
            return None;
        }
        // SGLang writes the same encoding: yield to it when its own vocabulary shows.
        Some(if kv_events::speaks_sglang(head) { Confidence::Low } else { Confidence::High })
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        kv_events::parse(&DIALECT, input, ctx, sink)
    }
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, DiagnosticKind, ParseOptions};
    use infertrace_schema::CacheEventKind;

    use super::*;

    fn parse(bytes: &[u8]) -> (CollectSink, ParseReport) {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "kv.bin", options: &options, modified: None, sidecars: None };
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
    fn truncation_is_reported_and_sglang_files_are_left_to_sglang() {
        let mut bytes = vec![0x93, 0xcb];
        bytes.extend_from_slice(&1.0f64.to_be_bytes());
        bytes.extend_from_slice(&[0x91, 0x93]); // cut inside the event list
        let (sink, _) = parse(&bytes);
        assert_eq!(sink.diagnostics.len(), 1);
        assert_eq!(sink.diagnostics[0].kind, DiagnosticKind::MalformedRecord);
        assert_eq!(VllmKvEvents.detect(&bytes), Some(Confidence::High));
        let sglang = br#"[1.0, [["BlockStored", [1], null, [], 16, null, "CPU_PINNED"]], 0]"#;
        assert_eq!(VllmKvEvents.detect(sglang), Some(Confidence::Low));
    }
}
