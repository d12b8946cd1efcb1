//! `sglang-kv-events`: KV-cache events SGLang publishes with `--kv-events-config` (0.4.7+, the encoding vLLM
//! introduced, for NVIDIA Dynamo's router), as a subscriber stores them: msgpack payloads one after another, or
//! one JSON document per line.
//!
//! ```text
//! batch         [ts, [event, …], attn_dp_rank]                       (KVEventBatch, array_like)
//! ≤0.5.18       ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id[, medium, …]]
//!               ["BlockRemoved", block_hashes[, medium]]             ["AllBlocksCleared"]
//! 0.5.20+       tagged maps {"type": "BlockStored", "block_hashes": […], …}, None fields omitted
//! medium        GPU | CPU_PINNED | DISK | EXTERNAL (0.5.9+; absent before: the GPU radix cache)
//! ```
//!
//! Tiers: `GPU` → `gpu`, `CPU_PINNED` → `cpu` (HiCache L2), `DISK` → `disk`, `EXTERNAL` → `remote` (HiCache L3
//! storage backends such as Mooncake or 3FS). `instance` is `DP{attn_dp_rank}`. Rows are as in
//! [`infertrace_adapter::kv_events`]: one per block.
//!
//! Detection: a batch whose head shows `CPU_PINNED`, `EXTERNAL` or `attn_dp_rank` is SGLang's. Without them
//! (GPU-only, array form) the bytes are identical to vLLM's and `vllm-kv-events` claims the file; pass
//! `--format sglang-kv-events`.

use std::io::BufRead;

use infertrace_adapter::kv_events::{self, Dialect};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::CacheTier;

/// The SGLang KV-cache event adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct SglangKvEvents;

impl SglangKvEvents {
    /// Format id.
    pub const ID: &'static str = "sglang-kv-events";
}

const DIALECT: Dialect = Dialect {
    source: SglangKvEvents::ID,
    tier: |medium| match medium {
        None | Some("GPU") => Ok(CacheTier::Gpu),
        Some("CPU_PINNED") => Ok(CacheTier::Cpu),
        Some("DISK") => Ok(CacheTier::Disk),
        Some("EXTERNAL") => Ok(CacheTier::Remote),
        Some(_) => Err(()),
    },
    instance: |rank| format!("DP{rank}"),
    rank_key: "attn_dp_rank",
};

impl Adapter for SglangKvEvents {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "SGLang KV-cache events (--kv-events-config, 0.4.7+): msgpack payloads or JSON lines"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let batch = kv_events::looks_like_msgpack_batch(head.bytes()) || kv_events::looks_like_json_batch(head);
        (batch && kv_events::speaks_sglang(head)).then_some(Confidence::High)
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

    fn parse(bytes: &[u8]) -> CollectSink {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "kv.jsonl", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        SglangKvEvents.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
        sink
    }

    #[test]
    fn tagged_arrays_and_tagged_maps_with_every_medium() {
        let text = r#"[1766581535.25, [["BlockStored", [101, 102], null, [1, 2, 3, 4], 2, null, "GPU"], ["BlockStored", [103], 102, [5, 6], 2, null, "CPU_PINNED"], ["BlockRemoved", [101], "GPU"]], 1]
[1766581536.5, [{"type": "BlockStored", "block_hashes": [201], "parent_block_hash": 103, "token_ids": [7, 8], "block_size": 2, "medium": "EXTERNAL", "session_id": "s"}, {"type": "BlockRemoved", "block_hashes": [103], "medium": "DISK"}, {"type": "AllBlocksCleared"}, {"type": "BlockStored", "block_hashes": [9], "medium": "NVME"}], 0]
"#;
        let sink = parse(text.as_bytes());
        let rows: Vec<_> = sink
            .cache_events
            .iter()
            .map(|e| (e.time, e.instance.as_deref(), e.event, e.tier, e.block_hash, e.parent_hash, e.tokens))
            .collect();
        let t1 = Some(1_766_581_535_250_000_000);
        let t2 = Some(1_766_581_536_500_000_000);
        let (gpu, cpu, disk, remote) =
            (Some(CacheTier::Gpu), Some(CacheTier::Cpu), Some(CacheTier::Disk), Some(CacheTier::Remote));
        use CacheEventKind::{Cleared, Removed, Stored};
        assert_eq!(
            rows,
            [
                (t1, Some("DP1"), Stored, gpu, Some(101), None, Some(2)),
                (t1, Some("DP1"), Stored, gpu, Some(102), Some(101), Some(2)),
                (t1, Some("DP1"), Stored, cpu, Some(103), Some(102), Some(2)),
                (t1, Some("DP1"), Removed, gpu, Some(101), None, None),
                (t2, Some("DP0"), Stored, remote, Some(201), Some(103), Some(2)),
                (t2, Some("DP0"), Removed, disk, Some(103), None, None),
                (t2, Some("DP0"), Cleared, gpu, None, None, None),
            ]
        );
        let diagnostics: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind, d.message.as_str())).collect();
        assert_eq!(diagnostics, [(2, DiagnosticKind::MalformedRecord, "not a KV event batch: unknown medium")]);
        assert!(sink.cache_events.iter().all(|e| &*e.source == "sglang-kv-events"));
    }

    #[test]
    fn detection_needs_sglang_vocabulary() {
        assert_eq!(
            SglangKvEvents.detect(br#"[1.0, [["BlockRemoved", [1], "CPU_PINNED"]], 0]"#),
            Some(Confidence::High)
        );
        assert_eq!(SglangKvEvents.detect(br#"[1.0, [["BlockRemoved", [1]]], 0]"#), None);
        assert_eq!(SglangKvEvents.detect(b"[2025-01-01 00:00:00] EXTERNAL"), None);
    }
}
