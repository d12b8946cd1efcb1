//! Synthetic BurstGPT CSVs of any size, for tests and benchmarks. Deterministic for a seed; every line is valid,
//! so a parse gives no diagnostics.

use std::io::{self, Write};

/// What a generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written, the header included.
    pub lines: u64,
    /// Request rows.
    pub requests: u64,
    /// Rows with zero response tokens.
    pub failures: u64,
    /// Distinct session ids (2.0 only).
    pub sessions: u64,
    /// Sum of `Request tokens`.
    pub input_tokens: u64,
    /// Sum of `Response tokens`.
    pub output_tokens: u64,
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

/// `rows` BurstGPT rows in increasing time. With `v2`, the 2.0 header: every other row is a conversation turn of
/// one of a few sessions (a UUID-shaped id), the others are API rows without a session, as in `BurstGPT_3.csv`.
/// About one row in twelve is a failure (0 response tokens).
pub fn write_burstgpt(out: &mut impl Write, rows: u64, v2: bool, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    if v2 {
        writeln!(out, "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type")?;
    } else {
        writeln!(out, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")?;
    }
    generated.lines += 1;
    let mut sessions_seen = std::collections::BTreeSet::new();
    let mut time = 19_440_110.0_f64;
    for i in 0..rows {
        time += rng.below(50) as f64;
        let model = if rng.below(5) == 0 { "GPT-4" } else { "ChatGPT" };
        let request = 1 + rng.below(3000);
        let response = if rng.below(12) == 0 { 0 } else { 1 + rng.below(800) };
        if response == 0 {
            generated.failures += 1;
        }
        let conversation = i % 2 == 0;
        let log_type = if conversation { "Conversation log" } else { "API log" };
        let total = request + response;
        if v2 {
            let session = if conversation {
                let s = rng.below(rows / 4 + 1);
                sessions_seen.insert(s);
                format!("{s:08x}-0a46-4bf0-aa08-89794e7a2b3f")
            } else {
                String::new()
            };
            let elapsed = rng.below(60);
            writeln!(out, "{time:.1},{session},{elapsed},{model},{request},{response},{total},{log_type}")?;
        } else {
            writeln!(out, "{time:.0},{model},{request},{response},{total},{log_type}")?;
        }
        generated.lines += 1;
        generated.requests += 1;
        generated.input_tokens += request;
        generated.output_tokens += response;
    }
    generated.sessions = sessions_seen.len() as u64;
    Ok(generated)
}
