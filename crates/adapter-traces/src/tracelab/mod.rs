//! TraceLab (uw-syfi/TraceLab, arXiv 2606.30560): Claude Code and Codex rounds, and the session runner's replay CSV.
//!
//! # Generations (`format_version`)
//!
//! **`round-trace`**: the released trace and its sanitized examples (`example_sessions/sanitized/round_trace.jsonl`,
//! release `syfi_coding_trace.jsonl.gz`), one LLM round per line (shortened):
//!
//! ```text
//! {"provider":"claude","project":"project_4c7b8a1b","session_id":"claude:92ee…","round_index":0,
//!  "round_id":"msg_3e0c…","model":"claude-opus-4-8","input_tokens_total":32272,"prefix_tokens":27217,
//!  "newly_append_tokens":5055,"claude_uncached_input_tokens":2892,"claude_cache_creation_input_tokens":2163,
//!  "claude_cache_read_input_tokens":27217,"output_tokens":931,"reasoning_output_tokens":null,
//!  "timing_events":[{"event_type":"user_message","timestamp":"2026-06-01T05:40:20.151Z",…},…],
//!  "tools":[{"tool_name":"Bash","tool_call_id":…,"emitted_at":…,"result_at":…,"tool_wall_latency_ms":860,
//!  "is_error":false,…}],"current_input_event_count":1,…,"first_input_event_type":"user_message",…}
//! ```
//!
//! Codex rows add `turn_id` and `reasoning_output_tokens` and leave the `claude_*` counts null. `event_type` is
//! `user_message`, `tool_result` (inputs), `reasoning`, `text`, `tool_call` (model output) or `usage_report`.
//!
//! **`replay-csv`**: the input of TraceLab's Rust `session_runner` (`replay/examples/*.csv`), with either header:
//!
//! ```text
//! session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms   (arrival_time optional)
//! id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len          (csv_export's form)
//! ```
//!
//! The runner starts a session at its first row's `arrival_time` (ms from the start of the run), sends each round's
//! prompt of `prefix_len` earlier-context tokens plus `input_len` new ones, waits for the whole response, sleeps
//! `tool_wait_after_ms`, and sends the next round.
//!
//! # Mapping and decisions
//!
//! Round traces (one row per line, `workload_class` `agent`, `status` `unknown`):
//! - `request_id` = `round_id` (Claude's message id, Codex's `<turn_id>:<n>`), else `<file stem>:<line>`. TraceLab
//!   notes that `round_id` is not unique in the merged release; rows are kept as they are, duplicates included.
//! - `session_id` as written, `turn` = `round_index`, `model` as written.
//! - `input_tokens` = `input_tokens_total` (else `prefix_tokens` + `newly_append_tokens`; a total that is not that
//!   sum is an `inconsistent` diagnostic). `cached_tokens` = `prefix_tokens`, the provider-reported prompt-cache
//!   read (equal to `claude_cache_read_input_tokens` for Claude; Codex's cached input); the tier is unknown, so no
//!   per-tier column is set. A Claude row whose read count or whose uncached + creation + read sum disagrees is
//!   `inconsistent`. Cache-creation tokens have no column: their sum is `details.cache_creation_tokens`.
//! - `output_tokens`, `reasoning_tokens` = `reasoning_output_tokens` (a subset of the output for Codex; a larger
//!   one is `inconsistent`).
//! - `tool_calls` = the number of `tools` entries (else of `tool_call` events); tool errors and names are not
//!   per-row facts of the schema: `details.tool_calls`, `details.tool_errors` count them, names are never kept.
//! - Times follow TraceLab's own generation span (`artifacts/utils/timing.py`): `arrival_time` is the latest input
//!   event (`user_message`, `tool_result`) at or before the first model-output event, `completion_time` the last
//!   model-output event (`e2e_s` follows). Output events are logged per content block, not per token, so no
//!   first-token time is claimed. A row without both is counted in `details.rows_without_span` and keeps null
//!   times. Clock domain `utc`.
//! - Other counts go to `details`: `sessions` (distinct), `providers` (`claude`, `codex`, `other`).
//!
//! Replay CSV (one row per record, `workload_class` `agent`):
//! - `request_id` = `<session>_round_<round_idx, 6 digits>`, the id the runner gives each request in its log (else
//!   `<file stem>:<line>`); `session_id`, `turn` = `round_idx`.
//! - `input_tokens` = `prefix_len` + `input_len` (the prompt sent), `cached_tokens` = `prefix_len`: the reusable
//!   prefix the workload plans, which `csv_export` copies from the trace's provider-reported `prefix_tokens`
//!   (not a measurement of any engine), `output_tokens` = `output_len` (the target the runner asks for).
//! - `arrival_time`: a session's first row at `--start` + `arrival_time` ms (0 when the column is absent, as in the
//!   runner); a later row at the previous row's arrival plus its `tool_wait_after_ms`. The runner also waits for the
//!   previous response, which the CSV does not record, so these arrivals are lower bounds, counted in
//!   `details.arrivals_derived` (as Mooncake's derived arrivals). Clock domain `relative`.
//! - `details.sessions`, and `details.compactions`: rows whose `prefix_len` is below the previous round's whole
//!   context (`prefix_len + input_len + output_len`), i.e. the agent dropped context (TraceLab's compaction).
//! - Sessions are remembered for derived arrivals, at most 100,000 (least recently used forgotten, counted in
//!   `sessions_evicted`; a forgotten session that comes back starts again from its row's `arrival_time`).

pub mod generate;
mod replay;
mod round;

use std::io::BufRead;
use std::sync::LazyLock;

use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use regex::bytes::Regex;

/// The TraceLab adapter: round traces (JSONL) and replay CSVs.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLab;

static ROUND_LINE: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        Regex::new(r#""prefix_tokens"\s*:"#).expect("valid regex"),
        Regex::new(r#""newly_append_tokens"\s*:"#).expect("valid regex"),
    ]
});

impl Adapter for TraceLab {
    fn id(&self) -> &'static str {
        "tracelab"
    }

    fn description(&self) -> &'static str {
        "TraceLab coding-agent rounds JSONL (Claude Code, Codex: prefix/append tokens, ISO-8601 timing events, \
         tools) and session_runner replay CSV"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        if line.starts_with(b"{") {
            return ROUND_LINE.iter().all(|re| re.is_match(line)).then_some(Confidence::High);
        }
        replay::Columns::from_header(line).map(|_| Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        // The first non-blank byte decides: JSON objects are rounds, anything else is the CSV.
        let buffered = input.fill_buf()?;
        let start = buffered.strip_prefix(b"\xef\xbb\xbf").unwrap_or(buffered);
        if start.trim_ascii_start().starts_with(b"{") {
            round::parse(self.id(), input, ctx, sink)
        } else {
            replay::parse(self.id(), input, ctx, sink)
        }
    }
}

#[cfg(test)]
mod tests;
