//! Synthetic `dynamo.request.trace.v1` files: disaggregated `request_end` rows with worker ids above 2^53, replay
//! hashes and KV hit rates, interleaved with tool events.

use std::io::{self, Write};

use super::{Generated, Rng};

/// Writes `requests` `request_end` records (every fifth with a `tool_end` after it, every eleventh cancelled).
/// `x_request_id` is `aiperf-<n>`, so a matching AIPerf export can be generated for join tests.
pub fn write_request_trace(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let mut received = 1_767_225_600_000u64;
    for i in 0..requests {
        received += rng.below(200);
        let (input, output) = (1 + rng.below(8000), 1 + rng.below(500));
        let hashes: Vec<u64> = (0..input.div_ceil(64)).map(|_| u64::MAX - rng.below(1 << 20)).collect();
        let (ttft, transfer) = (5.0 + rng.below(500) as f64, rng.below(200) as f64 / 2.0);
        let total = ttft + transfer + output as f64 * (5.0 + rng.below(20) as f64);
        let reason = if i % 11 == 10 { "cancelled" } else { "stop" };
        let record = serde_json::json!({
            "schema": "dynamo.request.trace.v1", "event_type": "request_end",
            "event_time_unix_ms": received + total.round() as u64, "event_source": "dynamo",
            "agent_context": {"session_id": format!("s{}", i % 7)},
            "request": {
                "request_id": format!("00000000-0000-4000-8000-{i:012}"), "x_request_id": format!("aiperf-{i}"),
                "model": "m", "input_tokens": input, "output_tokens": output, "cached_tokens": rng.below(input),
                "request_received_ms": received, "prefill_wait_time_ms": 1.5, "prefill_time_ms": ttft - 1.5,
                "ttft_ms": ttft, "total_time_ms": total, "avg_itl_ms": 10.0,
                "kv_hit_rate": rng.below(101) as f64 / 100.0, "kv_transfer_estimated_latency_ms": transfer,
                "worker": {"prefill_worker_id": 7_587_888_160_958_627_596u64 + rng.below(4), "prefill_dp_rank": 0,
                           "decode_worker_id": 9_007_199_254_740_993u64 + rng.below(4), "decode_dp_rank": rng.below(2)},
                "replay": {"trace_block_size": 64, "input_length": input, "input_sequence_hashes": hashes},
                "finish_reason_metadata": {"finish_reason": reason},
            },
        });
        serde_json::to_writer(&mut *out, &record)?;
        writeln!(out)?;
        done.lines += 1;
        done.requests += 1;
        done.cache_events += 1;
        done.failed += u64::from(reason == "cancelled");
        if i % 5 == 4 {
            let tool = serde_json::json!({
                "schema": "dynamo.request.trace.v1", "event_type": "tool_end", "event_time_unix_ms": received + 1,
                "agent_context": {"session_id": format!("s{}", i % 7)},
                "tool": {"tool_call_id": format!("t{i}"), "tool_class": "shell", "status": "succeeded"},
            });
            serde_json::to_writer(&mut *out, &tool)?;
            writeln!(out)?;
            done.lines += 1;
        }
    }
    Ok(done)
}
