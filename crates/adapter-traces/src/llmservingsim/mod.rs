//! LLMServingSim (casys-kaist/LLMServingSim): the artifacts of its benchmark runs of vLLM, its simulator's
//! per-request output, and its JSONL workloads.
//!
//! `python -m bench run` replays a workload through vLLM 0.19's `AsyncLLM` (strict replay: `min_tokens =
//! max_tokens = output_toks`, `ignore_eos`) and writes `vllm/{requests.jsonl, timeseries.csv, meta.json}`;
//! the simulator writes `outputs/sim.csv` for the same workload. One adapter reads them all; `format_version`
//! names which file it was (the generations below). Measured and simulated rows never share a `source`: the bench's
//! rows are `llmservingsim-vllm`, the simulator's `llmservingsim-sim`, a workload's `llmservingsim-workload`. The
//! cluster `config.json` next to them describes hardware, not requests, and is left unrecognised.
//!
//! # `bench-requests`: `vllm/requests.jsonl` (`bench/core/recorder.py`, `write_requests`)
//!
//! ```text
//! {"request_id": "bench-0", "input_toks": 2358, "output_toks": 531, "arrival_time": 1777142838.338653,
//!  "queued_ts": 479748.340626232, "scheduled_ts": 479748.34067238, "first_token_ts": 479748.510151426,
//!  "last_token_ts": 479764.054028055}
//! ```
//!
//! vLLM's `RequestStateStats`: `arrival_time` is wall-clock epoch seconds, stamped by the frontend; the four `*_ts`
//! are `time.monotonic()` seconds of the engine core, a different clock domain in which only differences mean
//! anything. A request vLLM returned no metrics for has all five `null`.
//!
//! - Durations come from the monotonic stamps alone, as vLLM and LLMServingSim's validation compute them:
//!   `queue_s` = scheduled − queued, `prefill_s` = first token − scheduled, `ttft_s` = first token − **queued**
//!   (LLMServingSim's "vLLM" TTFT: 7.10 s and 65.5 s mean on its RTXPRO6000 and RTX4090 runs), `decode_s` = last −
//!   first token, `e2e_s` = last token − queued, `tpot_s` = decode / (output − 1). A negative one is left empty with
//!   an `inconsistent` diagnostic.
//! - Clock alignment: the monotonic stamps are moved onto the epoch by one offset, `arrival_time − queued_ts` of the
//!   first row that has both (the run starts on an idle engine, so the frontend-to-queue delay of that row is the
//!   smallest of the run: 1.2 ms and 1.8 ms above the minimum in the two published runs, against a median of 15 ms
//!   and a maximum of 200 ms later on). Rows before that anchor get durations but no instants.
//! - `arrival_time` is the *queue entry* (queued_ts + offset), so every instant of a row is on one clock and
//!   `ttft_s` = `first_token_time − arrival_time` as the schema defines it; the frontend's own `arrival_time` is
//!   not stored per row. The alignment and the frontend-to-queue delays it implies (min, mean, max) go to
//!   `details.clock_alignment`.
//! - `status` is `ok` when all four stamps are present and ordered, else `unknown` (`details.requests_without_timing`
//!   counts rows with none). `request_id` as written (`bench-<index in the workload>`); no model or instance in the
//!   file (they are in `meta.json`).
//!
//! # `bench-timeseries`: `vllm/timeseries.csv` (`bench/core/stat_logger.py`)
//!
//! ```text
//! t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct                       (runs up to 2026-08)
//! t,prompt_throughput,prompt_compute_throughput,prompt_cached_throughput,gen_throughput,running,waiting,
//!   preempted,kv_cache_pct                                                              (later runs)
//! ```
//!
//! One row per `tick_seconds` bucket in which the engine logged; `t` is the bucket's *end*, in seconds since the
//! stat logger was created (monotonic, during engine start-up): the file has no absolute time, so samples are at
//! `--start` + `t` (clock `relative`; `meta.json`'s `started_at` is a close `--start`). Columns by name:
//! `prompt_throughput` → `prompt_throughput_tps`, `gen_throughput` → `generation_throughput_tps`, `running` →
//! `requests_running`, `waiting` → `requests_waiting`, `preempted` → `preemptions`, `kv_cache_pct` (percent) →
//! `kv_cache_usage` (fraction). Other columns (`prompt_compute_throughput`, `prompt_cached_throughput`) have no
//! canonical metric and are listed in `details.unmapped_columns`. Before the stat logger was fixed,
//! `kv_cache_pct` read a renamed vLLM field through a default and stayed 0.0 (the RTXPRO6000 run): a 0 with
//! requests running is impossible, so it is withheld, counted in `details.kv_cache_pct_withheld`.
//!
//! # `bench-meta`: `vllm/meta.json` (`write_meta`, `schema_version` 1)
//!
//! One pretty-printed document: `model`, `vllm_version`, `engine_kwargs`, `dataset_path`, `dataset_hash`,
//! `num_requests`, `started_at`, `finished_at`, `tick_seconds`, and in later runs `kv_cache` (`num_gpu_blocks`,
//! `block_size`, `num_kv_tokens`, …), `hardware` and `resolved_config` (vLLM's whole resolved configuration).
//! It writes no rows: its top-level scalars, and the scalars of `engine_kwargs`, `kv_cache` and `hardware`, go to
//! `details`; `resolved_config` is skipped unread; `dataset_path` is cut to its file name (a path can name the
//! machine's user). Read as a stream, keeping at most 64 entries per object.
//!
//! # `sim-output`: the simulator's `outputs/sim.csv` (LLMServingSim 2.0)
//!
//! ```text
//! instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL
//! 0,0,meta-llama/Llama-3.1-8B,2358,531,46926808,14602802369,14555875561,82945408,102441621,27270630,"[11506465, …]"
//! ```
//!
//! One row per simulated request, in completion order; times in nanoseconds from the start of the simulation.
//! When the bench's `meta.json` is beside it (`vllm_meta.json`, `meta.json` or `../vllm/meta.json`, plain or
//! compressed), they count from its `started_at` (clock `utc`, `details.clock_alignment` names the file and the
//! instant): on the published RTXPRO6000 run, each simulated arrival then falls 1.9 ms to 18 ms (median 2.7 ms)
//! before the bench frontend's `arrival_time` of the same request. Else they count from `--start` (clock
//! `relative`). `arrival` → `arrival_time`, `arrival + queuing_delay` → `scheduled_time`,
//! `arrival + TTFT` → `first_token_time`, `end_time` → `last_token_time`; `queuing_delay`, `TTFT`, `TPOT` and
//! `latency` → `queue_s`, `ttft_s`, `tpot_s`, `e2e_s`; `instance id` → `instance`, `request id` (the index in the
//! workload) → `request_id` as written; `input`/`output` → token counts; `status` `ok`. `ITL` (a list of every
//! inter-token gap) is not read. A `latency` other than `end_time − arrival` is an `inconsistent` diagnostic.
//!
//! # `workload`: `workloads/*.jsonl`, the simulator's and the bench's input
//!
//! ```text
//! {"input_toks": 2358, "output_toks": 531, "arrival_time_ns": 46926808, "input_tok_ids": [5971, …],
//!  "output_tok_ids": […]}
//! ```
//!
//! A generation of this adapter rather than a format of its own: LLMServingSim's workload generators write it and
//! both its simulator and its bench read it. One row per line: `arrival_time` = `--start` + `arrival_time_ns`
//! (clock `relative`), `input_toks`/`output_toks` → token counts (the lengths of the id lists when absent),
//! `status` `unknown`, ids `<file stem>:<line>`. Token ids are never copied: `input_tok_ids` becomes 16-token
//! chained `prefix_hashes` (`block_size` 16, vLLM's block size in these runs; full blocks only), and
//! `output_tok_ids` is only counted. A list whose length differs from its count is an `inconsistent` diagnostic.
//! Agentic session rows (`sub_requests`, `tool_duration_ns`) are not read: each is a `malformed-record`
//! diagnostic (LLMServingSim's bench skips them too).

