//! `infertrace sql`: queries over normalized datasets, several at once and partitioned, in every output format.
//! Expected values are read by hand from `testdata/mooncake/fast25/conversation_trace_excerpt.jsonl` (14 requests:
//! 75,194 input and 4,474 output tokens, the longest prompt 9,418 tokens with 145 output tokens and 19 blocks, at
//! 5,999 ms).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::testdata;

fn excerpt() -> PathBuf {
    testdata().join("mooncake/fast25/conversation_trace_excerpt.jsonl")
}

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

/// Runs `infertrace` with `args`, which must succeed, and returns its standard output.
fn ok(args: &[&str]) -> String {
    let output = infertrace(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

fn normalize(inputs: &[PathBuf], output: &Path, partition_by: Option<&str>) {
    let mut args: Vec<String> = vec!["normalize".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".into(), output.display().to_string()]);
    if let Some(key) = partition_by {
        args.extend(["--partition-by".into(), key.into()]);
    }
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn sums_and_counts_of_one_dataset_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    normalize(&[excerpt()], &ds, None);
    let csv = ok(&[
        "sql",
        "SELECT count(*) AS n, sum(input_tokens) AS input, sum(output_tokens) AS output, max(input_tokens) AS longest \
         FROM requests",
        path(&ds),
        "--format",
        "csv",
    ]);
    assert_eq!(csv, "n,input,output,longest\n14,75194,4474,9418\n");
}

#[test]
fn several_datasets_and_a_partitioned_one_are_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, by_date) = (dir.path().join("plain"), dir.path().join("by-date"));
    normalize(&[excerpt()], &plain, None);
    normalize(&[excerpt()], &by_date, Some("date"));
    assert!(by_date.join("requests/date=1970-01-01").is_dir());
    let csv = ok(&[
        "sql",
        "SELECT arrival_time, count(*) AS n, sum(input_tokens) AS input FROM requests GROUP BY arrival_time \
         ORDER BY arrival_time",
        path(&plain),
        path(&by_date),
        "--format",
        "csv",
    ]);
    // Six requests at 0 ms, five at 3,000 ms and three at 5,999 ms, twice each.
    let expected = "arrival_time,n,input\n\
                    1970-01-01T00:00:00Z,12,";
    assert!(csv.starts_with(expected), "{csv}");
    let counts: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap()).collect();
    assert_eq!(counts, ["12", "10", "6"], "{csv}");
    let times: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(times, ["1970-01-01T00:00:00Z", "1970-01-01T00:00:03Z", "1970-01-01T00:00:05.999Z"]);
}

#[test]
fn json_lines_table_and_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    normalize(&[excerpt()], &ds, None);
    let longest = "SELECT input_tokens, output_tokens, cardinality(prefix_hashes) AS blocks FROM requests \
                   ORDER BY input_tokens DESC LIMIT 1";
    let json = ok(&["sql", longest, path(&ds), "--format", "json"]);
    assert_eq!(json, "{\"input_tokens\":9418,\"output_tokens\":145,\"blocks\":19}\n");

    let table = ok(&["sql", "SELECT input_tokens FROM requests ORDER BY input_tokens", path(&ds), "--max-rows", "2"]);
    assert!(table.ends_with("14 rows, the first 2 shown (--max-rows, or --format csv for all)\n"), "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("| ") && !l.contains("input_tokens")).count(), 2, "{table}");

    let out = dir.path().join("result.parquet");
    ok(&["sql", "SELECT request_id, input_tokens FROM requests", path(&ds), "--format", "parquet", "-o", path(&out)]);
    let file = fs::File::open(&out).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader as _;
    assert_eq!(reader.metadata().file_metadata().num_rows(), 14);
    let names: Vec<String> =
        fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
}

#[test]
fn every_table_counts_what_the_manifest_counts() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // A log with samples and a KV-event stream with cache events.
    let inputs = [
        testdata().join("sglang/0.4.3/sglang-issue-3909_v0.4.3_decode.log"),
        testdata().join("vllm/kv-events-0.24/subscriber.jsonl"),
    ];
    for input in &inputs {
        assert!(input.is_file(), "{}", input.display());
    }
    normalize(&inputs, &ds, None);
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(ds.join("manifest.json")).unwrap()).unwrap();
    for table in ["requests", "samples", "cache_events"] {
        let csv = ok(&["sql", &format!("SELECT count(*) AS n FROM {table}"), path(&ds), "--format", "csv"]);
        assert_eq!(csv, format!("n\n{}\n", manifest["rows"][table]), "{table}");
    }
    assert_ne!(manifest["rows"]["samples"], 0);
    assert_ne!(manifest["rows"]["cache_events"], 0);
}

#[test]
fn errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    normalize(&[excerpt()], &ds, None);
    for (args, needle) in [
        (vec!["sql", "SELECT * FROM nope", path(&ds)], "table 'datafusion.public.nope' not found"),
        (vec!["sql", "SELEC 1", path(&ds)], "invalid query"),
        (vec!["sql", "SELECT 1", path(&ds), "--format", "parquet"], "--format parquet needs -o FILE"),
        (vec!["sql", "SELECT 1", "no-such-dataset"], "cannot read dataset no-such-dataset"),
    ] {
        let output = infertrace(&args);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{needle:?} not in {stderr:?}");
    }
}
