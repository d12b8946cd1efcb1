//! Property tests: the trace adapters never panic and never drop a line silently.
//!
//! Every non-blank line must end up as a row, a diagnostic, or both.

use std::collections::BTreeSet;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
use infertrace_adapter_traces::{AzureLlm, Mooncake};
use proptest::prelude::*;

const MOONCAKE: &str = r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}"#;
const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,3180,8\n";

fn check(adapter: &dyn Adapter, bytes: &[u8], skip_header: bool) -> Result<(), TestCaseError> {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "fuzz.txt", options: &options, modified: None };
    let mut sink = CollectSink::default();
    let report = adapter.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    let accounted: BTreeSet<u64> =
        sink.requests.iter().filter_map(|r| r.source_line).chain(sink.diagnostics.iter().map(|d| d.line)).collect();
    let mut header_seen = !skip_header;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines {
            break;
        }
        let blank = line.iter().all(|b| b.is_ascii_whitespace()) || line == b"\xef\xbb\xbf";
        if blank {
            continue;
        }
        if !header_seen {
            // The first non-blank line of a CSV is its header (or reported as missing).
            header_seen = true;
            continue;
        }
        prop_assert!(
            accounted.contains(&number),
            "line {} was dropped silently: {:?}",
            number,
            String::from_utf8_lossy(line)
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn mooncake_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&Mooncake, &bytes, false)?;
    }

    #[test]
    fn mooncake_mutated_lines(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        let text = format!("{MOONCAKE}\n{MOONCAKE}\n");
        check(&Mooncake, &mutate(text.into_bytes(), &edits), false)?;
    }

    #[test]
    fn azure_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&AzureLlm, &bytes, true)?;
    }

    #[test]
    fn azure_mutated_lines(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        check(&AzureLlm, &mutate(AZURE.as_bytes().to_vec(), &edits), true)?;
    }

    #[test]
    fn detection_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Mooncake.detect(&bytes);
        let _ = AzureLlm.detect(&bytes);
    }
}
