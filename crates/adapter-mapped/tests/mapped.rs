//! Mapped inputs end to end: generated logs parse with no diagnostics and the counts the generator reports, and
//! random or mutated inputs never panic and never lose a line silently.

use std::collections::BTreeSet;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_mapped::generate::{CSV_MAPPING, Generated, JSONL_MAPPING, write_csv, write_jsonl};
use infertrace_adapter_mapped::{InputKind, MappedAdapter, Mapping};
use infertrace_schema::{ClockDomain, Status};
use proptest::prelude::*;

fn adapter(kind: InputKind, mapping: &str) -> MappedAdapter {
    MappedAdapter::new(kind, Mapping::from_toml(mapping).unwrap())
}

fn parse(adapter: &dyn Adapter, bytes: &[u8]) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "generated.log", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn check_generated(sink: &CollectSink, report: &ParseReport, generated: Generated) {
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.lines, generated.lines);
    assert_eq!(sink.requests.len() as u64, generated.requests);
    let input: u64 = sink.requests.iter().map(|r| u64::from(r.input_tokens.unwrap())).sum();
    assert_eq!(input, generated.input_tokens);
}

#[test]
fn generated_csv_logs() {
    let mut bytes = Vec::new();
    let generated = write_csv(&mut bytes, 500, 7).unwrap();
    let (sink, report) = parse(&adapter(InputKind::Csv, CSV_MAPPING), &bytes);
    check_generated(&sink, &report, generated);
    assert!(generated.lines > generated.requests + 1, "some prompts span two lines");
    assert_eq!(report.format_version.as_deref(), Some("generated-csv"));
    assert_eq!(report.clock_domain, ClockDomain::AssumedOffset);
    let ids: Vec<&str> = sink.requests.iter().map(|r| r.request_id.as_str()).take(2).collect();
    assert_eq!(ids, ["r0", "r1"]);
    assert!(sink.requests.iter().all(|r| r.arrival_time.is_some() && r.ttft_s.is_some() && r.e2e_s.is_some()));
    assert!(sink.requests.iter().any(|r| r.status == Status::Aborted));
    // Rows are numbered by the line their record starts on, continuation lines included.
    let lines: Vec<u64> = sink.requests.iter().filter_map(|r| r.source_line).collect();
    assert_eq!(&lines[..6], [2, 3, 4, 5, 7, 8], "the fourth record's prompt takes two lines");
}

#[test]
fn generated_jsonl_logs() {
    let mut bytes = Vec::new();
    let generated = write_jsonl(&mut bytes, 500, 11).unwrap();
    let (sink, report) = parse(&adapter(InputKind::Jsonl, JSONL_MAPPING), &bytes);
    check_generated(&sink, &report, generated);
    assert_eq!(report.clock_domain, ClockDomain::Utc);
    assert_eq!(sink.requests.iter().filter(|r| r.cached_tokens.is_some()).count(), 250);
    assert!(sink.requests.iter().all(|r| r.http_status == Some(200) && r.finish_reason.is_some()));
    assert!(sink.requests.iter().all(|r| r.first_token_time > r.arrival_time && r.completion_time.is_some()));
}

/// Every non-blank line of a JSONL input ends up as a row, a diagnostic, or both.
fn check_jsonl(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(&adapter(InputKind::Jsonl, JSONL_MAPPING), bytes);
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines {
            break;
        }
        let blank = line.iter().all(|b| b.is_ascii_whitespace()) || line == b"\xef\xbb\xbf";
        prop_assert!(blank || accounted.contains(&number), "line {} was dropped silently", number);
    }
    Ok(())
}

/// A CSV input never panics, and when it has records after the header, something comes out of them.
fn check_csv(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(&adapter(InputKind::Csv, CSV_MAPPING), bytes);
    prop_assert!(report.lines <= bytes.len() as u64 + 1);
    for d in &sink.diagnostics {
        prop_assert!(d.line >= 1 && d.line <= report.lines, "diagnostic line {} of {}", d.line, report.lines);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check_jsonl(&bytes)?;
        check_csv(&bytes)?;
    }

    #[test]
    fn mutated_jsonl_never_panics(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut bytes = Vec::new();
        write_jsonl(&mut bytes, 6, 3).unwrap();
        check_jsonl(&mutate(bytes, &edits))?;
    }

    #[test]
    fn mutated_csv_never_panics(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..12)) {
        let mut bytes = Vec::new();
        write_csv(&mut bytes, 8, 5).unwrap();
        check_csv(&mutate(bytes, &edits))?;
    }
}
