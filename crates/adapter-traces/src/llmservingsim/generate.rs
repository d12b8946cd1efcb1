//! Synthetic LLMServingSim artifacts of any size, for tests and benchmarks: bench request logs, time series and
//! `meta.json`, simulator output and workloads. Deterministic for a seed; every line is valid, so a parse gives no
//! diagnostics.

use std::io::{self, Write};

/// What a generated input holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Generated {
    /// Lines written, a header included.
    pub lines: u64,
    /// Request rows the input holds.
    pub requests: u64,
    /// Engine samples the input holds.
    pub samples: u64,
    /// Sum of input tokens.
    pub input_tokens: u64,
    /// Sum of output tokens.
    pub output_tokens: u64,
    /// Full 16-token blocks of the workload prompts (the prefix hashes a parse makes).
    pub prefix_blocks: u64,
    /// Sum of the requests' TTFT in seconds (first token − queued, or the simulator's TTFT).
    pub ttft_sum_s: f64,
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

/// A bench `requests.jsonl` of `requests` rows: epoch arrivals from 2026-04-25, monotonic stamps from 479,748 s,
/// each request queued 1–20 ms after its frontend arrival (the first one after exactly 1 ms). Times are whole
/// microseconds so that the sums a test checks are exact in decimal.
pub fn write_bench_requests(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    let epoch_us: u64 = 1_777_142_838_000_000;
    let mono_us: u64 = 479_748_000_000;
    let mut at = 0u64;
    for i in 0..requests {
        at += rng.below(200_000);
        let delay = if i == 0 { 1_000 } else { 1_000 + rng.below(19_000) };
        let queue = rng.below(50_000);
        let prefill = 1_000 + rng.below(300_000);
        let output = 1 + rng.below(700);
        let input = 1 + rng.below(3000);
        let decode = (output - 1) * (20_000 + rng.below(20_000));
        let arrival = epoch_us + at;
        let queued = mono_us + at + delay;
        let (scheduled, first) = (queued + queue, queued + queue + prefill);
        let last = first + decode;
        writeln!(
            out,
            r#"{{"request_id": "bench-{i}", "input_toks": {input}, "output_toks": {output}, "arrival_time": {}, "queued_ts": {}, "scheduled_ts": {}, "first_token_ts": {}, "last_token_ts": {}}}"#,
            micros(arrival),
            micros(queued),
            micros(scheduled),
            micros(first),
            micros(last),
        )?;
        generated.lines += 1;
        generated.requests += 1;
        generated.input_tokens += input;
        generated.output_tokens += output;
        generated.ttft_sum_s += (queue + prefill) as f64 / 1e6;
    }
    Ok(generated)
}

