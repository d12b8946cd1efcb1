//! Synthetic trace inputs of any size, for tests and benchmarks: every Mooncake variant Dynamo's replay reads, and
//! Azure LLM inference CSVs.
//! Deterministic for a seed; every line is valid, so a parse gives no diagnostics.

use std::io::{self, Write};

/// What a generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written (a header line included).
    pub lines: u64,
    /// Request rows the input holds.
    pub requests: u64,
    /// Distinct sessions.
    pub sessions: u64,
    /// Rows whose arrival follows from an earlier row (a session delay, `wait_for` or `dependencies`).
    pub derived_arrivals: u64,
    /// Sum of every row's prompt as the server sees it (accumulated for deltas and Applied Compute turns).
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

/// `ceil(input / 512)` hash ids, the first shared by every session (a system prompt), the rest fresh.
fn hash_ids(input: u64, next: &mut u64, block: u64) -> String {
    let blocks = input.div_ceil(block);
    let ids: Vec<String> = (0..blocks)
        .map(|i| {
            if i == 0 {
                "0".to_owned()
            } else {
                *next += 1;
                next.to_string()
            }
        })
        .collect();
    ids.join(",")
}

/// Mooncake rows in sessions of `turns` turns (Dynamo/AIPerf form: `session_id`, `request_id`, the first turn with a
/// `timestamp`, later ones with a `delay` only), turns of different sessions interleaved. Read with `delta`, the
/// same file is a mooncake-delta trace, and [`Generated::input_tokens`] counts accumulated prompts.
///
/// Sessions are written [`OPEN_SESSIONS`] at a time, all the turns of one group before the next group starts a
/// minute later, as sessions come and go in a real trace: however many sessions the file holds, at most that many
/// are open at once, well within what the adapter remembers. (Writing every session's first turn before any second
/// turn would keep them all open, and past the adapter's bound of open sessions every later turn would restart.)
pub fn write_mooncake(
    out: &mut impl Write,
    sessions: u64,
    turns: u64,
    delta: bool,
    seed: u64,
) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { sessions, ..Generated::default() };
    let mut next_id = 0;
    let mut contexts = vec![0u64; usize::try_from(OPEN_SESSIONS.min(sessions)).unwrap_or(0)];
    for first in (0..sessions).step_by(OPEN_SESSIONS as usize) {
        let open = &mut contexts[..usize::try_from((sessions - first).min(OPEN_SESSIONS)).unwrap_or(0)];
        open.fill(0);
        let minute = first / OPEN_SESSIONS * 60_000;
        for turn in 0..turns {
            for (offset, context) in open.iter_mut().enumerate() {
                let session = first + offset as u64;
                let input = 1 + rng.below(3000);
                let output = 1 + rng.below(400);
                let ids = hash_ids(input, &mut next_id, 512);
                let timing = if turn == 0 {
                    format!(r#""timestamp":{}"#, minute + rng.below(60_000))
                } else {
                    generated.derived_arrivals += 1;
                    format!(r#""delay":{}.5"#, rng.below(5_000))
                };
                writeln!(
                    out,
                    r#"{{"request_id":"r{session}-{turn}","session_id":"s{session}",{timing},"input_length":{input},"output_length":{output},"hash_ids":[{ids}]}}"#
                )?;
                let prompt = if delta && turn > 0 { *context + input } else { input };
                *context = prompt + output;
                generated.input_tokens += prompt;
                generated.lines += 1;
                generated.requests += 1;
            }
        }
    }
    Ok(generated)
}

/// Sessions open at once in [`write_mooncake`]'s output.
pub const OPEN_SESSIONS: u64 = 10_000;

/// An agentic Mooncake v2 trace: the header (block size 64, local hash ids), then `plays` plays of `requests` rows.
/// Each row depends on the previous row of its play (`completion`, `sequence`); every third row is a spawned child
/// session (`dispatch`, `spawn`) and the row after it joins it back.
pub fn write_agentic_v2(out: &mut impl Write, plays: u64, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    writeln!(
        out,
        r#"{{"schema":"dynamo.agentic_mooncake","version":2,"block_size":64,"hash_id_scope":"local","source":{{"format":"synthetic","digest":"seed-{seed}"}}}}"#
    )?;
    generated.lines += 1;
    for play in 0..plays {
        let mut next_id = 0;
        let mut child_sessions = 0;
        for k in 0..requests {
            let input = 1 + rng.below(2000);
            let output = 1 + rng.below(300);
            let ids = hash_ids(input, &mut next_id, 64);
            let spawned = k % 3 == 1;
            let session = if spawned {
                child_sessions += 1;
                format!("p{play}-child{k}")
            } else {
                format!("p{play}-main")
            };
            let dependencies = if k == 0 {
                String::new()
            } else if spawned {
                format!(r#"{{"request_id":"p{play}-{}","trigger":"dispatch","delay_ms":3,"relation":"spawn"}}"#, k - 1)
            } else if k % 3 == 2 {
                format!(
                    r#"{{"request_id":"p{play}-{}","trigger":"completion","delay_ms":1,"relation":"sequence"}},{{"request_id":"p{play}-{}","trigger":"completion","delay_ms":1,"relation":"join"}}"#,
                    k - 2,
                    k - 1
                )
            } else {
                format!(
                    r#"{{"request_id":"p{play}-{}","trigger":"completion","delay_ms":7.5,"relation":"sequence"}}"#,
                    k - 1
                )
            };
            if k > 0 {
                generated.derived_arrivals += 1;
            }
            let api = 10 + rng.below(2000);
            writeln!(
                out,
                r#"{{"request_id":"p{play}-{k}","play_id":"play-{play}","session_id":"{session}","model":"synthetic-model","input_length":{input},"output_length":{output},"hash_ids":[{ids}],"not_before_ms":0,"recorded_api_time_ms":{api},"dependencies":[{dependencies}]}}"#
            )?;
            generated.lines += 1;
            generated.requests += 1;
            generated.input_tokens += input;
        }
        generated.sessions += u64::from(requests > 0) + child_sessions;
    }
    Ok(generated)
}

/// Legacy (headerless) agentic rows: sessions of `turns` rows, each later turn waiting for the previous one
/// (`wait_for`) plus a `delay` and a `tool_wait_ms`, with one tool event. Sessions are written one after another.
pub fn write_agentic_legacy(out: &mut impl Write, sessions: u64, turns: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { sessions, ..Generated::default() };
    let mut next_id = 0;
    for session in 0..sessions {
        for turn in 0..turns {
            let input = 1 + rng.below(3000);
            let output = 1 + rng.below(400);
            let ids = hash_ids(input, &mut next_id, 512);
            let timing = if turn == 0 {
                format!(r#""timestamp":{},"tool_wait_ms":0"#, rng.below(60_000))
            } else {
                generated.derived_arrivals += 1;
                format!(
                    r#""wait_for":["a{session}-{}"],"delay":{},"tool_wait_ms":{},"tool_events":[{{"tool_call_id":"t{turn}","tool_class":"bash","started_at_unix_ms":1,"ended_at_unix_ms":2,"duration_ms":1.0,"status":"succeeded"}}]"#,
                    turn - 1,
                    rng.below(100),
                    rng.below(3000)
                )
            };
            writeln!(
                out,
                r#"{{"request_id":"a{session}-{turn}","session_id":"as{session}","input_length":{input},"output_length":{output},"hash_ids":[{ids}],{timing}}}"#
            )?;
            generated.lines += 1;
            generated.requests += 1;
            generated.input_tokens += input;
        }
    }
    Ok(generated)
}

/// Applied Compute agentic sessions, one per line, with 0 to 5 tool-calling turns each.
pub fn write_applied_compute(out: &mut impl Write, sessions: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated { sessions, ..Generated::default() };
    for _ in 0..sessions {
        let turns = rng.below(6);
        let prompt = 1 + rng.below(8000);
        let responses: Vec<u64> = (0..turns).map(|_| 1 + rng.below(500)).collect();
        let tools: Vec<u64> = (0..turns).map(|_| rng.below(2000)).collect();
        let latencies: Vec<String> = (0..turns).map(|_| format!("{}.25", rng.below(10))).collect();
        let last = 1 + rng.below(500);
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        writeln!(
            out,
            r#"{{"num_turns":{turns},"input_prompt_length":{prompt},"assistant_response_length":[{}],"tool_call_output_length":[{}],"tool_call_latency":[{}],"final_assistant_response_length":{last}}}"#,
            list(&responses),
            list(&tools),
            latencies.join(",")
        )?;
        let mut context = prompt;
        for k in 0..=turns as usize {
            generated.input_tokens += context;
            if let (Some(r), Some(t)) = (responses.get(k), tools.get(k)) {
                context += r + t;
            }
        }
        generated.lines += 1;
        generated.requests += turns + 1;
    }
    Ok(generated)
}

/// An Azure LLM inference trace of `rows` rows in the 2023 Splitwise shape (`TIMESTAMP,ContextTokens,GeneratedTokens`,
/// seven fraction digits, no zone): a request about every 50 ms from 2023-11-16 18:00:00, rising. With
/// `--utc-offset +00:00` row `i` (from 0) arrives `i × 50 ms` plus under 40 ms after 1,700,157,600 s.
pub fn write_azure(out: &mut impl Write, rows: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    writeln!(out, "TIMESTAMP,ContextTokens,GeneratedTokens")?;
    let mut generated = Generated { lines: 1, requests: rows, ..Generated::default() };
    for i in 0..rows {
        // In 100 ns ticks, as the trace writes them.
        let tick = i * 500_000 + rng.below(400_000);
        let (seconds, fraction) = (18 * 3600 + tick / 10_000_000, tick % 10_000_000);
        let (input, output) = (1 + rng.below(8000), 1 + rng.below(700));
        writeln!(
            out,
            "2023-11-{:02} {:02}:{:02}:{:02}.{fraction:07},{input},{output}",
            16 + seconds / 86_400,
            seconds / 3600 % 24,
            seconds / 60 % 60,
            seconds % 60,
        )?;
        generated.lines += 1;
        generated.input_tokens += input;
    }
    Ok(generated)
}
