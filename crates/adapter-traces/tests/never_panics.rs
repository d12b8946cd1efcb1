//! Property tests: the trace adapters never panic and never drop a line silently.
//!
//! Every non-blank line must end up as a row, a diagnostic, or both.

use std::collections::BTreeSet;

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
use infertrace_adapter_traces::generate::{
    write_agentic_legacy, write_agentic_v2, write_applied_compute, write_mooncake,
};
use infertrace_adapter_traces::{AzureLlm, Mooncake, MooncakeDelta};
use proptest::prelude::*;

const MOONCAKE: &str = r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}"#;
const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,3180,8\n";

fn check(adapter: &dyn Adapter, bytes: &[u8], skip_header: bool) -> Result<(), TestCaseError> {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "fuzz.txt", options: &options, modified: None, sidecars: None };
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
        if is_agentic_header(line) {
            // The agentic Mooncake header line holds settings, not a request.
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

/// Whether `line` is a `dynamo.agentic_mooncake` header, which the Mooncake adapter reads as settings.
fn is_agentic_header(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("schema").and_then(|s| s.as_str().map(|s| s == "dynamo.agentic_mooncake")))
        .unwrap_or(false)
}

/// A small input of every Mooncake variant, by index.
fn variant(index: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    match index % 5 {
        0 | 1 => write_mooncake(&mut bytes, 2, 2, index % 5 == 1, 1),
        2 => write_agentic_v2(&mut bytes, 1, 4, 1),
        3 => write_agentic_legacy(&mut bytes, 2, 2, 1),
        _ => write_applied_compute(&mut bytes, 2, 1),
    }
    .unwrap();
    bytes
}

proptest! {
    #[test]
    fn mooncake_variants_mutated(
        index in 0u8..5,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let bytes = mutate(variant(index), &edits);
        check(&Mooncake, &bytes, false)?;
        check(&MooncakeDelta, &bytes, false)?;
    }

    #[test]
    fn mooncake_delta_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&MooncakeDelta, &bytes, false)?;
    }

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