/// Microseconds as decimal seconds.
fn micros(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// A bench `timeseries.csv` of `ticks` one-second rows, in the later nine-column form when `detailed` (whose two
/// split throughput columns have no canonical metric) or the six-column form. Every row has requests running and a
/// non-zero KV usage, so every mapped cell is a sample.
pub fn write_timeseries(out: &mut impl Write, ticks: u64, detailed: bool, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    if detailed {
        writeln!(
            out,
            "t,prompt_throughput,prompt_compute_throughput,prompt_cached_throughput,gen_throughput,running,waiting,preempted,kv_cache_pct"
        )?;
    } else {
        writeln!(out, "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct")?;
    }
    generated.lines += 1;
    for tick in 1..=ticks {
        let prompt = rng.below(15_000);
        let cached = rng.below(prompt + 1);
        let gen_tps = rng.below(4_000);
        let running = 1 + rng.below(128);
        let waiting = rng.below(40);
        let kv = 1 + rng.below(9_999);
        if detailed {
            let preempted = rng.below(3);
            writeln!(
                out,
                "{tick}.0,{prompt}.0,{}.0,{cached}.0,{gen_tps}.0,{running},{waiting},{preempted},{}.{:02}",
                prompt - cached,
                kv / 100,
                kv % 100
            )?;
            generated.samples += 6;
        } else {
            writeln!(out, "{tick}.0,{prompt}.0,{gen_tps}.0,{running},{waiting},{}.{:02}", kv / 100, kv % 100)?;
            generated.samples += 5;
        }
        generated.lines += 1;
    }
    Ok(generated)
}

/// A simulator `sim.csv` of `requests` rows on instance 0, with a short ITL list each.
pub fn write_sim_output(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    writeln!(out, "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL")?;
    generated.lines += 1;
    let mut at = 0u64;
    for i in 0..requests {
        at += rng.below(200_000_000);
        let input = 1 + rng.below(3000);
        let output = 2 + rng.below(700);
        let queuing = rng.below(80_000_000);
        let ttft = queuing + 1_000_000 + rng.below(300_000_000);
        let tpot = 20_000_000 + rng.below(20_000_000);
        let latency = ttft + tpot * (output - 1);
        let end = at + latency;
        writeln!(
            out,
            "0,{i},synthetic/model-8B,{input},{output},{at},{end},{latency},{queuing},{ttft},{tpot},\"[{tpot}, {tpot}]\""
        )?;
        generated.lines += 1;
        generated.requests += 1;
        generated.input_tokens += input;
        generated.output_tokens += output;
        generated.ttft_sum_s += ttft as f64 / 1e9;
    }
    Ok(generated)
}

/// A workload of `requests` rows with token ids: every prompt starts with the same 32-token system prompt, so the
/// first two prefix hashes are shared by every prompt of 32 tokens or more.
pub fn write_workload(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    let mut at = 0u64;
    for _ in 0..requests {
        at += rng.below(300_000_000);
        let input = 1 + rng.below(400);
        let output = 1 + rng.below(300);
        let ids: Vec<String> =
            (0..input).map(|k| if k < 32 { k } else { 1000 + rng.below(120_000) }.to_string()).collect();
        let out_ids: Vec<String> = (0..output).map(|_| rng.below(128_000).to_string()).collect();
        writeln!(
            out,
            r#"{{"input_toks": {input}, "output_toks": {output}, "arrival_time_ns": {at}, "input_tok_ids": [{}], "output_tok_ids": [{}]}}"#,
            ids.join(", "),
            out_ids.join(", ")
        )?;
        generated.lines += 1;
        generated.requests += 1;
        generated.input_tokens += input;
        generated.output_tokens += output;
        generated.prefix_blocks += input / 16;
    }
    Ok(generated)
}

/// A `meta.json` in the later form (with `kv_cache`, `hardware` and a `resolved_config` that is skipped).
pub fn write_meta(out: &mut impl Write, num_requests: u64) -> io::Result<Generated> {
    let text = format!(
        r#"{{
  "schema_version": 1,
  "model": "synthetic/model-8B",
  "vllm_version": "0.19.0",
  "engine_kwargs": {{
    "model": "synthetic/model-8B",
    "tensor_parallel_size": 1,
    "max_num_seqs": 256,
    "max_model_len": null
  }},
  "dataset_path": "/home/someone/workloads/synthetic.jsonl",
  "dataset_hash": "0000000000000000000000000000000000000000000000000000000000000000",
  "num_requests": {num_requests},
  "started_at": "2026-08-20T23:19:39.992496Z",
  "finished_at": "2026-08-20T23:22:44.062091Z",
  "tick_seconds": 1.0,
  "kv_cache": {{
    "num_gpu_blocks": 2588,
    "block_size": 16,
    "enable_prefix_caching": true
  }},
  "hardware": {{
    "device_name": "Synthetic GPU",
    "device_count": 1
  }},
  "resolved_config": {{
    "cache_config": {{ "block_size": 16 }},
    "model_config": {{ "hf_config": "<LlamaConfig>" }}
  }}
}}"#
    );
    out.write_all(text.as_bytes())?;
    Ok(Generated { lines: text.lines().count() as u64, ..Generated::default() })
}
