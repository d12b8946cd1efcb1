//! Synthetic WEKA traces of any size, for tests and benchmarks: one conversation per document, calls whose prompts
//! grow turn by turn over a shared prefix, streaming calls with `ttft`, and sub-agent markers with nested calls.
//! Deterministic for a seed; every value is valid, so a parse gives no diagnostics.

use std::io::{self, Write};

/// What a generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Call rows (the trace's and its sub-agents').
    pub requests: u64,
    /// Calls made by sub-agents.
    pub subagent_requests: u64,
    /// Sub-agent markers.
    pub subagents: u64,
    /// Streaming calls (`type` `s`), each with a `ttft`.
    pub streaming: u64,
    /// Sum of `in` over every call.
    pub input_tokens: u64,
    /// Sum of `out` over every call.
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

/// One session's growing context: its block ids so far and the next fresh id of the trace.
struct Context {
    ids: Vec<u64>,
    tokens: u64,
}

/// Writes `calls` calls of one session from `t0` seconds on, as JSON objects separated by commas, and counts them.
fn write_calls(
    out: &mut impl Write,
    rng: &mut Rng,
    calls: u64,
    t0: f64,
    context: &mut Context,
    next_id: &mut u64,
    generated: &mut Generated,
) -> io::Result<()> {
    let mut t = t0;
    for i in 0..calls {
        if i > 0 {
            out.write_all(b",")?;
        }
        // The prompt grows by a tool result (and sometimes loses its last blocks, as Claude Code rewrites them).
        let added = 200 + rng.below(3000);
        let kept = context.ids.len().saturating_sub(usize::from(rng.below(4) == 0));
        context.ids.truncate(kept);
        context.tokens = (kept as u64) * 64 + (context.tokens % 64) + added;
        while (context.ids.len() as u64) < context.tokens / 64 {
            *next_id += 1;
            context.ids.push(*next_id);
        }
        let input = context.tokens;
        let output = 20 + rng.below(600);
        let api = 1.0 + rng.below(900) as f64 / 100.0;
        let think = if i == 0 { 0.0 } else { rng.below(30) as f64 };
        let streaming = rng.below(3) == 0;
        let ids: Vec<String> = context.ids.iter().map(u64::to_string).collect();
        let kind = if streaming { "s" } else { "n" };
        let ttft = if streaming { format!(r#","ttft":{:.2}"#, api / 3.0) } else { String::new() };
        let stop = if i + 1 == calls { "end_turn" } else { "tool_use" };
        write!(
            out,
            r#"{{"t":{t:.3},"type":"{kind}","model":"claude-synthetic-1","in":{input},"out":{output},"hash_ids":[{ids}],"input_types":["tool_result"],"output_types":["text","tool_use"],"stop":"{stop}","api_time":{api:.2}{ttft},"think_time":{think:.1}}}"#,
            ids = ids.join(","),
        )?;
        t += api + think + 1.0;
        generated.requests += 1;
        generated.streaming += u64::from(streaming);
        generated.input_tokens += input;
        generated.output_tokens += output;
    }
    Ok(())
}

/// A trace `id` with `calls` calls of its own and, after every few of them, `subagents` sub-agent markers in all
/// with `subagent_calls` calls each. Written on one line, as kv-cache-tester writes its files.
pub fn write_weka(
    out: &mut impl Write,
    id: &str,
    calls: u64,
    subagents: u64,
    subagent_calls: u64,
    seed: u64,
) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut generated = Generated::default();
    let mut next_id = 0;
    write!(
        out,
        r#"{{"id":"{id}","models":["claude-synthetic-1"],"block_size":64,"hash_id_scope":"local","tool_tokens":9000,"system_tokens":1200,"requests":["#
    )?;
    let mut parent = Context { ids: Vec::new(), tokens: 0 };
    // Sub-agents start from a shared prompt of their own.
    let mut shared = Context { ids: Vec::new(), tokens: 0 };
    let mut written = 0;
    let every = calls / (subagents + 1) + 1;
    let mut t = 0.0f64;
    for call in 0..calls {
        if call > 0 {
            out.write_all(b",")?;
        }
        write_calls(out, &mut rng, 1, t, &mut parent, &mut next_id, &mut generated)?;
        t += 5.0 + rng.below(20) as f64;
        if written < subagents && (call + 1) % every == 0 {
            written += 1;
            write!(
                out,
                r#",{{"t":{t:.3},"type":"subagent","agent_id":"agent_{written:03}","subagent_type":"Explore","duration_ms":60000,"total_tokens":1000,"tool_use_count":3,"status":"completed","requests":["#
            )?;
            if shared.ids.is_empty() {
                shared.tokens = 700;
                for _ in 0..10 {
                    next_id += 1;
                    shared.ids.push(next_id);
                }
            }
            let mut context = Context { ids: shared.ids.clone(), tokens: shared.tokens };
            let before = generated.requests;
            write_calls(out, &mut rng, subagent_calls, 0.0, &mut context, &mut next_id, &mut generated)?;
            generated.subagent_requests += generated.requests - before;
            out.write_all(br#"],"models":["claude-synthetic-1"],"tool_tokens":7000,"system_tokens":1000}"#)?;
            generated.subagents += 1;
            t += 60.0;
        }
    }
    out.write_all(b"]}\n")?;
    Ok(generated)
}
