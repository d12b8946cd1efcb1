//! Azure LLM inference traces (Azure/AzurePublicDataset).
//!
//! Format generations, told apart by the header and the first timestamp:
//!
//! ```text
//! 2023  TIMESTAMP,ContextTokens,GeneratedTokens
//!       2023-11-16 18:17:03.9799600,4808,10             (7 fraction digits = 100 ns, no zone)
//! 2024  TIMESTAMP,ContextTokens,GeneratedTokens
//!       2024-05-10 00:00:00.009930+00:00,2048,28        (explicit offset, fraction present or absent)
//! 2025  TIMESTAMP,NumImages,ContextTokens,GeneratedTokens   (multimodal; NumImages has no canonical column)
//! ```
//!
//! Columns are found by header name, so column order does not matter. Timestamps without a zone get the
//! `--utc-offset` assumption and the input's clock domain is `assumed-offset`.

use std::io::BufRead;

use infertrace_adapter::parallel::map_lines;
use infertrace_adapter::time::{Instant, parse_datetime};
use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, Head, LineReader, ParseContext, ParseError, ParseReport, Sink,
    UtcOffset, utf8_line,
};
use infertrace_schema::{ClockDomain, RequestRow, Status};

/// The Azure LLM inference CSV trace adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct AzureLlm;

const TIMESTAMP: &str = "TIMESTAMP";
const CONTEXT_TOKENS: &str = "ContextTokens";
const GENERATED_TOKENS: &str = "GeneratedTokens";
const NUM_IMAGES: &str = "NumImages";
const MAX_FIELDS: usize = 16;

/// Positions of the columns used.
#[derive(Debug, Clone, Copy)]
struct Columns {
    timestamp: usize,
    context: usize,
    generated: usize,
}

impl Columns {
    const DEFAULT: Columns = Columns { timestamp: 0, context: 1, generated: 2 };

    fn from_header(header: &[&str]) -> Option<Self> {
        let find = |name: &str| header.iter().position(|&field| field == name);
        Some(Columns {
            timestamp: find(TIMESTAMP)?,
            context: find(CONTEXT_TOKENS)?,
            generated: find(GENERATED_TOKENS)?,
        })
    }

    fn width(self) -> usize {
        self.timestamp.max(self.context).max(self.generated) + 1
    }
}

/// Which timestamp shapes were seen, to name the generation and the clock domain.
#[derive(Debug, Default)]
struct Zones {
    with: u64,
    without: u64,
}

