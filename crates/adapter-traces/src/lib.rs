//! infertrace adapters for public production LLM-inference traces.
//!
//! Production traces are the workloads the product exists to replay: they carry arrivals, token counts and (for
//! some) chained prefix-block hashes, but no engine timings. Each format here is one [`Adapter`] with its own id:
//!
//! - [`Mooncake`] (`mooncake`): the Mooncake/Kimi FAST'25 and arXiv traces, the same JSONL with `request_id` and
//!   `session_id` as Dynamo and AIPerf replay it, and Dynamo's agentic variants (`agentic_mooncake` v2 and legacy,
//!   `applied_compute_agentic`), sessions kept in `session_id`/`turn`.
//! - [`MooncakeDelta`] (`mooncake-delta`): Mooncake lines whose later session rows carry only the new input, as
//!   Dynamo's replay reads them; never detected (the lines are Mooncake's), chosen with `--format`.
//! - [`AzureLlm`] (`azure-llm`): the Azure LLM inference CSV traces of 2023 and 2024, and the 2025 multimodal one.
//! - [`WekaTrace`] (`weka-trace`): WEKA's kv-cache-tester Claude Code traces, one JSON document per conversation read
//!   as a stream, sub-agents as sessions `<trace>/<agent_id>`, `hash_ids` chained per trace.
//! - [`BailianTrace`] (`bailian-trace`): the Qwen Bailian usage traces (`qwen-bailian-usagetraces-anon`) JSONL,
//!   sessions rebuilt from `parent_chat_id` links.
//! - [`BurstGpt`] (`burstgpt`): the BurstGPT CSV traces (1.x and 2.0 with sessions); zero-response rows are failures.
//! - [`LlmServingSim`] (`llmservingsim`): the artifacts of LLMServingSim's benchmark runs of vLLM 0.19 (request
//!   log, time series, `meta.json`), its simulator's per-request output, and its JSONL workloads.
//! - [`RagPulse`] (`ragpulse`): the RAGPulse RAG-service trace (component chunk ids as chained `prefix_hashes`) and
//!   its id→token-length map files, which give the run's per-component token split when they precede the trace.
//! - [`TraceLab`] (`tracelab`): TraceLab's Claude Code / Codex round traces (provider cache reads, reasoning
//!   tokens, tool calls, generation spans) and its `session_runner` replay CSVs.
//!
//! Traces that record no outcome leave `status` `unknown` (BurstGPT marks failures, LLMServingSim's runs record
//! completions); traces without ids get `<file stem>:<line>` (WEKA and Bailian rows take theirs from the trace).
//! These adapters deliberately do not simulate anything (cache hits, queueing): that is the replay engine's job.
//!
//! [`Adapter`]: infertrace_adapter::Adapter

mod azure;
pub mod bailian;
pub mod burstgpt;
pub mod generate;
pub mod llmservingsim;
mod mooncake;
pub mod ragpulse;
mod sessions;
pub mod tracelab;
pub mod weka;

pub use azure::AzureLlm;
pub use bailian::BailianTrace;
pub use burstgpt::BurstGpt;
pub use llmservingsim::LlmServingSim;
pub use mooncake::{Mooncake, MooncakeDelta};
pub use ragpulse::RagPulse;
pub use tracelab::TraceLab;
pub use weka::WekaTrace;

/// A token count as the schema's `u32`, or `None` with an `invalid-value` diagnostic naming `field` when it does not
/// fit.
fn token_count(n: u64, field: &str, line: u64, sink: &mut dyn infertrace_adapter::Sink) -> Option<u32> {
    let tokens = u32::try_from(n).ok();
    if tokens.is_none() {
        sink.diagnostic(infertrace_adapter::Diagnostic::new(
            line,
            infertrace_adapter::DiagnosticKind::InvalidValue,
            format!("`{field}` exceeds {} tokens", u32::MAX),
        ));
    }
    tokens
}

/// The first line of `head`, which may be cut short when the line is longer than the head.
fn first_line(head: &[u8]) -> &[u8] {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    let line = &head[..end];
    line.strip_suffix(b"\r").unwrap_or(line)
}
