//! Synthetic vLLM outputs of any size: logs of every release family ([`write_log`]), benchmark results
//! ([`write_bench`]), Prometheus scrapes ([`write_metrics`]), OTLP spans ([`write_otlp`]) and KV-event streams
//! ([`write_kv_events`]). The logs are written the way each release family writes them (reference `vllm.md` §1-3), for
//! tests and benchmarks. Deterministic for a seed; prompts are made-up text, never user data.

use std::io::{self, Write};

/// A release family whose log lines the generator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 0.2.7: f-string Received with `sampling params:`/`prompt token ids:`, `llm_engine.py` stats, Finished lines.
    V0_2_7,
    /// 0.4.2: `%`-format Received with `sampling_params:`, stats without a final period.
    V0_4_2,
    /// 0.6.0: `logger.py` Received with `params:`, Added, stats with a period, the V0 prefix-cache line.
    V0_6_0,
    /// 0.8.5, V1: `[file:line]`, `Engine 000:` stats, `Request … aborted.` then `Aborted request …`.
    V0_8_5,
    /// 0.14: `(APIServer pid=N)` stream prefix, INFO Received without prompt plus DEBUG details, internal id
    /// suffixes on Added, `Aborted request(s)`, Preemptions, SpecDecoding lines.
    V0_14,
    /// 0.31: record-level process prefix, `<device> KV cache usage`, no prefix-cache part; starts on Dec 31.
    V0_31,
    /// 0.32+ with `--logging-config.formatter json`: JSON records with year and milliseconds, 0.31 messages.
    V0_32Json,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 7] = [
        Generation::V0_2_7,
        Generation::V0_4_2,
        Generation::V0_6_0,
        Generation::V0_8_5,
        Generation::V0_14,
        Generation::V0_31,
        Generation::V0_32Json,
    ];
}

/// What a generated log contains, to check a parse against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Distinct requests.
    pub requests: u64,
    /// Requests that ended with an abort.
    pub aborted: u64,
    /// Requests that ended with `Finished request`.
    pub finished: u64,
    /// Total prompt tokens logged.
    pub prompt_tokens: u64,
    /// Samples the statistics lines hold.
    pub samples: u64,
    /// Lines written.
    pub lines: u64,
}

/// A tiny deterministic generator (SplitMix64), so the output never depends on a library's algorithm.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Options of [`write_log`].
#[derive(Debug, Clone, Copy)]
pub struct LogOptions {
    /// Requests to write.
    pub requests: u64,
    /// Prompt length range in tokens, inclusive.
    pub prompt_tokens: (u64, u64),
    /// Seed.
    pub seed: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self { requests: 20, prompt_tokens: (20, 60), seed: 1 }
    }
}

const SAMPLING_V0: &str = "SamplingParams(n=1, best_of=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, top_p=1.0, top_k=-1, min_p=0.0, seed=None, use_beam_search=False, length_penalty=1.0, early_stopping=False, stop=[], stop_token_ids=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens={MAX}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, truncate_prompt_tokens=None)";
const SAMPLING_V1: &str = "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens={MAX}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, truncate_prompt_tokens=None, structured_outputs=None, extra_args=None)";

