//! Synthetic Dynamo logs (`dynamo-log`) of any size: a frontend with a KV router, readable or JSONL.
//!
//! Each request is a `request received` line, one router decision (rotating through the ~0.5, ~0.7 and 1.6
//! wordings), and a `request completed` line carrying the `http-request` span fields. Readable logs colour every
//! third request's lines with ANSI codes and tear every tenth completion across two physical lines; JSONL logs add
//! `SPAN_FIRST_ENTRY`/`SPAN_CLOSED` events of the `http-request` span. Bridged Python lines carry a canary string
//! (as would a user's text) that must never reach an output.

use std::io::{self, Write};

use super::{Generated, Rng};

/// Text no output may contain: it stands for a user's prompt.
pub const CANARY: &str = "CANARY-user-prompt-text";

/// Readable text or JSONL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// tracing's compact layout.
    Readable,
    /// `DYN_LOGGING_JSONL=1`.
    Jsonl,
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct LogOptions {
    /// Requests in the log.
    pub requests: u64,
    /// Readable or JSONL.
    pub mode: LogMode,
    /// Seed of the random values.
    pub seed: u64,
}

/// A worker id above 2^53, so that any pass through `f64` would show.
const WORKER_BASE: u64 = 7_587_888_160_958_627_000;

fn timestamp(micros: u64) -> String {
    // 2026-03-01T10:00:00Z plus `micros`, without a calendar crate: the log spans less than a day.
    let seconds = 10 * 3600 + micros / 1_000_000;
    format!(
        "2026-03-01T{:02}:{:02}:{:02}.{:06}Z",
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
        micros % 1_000_000
    )
}

