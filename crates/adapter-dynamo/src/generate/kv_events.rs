//! Synthetic router KV events: the recorder form, with every storage tier, removals, clears and legacy hit-rate
//! events.

use std::io::{self, Write};

use super::{Generated, Rng};

/// Writes `events` recorder lines `{"timestamp": ms, "event": RouterEvent}` (every tenth a clear, every seventh
/// a legacy hit-rate event instead).
pub fn write_kv_events(out: &mut impl Write, events: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let tiers = ["device", "host_pinned", "disk", "external"];
    for i in 0..events {
        let worker = u64::MAX - rng.below(8);
        let line = if i % 7 == 6 {
            done.cache_events += 1;
            serde_json::json!({"worker_id": worker, "dp_rank": 0, "isl_blocks": 20, "overlap_blocks": rng.below(21)})
        } else {
            let data = if i % 10 == 9 {
                done.cache_events += 1;
                serde_json::json!("cleared")
            } else if i % 2 == 0 {
                let blocks: Vec<_> = (0..1 + rng.below(4))
                    .map(|_| serde_json::json!({"block_hash": rng.below(u64::MAX), "tokens_hash": rng.below(1000)}))
                    .collect();
                done.cache_events += blocks.len() as u64;
                serde_json::json!({"stored": {"parent_hash": null, "blocks": blocks}})
            } else {
                done.cache_events += 2;
                serde_json::json!({"removed": {"block_hashes": [rng.below(u64::MAX), rng.below(u64::MAX)]}})
            };
            serde_json::json!({"timestamp": i * 10, "event": {
                "worker_id": worker, "storage_tier": tiers[(i % 4) as usize],
                "event": {"event_id": i, "data": data, "dp_rank": i % 2},
            }})
        };
        serde_json::to_writer(&mut *out, &line)?;
        writeln!(out)?;
        done.lines += 1;
    }
    Ok(done)
}