/// Writes a log of `options.requests` requests in the style of `generation`, returning what it holds.
pub fn write_log(out: &mut impl Write, generation: Generation, options: LogOptions) -> io::Result<Generated> {
    use Generation::*;
    let mut rng = Rng(options.seed);
    let mut done = Generated::default();
    // Seconds since the start; 0.31 starts just before midnight on Dec 31 to cross a year.
    let (start_month, start_day, start_secs) =
        if generation == V0_31 { (12, 31, 86_400 - 30) } else { (3, 14, 9 * 3600) };
    let mut clock = 0u64;
    let record = |level: &str, clock: u64, file: &str, line: u32, message: &str| {
        let total = start_secs + clock;
        let (month, day) = if total >= 86_400 { (1, 1 + (total / 86_400 - 1)) } else { (start_month, start_day) };
        let year = if total >= 86_400 && generation == V0_31 { 2026 } else { 2025 };
        let t = total % 86_400;
        let time = format!("{month:02}-{day:02} {:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
        match generation {
            V0_2_7 | V0_4_2 | V0_6_0 => format!("{level} {time} {file}:{line}] {message}"),
            V0_8_5 => format!("{level} {time} [{file}:{line}] {message}"),
            V0_14 | V0_31 => format!("(APIServer pid=7) {level} {time} [{file}:{line}] {message}"),
            V0_32Json => serde_json::json!({
                "asctime": format!("{year}-{time},{:03}", clock % 1000),
                "levelname": level,
                "name": format!("vllm.{}", file.trim_end_matches(".py")),
                "processName": "APIServer",
                "process": 7,
                "message": message,
            })
            .to_string(),
        }
    };
    let line = |out: &mut dyn Write, text: String, done: &mut Generated| -> io::Result<()> {
        done.lines += 1;
        writeln!(out, "{text}")
    };
    for i in 0..options.requests {
        clock += 1 + rng.below(2);
        let id = match generation {
            V0_2_7 | V0_4_2 => format!("cmpl-{:032x}", rng.next() as u128 * 7 + i as u128),
            V0_6_0 => format!("chat-{:032x}", rng.next() as u128 + i as u128),
            _ => format!("chatcmpl-{:016x}", rng.next()),
        };
        let (lo, hi) = options.prompt_tokens;
        let n_tokens = lo + rng.below(hi - lo + 1);
        let tokens: Vec<String> = (0..n_tokens).map(|_| (rng.below(32_000) + 1).to_string()).collect();
        let ids = format!("[{}]", tokens.join(", "));
        let prompt = format!("'Question {i}: what is item {}?\\nAnswer briefly.'", rng.below(1000));
        let max = 64 + rng.below(512);
        let v0_params = SAMPLING_V0.replace("{MAX}", &max.to_string());
        let v1_params = SAMPLING_V1.replace("{MAX}", &max.to_string());
        done.requests += 1;
        done.prompt_tokens += n_tokens;
        let received = match generation {
            V0_2_7 => format!(
                "Received request {id}: prompt: {prompt}, sampling params: {v0_params}, prompt token ids: {ids}."
            ),
            V0_4_2 => format!(
                "Received request {id}: prompt: {prompt}, sampling_params: {v0_params}, prompt_token_ids: {ids}, lora_request: None."
            ),
            V0_6_0 => format!(
                "Received request {id}: prompt: {prompt}, params: {v0_params}, prompt_token_ids: {ids}, lora_request: None, prompt_adapter_request: None."
            ),
            V0_8_5 => format!(
                "Received request {id}: prompt: {prompt}, params: {v1_params}, prompt_token_ids: {ids}, lora_request: None, prompt_adapter_request: None."
            ),
            V0_14 | V0_31 | V0_32Json => format!("Received request {id}: params: {v1_params}, lora_request: None."),
        };
        let (file, number) = match generation {
            V0_2_7 => ("async_llm_engine.py", 383),
            V0_4_2 => ("async_llm_engine.py", 529),
            V0_6_0 => ("logger.py", 36),
            V0_8_5 => ("logger.py", 39),
            V0_14 => ("logger.py", 49),
            V0_31 | V0_32Json => ("request_logger.py", 65),
        };
        line(out, record("INFO", clock, file, number, &received), &mut done)?;
        if matches!(generation, V0_14 | V0_31 | V0_32Json) {
            let details =
                format!("Request {id} details: prompt: {prompt}, prompt_token_ids: {ids}, prompt_embeds shape: None.");
            line(out, record("DEBUG", clock, file, number, &details), &mut done)?;
        }
        let internal = if matches!(generation, V0_14 | V0_31 | V0_32Json) {
            format!("{id}-{:08x}", rng.next() as u32)
        } else {
            id.clone()
        };
        match generation {
            V0_2_7 | V0_4_2 => {}
            V0_6_0 => line(
                out,
                record("INFO", clock, "async_llm_engine.py", 206, &format!("Added request {internal}.")),
                &mut done,
            )?,
            _ => {
                line(out, record("INFO", clock, "async_llm.py", 252, &format!("Added request {internal}.")), &mut done)?
            }
        }
        let abort = i % 7 == 3;
        if abort {
            done.aborted += 1;
            match generation {
                V0_2_7 | V0_4_2 | V0_6_0 => {
                    line(
                        out,
                        record("INFO", clock, "async_llm_engine.py", 134, &format!("Aborted request {id}.")),
                        &mut done,
                    )?;
                }
                V0_8_5 => {
                    line(
                        out,
                        record("INFO", clock, "async_llm.py", 411, &format!("Request {id} aborted.")),
                        &mut done,
                    )?;
                    line(
                        out,
                        record("INFO", clock, "async_llm.py", 411, &format!("Aborted request {id}.")),
                        &mut done,
                    )?;
                }
                V0_14 | V0_31 | V0_32Json => {
                    line(
                        out,
                        record("INFO", clock, "async_llm.py", 563, &format!("Request {id} aborted.")),
                        &mut done,
                    )?;
                    line(
                        out,
                        record("INFO", clock, "async_llm.py", 563, &format!("Aborted request(s) {internal}.")),
                        &mut done,
                    )?;
                }
            }
        } else if matches!(generation, V0_2_7 | V0_4_2 | V0_6_0) {
            done.finished += 1;
            line(
                out,
                record("INFO", clock, "async_llm_engine.py", 111, &format!("Finished request {id}.")),
                &mut done,
            )?;
        }
        if i % 5 == 4 {
            let running = rng.below(32);
            let waiting = rng.below(8);
            let prompt_tps = format!("{:.1}", rng.below(50_000) as f64 / 10.0);
            let gen_tps = format!("{:.1}", rng.below(20_000) as f64 / 10.0);
            let kv = format!("{:.1}", rng.below(1000) as f64 / 10.0);
            let (file, number, text, samples) = match generation {
                V0_2_7 => (
                    "llm_engine.py",
                    706,
                    format!(
                        "Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: 0.0%"
                    ),
                    7,
                ),
                V0_4_2 => (
                    "metrics.py",
                    334,
                    format!(
                        "Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: 0.0%"
                    ),
                    7,
                ),
                V0_6_0 => (
                    "metrics.py",
                    351,
                    format!(
                        "Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: 0.0%."
                    ),
                    7,
                ),
                V0_8_5 => (
                    "loggers.py",
                    111,
                    format!(
                        "Engine 000: Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: {kv}%, Prefix cache hit rate: 12.5%"
                    ),
                    6,
                ),
                V0_14 => (
                    "loggers.py",
                    257,
                    format!(
                        "Engine 000: Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, Preemptions: 2, GPU KV cache usage: {kv}%, Prefix cache hit rate: 40.0%"
                    ),
                    7,
                ),
                V0_31 | V0_32Json => (
                    "loggers.py",
                    320,
                    format!(
                        "Engine 000: Avg prompt throughput: {prompt_tps} tokens/s, Avg generation throughput: {gen_tps} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, XPU KV cache usage: {kv}%"
                    ),
                    5,
                ),
            };
            line(out, record("INFO", clock, file, number, &text), &mut done)?;
            done.samples += samples;
            match generation {
                V0_6_0 => {
                    line(
                        out,
                        record("INFO", clock, "metrics.py", 367, "Prefix cache hit rate: GPU: 25.00%, CPU: 0.00%"),
                        &mut done,
                    )?;
                    done.samples += 2;
                }
                V0_14 => {
                    line(
                        out,
                        record(
                            "INFO",
                            clock,
                            "metrics.py",
                            100,
                            "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 10.00 tokens/s, Drafted throughput: 20.00 tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.700, 0.300, Avg Draft acceptance rate: 50.0%",
                        ),
                        &mut done,
                    )?;
                    done.samples += 6;
                }
                _ => {}
            }
        }
        if i % 11 == 10 {
            // Access lines and a startup-style record: recognised, not rows.
            let prefix = if matches!(generation, V0_14) { "(APIServer pid=7) " } else { "" };
            line(
                out,
                format!(
                    "{prefix}INFO:     127.0.0.1:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
                    30_000 + rng.below(30_000)
                ),
                &mut done,
            )?;
        }
    }
    Ok(done)
}

/// Writes a `vllm bench serve --save-result --save-detailed` JSON (0.15+ keys) of `requests` requests, every
/// seventh one failed. Returns the requests written; `prompt_tokens` counts only successful ones' inputs.
pub fn write_bench(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng(seed);
    let mut done = Generated { requests, ..Generated::default() };
    let (mut input_lens, mut output_lens, mut ttfts, mut itls, mut errors, mut starts, mut latencies) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut clock = 350_000.0;
    for i in 0..requests {
        let failed = i % 7 == 6;
        let input = 100 + rng.below(4000);
        let output = if failed { 0 } else { 2 + rng.below(300) };
        let ttft = if failed { 0.0 } else { 0.05 + rng.below(1000) as f64 / 1000.0 };
        let itl: Vec<f64> = (1..output).map(|_| 0.01 + rng.below(20) as f64 / 1000.0).collect();
        clock += rng.below(500) as f64 / 1000.0;
        done.prompt_tokens += if failed { 0 } else { input };
        done.aborted += u64::from(failed);
        latencies.push(ttft + itl.iter().sum::<f64>());
        input_lens.push(input);
        output_lens.push(output);
        ttfts.push(ttft);
        itls.push(itl);
        errors.push(if failed { "Bad Request" } else { "" });
        starts.push(clock);
    }
    let json = serde_json::json!({
        "date": "20260105-100030", "backend": "vllm", "model_id": "synthetic/model", "num_prompts": requests,
        "duration": 60.0, "completed": requests - done.aborted, "failed": done.aborted, "request_throughput": 1.0,
        "input_lens": input_lens, "output_lens": output_lens, "ttfts": ttfts, "itls": itls, "errors": errors,
        "start_times": starts, "latencies": latencies, "generated_texts": vec![""; requests as usize],
    });
    serde_json::to_writer(&mut *out, &json)?;
    writeln!(out)?;
    done.lines = 1;
    Ok(done)
}

/// Writes `scrapes` Prometheus scrapes of a V1 server with `engines` data-parallel engines, each preceded by an
/// RFC 3339 line ten seconds after the last. `samples` counts the canonical samples they hold.
pub fn write_metrics(out: &mut impl Write, scrapes: u64, engines: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng(seed);
    let mut done = Generated::default();
    let mut counters = vec![0u64; engines as usize];
    for scrape in 0..scrapes {
        let t = 1_767_225_600 + scrape * 10;
        writeln!(out, "{}", infertrace_adapter::time::format_rfc3339(t as i64 * 1_000_000_000))?;
        writeln!(out, "# HELP vllm:num_requests_running Number of requests in model execution batches.")?;
        writeln!(out, "# TYPE vllm:num_requests_running gauge")?;
        for e in 0..engines {
            writeln!(out, "vllm:num_requests_running{{engine=\"{e}\",model_name=\"m\"}} {}.0", rng.below(64))?;
        }
        writeln!(out, "# TYPE vllm:kv_cache_usage_perc gauge")?;
        for e in 0..engines {
            writeln!(
                out,
                "vllm:kv_cache_usage_perc{{engine=\"{e}\",model_name=\"m\"}} {}",
                rng.below(1000) as f64 / 1000.0
            )?;
        }
        writeln!(out, "# TYPE vllm:prompt_tokens counter")?;
        for (e, total) in counters.iter_mut().enumerate() {
            *total += rng.below(10_000);
            writeln!(out, "vllm:prompt_tokens_total{{engine=\"{e}\",model_name=\"m\"}} {total}.0")?;
            writeln!(out, "vllm:prompt_tokens_created{{engine=\"{e}\",model_name=\"m\"}} 1.7672256e+09")?;
        }
        writeln!(out, "# TYPE vllm:time_to_first_token_seconds histogram")?;
        for e in 0..engines {
            writeln!(
                out,
                "vllm:time_to_first_token_seconds_bucket{{engine=\"{e}\",le=\"+Inf\",model_name=\"m\"}} 4.0"
            )?;
            writeln!(out, "vllm:time_to_first_token_seconds_count{{engine=\"{e}\",model_name=\"m\"}} 4.0")?;
            writeln!(out, "vllm:time_to_first_token_seconds_sum{{engine=\"{e}\",model_name=\"m\"}} 1.25")?;
        }
        done.samples += 5 * engines;
        done.lines += 6 + 7 * engines;
    }
    Ok(done)
}

/// Writes `requests` vLLM `llm_request` spans as OTLP/JSON, `per_line` spans per export line.
pub fn write_otlp(out: &mut impl Write, requests: u64, per_line: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng(seed);
    let mut done = Generated { requests, ..Generated::default() };
    let mut spans = Vec::new();
    let flush = |out: &mut dyn Write, spans: &mut Vec<serde_json::Value>, done: &mut Generated| -> io::Result<()> {
        if spans.is_empty() {
            return Ok(());
        }
        let export = serde_json::json!({"resourceSpans": [{"resource": {"attributes": []},
            "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": std::mem::take(spans)}]}]});
        done.lines += 1;
        writeln!(out, "{export}")
    };
    for i in 0..requests {
        let start = 1_767_225_600_000_000_000u64 + i * 250_000_000;
        let prompt = 10 + rng.below(5000);
        done.prompt_tokens += prompt;
        let attr = |key: &str, value: serde_json::Value| serde_json::json!({"key": key, "value": value});
        spans.push(serde_json::json!({
            "traceId": format!("{:032x}", rng.next()), "spanId": format!("{:016x}", rng.next()), "name": "llm_request", "kind": 2,
            "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 2_000_000_000).to_string(),
            "attributes": [
                attr("gen_ai.request.id", serde_json::json!({"stringValue": format!("chatcmpl-{:016x}", rng.next())})),
                attr("gen_ai.usage.prompt_tokens", serde_json::json!({"intValue": prompt.to_string()})),
                attr("gen_ai.usage.completion_tokens", serde_json::json!({"intValue": (1 + rng.below(500)).to_string()})),
                attr("gen_ai.latency.time_in_queue", serde_json::json!({"doubleValue": rng.below(100) as f64 / 1000.0})),
                attr("gen_ai.latency.time_to_first_token", serde_json::json!({"doubleValue": 0.1 + rng.below(100) as f64 / 1000.0})),
                attr("gen_ai.latency.e2e", serde_json::json!({"doubleValue": 2.0})),
            ],
            "status": {},
        }));
        if spans.len() as u64 >= per_line.max(1) {
            flush(out, &mut spans, &mut done)?;
        }
    }
    flush(out, &mut spans, &mut done)?;
    Ok(done)
}

