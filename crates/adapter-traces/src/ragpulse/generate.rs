//! Synthetic RAGPulse inputs of any size: trace lines and the id→length map lines that match them.
//! Deterministic for a seed; every line is valid, so a parse gives no diagnostics.

use std::io::{self, Write};

/// Chunk ids of each component, in prompt order: `(map id key, first id, count)`. The ranges do not overlap, as in
/// the published trace.
const RANGES: [(&str, u64, u64); 5] = [
    ("sys_prompt_id", 1000, 4),
    ("passage_id", 0, 200),
    ("history_id", 2000, 100),
    ("web_search_id", 3000, 50),
    ("user_input_id", 4000, 300),
];

/// Tokens added to every prompt beyond its chunks (the chat template).
pub const TEMPLATE_TOKENS: u64 = 8;

/// What a generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines written.
    pub lines: u64,
    /// Request rows.
    pub requests: u64,
    /// Distinct sessions.
    pub sessions: u64,
    /// Sum of `input_length`.
    pub input_tokens: u64,
    /// Sum of `output_length`.
    pub output_tokens: u64,
    /// Sum of the number of retrieved passages.
    pub passages: u64,
    /// Tokens per component in prompt order (system prompt, passages, history, web search, user input).
    pub component_tokens: [u64; 5],
}

/// The token length the maps give chunk `id`: 1 to 300.
pub fn chunk_length(id: u64) -> u64 {
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d;
    x ^= x >> 29;
    1 + x % 300
}

/// Writes every map line of the id space the generated traces use, component by component; returns the lines.
pub fn write_maps(out: &mut impl Write) -> io::Result<u64> {
    let mut lines = 0;
    for (key, first, count) in RANGES {
        for id in first..first + count {
            writeln!(out, r#"{{"{key}": {id}, "token_length": {}}}"#, chunk_length(id))?;
            lines += 1;
        }
    }
    Ok(lines)
}

/// A xorshift generator: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// RAGPulse trace lines: `sessions` sessions of `turns` requests, turns of different sessions interleaved, string
/// timestamps rising by 0 to 29 s. Each prompt has two shared system-prompt chunks and a third of two, 0 to 6
/// passages, a history chunk after the first turn, sometimes web results, and a question; `input_length` is the
/// chunks' lengths plus [`TEMPLATE_TOKENS`].
pub fn write_trace(out: &mut impl Write, sessions: u64, turns: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut generated = Generated { sessions: if turns > 0 { sessions } else { 0 }, ..Generated::default() };
    let mut seconds = 0;
    for turn in 0..turns {
        for session in 0..sessions {
            let pick = |rng: &mut Rng, component: usize| RANGES[component].1 + rng.below(RANGES[component].2);
            let sys = vec![1000, 1001, 1002 + rng.below(2)];
            let passages: Vec<u64> = (0..rng.below(7)).map(|_| pick(&mut rng, 1)).collect();
            let history: Vec<u64> = if turn > 0 { vec![pick(&mut rng, 2)] } else { Vec::new() };
            let web: Vec<u64> =
                if rng.below(5) == 0 { (0..1 + rng.below(2)).map(|_| pick(&mut rng, 3)).collect() } else { Vec::new() };
            let user = vec![pick(&mut rng, 4)];
            let lists = [&sys, &passages, &history, &web, &user];
            let mut input = TEMPLATE_TOKENS;
            for (total, list) in generated.component_tokens.iter_mut().zip(lists) {
                let tokens: u64 = list.iter().map(|&id| chunk_length(id)).sum();
                *total += tokens;
                input += tokens;
            }
            let output = 1 + rng.below(500);
            seconds += rng.below(30);
            let list = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
            writeln!(
                out,
                r#"{{"timestamp": "{seconds}", "input_length": {input}, "output_length": {output}, "hash_ids": {{"sys_prompt": [{}], "passages_ids": [{}], "history": [{}], "web_search": [{}], "user_input": [{}]}}, "session_id": "{seed}-s{session}"}}"#,
                list(&sys),
                list(&passages),
                list(&history),
                list(&web),
                list(&user),
            )?;
            generated.lines += 1;
            generated.requests += 1;
            generated.input_tokens += input;
            generated.output_tokens += output;
            generated.passages += passages.len() as u64;
        }
    }
    Ok(generated)
}
