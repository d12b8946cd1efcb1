//! infertrace adapters for what the application and its gateway record about each LLM call: the sessions, agent
//! loops, tool calls, cached and reasoning tokens that serving-engine logs rarely carry.
//!
//! - [`OtelGenai`] (`otel-genai`): OpenTelemetry spans under the GenAI semantic conventions (and OpenInference's),
//!   as OTLP/JSON or OTLP protobuf: LLM calls become requests, with their sessions, turns, tool calls and class
//!   rebuilt from the agent and tool spans around them.
//! - [`LitellmSpend`] (`litellm-spend`): LiteLLM proxy's spend logs, as rows of its `LiteLLM_SpendLogs` table
//!   (CSV with a header, JSONL or the `/spend/logs` JSON array) and as the standard logging payload its callbacks
//!   write.
//! - [`OpenaiUsage`] (`openai-usage`): any JSONL of OpenAI-compatible responses (chat completions, completions,
//!   Responses API, Batch API output lines) or summaries of them carrying a `usage` object.
//!
//! None of them reads a message, a prompt, a completion or a tool's arguments: those positions are skipped
//! unread, and the privacy test plants its canary in each.

mod litellm;
mod otel;
mod usage;

pub use litellm::LitellmSpend;
pub use otel::OtelGenai;
pub use usage::OpenaiUsage;

/// The next turn of `session`, counting from 0, in a table of the most recent sessions.
fn next_turn(turns: &mut lru::LruCache<String, u32>, session: &str) -> u32 {
    match turns.get_mut(session) {
        Some(next) => {
            *next += 1;
            *next - 1
        }
        None => {
            turns.put(session.to_owned(), 1);
            0
        }
    }
}

/// An error code or class kept as a row's error: a name, never a message that could quote input.
fn error_name(value: &str) -> &str {
    if value.len() <= 64 && !value.is_empty() && !value.contains(char::is_whitespace) { value } else { "error" }
}