impl Adapter for AzureLlm {
    fn id(&self) -> &'static str {
        "azure-llm"
    }

    fn description(&self) -> &'static str {
        "Azure LLM inference trace CSV (2023 Splitwise, 2024 DynamoLLM week, 2025 multimodal): TIMESTAMP,ContextTokens,GeneratedTokens"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        let line = crate::first_line(head.bytes());
        let has = |name: &str| line.split(|&b| b == b',').any(|f| f.trim_ascii() == name.as_bytes());
        (has(TIMESTAMP) && has(CONTEXT_TOKENS) && has(GENERATED_TOKENS)).then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        // Lines, not the csv crate: these files have no quoting or embedded newlines, and the csv crate's record
        // positions skip blank lines, which would put diagnostics on the wrong line numbers.
        let stem = ctx.source_stem();
        let mut lines = LineReader::new(input);
        let mut multimodal = false;
        let mut zones = Zones::default();
        // The header (or the first record, when there is none) settles the columns; every later line is read on
        // any thread and folded in order.
        let mut columns = None;
        while columns.is_none() {
            let Some((line_no, bytes)) = lines.next_bytes()? else { break };
            let Some(line) = utf8_line(line_no, bytes, sink) else { continue };
            let line = if line_no == 1 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
            if line.trim_ascii().is_empty() {
                continue; // A blank line carries nothing to lose.
            }
            let (buf, count) = split(line);
            let fields = &buf[..count];
            let header = Columns::from_header(fields);
            multimodal = fields.contains(&NUM_IMAGES);
            columns = Some(header.unwrap_or(Columns::DEFAULT));
            if header.is_none() {
                sink.diagnostic(Diagnostic::new(
                    line_no,
                    DiagnosticKind::MissingField,
                    "no TIMESTAMP,ContextTokens,GeneratedTokens header; assuming that column order",
                ));
                let record = Record::read(fields, Columns::DEFAULT, ctx.options.utc_offset);
                if let Some(row) = self.row(record, line_no, stem, ctx, &mut zones, sink) {
                    sink.request(row)?;
                }
            }
        }
        if let Some(cols) = columns {
            let offset = ctx.options.utc_offset;
            let prepare = |bytes: &[u8]| {
                let line = infertrace_adapter::utf8(bytes)?;
                if line.trim_ascii().is_empty() {
                    return None;
                }
                let (buf, count) = split(line);
                Some(Record::read(&buf[..count], cols, offset))
            };
            map_lines(&mut lines, prepare, |line_no, bytes, record| {
                let Some(record) = record else {
                    // Blank (nothing to lose), or not UTF-8 (which `utf8_line` reports).
                    let _ = utf8_line(line_no, bytes, sink);
                    return Ok(());
                };
                if let Some(row) = self.row(record, line_no, stem, ctx, &mut zones, sink) {
                    sink.request(row)?;
                }
                Ok::<_, ParseError>(())
            })?;
        }
        let (format_version, clock_domain) = match (zones.with, zones.without, multimodal) {
            (_, _, true) => ("2025-multimodal", domain(&zones)),
            (0, _, false) => ("2023", ClockDomain::AssumedOffset),
            (_, 0, false) => ("2024", ClockDomain::Utc),
            _ => ("mixed", ClockDomain::AssumedOffset),
        };
        Ok(ParseReport {
            format_version: Some(format_version.to_owned()),
            clock_domain,
            year: None,
            lines: lines.lines_read(),
            details: Default::default(),
        })
    }
}

/// A line's first [`MAX_FIELDS`] comma-separated fields, trimmed and unquoted, and how many there are.
fn split(line: &str) -> ([&str; MAX_FIELDS], usize) {
    // The known columns are among the first few; later ones (if any) are never looked at.
    let mut buf = [""; MAX_FIELDS];
    let mut count = 0;
    for field in line.split(',').take(MAX_FIELDS) {
        buf[count] = unquote(infertrace_adapter::fragments::trim(field));
        count += 1;
    }
    (buf, count)
}

/// `field.trim_matches('"')`, byte by byte: a quote is ASCII, so the cuts are at character boundaries.
fn unquote(field: &str) -> &str {
    let bytes = field.as_bytes();
    let start = bytes.iter().position(|&b| b != b'"').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b'"').map_or(start, |last| last + 1);
    &field[start..end]
}

/// What a data line holds, read without the fold's state (on any thread).
#[derive(Debug, Clone, Copy)]
enum Record {
    /// Too few fields for the columns.
    Short { fields: usize, width: usize },
    /// The three values, each `None` when unreadable.
    Values { arrival: Option<Instant>, context: Option<u32>, generated: Option<u32> },
}

impl Record {
    fn read(fields: &[&str], cols: Columns, offset: UtcOffset) -> Record {
        if fields.len() < cols.width() {
            return Record::Short { fields: fields.len(), width: cols.width() };
        }
        Record::Values {
            arrival: parse_datetime(fields[cols.timestamp], offset).ok(),
            context: fields[cols.context].parse::<u32>().ok(),
            generated: fields[cols.generated].parse::<u32>().ok(),
        }
    }
}

fn domain(zones: &Zones) -> ClockDomain {
    if zones.without == 0 && zones.with > 0 { ClockDomain::Utc } else { ClockDomain::AssumedOffset }
}

