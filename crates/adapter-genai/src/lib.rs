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
pub use otel::{CACHED, INPUT, MAX_OPEN_SPANS, OUTPUT, OtelGenai, REASONING};
pub use usage::OpenaiUsage;
