//! The infertrace adapter for everything else: any per-request CSV or JSONL log, read through a mapping file.
//!
//! A user with an in-house request log writes a small TOML [`Mapping`] that names, for each canonical `requests`
//! column, the input column (CSV header name) or key (JSON, dotted for nested objects) it comes from and how to
//! read it: a `clock` for times, a `unit` for durations, a `map` for status spellings, or a constant `value`.
//! `infertrace normalize log.csv --format csv --map mapping.toml` then reads it like any built-in format.
//! The format is documented on [`Mapping`]; `examples/mappings/` has mappings for the Azure LLM inference trace
//! 2024 and Vidur's trace CSV.
//!
//! Key design decision: the [`Adapter`] trait stays as it is. A [`MappedAdapter`] is an ordinary adapter value
//! built at run time from a kind ([`InputKind::Csv`] or [`InputKind::Jsonl`], the `--format` value and the
//! adapter's `id`) and a checked mapping; the CLI holds it and hands it to the pipeline as `&dyn Adapter`. It
//! never claims an input in [`detect`](Adapter::detect): a header alone cannot tell which mapping was meant, so
//! the user chooses with `--format`.
//!
//! What a mapping cannot get wrong at run time is refused when it is read ([`MappingError`], one line): unknown
//! canonical columns, units, clocks and status values, a column given both a source and a constant. What an
//! input can get wrong is a diagnostic, never an error:
//!
//! - a mapped column missing from a CSV header: one `missing-field` diagnostic on the header line, and the
//!   column is null in every row (reported once, not per line; `optional = true` silences it);
//! - a mapped JSON key missing from a record: `missing-field` for that line (unless `optional = true`), since
//!   JSON records need not share keys;
//! - a value that does not parse: `invalid-value` naming the source column and the canonical column, never the
//!   value; the rest of the row is kept;
//! - a record none of whose mapped columns has a usable value: one `unrecognized-line`, no row;
//! - a CSV record with another number of fields than the header: `malformed-csv`, no row.
//!
//! Empty CSV fields and JSON `null` are null, silently. `request_id` defaults to `<file stem>:<line>` when it is
//! not mapped or empty. `status` is `unknown` unless mapped; `source` is `csv` or `jsonl`; the manifest records
//! the mapping under `details.mapping` and its `name` as the input's `format_version`.
//!
//! Privacy: values are copied into rows only for the columns the user maps, by their choice; of the text
//! columns that means ids and names (`request_id`, `session_id`, `model`, `instance`, `prefill_instance`,
//! `decode_instance`) and `finish_reason`. `error` is not mappable because error messages can quote prompts.
//! Nothing else of a record is read, and diagnostics name columns, never values.
//!
//! Streams: CSV through the `csv` crate's reader one record at a time, JSONL one line at a time.

mod csv;
pub mod generate;
mod jsonl;
mod mapping;
mod record;

use std::collections::BTreeMap;
use std::io::BufRead;

use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};

pub use mapping::{Mapping, MappingError};

/// The container of a mapped input: what `--format` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// Comma-separated (or `[csv] delimiter`) values with a header line.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

impl InputKind {
    /// Both kinds, in the order `infertrace formats` lists them.
    pub const ALL: &'static [InputKind] = &[InputKind::Csv, InputKind::Jsonl];

    /// The `--format` value and the rows' `source`.
    pub const fn id(self) -> &'static str {
        match self {
            InputKind::Csv => "csv",
            InputKind::Jsonl => "jsonl",
        }
    }

    /// One line for `infertrace formats`.
    pub const fn description(self) -> &'static str {
        match self {
            InputKind::Csv => "Any per-request CSV with a header, read through --map <mapping.toml> (never detected)",
            InputKind::Jsonl => "Any per-request JSONL, read through --map <mapping.toml> (never detected)",
        }
    }
}

/// A per-request CSV or JSONL input read through a [`Mapping`].
#[derive(Debug, Clone)]
pub struct MappedAdapter {
    kind: InputKind,
    mapping: Mapping,
}

impl MappedAdapter {
    /// Reads inputs of `kind` through `mapping`.
    pub fn new(kind: InputKind, mapping: Mapping) -> Self {
        Self { kind, mapping }
    }
}

