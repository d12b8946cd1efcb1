//! Synthetic TraceLab inputs of any size: round traces and replay CSVs. Deterministic for a seed; every line is
//! valid, so a parse gives no diagnostics.

use std::io::{self, Write};

/// What a generated input holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written (a header included).
    pub lines: u64,
    /// Rounds (request rows).
    pub rounds: u64,
    /// Distinct sessions.
    pub sessions: u64,
    /// Sum of the prompts (`input_tokens_total`, or `prefix_len + input_len`).
    pub input_tokens: u64,
    /// Sum of the cached prefixes (`prefix_tokens`, or `prefix_len`).
    pub cached_tokens: u64,
    /// Sum of `output_tokens` / `output_len`.
    pub output_tokens: u64,
    /// Tool calls (round traces).
    pub tool_calls: u64,
    /// Rounds whose arrival follows from the previous round (replay CSVs).
    pub derived_arrivals: u64,
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

/// `2026-06-01T00:00:00Z` plus `ms` milliseconds, as TraceLab writes instants.
fn instant(ms: u64) -> String {
    let (s, ms) = (ms / 1000, ms % 1000);
    let (m, s) = (s / 60, s % 60);
    let (h, m) = (m / 60, m % 60);
    let (d, h) = (h / 24, h % 24);
    format!("2026-06-{:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z", 1 + d % 28)
}

/// Round-trace lines: `sessions` sessions of `rounds` rounds, written session after session, alternating Claude
/// (cache read = prefix, creation + uncached = the appended tokens) and Codex (reasoning tokens) sessions. Each
/// round's context grows by its appended input and output; each but the last calls 0 to 2 tools.
pub fn write_rounds(out: &mut impl Write, sessions: u64, rounds: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { sessions: if rounds > 0 { sessions } else { 0 }, ..Generated::default() };
    for session in 0..sessions {
        let claude = session % 2 == 0;
        let mut clock = session * 3_600_000 + rng.below(60_000);
        let mut prefix = 0;
        for round in 0..rounds {
            let append = 1 + rng.below(5000);
            let output = 1 + rng.below(2000);
            let total = prefix + append;
            let (cache, reasoning) = if claude {
                let creation = rng.below(append + 1);
                (
                    format!(
                        r#""claude_uncached_input_tokens":{},"claude_cache_creation_input_tokens":{creation},"claude_cache_read_input_tokens":{prefix}"#,
                        append - creation
                    ),
                    "null".to_owned(),
                )
            } else {
                (
                    r#""claude_uncached_input_tokens":null,"claude_cache_creation_input_tokens":null,"claude_cache_read_input_tokens":null"#.to_owned(),
                    rng.below(output + 1).to_string(),
                )
            };
            let first = if round == 0 { "user_message" } else { "tool_result" };
            let start = clock;
            clock += 1 + rng.below(5000);
            let mut events =
                vec![format!(r#"{{"event_type":"{first}","timestamp":"{}","content_chars":10}}"#, instant(start))];
            events.push(format!(r#"{{"event_type":"text","timestamp":"{}","content_chars":5}}"#, instant(clock)));
            let tools = if round + 1 < rounds { rng.below(3) } else { 0 };
            let mut tool_list = Vec::new();
            for t in 0..tools {
                clock += rng.below(500);
                events.push(format!(
                    r#"{{"event_type":"tool_call","timestamp":"{}","tool_call_id":"call_{session}_{round}_{t}","tool_name":"Bash","tool_index":{t}}}"#,
                    instant(clock)
                ));
                tool_list.push(format!(
                    r#"{{"tool_index":{t},"tool_name":"Bash","tool_call_id":"call_{session}_{round}_{t}","input_chars":3,"result_chars":4,"tool_wall_latency_ms":20,"is_error":false}}"#
                ));
            }
            if !claude {
                events.push(format!(r#"{{"event_type":"usage_report","timestamp":"{}"}}"#, instant(clock + 5)));
            }
            clock += 100 + rng.below(20_000);
            let provider = if claude { "claude" } else { "codex" };
            writeln!(
                out,
                r#"{{"provider":"{provider}","project":"project_0","session_id":"{provider}:s{seed}-{session}","round_index":{round},"round_id":"r{seed}-{session}-{round}","model":"synthetic-model","input_tokens_total":{total},"prefix_tokens":{prefix},"newly_append_tokens":{append},{cache},"output_tokens":{output},"reasoning_output_tokens":{reasoning},"timing_events":[{}],"tools":[{}],"first_input_event_type":"{first}","store":".{provider}"}}"#,
                events.join(","),
                tool_list.join(","),
            )?;
            generated.lines += 1;
            generated.rounds += 1;
            generated.input_tokens += total;
            generated.cached_tokens += prefix;
            generated.output_tokens += output;
            generated.tool_calls += tools;
            prefix = total + output;
        }
    }
    Ok(generated)
}

/// A replay CSV: `sessions` sessions of `rounds` rounds, each round's `prefix_len` the previous round's whole context
/// (as in `multi_session_large.csv`), in the runner's form (`session_id` first) or csv_export's (`id`, float times).
pub fn write_replay(
    out: &mut impl Write,
    sessions: u64,
    rounds: u64,
    canonical: bool,
    seed: u64,
) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { sessions: if rounds > 0 { sessions } else { 0 }, lines: 1, ..Generated::default() };
    if canonical {
        writeln!(out, "id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len")?;
    } else {
        writeln!(out, "session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms")?;
    }
    let mut arrival = 0;
    for session in 0..sessions {
        arrival += rng.below(400);
        let mut prefix = 0;
        for round in 0..rounds {
            let input = 1 + rng.below(3000);
            let output = 1 + rng.below(400);
            let wait = if round + 1 < rounds { rng.below(500) } else { 0 };
            if canonical {
                writeln!(out, "{session},{input},{output},{arrival}.000000,{round},{wait}.000000,{prefix}")?;
            } else {
                writeln!(out, "{session},{arrival},{round},{prefix},{input},{output},{wait}")?;
            }
            generated.lines += 1;
            generated.rounds += 1;
            generated.input_tokens += prefix + input;
            generated.cached_tokens += prefix;
            generated.output_tokens += output;
            generated.derived_arrivals += u64::from(round > 0);
            prefix += input + output;
        }
    }
    Ok(generated)
}
