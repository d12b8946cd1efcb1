//! End-to-end behaviour of `normalize`, with values computed independently of the code (by hand from the format
//! description, or with a separate Python reading of the original corpus files, noted at each constant).

mod common;

use std::fs;
use std::path::PathBuf;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{TimestampNanosecondType, UInt32Type, UInt64Type};
use infertrace_adapter::ParseOptions;
use infertrace_adapter::time::parse_rfc3339;
use infertrace_schema::{Dataset, request};

fn input(relative: &str) -> PathBuf {
    common::testdata().join(relative)
}

fn u32_sum(dataset: &Dataset, column: &str) -> u64 {
    let array = dataset.requests.column_by_name(column).unwrap().as_primitive::<UInt32Type>();
    array.iter().flatten().map(u64::from).sum()
}

fn times(dataset: &Dataset) -> Vec<i64> {
    let array = dataset.requests.column_by_name(request::ARRIVAL_TIME).unwrap();
    array.as_primitive::<TimestampNanosecondType>().iter().map(|t| t.unwrap()).collect()
}

#[test]
fn mooncake_conversation_trace_has_every_request_with_its_hash_ids() {
    let dir = tempfile::tempdir().unwrap();
    let report = common::run(&[input("mooncake/fast25/conversation_trace.jsonl.zst")], &dir.path().join("ds"));
    let dataset = Dataset::open(&report.output).unwrap();
    // Computed with Python's json module over the original file: 12,031 rows, Σ input_length 144,793,823,
    // Σ output_length 4,122,048, Σ len(hash_ids) 288,500, last timestamp 3,536,999 ms.
    assert_eq!(dataset.requests.num_rows(), 12_031);
    assert_eq!(report.manifest.rows.requests, 12_031);
    assert_eq!(u32_sum(&dataset, request::INPUT_TOKENS), 144_793_823);
    assert_eq!(u32_sum(&dataset, request::OUTPUT_TOKENS), 4_122_048);
    let hashes = dataset.requests.column_by_name(request::PREFIX_HASHES).unwrap().as_list::<i32>();
    assert_eq!(hashes.values().len(), 288_500);
    let first: Vec<u64> = hashes.value(0).as_primitive::<UInt64Type>().values().to_vec();
    assert_eq!(first, (0..=13).collect::<Vec<u64>>());
    let block_sizes = dataset.requests.column_by_name(request::BLOCK_SIZE).unwrap().as_primitive::<UInt32Type>();
    assert!(block_sizes.iter().all(|b| b == Some(512)));
    assert_eq!(times(&dataset).last(), Some(&3_536_999_000_000), "ms offsets from the 1970 epoch");
    assert_eq!(report.manifest.inputs[0].diagnostics.total, 0);
}

#[test]
fn start_moves_mooncake_arrivals() {
    let dir = tempfile::tempdir().unwrap();
    let start = parse_rfc3339("2024-05-10T00:00:00Z").unwrap();
    let options = ParseOptions { start_ns: start, ..ParseOptions::default() };
    let report = common::run_with(&[input("mooncake/dynamo-replay/mooncake.jsonl")], &dir.path().join("ds"), options);
    let dataset = Dataset::open(&report.output).unwrap();
    // 2024-05-10T00:00:00Z is 1,715,299,200 s after the epoch; the second request arrives 20 ms later.
    assert_eq!(times(&dataset), [1_715_299_200_000_000_000, 1_715_299_200_020_000_000]);
    assert_eq!(report.manifest.assumptions.start, "2024-05-10T00:00:00Z");
}

