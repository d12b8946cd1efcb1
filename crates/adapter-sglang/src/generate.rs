//! Synthetic SGLang scheduler logs of any size in every envelope and batch-line generation, for tests and
//! benchmarks. Deterministic for a seed.

use std::io::{self, Write};

/// A release family whose batch lines the generator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 0.3.0: time-only envelope, `cache hit rate`, no `token usage` on prefill lines.
    V0_3_0,
    /// 0.4.4: dated envelope with `TP0`, `largest-len`, trailing `, `.
    V0_4_4,
    /// 0.5.1: `cuda graph` on decode lines, trailing `, `.
    V0_5_1,
    /// 0.5.10: comma heads, `#pending-token`, graph flags and input throughput on prefill lines, milliseconds and
    /// `DP{n} TP0` rank tags (two data-parallel ranks).
    V0_5_10,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 4] = [Generation::V0_3_0, Generation::V0_4_4, Generation::V0_5_1, Generation::V0_5_10];
}

/// What a generated log holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written.
    pub lines: u64,
    /// Canonical samples the batch lines hold.
    pub samples: u64,
    /// Prefill batch lines written.
    pub prefill_lines: u64,
}

/// Writes `batches` batch lines (every third a prefill) in the style of `generation`.
pub fn write_log(out: &mut impl Write, generation: Generation, batches: u64, seed: u64) -> io::Result<Generated> {
    use Generation::*;
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    let mut done = Generated::default();
    for i in 0..batches {
        let t = 9 * 3600 + i * 2;
        let hms = format!("{:02}:{:02}:{:02}", t / 3600 % 24, t / 60 % 60, t % 60);
        let envelope = match generation {
            V0_3_0 => format!("[{hms} TP0]"),
            V0_4_4 | V0_5_1 => format!("[2025-03-14 {hms} TP0]"),
            V0_5_10 => format!("[2026-04-05 {hms}.{:03} DP{} TP0]", next(1000), i % 2),
        };
        let (running, queue, usage) = (next(64), next(16), format!("{:.2}", next(100) as f64 / 100.0));
        let (new_seq, new_tok, cached) = (1 + next(8), 1 + next(8000), next(8000));
        let (line, samples) = if i % 3 == 0 {
            done.prefill_lines += 1;
            match generation {
                V0_3_0 => (
                    format!(
                        "Prefill batch. #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, cache hit rate: {:.2}%, #running-req: {running}, #queue-req: {queue}",
                        next(10_000) as f64 / 100.0
                    ),
                    6,
                ),
                V0_4_4 => (
                    format!(
                        "Prefill batch. #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, token usage: {usage}, #running-req: {running}, #queue-req: {queue}, "
                    ),
                    6,
                ),
                V0_5_1 => (
                    format!(
                        "Prefill batch. #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, token usage: {usage}, #running-req: {running}, #queue-req: {queue}, "
                    ),
                    6,
                ),
                V0_5_10 => (
                    format!(
                        "Prefill batch, #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, token usage: {usage}, #running-req: {running}, #queue-req: {queue}, #pending-token: {}, cuda graph: False, input throughput (token/s): {:.2}",
                        next(50_000),
                        next(1_000_000) as f64 / 100.0
                    ),
                    8,
                ),
            }
        } else {
            let tokens = next(300_000);
            let tps = format!("{:.2}", next(500_000) as f64 / 100.0);
            match generation {
                V0_3_0 => (
                    format!(
                        "Decode batch. #running-req: {running}, #token: {tokens}, token usage: {usage}, gen throughput (token/s): {tps}, #queue-req: {queue}"
                    ),
                    5,
                ),
                V0_4_4 => (
                    format!(
                        "Decode batch. #running-req: {running}, #token: {tokens}, token usage: {usage}, gen throughput (token/s): {tps}, largest-len: 0, #queue-req: {queue}, "
                    ),
                    5,
                ),
                V0_5_1 => (
                    format!(
                        "Decode batch. #running-req: {running}, #token: {tokens}, token usage: {usage}, cuda graph: True, gen throughput (token/s): {tps}, #queue-req: {queue}, "
                    ),
                    5,
                ),
                V0_5_10 => (
                    format!(
                        "Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage}, accept len: 2.50, accept rate: 0.70, cuda graph: True, gen throughput (token/s): {tps}, #queue-req: {queue}"
                    ),
                    7,
                ),
            }
        };
        writeln!(out, "{envelope} {line}")?;
        done.samples += samples;
        done.lines += 1;
        if i % 10 == 9 {
            // An access line and a startup-style record: recognised, not samples.
            let date = if generation == V0_3_0 { String::new() } else { "2025-03-14 ".to_owned() };
            writeln!(
                out,
                "[{date}{hms}] INFO:     127.0.0.1:{} - \"POST /generate HTTP/1.1\" 200 OK",
                30_000 + next(30_000)
            )?;
            done.lines += 1;
        }
    }
    Ok(done)
}
