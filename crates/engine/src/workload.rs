//! The workload class of rows that do not record one, inferred by documented rules.
//!
//! A row's stored `workload_class` is always kept. For a row without one, the first rule that holds decides:
//!
//! 1. **agent**: the row made tool calls (`tool_calls` > 0), or it belongs to a multi-turn session (two or more
//!    rows share its `session_id`) whose later turns reuse at least [`HIGH_REUSE`] of their prompt tokens.
//! 2. **rag**: the row retrieved documents (`retrieved_docs` > 0), or its prompt is long (`input_tokens` ≥
//!    [`LONG_PROMPT_TOKENS`]) with known reuse below [`HIGH_REUSE`].
//! 3. **batch**: no SLO was given and the row was not streamed: its TTFT is present and not shorter than its e2e
//!    (the first token arrived with the whole answer) and it produced more than one token. Sources without TTFT
//!    (most public traces) cannot show this, so their rows are never inferred batch.
//! 4. **chat** otherwise.
//!
//! Reuse of a row is `cached_tokens / input_tokens` when both are recorded, else the fraction of its
//! `prefix_hashes` blocks an unbounded cache replaying every row in arrival order would hit (the `reuse` figure of
//! the metrics), else unknown. A session's reuse is Σ reused tokens / Σ input tokens over its rows with known reuse
//! other than its earliest (by arrival, then row order): the first turn of a conversation has nothing to reuse.
//! Sessions with no later turn of known reuse are not "high reuse".
//!
//! The rules run as queries over the whole trace ([`compute_over`](crate::compute_over)); `metrics` counts the
//! rows of each class, stored and inferred apart, and `--by workload_class` groups them under `agent` or
//! `agent (inferred)`.

use serde::Serialize;

/// Fraction of prompt tokens reused above which reuse is high.
pub const HIGH_REUSE: f64 = 0.5;

/// Prompt length, in tokens, from which a prompt is long.
pub const LONG_PROMPT_TOKENS: u32 = 4096;