/// Writes a synthetic Dynamo frontend log.
pub fn write_log(out: &mut impl Write, options: LogOptions) -> io::Result<Generated> {
    let mut rng = Rng::new(options.seed);
    let mut done = Generated::default();
    let emit = |out: &mut dyn Write, text: &str, done: &mut Generated| -> io::Result<()> {
        done.lines += 1;
        writeln!(out, "{text}")
    };
    for i in 0..options.requests {
        let start = i * 50_000;
        let rid = format!("{:08x}-0000-4000-8000-{:012x}", i, rng.below(1 << 40));
        let span_rid = format!("{:08x}-1111-4000-8000-000000000000", i);
        let xrid = format!("aiperf-{i:06}");
        let trace = format!("{:032x}", u128::from(i) + 1);
        let worker = WORKER_BASE + rng.below(4);
        let dp = rng.below(2);
        let cached = rng.below(40);
        let (input, output) = (100 + rng.below(4000), 2 + rng.below(500));
        let ttft = 20 + rng.below(400);
        let itl = 5 + rng.below(30);
        let elapsed = ttft + itl * (output - 1) / 1000 + 1;
        let (status, error_type) = match i % 9 {
            4 => ("error", Some("internal")),
            7 => ("cancelled", Some("cancelled")),
            _ => ("success", None),
        };
        done.requests += 1;
        done.failed += u64::from(status == "error");
        let wording = i % 3;
        done.cache_events += if wording == 2 { 3 } else { 1 };
        let t = |offset: u64| timestamp(start + offset);
        match options.mode {
            LogMode::Readable => {
                let colour = i % 3 == 0;
                let head = |time: String, level: &str, spans: &str, target: &str| {
                    if colour {
                        format!(
                            "\x1b[2m{time}\x1b[0m \x1b[32m{level:>5}\x1b[0m {spans}\x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m"
                        )
                    } else {
                        format!("{time} {level:>5} {spans}{target}:")
                    }
                };
                let span_fields = format!(
                    "method=POST uri=/v1/chat/completions version=HTTP/1.1 request_id={span_rid} x_request_id={xrid}"
                );
                let metrics = "dynamo_llm::http::service::metrics";
                emit(
                    out,
                    &format!(
                        "{} request received request_id={rid} model=synthetic/model endpoint=chat_completions request_type=stream {span_fields}",
                        head(t(0), "INFO", "http-request: ", metrics)
                    ),
                    &mut done,
                )?;
                let decision = match wording {
                    0 => {
                        format!("Selected worker: {worker}, logit: 1.250, cached blocks: {cached}, total blocks: 2859")
                    }
                    1 => format!(
                        "Selected worker: worker_id={worker} dp_rank={dp}, logit: 14.031, cached blocks: {cached}, tree size: 7"
                    ),
                    _ => format!(
                        "Selected worker router_mode=\"kv\" request_id={rid} worker_id={worker} worker_type=prefill dp_rank={dp} logit=3.5 effective_cached_blocks={cached}.0 host_pinned_blocks=2 disk_blocks=1 total_kv_blocks=Some(2859)"
                    ),
                };
                emit(
                    out,
                    &format!("{} {decision}", head(t(100), "INFO", "", "dynamo_llm::kv_router::scheduler")),
                    &mut done,
                )?;
                if i % 5 == 0 {
                    let line = format!("{} {CANARY} was received", head(t(200), "INFO", "", "handlers.generate"));
                    emit(out, &line, &mut done)?;
                }
                let error = match error_type {
                    Some(kind) => format!(" error_type={kind} error_detail=\"{CANARY}\""),
                    None => String::new(),
                };
                let level = if status == "error" { "ERROR" } else { "INFO" };
                let completed = format!(
                    "{} request completed request_id={rid} model=synthetic/model endpoint=chat_completions request_type=stream status={status}{error} elapsed_ms={elapsed} {span_fields} model=\"synthetic/model\" input_tokens={input} output_tokens={output} ttft_ms=\"{ttft}.00\" avg_itl_ms=\"{itl}.00\" decode_worker_id={worker}",
                    head(t(elapsed * 1000), level, "http-request: ", metrics)
                );
                if i % 10 == 9 {
                    // Torn by a concurrent writer: the tail arrives on the next physical line.
                    let cut = completed.find(" input_tokens=").unwrap_or(completed.len() / 2);
                    emit(out, &completed[..cut], &mut done)?;
                    emit(out, &completed[cut..], &mut done)?;
                } else {
                    emit(out, &completed, &mut done)?;
                }
            }
            LogMode::Jsonl => {
                let base = |time: String, level: &str, target: &str, message: &str| {
                    format!(
                        "{{\"time\":\"{time}\",\"level\":\"{level}\",\"file\":\"/opt/dynamo/lib/x.rs\",\"line\":1,\"target\":\"{target}\",\"message\":\"{message}\""
                    )
                };
                let span = format!(
                    ",\"method\":\"POST\",\"uri\":\"/v1/chat/completions\",\"request_id\":\"{rid}\",\"x_request_id\":\"{xrid}\",\"span_id\":\"{:016x}\",\"span_name\":\"http-request\",\"trace_id\":\"{trace}\"",
                    i + 1
                );
                emit(out, &format!("{}{span}}}", base(t(0), "INFO", "request_span", "SPAN_FIRST_ENTRY")), &mut done)?;
                emit(
                    out,
                    &format!(
                        "{},\"endpoint\":\"chat_completions\",\"model\":\"synthetic/model\",\"request_type\":\"stream\"{span}}}",
                        base(t(10), "INFO", "dynamo_llm::http::service::metrics", "request received")
                    ),
                    &mut done,
                )?;
                let decision = match wording {
                    0 => base(
                        t(100),
                        "INFO",
                        "dynamo_llm::kv_router::scheduler",
                        &format!(
                            "Selected worker: {worker}, logit: 1.250, cached blocks: {cached}, total blocks: 2859"
                        ),
                    ),
                    1 => base(
                        t(100),
                        "INFO",
                        "dynamo_llm::kv_router::scheduler",
                        &format!(
                            "Selected worker: worker_id={worker} dp_rank={dp}, logit: 14.031, cached blocks: {cached}, tree size: 7"
                        ),
                    ),
                    _ => format!(
                        "{},\"disk_blocks\":1,\"dp_rank\":\"{dp}\",\"effective_cached_blocks\":{cached}.0,\"host_pinned_blocks\":2,\"logit\":3.5,\"request_id\":\"{rid}\",\"router_mode\":\"kv\",\"total_kv_blocks\":\"Some(2859)\",\"worker_id\":{worker},\"worker_type\":\"prefill\"",
                        base(t(100), "INFO", "dynamo_kv_router::scheduling::selector", "Selected worker")
                    ),
                };
                emit(out, &format!("{decision}}}"), &mut done)?;
                if i % 5 == 0 {
                    let line = format!(
                        "{{\"time\":\"{}\",\"level\":\"INFO\",\"target\":\"log\",\"message\":\"{CANARY}\",\"log.file\":\"/opt/dynamo/handlers.py\",\"log.line\":10,\"log.target\":\"handlers.generate\"}}",
                        t(200)
                    );
                    emit(out, &line, &mut done)?;
                }
                let error = match error_type {
                    Some(kind) => format!(",\"error_detail\":\"{CANARY}\",\"error_type\":\"{kind}\""),
                    None => String::new(),
                };
                let level = if status == "error" { "ERROR" } else { "INFO" };
                let recorded = format!(
                    ",\"avg_itl_ms\":\"{itl}.00\",\"decode_worker_id\":\"{worker}\",\"input_tokens\":\"{input}\",\"output_tokens\":\"{output}\",\"ttft_ms\":\"{ttft}.00\""
                );
                emit(
                    out,
                    &format!(
                        "{},\"elapsed_ms\":\"{elapsed}\",\"endpoint\":\"chat_completions\"{error},\"model\":\"synthetic/model\",\"status\":\"{status}\"{recorded}{span}}}",
                        base(t(elapsed * 1000), level, "dynamo_llm::http::service::metrics", "request completed")
                    ),
                    &mut done,
                )?;
                emit(
                    out,
                    &format!(
                        "{},\"time.busy_us\":900,\"time.duration_us\":{},\"time.idle_us\":{}{recorded}{span}}}",
                        base(t(elapsed * 1000 + 50), "INFO", "request_span", "SPAN_CLOSED"),
                        elapsed * 1000 + 50,
                        elapsed * 1000 + 50 - 900
                    ),
                    &mut done,
                )?;
            }
        }
    }
    Ok(done)
}
