//! Synthetic Bailian traces of any size, for tests and benchmarks: sessions of follow-ups whose prompts carry the
//! history (the previous prompt's blocks, then new ones), interleaved in time, with every request type.
//! Deterministic for a seed; every line is valid, so a parse gives no diagnostics.

use std::io::{self, Write};

/// What a generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written, one per request.
    pub lines: u64,
    /// Request rows.
    pub requests: u64,
    /// Sessions (root requests).
    pub sessions: u64,
    /// Sum of `input_length`.
    pub input_tokens: u64,
    /// Sum of `output_length`.
    pub output_tokens: u64,
    /// Requests of type `search`.
    pub search: u64,
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

const TYPES: [&str; 5] = ["text", "text", "search", "image", "file"];

/// `sessions` sessions of `turns` requests each, written round by round (turn 1 of every session, then turn 2, …)
/// with increasing timestamps, in the repository's `json.dumps` style (`", "` and `": "` separators).
pub fn write_bailian(out: &mut impl Write, sessions: u64, turns: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    let mut next_chat = 0u64;
    let mut next_block = 0u64;
    // Per session: the last chat id, its prompt's block ids and token count.
    let mut open: Vec<(i64, Vec<u64>, u64)> = (0..sessions).map(|_| (-1, Vec::new(), 0)).collect();
    let mut timestamp = 0.0f64;
    for turn in 1..=turns {
        for (parent, blocks, tokens) in &mut open {
            let chat = next_chat;
            next_chat += 1;
            // The prompt keeps the history's full blocks and adds new text (a partial last block gets an id too).
            blocks.truncate((*tokens / 16) as usize);
            let input = (*tokens / 16) * 16 + 1 + rng.below(700);
            while (blocks.len() as u64) < input.div_ceil(16) {
                blocks.push(next_block);
                next_block += 1;
            }
            let output = 1 + rng.below(500);
            let kind = TYPES[rng.below(TYPES.len() as u64) as usize];
            let ids: Vec<String> = blocks.iter().map(u64::to_string).collect();
            writeln!(
                out,
                r#"{{"chat_id": {chat}, "parent_chat_id": {parent}, "timestamp": {timestamp:.3}, "input_length": {input}, "output_length": {output}, "type": "{kind}", "turn": {turn}, "hash_ids": [{ids}]}}"#,
                ids = ids.join(", "),
            )?;
            timestamp += rng.below(2000) as f64 / 1000.0;
            *parent = i64::try_from(chat).unwrap_or(i64::MAX);
            *tokens = input + output;
            generated.lines += 1;
            generated.requests += 1;
            generated.sessions += u64::from(turn == 1);
            generated.input_tokens += input;
            generated.output_tokens += output;
            generated.search += u64::from(kind == "search");
        }
    }
    Ok(generated)
}
