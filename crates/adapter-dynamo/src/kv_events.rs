//! `dynamo-kv-events`: KV-cache events as Dynamo's router sees them (`lib/kv-router/src/protocols.rs`), one JSON
//! document per line: what the KV event recorder writes, or what a subscriber to the `kv-events` subject (1.6;
//! `kv_events` in 2025 builds) stores with the JSON codec.
//!
//! ```text
//! recorder      {"timestamp": <ms since the recorder started>, "event": <RouterEvent>}
//! RouterEvent   {"worker_id": u64, "storage_tier"?: "device"|"host_pinned"|"disk"|"external",
//!                "event": {"event_id": u64, "dp_rank"?: u32, "data": DATA}, "session_id"?: …}
//! placement     {"placement": {"owner": {"LocalWorker": {"worker_id", "dp_rank"}} | "Shared", "tier"}, "event": …}
//! DATA          {"stored": {"parent_hash": u64|null, "start_position"?, "blocks": [{"block_hash", "tokens_hash"}]}}
//!               | {"removed": {"block_hashes": [u64]}} | "cleared"
//! batch         {"events": [KvCacheEvent], "shutdown": bool}          (a worker's batch: no worker id)
//! legacy        {"worker_id", "dp_rank"?, "isl_blocks", "overlap_blocks"}   (2025 `kv-hit-rate` subject)
//! ```
//!
//! Each stored or removed block is one `cache_events` row (`block_hash` = the sequence-aware `block_hash`,
//! `parent_hash` = the block before it, `blocks` 1; `tokens_hash` is not kept), a clear is one row, and a legacy
//! hit-rate event is a `lookup` with `blocks` = `isl_blocks` and `hit_blocks` = `overlap_blocks`. Tier:
//! `device` → `gpu`, `host_pinned` → `cpu`, `disk` → `disk`, `external` → `remote` (absent: `device`, serde's
//! default). `instance` is the worker id, then `/dp<rank>` (as in `dynamo-request-trace`). Recorder timestamps are
//! offsets: they count from `--start` (clock `relative`); events without one have no time. Ids are read as u64,
//! never through a float.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::Arc;

use ahash::HashMap;
use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::time::millis_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    json, utf8_line,
};
use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, ClockDomain};
use serde_json::Value;

use crate::request_trace::worker_instance;

/// The Dynamo router KV-event adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamoKvEvents;

impl DynamoKvEvents {
    /// Format id.
    pub const ID: &'static str = "dynamo-kv-events";
}

impl Adapter for DynamoKvEvents {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "Dynamo router KV events (RouterEvent JSONL, recorder or subscriber) and legacy KV hit-rate events"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim_start();
        if !first.starts_with('{') {
            return None;
        }
        let router = first.contains("\"event_id\"")
            && (first.contains("\"stored\"") || first.contains("\"removed\"") || first.contains("\"cleared\""));
        let legacy = first.contains("\"isl_blocks\"") && first.contains("\"overlap_blocks\"");
        (router || legacy || first.contains("\"storage_tier\"")).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut relative = false;
        let start_ns = ctx.options.start_ns;
        let (source, file): (Arc<str>, Arc<str>) = (Self::ID.into(), ctx.source_file.into());
        let mut instances = Instances::default();
        // Each line is parsed and read into its events on the pool; the fold writes them in order.
        map_lines(
            &mut lines,
            |bytes| prepare(bytes, start_ns),
            |line_no, bytes, prepared| {
                let (events, outcome) = match prepared {
                    Prepared::Nothing => return Ok(()),
                    Prepared::NotUtf8 => {
                        utf8_line(line_no, bytes, sink);
                        return Ok(());
                    }
                    Prepared::Malformed(message) => {
                        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedJson, message));
                        return Ok(());
                    }
                    Prepared::Line(events, outcome) => (events, outcome),
                };
                for event in events {
                    sink.cache_event(CacheEvent {
                        time: event.time,
                        source: Arc::clone(&source),
                        instance: event.instance.map(|(worker, rank)| instances.get(worker, rank)),
                        tier: Some(event.tier),
                        event: event.kind,
                        block_hash: event.block_hash,
                        parent_hash: event.parent_hash,
                        blocks: event.blocks,
                        hit_blocks: event.hit_blocks,
                        source_file: Some(Arc::clone(&file)),
                        source_line: Some(line_no),
                        ..CacheEvent::default()
                    })?;
                }
                match outcome {
                    Ok((kind, timed)) => {
                        *kinds.entry(kind).or_default() += 1;
                        relative |= timed;
                    }
                    Err(what) => sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, what)),
                }
                Ok::<_, ParseError>(())
            },
        )?;
        let mut details = BTreeMap::new();
        details.insert("records".to_owned(), serde_json::json!(kinds));
        Ok(ParseReport {
            format_version: None,
            clock_domain: if relative { ClockDomain::Relative } else { ClockDomain::Utc },
            year: None,
            lines: lines.lines_read(),
            details,
        })
    }
}