mod csv;
pub mod generate;
mod jsonl;
mod meta;

use std::io::{self, BufRead, Read};

use infertrace_adapter::{Adapter, Confidence, HEAD_BYTES, Head, ParseContext, ParseError, ParseReport, Sink};

/// The LLMServingSim artifacts adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct LlmServingSim;

impl LlmServingSim {
    /// Format id.
    pub const ID: &'static str = "llmservingsim";
    /// `source` of the rows vLLM measured in the bench run (`requests.jsonl`, `timeseries.csv`).
    pub const MEASURED: &'static str = "llmservingsim-vllm";
    /// `source` of the rows the simulator made (`sim.csv`): never mixed with the measured ones.
    pub const SIMULATED: &'static str = "llmservingsim-sim";
    /// `source` of the rows of a workload (`workloads/*.jsonl`): planned arrivals and lengths, neither measured
    /// nor simulated.
    pub const WORKLOAD: &'static str = "llmservingsim-workload";
}

/// Keys one of the JSONL generations has on every line.
const JSONL_KEYS: &[&str] = &["\"input_toks\"", "\"queued_ts\"", "\"arrival_time_ns\"", "\"request_id\""];

/// Which of the files an input is, from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `requests.jsonl` or a workload (told apart per line).
    Jsonl,
    /// `meta.json`, one document.
    Meta,
    /// `timeseries.csv`, `sim.csv`, or a CSV this adapter does not know (told apart by the header).
    Csv,
}