#[test]
fn azure_2023_traces_have_every_request_to_the_microsecond() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = [
        input("azure-llm/2023/AzureLLMInferenceTrace_code.csv.gz"),
        input("azure-llm/2023/AzureLLMInferenceTrace_conv.csv.zst"),
    ];
    let report = common::run(&inputs, &dir.path().join("ds"));
    let counts: Vec<u64> = report.manifest.inputs.iter().map(|i| i.records.requests).collect();
    assert_eq!(counts, [8_819, 19_366]);
    let dataset = Dataset::open(&report.output).unwrap();
    // Python over the original CSVs: Σ ContextTokens 18,059,974 + 22,361,870, Σ GeneratedTokens 245,896 + 4,088,665;
    // first and last TIMESTAMP of code and conv as UTC nanoseconds.
    assert_eq!(u32_sum(&dataset, request::INPUT_TOKENS), 18_059_974 + 22_361_870);
    assert_eq!(u32_sum(&dataset, request::OUTPUT_TOKENS), 245_896 + 4_088_665);
    let times = times(&dataset);
    assert_eq!(times[0], 1_700_158_623_979_960_000, "2023-11-16 18:17:03.9799600");
    assert_eq!(times[8_818], 1_700_162_059_928_016_000, "2023-11-16 19:14:19.9280160");
    assert_eq!(times[8_819], 1_700_158_546_680_590_000, "2023-11-16 18:15:46.6805900");
    assert_eq!(times[8_819 + 19_365], 1_700_162_048_402_527_000, "2023-11-16 19:14:08.4025270");
    for entry in &report.manifest.inputs {
        assert_eq!(entry.format_version.as_deref(), Some("2023"));
        assert_eq!(entry.clock_domain, infertrace_schema::ClockDomain::AssumedOffset);
    }
    assert_eq!(report.manifest.inputs[0].compression, "gzip");
    assert_eq!(report.manifest.inputs[1].compression, "zstd");
}

#[test]
fn a_dynamo_request_trace_and_the_aiperf_export_of_the_same_run_share_request_ids() {
    let dir = tempfile::tempdir().unwrap();
    let report = common::run(&[input("dynamo/same-run")], &dir.path().join("ds"));
    let formats: Vec<&str> = report.manifest.inputs.iter().map(|i| i.format.as_str()).collect();
    assert_eq!(formats, ["dynamo-request-trace", "aiperf"]);
    let dataset = Dataset::open(&report.output).unwrap();
    let ids = dataset.requests.column_by_name(request::REQUEST_ID).unwrap().as_string::<i32>();
    let first_tokens =
        dataset.requests.column_by_name(request::FIRST_TOKEN_TIME).unwrap().as_primitive::<TimestampNanosecondType>();
    let rows: Vec<(&str, Option<i64>)> = ids.iter().map(|id| id.unwrap()).zip(first_tokens.iter()).collect();
    // The three x_request_ids of the fixture, server rows first, then client rows. Both sides put the first token
    // at the same instant for the completed requests: Dynamo's ttft_ms (100 ms) + transfer (25 ms) after the
    // frontend received the request, and AIPerf's TTFT (126.5 ms) after it sent it, 1.5 ms earlier.
    let ids = [
        "7609a2e7-aa53-4ab1-98f4-f35ecafefd25",
        "c35e4b1b-6775-4750-b875-94cd68e5ec15",
        "5b0e77aa-b305-423f-88d5-c00da1892599",
    ];
    let server: Vec<&str> = rows[..3].iter().map(|r| r.0).collect();
    let client: Vec<&str> = rows[3..].iter().map(|r| r.0).collect();
    assert_eq!((server, client), (ids.to_vec(), ids.to_vec()));
    let t0 = 1_767_225_600_000_000_000; // 2026-01-01T00:00:00Z
    assert_eq!((rows[0].1, rows[3].1), (Some(t0 + 125_000_000), Some(t0 + 125_000_000)));
    // 90 ms + 80 ms + 20 ms; 88.5 ms + 101.5 ms.
    assert_eq!((rows[2].1, rows[5].1), (Some(t0 + 190_000_000), Some(t0 + 190_000_000)));
}