/// Instance names by worker id and rank, made once each (at most [`MAX_INSTANCES`] remembered).
#[derive(Default)]
struct Instances(HashMap<(u64, Option<u32>), Arc<str>>);

/// Instances whose names are remembered; past it a name is made for each row (a fleet has far fewer workers).
const MAX_INSTANCES: usize = 4096;

impl Instances {
    fn get(&mut self, worker: u64, rank: Option<u32>) -> Arc<str> {
        if let Some(name) = self.0.get(&(worker, rank)) {
            return Arc::clone(name);
        }
        let name: Arc<str> = worker_instance(worker, rank).into();
        if self.0.len() < MAX_INSTANCES {
            self.0.insert((worker, rank), Arc::clone(&name));
        }
        name
    }
}

/// What one line is, read on any thread.
enum Prepared {
    /// Blank.
    Nothing,
    /// Not UTF-8: the fold reports it.
    NotUtf8,
    /// Not JSON: the message.
    Malformed(String),
    /// The line's events in order, then the kind of record it was and whether it carried a recorder offset, or
    /// what was wrong with it (after the events read before the fault, which are kept).
    Line(Vec<Event>, Result<(&'static str, bool), &'static str>),
}

/// One `cache_events` row, its instance as the worker id and rank it is named by.
struct Event {
    time: Option<i64>,
    instance: Option<(u64, Option<u32>)>,
    tier: CacheTier,
    kind: CacheEventKind,
    block_hash: Option<u64>,
    parent_hash: Option<u64>,
    blocks: Option<u32>,
    hit_blocks: Option<u32>,
}

fn prepare(bytes: &[u8], start_ns: i64) -> Prepared {
    let Some(line) = infertrace_adapter::utf8(bytes) else { return Prepared::NotUtf8 };
    if line.trim_ascii().is_empty() {
        return Prepared::Nothing;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => return Prepared::Malformed(json::error_message(&e)),
    };
    let mut events = Vec::new();
    let outcome = read_line(&value, start_ns, &mut events);
    Prepared::Line(events, outcome)
}

/// Facts shared by every row of one event.
#[derive(Clone, Copy)]
struct Origin {
    time: Option<i64>,
    instance: Option<(u64, Option<u32>)>,
    tier: CacheTier,
}

impl Origin {
    fn event(&self, kind: CacheEventKind) -> Event {
        Event {
            time: self.time,
            instance: self.instance,
            tier: self.tier,
            kind,
            block_hash: None,
            parent_hash: None,
            blocks: None,
            hit_blocks: None,
        }
    }
}

fn tier(name: Option<&str>) -> Result<CacheTier, &'static str> {
    match name {
        None | Some("device") => Ok(CacheTier::Gpu),
        Some("host_pinned") => Ok(CacheTier::Cpu),
        Some("disk") => Ok(CacheTier::Disk),
        Some("external") => Ok(CacheTier::Remote),
        Some(_) => Err("an unknown storage_tier"),
    }
}

fn u32_of(value: Option<&Value>) -> Option<u32> {
    value.and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
}

