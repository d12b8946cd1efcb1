//! Mooncake JSONL traces.
//!
//! Format (FAST25-release/README.md and the paper's appendix A), one request per line:
//!
//! ```text
//! {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, …, 2354]}
//! ```
//!
//! `timestamp` is the arrival in milliseconds from the start of the trace, `input_length` and `output_length` are
//! tokens, and `hash_ids` are 512-token blocks, each id standing for the block *and all blocks before it* (chained
//! prefix hashes remapped to small integers), so they are stored as `prefix_hashes` unchanged with `block_size` 512.
//! A trailing partial block has an id too: `len(hash_ids) == ceil(input_length / 512)`.
//! Dynamo and AIPerf replay the same lines with optional `request_id` and `session_id`, which are kept.

use std::borrow::Cow;
use std::io::BufRead;
use std::sync::LazyLock;

use infertrace_adapter::time::millis_to_nanos;
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, json,
    utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};
use regex::bytes::Regex;
use serde::Deserialize;

/// Tokens per `hash_ids` block in every Mooncake trace.
pub(crate) const BLOCK_SIZE: u32 = 512;

/// The Mooncake JSONL trace adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mooncake;

/// One line. Fields are optional so that a missing one is reported by name rather than as a parse failure.
#[derive(Debug, Deserialize)]
struct Record<'a> {
    timestamp: Option<f64>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    hash_ids: Option<Vec<u64>>,
    #[serde(borrow)]
    request_id: Option<Id<'a>>,
    #[serde(borrow)]
    session_id: Option<Id<'a>>,
}

/// Ids are strings in Dynamo's fixtures but may be numbers elsewhere.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Id<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Number(u64),
}

impl Id<'_> {
    fn into_string(self) -> String {
        match self {
            Id::Text(text) => text.into_owned(),
            Id::Number(n) => n.to_string(),
        }
    }
}

static SIGNATURE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r#""input_length"\s*:\s*\d"#).expect("valid regex"),
        Regex::new(r#""output_length"\s*:\s*\d"#).expect("valid regex"),
        // RAGPulse uses the same keys but a map of hash ids and string timestamps; Mooncake has a list.
        Regex::new(r#""hash_ids"\s*:\s*\["#).expect("valid regex"),
    ]
});
static NUMERIC_TIMESTAMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""timestamp"\s*:\s*-?\d"#).expect("valid regex"));

impl Adapter for Mooncake {
    fn id(&self) -> &'static str {
        "mooncake"
    }

    fn description(&self) -> &'static str {
        "Mooncake/Kimi JSONL trace (FAST'25, arXiv; Dynamo/AIPerf replay form): ms arrivals, 512-token hash_ids"
    }

    fn detect(&self, head: &[u8]) -> Option<Confidence> {
        let line = crate::first_line(head);
        if !line.starts_with(b"{") || !SIGNATURE.iter().all(|re| re.is_match(line)) {
            return None;
        }
        Some(if NUMERIC_TIMESTAMP.is_match(line) { Confidence::High } else { Confidence::Low })
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let stem = ctx.source_stem();
        let mut lines = LineReader::new(input);
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            if line.trim_ascii().is_empty() {
                continue;
            }
            let diagnostic = |kind, message: String| Diagnostic::new(line_no, kind, message);
            let record: Record<'_> = match serde_json::from_str(line) {
                Ok(record) => record,
                Err(e) => {
                    sink.diagnostic(diagnostic(DiagnosticKind::MalformedJson, json::error_message(&e)));
                    continue;
                }
            };
            let Some(input_length) = record.input_length else {
                sink.diagnostic(diagnostic(DiagnosticKind::MissingField, "missing field `input_length`".into()));
                continue;
            };
            let mut row = RequestRow {
                request_id: match record.request_id {
                    Some(id) => id.into_string(),
                    None => format!("{stem}:{line_no}"),
                },
                source: self.id().to_owned(),
                session_id: record.session_id.map(Id::into_string),
                status: Status::Unknown,
                source_file: Some(ctx.source_file.to_owned()),
                source_line: Some(line_no),
                ..RequestRow::default()
            };
            row.input_tokens = to_tokens(input_length, "input_length", line_no, sink);
            row.output_tokens = record.output_length.and_then(|n| to_tokens(n, "output_length", line_no, sink));
            if let Some(ms) = record.timestamp {
                row.arrival_time = millis_to_nanos(ms).and_then(|ns| ns.checked_add(ctx.options.start_ns));
                if row.arrival_time.is_none() {
                    sink.diagnostic(diagnostic(
                        DiagnosticKind::InvalidValue,
                        "`timestamp` is out of the representable range".into(),
                    ));
                }
            }
            if let Some(hash_ids) = record.hash_ids {
                let needed = input_length.div_ceil(u64::from(BLOCK_SIZE));
                if hash_ids.len() as u64 != needed {
                    sink.diagnostic(diagnostic(
                        DiagnosticKind::Inconsistent,
                        format!(
                            "`hash_ids` has {} blocks but input_length {input_length} spans {needed} blocks of {BLOCK_SIZE} tokens",
                            hash_ids.len()
                        ),
                    ));
                }
                row.prefix_hashes = Some(hash_ids);
                row.block_size = Some(BLOCK_SIZE);
            }
            sink.request(row)?;
        }
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Relative,
            year: None,
            lines: lines.lines_read(),
            details: Default::default(),
        })
    }
}

