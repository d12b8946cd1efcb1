//! Synthetic SGLang inputs of any size, for tests and benchmarks: scheduler logs in every envelope and batch-line
//! generation (with request and time-stats lines), request-metrics files, Prometheus scrapes, KV-event streams and
//! `bench_serving` results. Deterministic for a seed.

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
    /// Request rows the input holds.
    pub requests: u64,
    /// Cache-event rows the input holds.
    pub cache_events: u64,
}

/// A xorshift generator: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Writes `batches` batch lines (every third a prefill) in the style of `generation`. Every fifth batch, a request
/// finishes: 0.4.4 logs write its `Receive:`/`Finish:` pair, 0.5.10 logs its `Req Time Stats` line.
pub fn write_log(out: &mut impl Write, generation: Generation, batches: u64, seed: u64) -> io::Result<Generated> {
    use Generation::*;
    let mut rng = Rng::new(seed);
    let mut next = |n: u64| rng.below(n);
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
        if i % 5 == 4 && generation == V0_4_4 {
            let (input, output) = (1 + next(4000), 1 + next(500));
            writeln!(
                out,
                "[2025-03-14 {hms}] Receive: obj=GenerateReqInput(rid='g{i}', text='synthetic' ... 'prompt', input_ids=None, sampling_params={{'max_new_tokens': {output}}})"
            )?;
            writeln!(
                out,
                "[2025-03-14 {hms}] Finish: obj=GenerateReqInput(rid='g{i}', text='synthetic' ... 'prompt'), out={{'text': 'synthetic' ... 'answer', 'meta_info': {{'id': 'g{i}', 'finish_reason': {{'type': 'length', 'length': {output}}}, 'prompt_tokens': {input}, 'completion_tokens': {output}, 'cached_tokens': {}, 'e2e_latency': {:.3}}}}}",
                next(input),
                next(10_000) as f64 / 1000.0
            )?;
            done.lines += 2;
            done.requests += 1;
        }
        if i % 5 == 4 && generation == V0_5_10 {
            writeln!(
                out,
                "{envelope} Req Time Stats(rid=g{i}, input len={}, output len={}, type=unified): queue_duration={:.2}ms, forward_duration={:.2}ms, start={:.3}",
                1 + next(4000),
                1 + next(500),
                next(100_000) as f64 / 100.0,
                next(1_000_000) as f64 / 100.0,
                13_000_000.0 + i as f64 * 0.25
            )?;
            done.lines += 1;
            done.requests += 1;
        }
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

/// Writes `requests` `--export-metrics-to-file` records (0.5.6+ with `--enable-metrics`), every ninth aborted.
pub fn write_request_metrics(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated { requests, ..Generated::default() };
    for i in 0..requests {
        let received = 1_766_581_500.0 + i as f64 * 0.5;
        let (input, output) = (1 + rng.below(8000), rng.below(1000));
        let cached = rng.below(input);
        let e2e = 0.05 + rng.below(20_000) as f64 / 1000.0;
        let reason = if i % 9 == 8 {
            serde_json::json!({"type": "abort", "message": "client disconnected", "status_code": 499})
        } else {
            serde_json::json!({"type": "length", "length": output})
        };
        let parameters = serde_json::json!({"rid": format!("rm{i}"), "text": "synthetic prompt", "sampling_params": {"max_new_tokens": 1000}});
        let record = serde_json::json!({
            "request_parameters": parameters.to_string(), "id": format!("rm{i}"), "finish_reason": reason,
            "prompt_tokens": input, "completion_tokens": output, "cached_tokens": cached,
            "cached_tokens_details": {"device": cached / 2, "host": cached - cached / 2, "storage": 0},
            "e2e_latency": e2e, "request_received_ts": received, "response_sent_to_client_ts": received + e2e,
            "queue_time": rng.below(100) as f64 / 1000.0,
        });
        serde_json::to_writer(&mut *out, &record)?;
        writeln!(out)?;
        done.lines += 1;
    }
    Ok(done)
}

/// Writes `scrapes` Prometheus scrapes of a server with `dp` data-parallel ranks, each after an RFC 3339 line ten
/// seconds after the last. `samples` counts the canonical samples they hold.
pub fn write_metrics(out: &mut impl Write, scrapes: u64, dp: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let mut prompt_tokens = vec![0u64; dp as usize];
    for scrape in 0..scrapes {
        let t = 1_767_225_600 + scrape as i64 * 10;
        writeln!(out, "{}", infertrace_adapter::time::format_rfc3339(t * 1_000_000_000))?;
        let labels =
            |r: u64| format!("dp_rank=\"{r}\",engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\"");
        writeln!(out, "# HELP sglang:num_running_reqs The number of running requests.")?;
        writeln!(out, "# TYPE sglang:num_running_reqs gauge")?;
        for r in 0..dp {
            writeln!(out, "sglang:num_running_reqs{{{}}} {}.0", labels(r), rng.below(64))?;
        }
        writeln!(out, "# TYPE sglang:token_usage gauge")?;
        for r in 0..dp {
            writeln!(out, "sglang:token_usage{{{}}} {}", labels(r), rng.below(1000) as f64 / 1000.0)?;
        }
        writeln!(out, "# TYPE sglang:prompt_tokens_total counter")?;
        for (r, total) in prompt_tokens.iter_mut().enumerate() {
            *total += rng.below(10_000);
            writeln!(out, "sglang:prompt_tokens_total{{{}}} {total}.0", labels(r as u64))?;
        }
        writeln!(out, "# TYPE sglang:time_to_first_token_seconds histogram")?;
        for r in 0..dp {
            writeln!(out, "sglang:time_to_first_token_seconds_bucket{{{},le=\"+Inf\"}} 4.0", labels(r))?;
            writeln!(out, "sglang:time_to_first_token_seconds_count{{{}}} 4.0", labels(r))?;
            writeln!(out, "sglang:time_to_first_token_seconds_sum{{{}}} 1.25", labels(r))?;
        }
        done.samples += 5 * dp;
        done.lines += 6 + 6 * dp;
    }
    Ok(done)
}

/// Writes `batches` KV-event batches as JSON lines, alternating the ≤0.5.18 tagged-array and the 0.5.20+
/// tagged-map encodings, with every `medium` and two attention-DP ranks.
pub fn write_kv_events(out: &mut impl Write, batches: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let media = ["GPU", "CPU_PINNED", "DISK", "EXTERNAL"];
    for b in 0..batches {
        let ts = 1_766_581_535.0 + b as f64 * 0.125;
        let hashes: Vec<u64> = (0..1 + rng.below(4)).map(|_| rng.below(u64::MAX)).collect();
        let parent = rng.below(u64::MAX);
        let medium = media[(b % 4) as usize];
        let removed = hashes[0];
        let events = if b % 2 == 0 {
            serde_json::json!([
                ["BlockStored", hashes, parent, [1, 2, 3], 16, null, medium],
                ["BlockRemoved", [removed], medium],
            ])
        } else {
            serde_json::json!([
                {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": [1], "block_size": 16, "medium": medium},
                {"type": "BlockRemoved", "block_hashes": [removed], "medium": medium},
            ])
        };
        let mut batch = serde_json::json!([ts, events, b % 2]);
        if b % 10 == 9
            && let Some(events) = batch[1].as_array_mut()
        {
            events.push(serde_json::json!(["AllBlocksCleared"]));
            done.cache_events += 1;
        }
        serde_json::to_writer(&mut *out, &batch)?;
        writeln!(out)?;
        done.cache_events += hashes.len() as u64 + 1;
        done.lines += 1;
    }
    Ok(done)
}

/// Writes `runs` `bench_serving` records (0.5.5+ keys) with `--output-details`, `requests` requests each, every
/// seventh failed.
pub fn write_bench(out: &mut impl Write, runs: u64, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    for run in 0..runs {
        let (mut input_lens, mut output_lens, mut ttfts, mut itls, mut errors) =
            (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..requests {
            let failed = i % 7 == 6;
            let output = if failed { 0 } else { 1 + rng.below(300) };
            input_lens.push(1 + rng.below(4000));
            output_lens.push(output);
            ttfts.push(if failed { 0.0 } else { 0.01 + rng.below(1000) as f64 / 1000.0 });
            itls.push((1..output).map(|_| rng.below(30) as f64 / 1000.0).collect::<Vec<_>>());
            errors.push(if failed { "Bad Request" } else { "" });
        }
        let summary = serde_json::json!({
            "tag": null, "backend": "sglang", "dataset_name": "random", "request_rate": (run + 1) as f64,
            "max_concurrency": null, "sharegpt_output_len": null, "duration": 30.0, "completed": requests,
            "total_output_tokens_retokenized": output_lens.iter().sum::<u64>(), "mean_ttft_ms": 100.0,
            "server_info": {"internal_states": []},
        });
        let details = serde_json::json!({
            "input_lens": input_lens, "output_lens": output_lens, "ttfts": ttfts, "itls": itls,
            "generated_texts": vec!["synthetic"; requests as usize], "errors": errors,
        });
        // Python writes the summary first and the merged details after it, and an unbounded rate as `Infinity`.
        let summary = summary.to_string().replacen("\"request_rate\":1.0", "\"request_rate\":Infinity", 1);
        let details = details.to_string();
        writeln!(out, "{},{}", summary.trim_end_matches('}'), details.trim_start_matches('{'))?;
        done.lines += 1;
        done.requests += requests;
    }
    Ok(done)
}