/// One line's events into `events`: the kind of record it was and whether it carried a recorder offset, or what was
/// wrong.
fn read_line(value: &Value, start_ns: i64, events: &mut Vec<Event>) -> Result<(&'static str, bool), &'static str> {
    let offset = value.get("timestamp").and_then(Value::as_f64);
    let time = offset.and_then(millis_to_nanos).map(|t| start_ns + t);
    // The recorder wraps the router event; a subscriber stores it bare.
    let router = match (offset, value.get("event")) {
        (Some(_), Some(inner)) if inner.get("event").is_some() || inner.get("worker_id").is_some() => inner,
        _ => value,
    };
    if let (Some(isl), Some(overlap)) = (u32_of(router.get("isl_blocks")), u32_of(router.get("overlap_blocks"))) {
        let instance = router.get("worker_id").and_then(Value::as_u64).map(|w| (w, u32_of(router.get("dp_rank"))));
        let origin = Origin { time, instance, tier: CacheTier::Gpu };
        let mut event = origin.event(CacheEventKind::Lookup);
        (event.blocks, event.hit_blocks) = (Some(isl), Some(overlap));
        events.push(event);
        return Ok(("hit_rate", time.is_some()));
    }
    if let Some(batch) = router.get("events").and_then(Value::as_array) {
        // A worker's batch: its events name no worker.
        let origin = Origin { time, instance: None, tier: CacheTier::Gpu };
        for event in batch {
            cache_event(event, origin, events)?;
        }
        return Ok(("batch", time.is_some()));
    }
    let placement = router.get("placement");
    let owner = placement.and_then(|p| p.get("owner")).and_then(|o| o.get("LocalWorker"));
    let worker = router.get("worker_id").or(owner.and_then(|o| o.get("worker_id"))).and_then(Value::as_u64);
    let tier_name = router.get("storage_tier").or(placement.and_then(|p| p.get("tier"))).and_then(Value::as_str);
    let tier = tier(tier_name)?;
    let Some(event) = router.get("event") else { return Err("neither a router event nor a hit-rate event") };
    let rank = u32_of(event.get("dp_rank")).or(u32_of(owner.and_then(|o| o.get("dp_rank"))));
    let origin = Origin { time, instance: worker.map(|w| (w, rank)), tier };
    cache_event(event, origin, events).map(|()| ("router_event", time.is_some()))
}

/// One `KvCacheEvent` (`{"event_id", "data", "dp_rank"}`) into `events`.
fn cache_event(event: &Value, mut origin: Origin, events: &mut Vec<Event>) -> Result<(), &'static str> {
    // A worker named without its rank takes the event's.
    if let (Some(rank), Some((_, rank_of_worker @ None))) = (u32_of(event.get("dp_rank")), origin.instance.as_mut()) {
        *rank_of_worker = Some(rank);
    }
    let Some(data) = event.get("data") else { return Err("a KV event without `data`") };
    if data.as_str() == Some("cleared") {
        events.push(origin.event(CacheEventKind::Cleared));
    } else if let Some(stored) = data.get("stored") {
        let Some(blocks) = stored.get("blocks").and_then(Value::as_array) else {
            return Err("a stored event without `blocks`");
        };
        let mut parent = stored.get("parent_hash").and_then(Value::as_u64);
        for block in blocks {
            let Some(hash) = block.get("block_hash").and_then(Value::as_u64) else {
                return Err("a stored block without an unsigned `block_hash`");
            };
            let mut row = origin.event(CacheEventKind::Stored);
            (row.block_hash, row.parent_hash, row.blocks) = (Some(hash), parent, Some(1));
            events.push(row);
            parent = Some(hash);
        }
    } else if let Some(removed) = data.get("removed") {
        let Some(hashes) = removed.get("block_hashes").and_then(Value::as_array) else {
            return Err("a removed event without `block_hashes`");
        };
        for hash in hashes {
            let Some(hash) = hash.as_u64() else { return Err("a removed block hash that is not unsigned") };
            let mut row = origin.event(CacheEventKind::Removed);
            (row.block_hash, row.blocks) = (Some(hash), Some(1));
            events.push(row);
        }
    } else {
        return Err("a KV event whose `data` is neither stored, removed nor cleared");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str) -> (CollectSink, ParseReport) {
        let options = ParseOptions { start_ns: 1_000_000_000, ..ParseOptions::default() };
        let ctx = ParseContext { source_file: "kv.jsonl", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = DynamoKvEvents.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn recorder_subscriber_placement_batch_and_legacy_forms() {
        let text = concat!(
            r#"{"timestamp": 250, "event": {"worker_id": 7587888160958627596, "storage_tier": "host_pinned", "event": {"event_id": 1, "data": {"stored": {"parent_hash": 18446744073709551615, "blocks": [{"block_hash": 11, "tokens_hash": 99}, {"block_hash": 12, "tokens_hash": 98}]}}, "dp_rank": 1}}}"#,
            "\n",
            r#"{"worker_id": 5, "event": {"event_id": 2, "data": {"removed": {"block_hashes": [11]}}}}"#,
            "\n",
            r#"{"placement": {"owner": {"LocalWorker": {"worker_id": 6, "dp_rank": 0}}, "tier": "external"}, "event": {"event_id": 3, "data": "cleared"}}"#,
            "\n",
            r#"{"events": [{"event_id": 4, "data": {"removed": {"block_hashes": [12]}}, "dp_rank": 0}], "shutdown": false}"#,
            "\n",
            r#"{"worker_id": 5, "dp_rank": 2, "isl_blocks": 18, "overlap_blocks": 17}"#,
            "\n",
            r#"{"worker_id": 5, "storage_tier": "tape", "event": {"event_id": 5, "data": "cleared"}}"#,
            "\n",
            r#"{"worker_id": 5, "event": {"event_id": 6, "data": {"stored": {"blocks": [{"block_hash": -1}]}}}}"#,
            "\n",
        );
        let (sink, report) = parse(text);
        use CacheEventKind::{Cleared, Lookup, Removed, Stored};
        let rows: Vec<_> = sink
            .cache_events
            .iter()
            .map(|e| (e.source_line, e.time, e.instance.as_deref(), e.tier, e.event, e.block_hash, e.parent_hash))
            .collect();
        let t = Some(1_250_000_000);
        let (gpu, cpu, remote) = (Some(CacheTier::Gpu), Some(CacheTier::Cpu), Some(CacheTier::Remote));
        assert_eq!(
            rows,
            [
                (Some(1), t, Some("7587888160958627596/dp1"), cpu, Stored, Some(11), Some(u64::MAX)),
                (Some(1), t, Some("7587888160958627596/dp1"), cpu, Stored, Some(12), Some(11)),
                (Some(2), None, Some("5"), gpu, Removed, Some(11), None),
                (Some(3), None, Some("6/dp0"), remote, Cleared, None, None),
                (Some(4), None, None, gpu, Removed, Some(12), None),
                (Some(5), None, Some("5/dp2"), gpu, Lookup, None, None),
            ]
        );
        assert_eq!((sink.cache_events[5].blocks, sink.cache_events[5].hit_blocks), (Some(18), Some(17)));
        let diagnostics: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.message.as_str())).collect();
        assert_eq!(
            diagnostics,
            [(6, "an unknown storage_tier"), (7, "a stored block without an unsigned `block_hash`")]
        );
        assert_eq!(report.clock_domain, ClockDomain::Relative);
        assert_eq!(report.details["records"], serde_json::json!({"batch": 1, "hit_rate": 1, "router_event": 3}));
    }

    #[test]
    fn detection() {
        assert_eq!(
            DynamoKvEvents.detect(br#"{"worker_id": 1, "event": {"event_id": 1, "data": "cleared"}}"#),
            Some(Confidence::High)
        );
        assert_eq!(
            DynamoKvEvents.detect(br#"{"worker_id": 1, "isl_blocks": 2, "overlap_blocks": 1}"#),
            Some(Confidence::High)
        );
        assert_eq!(DynamoKvEvents.detect(br#"{"timestamp": 0, "input_length": 1, "hash_ids": [1]}"#), None);
    }
}