#[test]
fn same_inputs_give_byte_identical_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = common::valid_inputs();
    assert!(inputs.len() >= 8, "{inputs:?}");
    let first = common::run(&inputs, &dir.path().join("one"));
    let second = common::run(&inputs, &dir.path().join("two"));
    for name in ["requests.parquet", "samples.parquet", "cache_events.parquet", "manifest.json"] {
        let a = fs::read(first.output.join(name)).unwrap();
        let b = fs::read(second.output.join(name)).unwrap();
        assert!(a == b, "{name} differs between two runs");
    }
}

#[test]
fn no_input_content_reaches_any_output() {
    // bad_lines.jsonl has a wrong-typed field whose value is a canary string.
    let dir = tempfile::tempdir().unwrap();
    let report = common::run(&[input("mooncake/malformed/bad_lines.jsonl")], &dir.path().join("ds"));
    assert_eq!(report.manifest.inputs[0].diagnostics.total, 7);
    for entry in fs::read_dir(&report.output).unwrap() {
        let bytes = fs::read(entry.unwrap().path()).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"CANARY"), "canary found in an output");
    }
}

#[test]
fn manifest_records_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let report = common::run(&[input("mooncake/dynamo-replay/mooncake.jsonl")], &dir.path().join("ds"));
    let text = fs::read_to_string(report.output.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = &manifest["inputs"][0];
    assert_eq!(entry["path"], "../../testdata/mooncake/dynamo-replay/mooncake.jsonl");
    assert_eq!(entry["bytes"], 175);
    // sha256sum testdata/mooncake/dynamo-replay/mooncake.jsonl
    assert_eq!(entry["sha256"], "eb40484ba40d9ada82ebe85d5c9ad5c7f2be060e76769e6f0d15f0c625b40267");
    assert_eq!(entry["format"], "mooncake");
    assert_eq!(entry["clock_domain"], "relative");
    assert_eq!(entry["lines"], 2);
    assert_eq!(manifest["rows"]["requests"], 2);
    assert_eq!(manifest["assumptions"]["utc_offset"], "+00:00");
    assert_eq!(manifest["schema_version"], 1);
    assert!(!text.contains(&*std::env::current_dir().unwrap().to_string_lossy()), "absolute path in manifest");
}

#[test]
fn an_input_read_twice_is_written_once_and_listed_as_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    fs::create_dir(&traces).unwrap();
    // The Dynamo replay fixture holds 2 requests; a copy under another name has the same content, and a file of the
    // same size with one byte changed does not.
    let original = fs::read(input("mooncake/dynamo-replay/mooncake.jsonl")).unwrap();
    fs::write(traces.join("a.jsonl"), &original).unwrap();
    fs::write(traces.join("b-copy.jsonl"), &original).unwrap();
    let mut changed = original.clone();
    let digit = changed.iter().position(u8::is_ascii_digit).unwrap();
    changed[digit] = if changed[digit] == b'9' { b'8' } else { changed[digit] + 1 };
    fs::write(traces.join("c-changed.jsonl"), &changed).unwrap();
    let a = traces.join("a.jsonl");
    // The same file named twice, then its directory (which holds it, its copy and the changed file).
    let report = common::run(&[a.clone(), a.clone(), traces.clone()], &dir.path().join("ds"));
    let read: Vec<&str> = report.manifest.inputs.iter().map(|i| i.path.as_str()).collect();
    // A named file outside the working directory is recorded by its name, a directory's files under the
    // directory's name.
    assert_eq!(read, ["a.jsonl", "traces/c-changed.jsonl"]);
    let skipped: Vec<(&str, &str)> =
        report.manifest.skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect();
    let reason = "same content as a.jsonl";
    assert_eq!(skipped, [("a.jsonl", reason), ("traces/a.jsonl", reason), ("traces/b-copy.jsonl", reason)]);
    assert_eq!(report.manifest.rows.requests, 4, "2 requests of a.jsonl and 2 of the changed file");
    assert_eq!(Dataset::open(&report.output).unwrap().requests.num_rows(), 4);
}
