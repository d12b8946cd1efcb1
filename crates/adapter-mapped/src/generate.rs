//! Synthetic in-house request logs of any size, with the mappings that read them, for tests and benchmarks.
//! Deterministic for a seed; every record is valid, so a parse gives no diagnostics.
//!
//! The logs carry what real request logs carry beside the columns a mapping reads: prompt texts with commas,
//! quotes and line breaks (CSV) or nested message arrays (JSONL), which must never reach a row.

use std::io::{self, Write};

/// The mapping for [`write_csv`] output.
pub const CSV_MAPPING: &str = r#"
name = "generated-csv"
[requests]
request_id = "req_id"
session_id = "user"
model = "model"
arrival_time = { from = "sent_at", clock = "datetime" }
ttft_s = { from = "ttft_ms", unit = "ms" }
e2e_s = { from = "latency_s" }
input_tokens = "prompt_tokens"
output_tokens = "completion_tokens"
status = { from = "outcome", map = { success = "ok", failure = "error", cancelled = "aborted" } }
"#;

/// The mapping for [`write_jsonl`] output.
pub const JSONL_MAPPING: &str = r#"
name = "generated-jsonl"
[requests]
request_id = "id"
model = "request.model"
arrival_time = { from = "timing.start_us", clock = "epoch_us" }
first_token_time = { from = "timing.first_token_us", clock = "epoch_us" }
completion_time = { from = "timing.end_us", clock = "epoch_us" }
input_tokens = "usage.prompt_tokens"
cached_tokens = { from = "usage.cached", optional = true }
output_tokens = "usage.completion_tokens"
finish_reason = "choices.0.finish_reason"
http_status = "http.status"
"#;

/// What a generated log holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written (the CSV header and the continuation lines of quoted prompts included).
    pub lines: u64,
    /// Request rows the log holds.
    pub requests: u64,
    /// Sum of the rows' prompt tokens.
    pub input_tokens: u64,
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

/// `requests` CSV records for [`CSV_MAPPING`]: zoneless datetimes, milliseconds and seconds, status words, and a
/// quoted `prompt` column (commas, doubled quotes, and every seventh a line break) the mapping never reads.
pub fn write_csv(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { lines: 1, ..Generated::default() };
    writeln!(out, "req_id,sent_at,user,prompt,model,prompt_tokens,completion_tokens,ttft_ms,latency_s,outcome")?;
    let mut micros = 0u64;
    for i in 0..requests {
        micros += rng.below(2_000_000);
        let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
        let sent = format!(
            "2025-03-{:02} {:02}:{:02}:{:02}.{frac:06}",
            1 + secs / 86_400 % 28,
            secs / 3600 % 24,
            secs / 60 % 60,
            secs % 60
        );
        let prompt = if i % 7 == 3 { "tell me \"why\",\nplease" } else { "hello, \"world\"" };
        let input = 1 + rng.below(8_000);
        let output = rng.below(1_000);
        let outcome = ["success", "success", "success", "failure", "cancelled"][rng.below(5) as usize];
        writeln!(
            out,
            "r{i},{sent},user-{},\"{}\",model-{},{input},{output},{}.{},{}.{:03},{outcome}",
            rng.below(50),
            prompt.replace('"', "\"\""),
            rng.below(3),
            rng.below(900),
            rng.below(10),
            rng.below(30),
            rng.below(1000),
        )?;
        generated.lines += 1 + u64::from(prompt.contains('\n'));
        generated.requests += 1;
        generated.input_tokens += input;
    }
    Ok(generated)
}

/// `requests` JSONL records for [`JSONL_MAPPING`]: epoch microseconds, nested usage and timing objects, a message
/// array the mapping never reads, and `usage.cached` on every other record.
pub fn write_jsonl(out: &mut impl Write, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    let mut start = 1_741_000_000_000_000u64;
    for i in 0..requests {
        start += rng.below(3_000_000);
        let first = start + 1 + rng.below(900_000);
        let end = first + rng.below(20_000_000);
        let input = 1 + rng.below(30_000);
        let cached = if i % 2 == 0 { format!(", \"cached\": {}", rng.below(input)) } else { String::new() };
        let finish = ["stop", "length"][rng.below(2) as usize];
        writeln!(
            out,
            "{{\"id\": \"chatcmpl-{i:08x}\", \"request\": {{\"model\": \"m{}\", \"messages\": [{{\"role\": \"user\", \
             \"content\": \"a prompt, with \\\"quotes\\\"\"}}]}}, \"timing\": {{\"start_us\": {start}, \
             \"first_token_us\": {first}, \"end_us\": {end}}}, \"usage\": {{\"prompt_tokens\": {input}, \
             \"completion_tokens\": {}{cached}}}, \"choices\": [{{\"finish_reason\": \"{finish}\", \"text\": \"…\"}}], \
             \"http\": {{\"status\": 200}}}}",
            rng.below(4),
            rng.below(2_000),
        )?;
        generated.lines += 1;
        generated.requests += 1;
        generated.input_tokens += input;
    }
    Ok(generated)
}
