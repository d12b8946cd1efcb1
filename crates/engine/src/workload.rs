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

use std::collections::{BTreeMap, HashMap, HashSet};

use infertrace_schema::{RequestRow, WorkloadClass};
use serde::Serialize;

/// Fraction of prompt tokens reused above which reuse is high.
pub const HIGH_REUSE: f64 = 0.5;

/// Prompt length, in tokens, from which a prompt is long.
pub const LONG_PROMPT_TOKENS: u32 = 4096;

/// A row's class and whether it was inferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Class {
    /// The class.
    pub class: WorkloadClass,
    /// Whether the rules of this module chose it (the row recorded none).
    pub inferred: bool,
}

impl Class {
    /// The group key of `--by workload_class`: `agent`, or `agent (inferred)`.
    pub fn key(self) -> String {
        if self.inferred { format!("{} (inferred)", self.class.as_str()) } else { self.class.as_str().to_owned() }
    }
}

/// Rows of one class: how many recorded it and how many were inferred.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    /// Rows whose `workload_class` was recorded.
    pub stored: u64,
    /// Rows whose class was inferred.
    pub inferred: u64,
}

/// The class of every row of `rows` (same order), stored or inferred; `slo_given` is whether an SLO applies.
pub fn classify(rows: &[&RequestRow], slo_given: bool) -> Vec<Class> {
    let reuse = row_reuse(rows);
    let high_reuse_sessions = high_reuse_sessions(rows, &reuse);
    rows.iter()
        .zip(&reuse)
        .map(|(row, reuse)| {
            if let Some(class) = row.workload_class {
                return Class { class, inferred: false };
            }
            let in_session = row.session_id.as_deref().is_some_and(|s| high_reuse_sessions.contains(s));
            let class = if row.tool_calls.is_some_and(|n| n > 0) || in_session {
                WorkloadClass::Agent
            } else if row.retrieved_docs.is_some_and(|n| n > 0)
                || (row.input_tokens.is_some_and(|n| n >= LONG_PROMPT_TOKENS)
                    && reuse.is_some_and(|(reused, input)| reused < HIGH_REUSE * input))
            {
                WorkloadClass::Rag
            } else if !slo_given && not_streamed(row) {
                WorkloadClass::Batch
            } else {
                WorkloadClass::Chat
            };
            Class { class, inferred: true }
        })
        .collect()
}

/// Rows per class, stored and inferred; every class is listed.
pub fn count(classes: &[Class]) -> BTreeMap<WorkloadClass, ClassCount> {
    let mut counts: BTreeMap<WorkloadClass, ClassCount> =
        WorkloadClass::ALL.iter().map(|&c| (c, ClassCount::default())).collect();
    for class in classes {
        let entry = counts.entry(class.class).or_default();
        if class.inferred {
            entry.inferred += 1;
        } else {
            entry.stored += 1;
        }
    }
    counts
}

fn not_streamed(row: &RequestRow) -> bool {
    match (row.ttft_s, row.e2e_s, row.output_tokens) {
        (Some(ttft), Some(e2e), Some(output)) => output > 1 && ttft >= e2e,
        _ => false,
    }
}

/// (reused tokens, input tokens) of each row, when known.
fn row_reuse(rows: &[&RequestRow]) -> Vec<Option<(f64, f64)>> {
    // Unbounded replay of prefix hashes in arrival order (rows without an arrival last, ties in row order).
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i].arrival_time.is_none(), rows[i].arrival_time));
    let mut seen = HashSet::new();
    let mut from_hashes: Vec<Option<(f64, f64)>> = vec![None; rows.len()];
    for i in order {
        let (Some(hashes), Some(block)) = (&rows[i].prefix_hashes, rows[i].block_size) else { continue };
        if hashes.is_empty() {
            continue;
        }
        let hits = hashes.iter().filter(|&&h| !seen.insert(h)).count();
        from_hashes[i] = Some((hits as f64 * f64::from(block), hashes.len() as f64 * f64::from(block)));
    }
    rows.iter()
        .zip(from_hashes)
        .map(|(row, hashes)| match (row.cached_tokens, row.input_tokens) {
            (Some(cached), Some(input)) if input > 0 => Some((f64::from(cached.min(input)), f64::from(input))),
            _ => hashes,
        })
        .collect()
}

/// Sessions of two or more rows whose later rows reuse at least [`HIGH_REUSE`] of their prompt tokens.
fn high_reuse_sessions<'r>(rows: &[&'r RequestRow], reuse: &[Option<(f64, f64)>]) -> HashSet<&'r str> {
    let mut sessions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        if let Some(session) = row.session_id.as_deref() {
            sessions.entry(session).or_default().push(i);
        }
    }
    sessions
        .into_iter()
        .filter(|(_, members)| members.len() >= 2)
        .filter(|(_, members)| {
            let first =
                members.iter().copied().min_by_key(|&i| (rows[i].arrival_time.is_none(), rows[i].arrival_time, i));
            let (reused, input) = members
                .iter()
                .filter(|&&i| Some(i) != first)
                .filter_map(|&i| reuse[i])
                .fold((0.0, 0.0), |(r, n), (reused, input)| (r + reused, n + input));
            input > 0.0 && reused >= HIGH_REUSE * input
        })
        .map(|(session, _)| session)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(session: Option<&str>, arrival: i64) -> RequestRow {
        RequestRow {
            request_id: format!("r{arrival}"),
            source: "t".into(),
            session_id: session.map(Into::into),
            arrival_time: Some(arrival),
            ..RequestRow::default()
        }
    }

    fn classes(rows: &[RequestRow], slo_given: bool) -> Vec<String> {
        let refs: Vec<&RequestRow> = rows.iter().collect();
        classify(&refs, slo_given).into_iter().map(Class::key).collect()
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
            [
                "rag",
                "agent (inferred)",
                "rag (inferred)",
                "rag (inferred)",
                "chat (inferred)",
                "batch (inferred)",
                "chat (inferred)",
                "chat (inferred)"
            ]
        );
        // With an SLO, nothing is batch.
        assert_eq!(classes(&rows, true)[5], "chat (inferred)");
        let counts = count(&classify(&rows.iter().collect::<Vec<_>>(), false));
        assert_eq!(counts[&WorkloadClass::Rag], ClassCount { stored: 1, inferred: 2 });
        assert_eq!(counts[&WorkloadClass::Chat], ClassCount { stored: 0, inferred: 3 });
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
        let got = classes(&rows, true);
        assert_eq!(got[..3], ["agent (inferred)"; 3]);
        assert_eq!(got[3..], ["chat (inferred)"; 3]);
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
        assert_eq!(classes(&rows, true), ["agent (inferred)"; 2]);
        // Only 1 of 3 blocks reused: 1 / 3 < 0.5.
        let rows = vec![hashed(0, vec![1]), hashed(5, vec![1, 7, 8])];
        assert_eq!(classes(&rows, true), ["chat (inferred)"; 2]);
    }
}