/// How [`write_kv_events`] encodes batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvEncoding {
    /// msgpack payloads back to back, events array-tagged (≤0.23).
    MsgpackArrays,
    /// msgpack payloads back to back, events map-tagged (0.24+).
    MsgpackMaps,
    /// One JSON batch per line, events map-tagged.
    JsonLines,
}

/// Writes `batches` KV-event batches of 1-4 events each. `samples` counts the cache-event rows they hold (one per
/// block, one per clear).
pub fn write_kv_events(out: &mut impl Write, batches: u64, encoding: KvEncoding, seed: u64) -> io::Result<Generated> {
    use rmpv::Value;
    let mut rng = Rng(seed);
    let mut done = Generated::default();
    let mut last_hash: Option<u64> = None;
    for b in 0..batches {
        let mut events = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let kind = rng.below(10);
            let hashes: Vec<u64> = (0..1 + rng.below(4)).map(|_| rng.next()).collect();
            let n = hashes.len() as u64;
            let maps = encoding != KvEncoding::MsgpackArrays;
            let array = |items: Vec<Value>| Value::Array(items);
            let hash_values = Value::Array(hashes.iter().map(|&h| Value::from(h)).collect());
            let event = match kind {
                0 => {
                    done.samples += 1;
                    if maps {
                        Value::Map(vec![(Value::from("type"), Value::from("AllBlocksCleared"))])
                    } else {
                        array(vec![Value::from("AllBlocksCleared")])
                    }
                }
                1..=3 => {
                    done.samples += n;
                    if maps {
                        Value::Map(vec![
                            (Value::from("type"), Value::from("BlockRemoved")),
                            (Value::from("block_hashes"), hash_values),
                            (Value::from("medium"), Value::from("GPU")),
                        ])
                    } else {
                        array(vec![Value::from("BlockRemoved"), hash_values, Value::from("GPU"), Value::Nil])
                    }
                }
                _ => {
                    done.samples += n;
                    let parent = last_hash.map_or(Value::Nil, Value::from);
                    last_hash = hashes.last().copied();
                    let tokens = Value::Array((0..n * 16).map(|_| Value::from(rng.below(32_000))).collect());
                    if maps {
                        Value::Map(vec![
                            (Value::from("type"), Value::from("BlockStored")),
                            (Value::from("block_hashes"), hash_values),
                            (Value::from("parent_block_hash"), parent),
                            (Value::from("token_ids"), tokens),
                            (Value::from("block_size"), Value::from(16)),
                            (Value::from("medium"), Value::from(if rng.below(2) == 0 { "GPU" } else { "CPU" })),
                        ])
                    } else {
                        array(vec![
                            Value::from("BlockStored"),
                            hash_values,
                            parent,
                            tokens,
                            Value::from(16),
                            Value::Nil,
                            Value::from("GPU"),
                        ])
                    }
                }
            };
            events.push(event);
        }
        let batch =
            Value::Array(vec![Value::F64(1_767_225_600.0 + b as f64 * 0.25), Value::Array(events), Value::from(0)]);
        match encoding {
            KvEncoding::JsonLines => writeln!(out, "{}", to_json(&batch))?,
            _ => rmpv::encode::write_value(out, &batch).map_err(io::Error::other)?,
        }
        done.lines += 1;
    }
    Ok(done)
}

fn to_json(value: &rmpv::Value) -> serde_json::Value {
    use rmpv::Value;
    match value {
        Value::Nil => serde_json::Value::Null,
        Value::Boolean(b) => serde_json::Value::from(*b),
        Value::Integer(n) => n.as_u64().map_or_else(|| serde_json::Value::from(n.as_i64()), serde_json::Value::from),
        Value::F64(x) => serde_json::Value::from(*x),
        Value::F32(x) => serde_json::Value::from(f64::from(*x)),
        Value::String(s) => serde_json::Value::from(s.as_str().unwrap_or_default()),
        Value::Array(items) => items.iter().map(to_json).collect(),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Value::Binary(_) | Value::Ext(..) => serde_json::Value::Null,
    }
}