fn to_tokens(n: u64, field: &str, line: u64, sink: &mut dyn Sink) -> Option<u32> {
    let tokens = u32::try_from(n).ok();
    if tokens.is_none() {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::InvalidValue,
            format!("`{field}` exceeds {} tokens", u32::MAX),
        ));
    }
    tokens
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    fn parse(text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
        let mut sink = CollectSink::default();
        let ctx = ParseContext { source_file: "traces/conv.jsonl", options: &options, modified: None };
        let report = Mooncake.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    #[test]
    fn maps_the_readme_example_row() {
        // The example row of the Mooncake README, hash_ids written out.
        let ids: Vec<u64> = (46..=57).chain([2353, 2354]).collect();
        let line = format!(r#"{{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": {ids:?}}}"#);
        let (sink, report) = parse(&line, ParseOptions::default());
        assert_eq!(sink.diagnostics, []);
        assert_eq!(
            report,
            ParseReport {
                format_version: None,
                clock_domain: ClockDomain::Relative,
                year: None,
                lines: 1,
                details: Default::default()
            }
        );
        let expected = RequestRow {
            request_id: "conv:1".into(),
            source: "mooncake".into(),
            arrival_time: Some(27_482_000_000),
            input_tokens: Some(6955),
            output_tokens: Some(52),
            prefix_hashes: Some(ids),
            block_size: Some(512),
            status: Status::Unknown,
            source_file: Some("traces/conv.jsonl".into()),
            source_line: Some(1),
            ..RequestRow::default()
        };
        assert_eq!(sink.requests, [expected]);
    }

    #[test]
    fn start_shifts_arrivals_and_ids_are_kept() {
        let options = ParseOptions { start_ns: 1_700_000_000_000_000_000, ..ParseOptions::default() };
        let text = r#"{"request_id":"d2","session_id":"delta-session","timestamp":10,"delay":5,"input_length":8,"output_length":4,"hash_ids":[202]}"#;
        let (sink, _) = parse(text, options);
        assert_eq!(sink.diagnostics, []);
        let row = &sink.requests[0];
        assert_eq!(row.request_id, "d2");
        assert_eq!(row.session_id.as_deref(), Some("delta-session"));
        assert_eq!(row.arrival_time, Some(1_700_000_000_010_000_000));
    }

    #[test]
    fn bad_lines_become_diagnostics_with_line_numbers() {
        let text = [
            r#"{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}"#,
            r#"{"timestamp": 0, "input_length": "#,
            "",
            r#"{"schema":"dynamo.agentic_mooncake","version":2}"#,
            r#"{"timestamp": 3000, "input_length": 600, "output_length": 5, "hash_ids": [0]}"#,
            r#"{"timestamp": 1, "input_length": 5000000000, "output_length": "many", "hash_ids": []}"#,
            r#"{"timestamp": 1e300, "input_length": 1, "output_length": 1}"#,
            r#"{"timestamp": 1, "input_length": 5000000000, "output_length": 3}"#,
        ]
        .join("\n");
        let (sink, report) = parse(&text, ParseOptions::default());
        assert_eq!(report.lines, 8);
        let found: Vec<(u64, &str)> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str())).collect();
        assert_eq!(
            found,
            [
                (2, "malformed-json"),
                (4, "missing-field"),
                (5, "inconsistent"),
                (6, "malformed-json"),
                (7, "invalid-value"),
                (8, "invalid-value"),
            ]
        );
        assert_eq!(
            sink.diagnostics[2].message,
            "`hash_ids` has 1 blocks but input_length 600 spans 2 blocks of 512 tokens"
        );
        assert_eq!(sink.diagnostics[4].message, "`timestamp` is out of the representable range");
        assert_eq!(sink.diagnostics[5].message, "`input_length` exceeds 4294967295 tokens");
        // Line 5 is kept despite its inconsistency, line 7 without an arrival, line 8 without input tokens.
        let kept: Vec<(u64, Option<i64>)> =
            sink.requests.iter().map(|r| (r.source_line.unwrap(), r.arrival_time)).collect();
        assert_eq!(kept, [(1, Some(0)), (5, Some(3_000_000_000)), (7, None), (8, Some(1_000_000))]);
        assert_eq!(sink.requests[3].input_tokens, None);
        assert_eq!(sink.requests[3].output_tokens, Some(3));
    }

    #[test]
    fn detects_mooncake_but_not_ragpulse_or_csv() {
        let mooncake = br#"{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2"#;
        assert_eq!(Mooncake.detect(mooncake), Some(Confidence::High));
        let dynamo = br#"{"request_id":"m1","timestamp":0,"input_length":32,"output_length":4,"hash_ids":[101]}"#;
        assert_eq!(Mooncake.detect(dynamo), Some(Confidence::High));
        let ragpulse =
            br#"{"timestamp": "0", "input_length": 10, "output_length": 2, "hash_ids": {"sys_prompt": [1]}}"#;
        assert_eq!(Mooncake.detect(ragpulse), None);
        assert_eq!(Mooncake.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"), None);
        assert_eq!(Mooncake.detect(b""), None);
    }
}