impl AzureLlm {
    /// One data record as a request row, or `None` (with a diagnostic) when nothing in it is usable.
    fn row(
        &self,
        record: Record,
        line: u64,
        stem: &str,
        ctx: &ParseContext<'_>,
        zones: &mut Zones,
        sink: &mut dyn Sink,
    ) -> Option<RequestRow> {
        let (arrival, context, generated) = match record {
            Record::Values { arrival, context, generated } => (arrival, context, generated),
            Record::Short { fields, width } => {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::MalformedCsv,
                    format!("{fields} fields, expected at least {width}"),
                ));
                return None;
            }
        };
        if arrival.is_none() && context.is_none() && generated.is_none() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::UnrecognizedLine,
                "no usable TIMESTAMP, ContextTokens or GeneratedTokens",
            ));
            return None;
        }
        for (value_ok, name, expected) in [
            (arrival.is_some(), TIMESTAMP, "a timestamp YYYY-MM-DD HH:MM:SS[.f][±HH:MM]"),
            (context.is_some(), CONTEXT_TOKENS, "a token count"),
            (generated.is_some(), GENERATED_TOKENS, "a token count"),
        ] {
            if !value_ok {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::InvalidValue,
                    format!("{name} is not {expected}"),
                ));
            }
        }
        if let Some(instant) = arrival {
            if instant.had_zone { zones.with += 1 } else { zones.without += 1 }
        }
        Some(RequestRow {
            request_id: infertrace_adapter::line_id(stem, line),
            source: self.id().to_owned(),
            arrival_time: arrival.map(|a| a.nanos),
            input_tokens: context,
            output_tokens: generated,
            status: Status::Unknown,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{CollectSink, ParseOptions, UtcOffset};
    use proptest::strategy::Strategy as _;

    use super::*;

    fn parse(text: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
        let mut sink = CollectSink::default();
        let ctx = ParseContext { source_file: "azure/code.csv", options: &options, modified: None, sidecars: None };
        let report = AzureLlm.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        (sink, report)
    }

    // 2023-11-16T18:17:03Z and 2024-05-10T00:00:00Z as Unix seconds.
    const NOV_16_181703: i64 = 1_700_158_623;
    const MAY_10_2024: i64 = 1_715_299_200;

    #[test]
    fn first_rows_of_the_2023_code_trace() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:17:03.9799600,4808,10\n\
                    2023-11-16 18:17:04.0319600,3180,8";
        let (sink, report) = parse(text, ParseOptions::default());
        assert_eq!(sink.diagnostics, []);
        assert_eq!(
            report,
            ParseReport {
                format_version: Some("2023".into()),
                clock_domain: ClockDomain::AssumedOffset,
                year: None,
                lines: 3,
                details: Default::default(),
            }
        );
        let rows: Vec<_> = sink
            .requests
            .iter()
            .map(|r| (r.request_id.as_str(), r.arrival_time, r.input_tokens, r.output_tokens))
            .collect();
        assert_eq!(
            rows,
            [
                ("code:2", Some(NOV_16_181703 * 1_000_000_000 + 979_960_000), Some(4808), Some(10)),
                ("code:3", Some((NOV_16_181703 + 1) * 1_000_000_000 + 31_960_000), Some(3180), Some(8)),
            ]
        );
    }

    #[test]
    fn the_2024_form_has_an_offset_and_mixed_precision() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\
                    2024-05-10 00:00:00+00:00,2048,28\r\n\
                    2024-05-10 00:00:00.009930+00:00,1024,1\r\n";
        // The assumed offset must not apply to timestamps that carry their own.
        let options = ParseOptions { utc_offset: "-07:00".parse::<UtcOffset>().unwrap(), ..ParseOptions::default() };
        let (sink, report) = parse(text, options);
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("2024"));
        assert_eq!(report.clock_domain, ClockDomain::Utc);
        let arrivals: Vec<_> = sink.requests.iter().map(|r| r.arrival_time.unwrap()).collect();
        assert_eq!(arrivals, [MAY_10_2024 * 1_000_000_000, MAY_10_2024 * 1_000_000_000 + 9_930_000]);
    }

    #[test]
    fn columns_are_found_by_name_in_the_multimodal_form() {
        let text = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2024-10-15 00:00:00.5+00:00,2,1500,80\n";
        let (sink, report) = parse(text, ParseOptions::default());
        assert_eq!(report.format_version.as_deref(), Some("2025-multimodal"));
        assert_eq!(sink.requests[0].input_tokens, Some(1500));
        assert_eq!(sink.requests[0].output_tokens, Some(80));
    }

    #[test]
    fn bad_records_are_counted_and_good_fields_kept() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:17:03.9799600,4808,10\n\
                    2023-11-16 18:17:04,-5,8\n\
                    2023-11-16 18:17:05\n\
                    TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    \n\
                    yesterday,12,3\n";
        let (sink, report) = parse(text, ParseOptions::default());
        let found: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect();
        assert_eq!(
            found,
            [
                (3, "invalid-value", "ContextTokens is not a token count"),
                (4, "malformed-csv", "1 fields, expected at least 3"),
                (5, "unrecognized-line", "no usable TIMESTAMP, ContextTokens or GeneratedTokens"),
                (7, "invalid-value", "TIMESTAMP is not a timestamp YYYY-MM-DD HH:MM:SS[.f][±HH:MM]"),
            ]
        );
        let kept: Vec<_> =
            sink.requests.iter().map(|r| (r.source_line, r.input_tokens, r.arrival_time.is_some())).collect();
        assert_eq!(kept, [(Some(2), Some(4808), true), (Some(3), None, true), (Some(7), Some(12), false)]);
        assert_eq!(report.lines, 7);
    }

    #[test]
    fn a_headerless_file_is_parsed_in_the_documented_order_with_a_diagnostic() {
        let (sink, _) = parse("2023-11-16 18:17:03,1,2\n2023-11-16 18:17:04,3,x\n", ParseOptions::default());
        let diagnostics: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(diagnostics, [(1, DiagnosticKind::MissingField), (2, DiagnosticKind::InvalidValue)]);
        let rows: Vec<_> = sink.requests.iter().map(|r| (r.arrival_time, r.input_tokens, r.output_tokens)).collect();
        let s = 1_000_000_000;
        assert_eq!(rows, [(Some(NOV_16_181703 * s), Some(1), Some(2)), (Some((NOV_16_181703 + 1) * s), Some(3), None)]);
    }

    #[test]
    fn a_generated_trace_reads_back_whole_and_in_order() {
        let mut text = Vec::new();
        let generated = crate::generate::write_azure(&mut text, 5_000, 11).unwrap();
        let options = ParseOptions { utc_offset: UtcOffset::UTC, ..ParseOptions::default() };
        let (sink, report) = parse(std::str::from_utf8(&text).unwrap(), options);
        assert_eq!(sink.diagnostics, []);
        assert_eq!((report.lines, sink.requests.len()), (5_001, 5_000));
        assert_eq!(
            sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum::<u64>(),
            generated.input_tokens
        );
        // Row i arrives 50 ms × i plus under 40 ms after 2023-11-16T18:00:00Z (1,700,157,600 s).
        for (i, row) in sink.requests.iter().enumerate() {
            let after = row.arrival_time.unwrap() - 1_700_157_600 * 1_000_000_000 - i as i64 * 50_000_000;
            assert!((0..40_000_000).contains(&after), "row {i} arrives {after} ns after its slot");
            assert_eq!(row.source_line, Some(i as u64 + 2));
        }
    }

    #[test]
    fn detects_by_header() {
        assert_eq!(AzureLlm.detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16"), Some(Confidence::High));
        assert_eq!(
            AzureLlm.detect(b"\xef\xbb\xbfTIMESTAMP,NumImages,ContextTokens,GeneratedTokens\r\n"),
            Some(Confidence::High)
        );
        assert_eq!(AzureLlm.detect(b"Timestamp,Model,Request tokens,Response tokens\n"), None);
        assert_eq!(AzureLlm.detect(br#"{"timestamp": 0}"#), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4096, ..Default::default() })]

        /// The fields `str::trim` and `trim_matches('"')` give, white space of every kind and quotes included.
        #[test]
        fn split_agrees_with_trim_and_trim_matches(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => "[a-z0-9:. -]{0,6}",
                    2 => proptest::sample::select(vec![",", ",", "\"", "\"\"", ", ", " ,"]).prop_map(str::to_owned),
                    1 => "[ \t\u{b}\u{c}\u{85}\u{a0}\u{2003}é\"]{1,3}",
                ],
                0..24,
            ),
        ) {
            let line = parts.concat();
            let want: Vec<&str> = line.split(',').take(MAX_FIELDS).map(|f| f.trim().trim_matches('"')).collect();
            let (fields, n) = split(&line);
            proptest::prop_assert_eq!(&fields[..n], &want[..], "{:?}", line);
        }
    }
}
