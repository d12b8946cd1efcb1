//! BurstGPT end to end: generated traces parse with no diagnostics and the counts the generator reports, the
//! fixtures under `testdata/traces/burstgpt/` give the rows worked out by hand, and no input makes the adapter
//! panic or drop a line silently.

use std::collections::BTreeSet;
use std::path::Path;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::BurstGpt;
use infertrace_adapter_traces::burstgpt::generate::write_burstgpt;
use infertrace_schema::{Status, WorkloadClass};
use proptest::prelude::*;

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = BurstGpt.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

#[test]
fn generated_traces_of_both_generations() {
    for (v2, version) in [(false, "1.x"), (true, "2.0")] {
        let mut bytes = Vec::new();
        let generated = write_burstgpt(&mut bytes, 2_000, v2, 17).unwrap();
        assert_eq!(BurstGpt.detect(&bytes), Some(Confidence::High));
        let (sink, report) = parse(&bytes, "generated.csv");
        assert_eq!(sink.diagnostics, [], "{version}");
        assert_eq!(report.format_version.as_deref(), Some(version));
        assert_eq!(report.lines, generated.lines);
        assert_eq!(sink.requests.len() as u64, generated.requests);
        let sum = |f: fn(&infertrace_schema::RequestRow) -> Option<u32>| {
            sink.requests.iter().map(|r| u64::from(f(r).unwrap())).sum::<u64>()
        };
        assert_eq!(sum(|r| r.input_tokens), generated.input_tokens);
        assert_eq!(sum(|r| r.output_tokens), generated.output_tokens);
        let failures = sink.requests.iter().filter(|r| r.status == Status::Error).count() as u64;
        assert_eq!((failures, report.details["failures"].as_u64()), (generated.failures, Some(generated.failures)));
        assert!(generated.failures > 0);
        if v2 {
            assert_eq!(report.details["sessions"].as_u64(), Some(generated.sessions));
            assert!(sink.requests.iter().any(|r| r.turn.is_some_and(|t| t > 0)));
        } else {
            assert!(!report.details.contains_key("sessions"));
        }
    }
}

fn fixture(relative: &str) -> (CollectSink, ParseReport) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/traces/burstgpt").join(relative);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(BurstGpt.detect(&bytes), Some(Confidence::High), "{relative} is detected");
    parse(&bytes, relative)
}

const S: i64 = 1_000_000_000;

#[test]
fn first_rows_of_release_2_0() {
    let (sink, report) = fixture("2.0/BurstGPT_3_head.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("2.0"));
    let rows: Vec<_> = sink
        .requests
        .iter()
        .map(|r| (r.arrival_time, r.e2e_s, r.model.as_deref(), r.input_tokens, r.output_tokens, r.turn))
        .collect();
    assert_eq!(
        rows,
        [
            (Some(19_440_110 * S), Some(43.0), Some("GPT-4"), Some(906), Some(446), Some(0)),
            (Some(19_440_161 * S), Some(2.0), Some("ChatGPT"), Some(36), Some(29), Some(0)),
            (Some(19_440_192 * S), Some(8.0), Some("GPT-4"), Some(1779), Some(123), Some(0)),
            (Some(19_440_254 * S), Some(3.0), Some("ChatGPT"), Some(935), Some(178), Some(0)),
        ]
    );
    assert_eq!(sink.requests[0].session_id.as_deref(), Some("1722ac82-0a46-4bf0-aa08-89794e7a2b3f"));
    assert_eq!(report.details["sessions"], 4);
}

#[test]
fn failures_and_api_rows() {
    let (sink, report) = fixture("2.0/failures_shape.csv");
    assert_eq!(sink.diagnostics, []);
    let rows: Vec<_> =
        sink.requests.iter().map(|r| (r.status, r.session_id.is_some(), r.turn, r.workload_class)).collect();
    assert_eq!(
        rows,
        [
            (Status::Error, false, None, None),
            (Status::Ok, false, None, None),
            (Status::Error, true, Some(0), Some(WorkloadClass::Chat)),
            (Status::Ok, true, Some(1), Some(WorkloadClass::Chat)),
        ]
    );
    assert_eq!(report.details["failures"], 2);
}

#[test]
fn first_rows_of_release_1() {
    let (sink, report) = fixture("1.x/BurstGPT_1_head.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("1.x"));
    let arrivals: Vec<_> = sink.requests.iter().map(|r| r.arrival_time.unwrap() / S).collect();
    assert_eq!(arrivals, [5, 45, 118]);
}

const SAMPLE: &str = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
19440110.0,1722ac82-0a46-4bf0-aa08-89794e7a2b3f,43,GPT-4,906,446,1352,Conversation log\n\
19440192.0,,8,GPT-4,1779,0,1779,API log\n";

/// Every non-blank line after the header ends up as a row, a diagnostic, or both.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(bytes, "fuzz.csv");
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    let mut header_seen = false;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines {
            break;
        }
        if line.iter().all(|b| b.is_ascii_whitespace()) || line == b"\xef\xbb\xbf" {
            continue;
        }
        if !header_seen && !accounted.contains(&number) {
            header_seen = true;
            continue;
        }
        header_seen = true;
        prop_assert!(accounted.contains(&number), "line {} dropped: {:?}", number, String::from_utf8_lossy(line));
    }
    Ok(())
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = BurstGpt.detect(&bytes);
    }

    #[test]
    fn mutated_traces_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        check(&mutate(SAMPLE.as_bytes().to_vec(), &edits))?;
    }

    #[test]
    fn mutated_generated_traces_never_panic(
        v2 in any::<bool>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = Vec::new();
        write_burstgpt(&mut bytes, 6, v2, 3).unwrap();
        check(&mutate(bytes, &edits))?;
    }
}