impl Kind {
    fn of(head: &[u8]) -> Kind {
        let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
        let start = head.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(head.len());
        let head = &head[start..];
        if !head.starts_with(b"{") {
            return Kind::Csv;
        }
        let first = crate::first_line(head);
        let text = String::from_utf8_lossy(first);
        let complete = text.trim_end().ends_with('}');
        if complete || JSONL_KEYS.iter().any(|k| text.contains(k)) { Kind::Jsonl } else { Kind::Meta }
    }
}

/// Whether the first line of `head` is a CSV header with all of `names` among its fields.
fn header_has(head: &[u8], names: &[&str]) -> bool {
    let line = crate::first_line(head);
    names.iter().all(|name| line.split(|&b| b == b',').any(|f| f.trim_ascii() == name.as_bytes()))
}

impl Adapter for LlmServingSim {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "LLMServingSim: its vLLM 0.19 bench runs (requests.jsonl, timeseries.csv, meta.json), the simulator's \
         outputs/sim.csv, and its JSONL workloads (token ids become 16-token prefix hashes)"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let text = head.text();
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if text.starts_with('{') {
            let first = text.lines().next().unwrap_or_default();
            let has = |key: &str| first.contains(key);
            let requests = has("\"input_toks\"") && has("\"output_toks\"") && has("\"queued_ts\"");
            let workload = has("\"input_toks\"") && has("\"output_toks\"") && has("\"arrival_time_ns\"");
            let meta = ["\"vllm_version\"", "\"engine_kwargs\"", "\"dataset_hash\""].iter().all(|k| text.contains(k));
            return (requests || workload || meta).then_some(Confidence::High);
        }
        let timeseries = header_has(head.bytes(), &["t", "prompt_throughput", "gen_throughput", "kv_cache_pct"]);
        let sim = header_has(head.bytes(), &["instance id", "request id", "arrival", "queuing_delay", "TTFT", "TPOT"]);
        (timeseries || sim).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut head = Vec::with_capacity(HEAD_BYTES);
        Read::take(&mut *input, HEAD_BYTES as u64).read_to_end(&mut head)?;
        let kind = Kind::of(&head);
        let mut input = io::Cursor::new(head).chain(input);
        match kind {
            Kind::Jsonl => jsonl::parse(&mut input, ctx, sink),
            Kind::Meta => meta::parse(&mut input, sink),
            Kind::Csv => csv::parse(&mut input, ctx, sink),
        }
    }
}

#[cfg(test)]
mod tests;