impl Adapter for MappedAdapter {
    fn id(&self) -> &'static str {
        self.kind.id()
    }

    fn description(&self) -> &'static str {
        self.kind.description()
    }

    fn detect_head(&self, _head: &Head<'_>) -> Option<Confidence> {
        None
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut rows = record::Rows::new(&self.mapping, self.kind.id(), ctx);
        let lines = match self.kind {
            InputKind::Csv => csv::parse(&self.mapping, &mut rows, input, sink)?,
            InputKind::Jsonl => jsonl::parse(&self.mapping, &mut rows, input, sink)?,
        };
        Ok(ParseReport {
            format_version: self.mapping.name().map(str::to_owned),
            clock_domain: rows.clock_domain(),
            year: None,
            lines,
            details: BTreeMap::from([("mapping".to_owned(), self.mapping.describe())]),
        })
    }
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, Diagnostic, DiagnosticKind, ParseOptions};
    use infertrace_schema::{ClockDomain, RequestRow, Status};

    use super::*;

    const NS: i64 = 1_000_000_000;
    // 2024-05-10T00:00:00Z as Unix seconds: 19,853 days × 86,400 s.
    const MAY_10_2024: i64 = 1_715_299_200;

    fn parse(kind: InputKind, mapping: &str, text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
        let adapter = MappedAdapter::new(kind, Mapping::from_toml(mapping).unwrap());
        let ctx = ParseContext { source_file: "logs/run-7.csv", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = adapter.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    fn found(sink: &CollectSink) -> Vec<(u64, &str, &str)> {
        sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect()
    }

    const IN_HOUSE: &str = r#"
        name = "in-house"
        [requests]
        request_id = "id"
        model = { value = "llama-3.1-8b" }
        arrival_time = { from = "sent", clock = "epoch_ms" }
        ttft_s = { from = "ttft", unit = "ms" }
        e2e_s = { from = "latency" }
        input_tokens = "prompt_tokens"
        output_tokens = "completion_tokens"
        status = { from = "result", map = { success = "ok", failed = "error" } }
    "#;

    #[test]
    fn an_in_house_csv_maps_column_by_column() {
        // Column order differs from the mapping's; `prompt` is never read.
        let text = "id,prompt,sent,ttft,latency,prompt_tokens,completion_tokens,result\n\
                    a1,\"hello, world\",1715299200250,125,1.5,512,64,success\n\
                    a2,\"line one\nline two\",1715299201000,80.5,0.75,100,0,failed\n";
        let (sink, report) = parse(InputKind::Csv, IN_HOUSE, text, ParseOptions::default());
        assert_eq!(found(&sink), []);
        let expected = [
            RequestRow {
                request_id: "a1".into(),
                source: "csv".into(),
                model: Some("llama-3.1-8b".into()),
                arrival_time: Some(MAY_10_2024 * NS + 250_000_000),
                ttft_s: Some(0.125),
                e2e_s: Some(1.5),
                input_tokens: Some(512),
                output_tokens: Some(64),
                status: Status::Ok,
                source_file: Some("logs/run-7.csv".into()),
                source_line: Some(2),
                ..RequestRow::default()
            },
            RequestRow {
                request_id: "a2".into(),
                source: "csv".into(),
                model: Some("llama-3.1-8b".into()),
                arrival_time: Some((MAY_10_2024 + 1) * NS),
                ttft_s: Some(0.0805),
                e2e_s: Some(0.75),
                input_tokens: Some(100),
                output_tokens: Some(0),
                status: Status::Error,
                source_file: Some("logs/run-7.csv".into()),
                // The record starts on line 3; its quoted prompt runs onto line 4.
                source_line: Some(3),
                ..RequestRow::default()
            },
        ];
        assert_eq!(sink.requests, expected);
        assert_eq!(report.format_version.as_deref(), Some("in-house"));
        assert_eq!(report.clock_domain, ClockDomain::Utc);
        assert_eq!(report.lines, 4);
        assert_eq!(report.details["mapping"]["requests"]["ttft_s"], serde_json::json!({"from": "ttft", "unit": "ms"}));
    }

    #[test]
    fn the_same_mapping_reads_nested_jsonl() {
        let mapping = r#"
            [requests]
            request_id = "meta.id"
            session_id = { from = "meta.conversation", optional = true }
            arrival_time = { from = "t", clock = "relative_s" }
            input_tokens = "usage.prompt_tokens"
            cached_tokens = { from = "usage.prompt_tokens_details.cached_tokens", optional = true }
            output_tokens = "usage.completion_tokens"
            finish_reason = "choices.0.finish_reason"
            kv_transfer_bytes = { from = "kv.bytes", optional = true }
        "#;
        let text = concat!(
            r#"{"meta": {"id": "r-1", "conversation": 42}, "t": 0.5, "usage": {"prompt_tokens": 900, "#,
            r#""completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 512}}, "#,
            r#""choices": [{"finish_reason": "stop", "text": "…"}]}"#,
            "\n\n",
            r#"{"meta": {"id": 7587888160958627596}, "t": "2", "usage": {"prompt_tokens": 10, "#,
            r#""completion_tokens": null}, "choices": [], "kv": {"bytes": 18446744073709551615}}"#,
            "\n",
        );
        let start = MAY_10_2024 * NS;
        let (sink, report) =
            parse(InputKind::Jsonl, mapping, text, ParseOptions { start_ns: start, ..Default::default() });
        assert_eq!(found(&sink), [(3, "missing-field", "`choices.0.finish_reason` (for finish_reason) is missing")]);
        let rows: Vec<_> = sink
            .requests
            .iter()
            .map(|r| {
                let ids = (r.request_id.as_str(), r.session_id.as_deref(), r.source_line);
                (ids, r.arrival_time, r.input_tokens, r.cached_tokens, r.output_tokens, r.finish_reason.as_deref())
            })
            .collect();
        assert_eq!(
            rows,
            [
                (("r-1", Some("42"), Some(1)), Some(start + 500_000_000), Some(900), Some(512), Some(20), Some("stop")),
                // A u64 id beyond 2^53 keeps every digit; a numeric string reads as a number.
                (("7587888160958627596", None, Some(3)), Some(start + 2 * NS), Some(10), None, None, None),
            ]
        );
        assert_eq!(sink.requests[1].kv_transfer_bytes, Some(u64::MAX));
        assert_eq!(sink.requests[0].source, "jsonl");
        assert_eq!(report.clock_domain, ClockDomain::Relative);
        assert_eq!(report.lines, 3);
        assert_eq!(report.format_version, None);
    }

    #[test]
    fn a_column_missing_from_the_header_is_reported_once() {
        let text = "id,sent,prompt_tokens,completion_tokens,result\n\
                    a1,1715299200000,5,6,success\n\
                    a2,1715299200001,7,8,success\n";
        let (sink, _) = parse(InputKind::Csv, IN_HOUSE, text, ParseOptions::default());
        assert_eq!(
            found(&sink),
            [
                (1, "missing-field", "the header has no column `ttft` (mapped to ttft_s); it is null in every row"),
                (1, "missing-field", "the header has no column `latency` (mapped to e2e_s); it is null in every row"),
            ]
        );
        assert_eq!(sink.requests.len(), 2);
        assert!(sink.requests.iter().all(|r| r.ttft_s.is_none() && r.input_tokens.is_some()));
    }

    #[test]
    fn bad_values_are_diagnostics_and_the_rest_of_the_row_is_kept() {
        let text = "id,sent,ttft,latency,prompt_tokens,completion_tokens,result\n\
                    a1,soon,-5,1.5,512,64,success\n\
                    ,soon,,,x,,\n\
                    a3,1715299200000,1,1,1,1\n\
                    \n\
                    a5,1715299200000,,,x,y,maybe\n\
                    ,1715299200000,,,,,\n";
        let (sink, report) = parse(InputKind::Csv, IN_HOUSE, text, ParseOptions::default());
        let count = "a whole number from 0 to 4294967295";
        let status = "a status of the mapping's map or one of ok, error, aborted, timeout, unknown";
        assert_eq!(
            found(&sink),
            [
                (2, "invalid-value", "`sent` (for arrival_time) is not a number of milliseconds".to_owned()),
                (2, "invalid-value", "`ttft` (for ttft_s) is not a non-negative number".to_owned()),
                (3, "unrecognized-line", "no mapped column has a usable value".to_owned()),
                (4, "malformed-csv", "6 fields, expected 7 as in the header".to_owned()),
                (6, "invalid-value", format!("`prompt_tokens` (for input_tokens) is not {count}")),
                (6, "invalid-value", format!("`completion_tokens` (for output_tokens) is not {count}")),
                (6, "invalid-value", format!("`result` (for status) is not {status}")),
            ]
            .iter()
            .map(|(l, k, m)| (*l, *k, m.as_str()))
            .collect::<Vec<_>>()
        );
        let kept: Vec<_> = sink.requests.iter().map(|r| (r.request_id.as_str(), r.e2e_s, r.arrival_time)).collect();
        // The last record has no id: it gets `<file stem>:<line>`.
        let may_10 = Some(MAY_10_2024 * NS);
        assert_eq!(kept, [("a1", Some(1.5), None), ("a5", None, may_10), ("run-7:7", None, may_10)]);
        assert_eq!(report.lines, 7);
    }

    #[test]
    fn malformed_jsonl_lines_are_diagnostics() {
        let bytes = b"{\"id\": \"a\", \"prompt_tokens\": 3}\n[1, 2]\n{\"id\": \nnot json\n\n\
                      {\"id\": {\"x\": 1}, \"prompt_tokens\": NaN}\n\xff\n";
        let mapping = "[requests]\nrequest_id = \"id\"\ninput_tokens = \"prompt_tokens\"\n";
        let options = ParseOptions::default();
        let adapter = MappedAdapter::new(InputKind::Jsonl, Mapping::from_toml(mapping).unwrap());
        let ctx = ParseContext { source_file: "x.jsonl", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let _ = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
        let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(
            kinds,
            [
                (2, DiagnosticKind::NotARecord),
                (3, DiagnosticKind::MalformedJson),
                (4, DiagnosticKind::MalformedJson),
                (6, DiagnosticKind::UnrecognizedLine),
                (7, DiagnosticKind::InvalidUtf8),
            ]
        );
        assert_eq!(sink.requests.len(), 1);
    }

    #[test]
    fn user_text_reaches_only_the_columns_the_user_mapped() {
        let text = "id,prompt,sent,ttft,latency,prompt_tokens,completion_tokens,result,note\n\
                    CANARY-id,CANARY-prompt,CANARY-time,CANARY-ttft,1,2,3,CANARY-status,CANARY-note\n";
        let (sink, _) = parse(InputKind::Csv, IN_HOUSE, text, ParseOptions::default());
        assert_eq!(sink.requests.len(), 1);
        assert_eq!(sink.requests[0].request_id, "CANARY-id", "the user mapped the id");
        let mut row = sink.requests[0].clone();
        row.request_id.clear();
        assert!(!format!("{row:?}").contains("CANARY"), "{row:?}");
        for Diagnostic { message, .. } in &sink.diagnostics {
            assert!(!message.contains("CANARY"), "{message}");
        }
        assert_eq!(sink.diagnostics.len(), 3, "time, ttft and status are invalid values");
    }

    #[test]
    fn zoneless_datetimes_make_the_domain_an_assumed_offset() {
        let mapping = "[requests]\narrival_time = { from = \"when\", clock = \"datetime\" }\n";
        let options = ParseOptions { utc_offset: "+02:00".parse().unwrap(), ..Default::default() };
        let (sink, report) = parse(InputKind::Csv, mapping, "when\n2024-05-10 02:00:00\n", options);
        assert_eq!(sink.requests[0].arrival_time, Some(MAY_10_2024 * NS));
        assert_eq!(report.clock_domain, ClockDomain::AssumedOffset);
        // With no readable time, the mapping's clock decides.
        let (_, report) = parse(InputKind::Csv, mapping, "when\n", options);
        assert_eq!(report.clock_domain, ClockDomain::AssumedOffset);
    }

    #[test]
    fn a_tab_delimiter_and_a_byte_order_mark() {
        let mapping = "[csv]\ndelimiter = \"\\t\"\n[requests]\ninput_tokens = \"in\"\noutput_tokens = \"out\"\n";
        let (sink, report) = parse(InputKind::Csv, mapping, "\u{feff}in\tout\r\n3\t4\r\n", ParseOptions::default());
        assert_eq!(found(&sink), []);
        assert_eq!((sink.requests[0].input_tokens, sink.requests[0].output_tokens), (Some(3), Some(4)));
        assert_eq!(sink.requests[0].request_id, "run-7:2");
        assert_eq!(report.lines, 2);
    }

    #[test]
    fn jsonl_byte_order_marks_are_dropped_where_files_were_joined() {
        // Two files joined with `cat`, each starting with a byte-order mark; a blank line and a non-object between.
        let mapping = "[requests]\ninput_tokens = \"in\"\n";
        let text = "\u{feff}{\"in\": 3}\n\n\u{feff}{\"in\": 4}\n[5]\n";
        let (sink, report) = parse(InputKind::Jsonl, mapping, text, ParseOptions::default());
        assert_eq!(found(&sink), [(4, "not-a-record", "JSON but not an object")]);
        let rows: Vec<_> = sink.requests.iter().map(|r| (r.source_line, r.input_tokens)).collect();
        assert_eq!(rows, [(Some(1), Some(3)), (Some(3), Some(4))]);
        assert_eq!(report.lines, 4);
    }

    #[test]
    fn never_detected() {
        let adapter = MappedAdapter::new(InputKind::Csv, Mapping::from_toml(IN_HOUSE).unwrap());
        assert_eq!(adapter.detect(b"id,sent,ttft\n"), None);
        assert_eq!((adapter.id(), InputKind::Jsonl.id()), ("csv", "jsonl"));
    }
}