/// Rows of one class: how many recorded it and how many were inferred.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    /// Rows whose `workload_class` was recorded.
    pub stored: u64,
    /// Rows whose class was inferred.
    pub inferred: u64,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use infertrace_schema::{RequestRow, WorkloadClass};

    use crate::tests::{compute, write};
    use crate::{GroupBy, MetricsOptions, Slo};

    fn row(session: Option<&str>, arrival: i64) -> RequestRow {
        RequestRow {
            request_id: format!("r{arrival}"),
            source: "t".into(),
            session_id: session.map(Into::into),
            arrival_time: Some(arrival),
            ..RequestRow::default()
        }
    }

    /// Rows per `--by workload_class` key.
    fn classes(rows: &[RequestRow], slo_given: bool) -> BTreeMap<String, u64> {
        let dir = tempfile::tempdir().unwrap();
        let data = [write(&dir.path().join("d"), rows, &[])];
        let slo = if slo_given { Slo::parse("e2e=60m").unwrap() } else { Slo::default() };
        let options = MetricsOptions { slo, by: Some(GroupBy::WorkloadClass), cost: None };
        compute(&data, &options).groups.into_iter().map(|(key, group)| (key, group.requests)).collect()
    }

    fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|&(key, n)| (key.to_owned(), n)).collect()
    }

    #[test]
    fn each_rule_decides_in_order() {
        let rows = vec![
            // Stored: kept, not inferred.
            RequestRow { workload_class: Some(WorkloadClass::Rag), tool_calls: Some(3), ..row(None, 0) },
            // Tool calls: agent, even with retrieved documents.
            RequestRow { tool_calls: Some(1), retrieved_docs: Some(2), ..row(None, 1) },
            // Retrieved documents: rag.
            RequestRow { retrieved_docs: Some(2), ..row(None, 2) },
            // Long prompt, low reuse (1000 / 8000): rag.
            RequestRow { input_tokens: Some(8000), cached_tokens: Some(1000), ..row(None, 3) },
            // Long prompt, high reuse (6000 / 8000): not rag; streamed (ttft < e2e): chat.
            RequestRow {
                input_tokens: Some(8000),
                cached_tokens: Some(6000),
                ttft_s: Some(0.5),
                e2e_s: Some(2.0),
                output_tokens: Some(50),
                ..row(None, 4)
            },
            // Long prompt, unknown reuse: not rag; first token with the whole answer: batch.
            RequestRow {
                input_tokens: Some(8000),
                ttft_s: Some(2.0),
                e2e_s: Some(2.0),
                output_tokens: Some(50),
                ..row(None, 5)
            },
            // One output token: ttft = e2e says nothing about streaming: chat.
            RequestRow { ttft_s: Some(1.0), e2e_s: Some(1.0), output_tokens: Some(1), ..row(None, 6) },
            // Nothing known: chat.
            row(None, 7),
        ];
        assert_eq!(
            classes(&rows, false),
            expect(&[
                ("rag", 1),
                ("agent (inferred)", 1),
                ("rag (inferred)", 2),
                ("chat (inferred)", 3),
                ("batch (inferred)", 1)
            ])
        );
        // With an SLO, nothing is batch.
        assert_eq!(
            classes(&rows, true),
            expect(&[("rag", 1), ("agent (inferred)", 1), ("rag (inferred)", 2), ("chat (inferred)", 4)])
        );
    }

    #[test]
    fn sessions_with_high_reuse_after_their_first_turn_are_agents() {
        let turn = |session, arrival, input, cached| RequestRow {
            input_tokens: Some(input),
            cached_tokens: Some(cached),
            ..row(Some(session), arrival)
        };
        let rows = vec![
            // s1: later turns reuse (1000 + 2000) / (2000 + 3000) = 0.6 ≥ 0.5; the first turn does not count.
            turn("s1", 0, 1000, 0),
            turn("s1", 10, 2000, 1000),
            turn("s1", 20, 3000, 2000),
            // s2: (900) / (2000) = 0.45 < 0.5.
            turn("s2", 1, 1000, 0),
            turn("s2", 11, 2000, 900),
            // s3: one row only.
            turn("s3", 2, 1000, 1000),
        ];
        assert_eq!(classes(&rows, true), expect(&[("agent (inferred)", 3), ("chat (inferred)", 3)]));
        // The first turn is the earliest arrival, not the first row: s4's first turn (arrival 0) is its last row,
        // and without it its reuse is 2000 / 2000.
        let rows = vec![turn("s4", 10, 2000, 2000), turn("s4", 0, 1000, 0)];
        assert_eq!(classes(&rows, true), expect(&[("agent (inferred)", 2)]));
        // Tied arrivals: the earlier row is the first turn; without it, 0 / 1000 is not high reuse.
        let rows = vec![turn("s5", 0, 1000, 1000), turn("s5", 0, 1000, 0)];
        assert_eq!(classes(&rows, true), expect(&[("chat (inferred)", 2)]));
    }

    #[test]
    fn reuse_falls_back_to_prefix_hashes() {
        // Session s: the second turn's blocks [1, 2, 3] hit 1 and 2 from the first: 2 / 3 ≥ 0.5.
        let hashed = |arrival, hashes: Vec<u64>| RequestRow {
            prefix_hashes: Some(hashes),
            block_size: Some(16),
            ..row(Some("s"), arrival)
        };
        let rows = vec![hashed(0, vec![1, 2]), hashed(5, vec![1, 2, 3])];
        assert_eq!(classes(&rows, true), expect(&[("agent (inferred)", 2)]));
        // Only 1 of 3 blocks reused: 1 / 3 < 0.5.
        let rows = vec![hashed(0, vec![1]), hashed(5, vec![1, 7, 8])];
        assert_eq!(classes(&rows, true), expect(&[("chat (inferred)", 2)]));
        // Replayed in arrival order, not row order: the row of arrival 0 comes second but is seen first.
        let rows = vec![hashed(5, vec![1, 2, 3]), hashed(0, vec![1, 2])];
        assert_eq!(classes(&rows, true), expect(&[("agent (inferred)", 2)]));
    }
}
