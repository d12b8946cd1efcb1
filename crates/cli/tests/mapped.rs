//! `--format csv|jsonl --map <mapping.toml>` through the binary: the example mappings and the fixtures under
//! `testdata/mapped/` give values worked out by hand, and mistakes in a mapping are one-line errors naming it.
//!
//! Inputs under `testdata/mapped/` cannot be auto-detected, so the golden test and `cargo xtask normalize` skip
//! them; this file is where they are tested.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use arrow::array::AsArray;
use arrow::datatypes::{Float64Type, TimestampNanosecondType, UInt32Type};
use infertrace_schema::{Dataset, request};

const AZURE_2024: &str = "../../examples/mappings/azure-2024.toml";
const VIDUR: &str = "../../examples/mappings/vidur.toml";

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `normalize` with `args` into a fresh directory and opens the dataset.
fn normalize(args: &[&str]) -> (Dataset, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut all = vec!["normalize"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", path(&out)]);
    let output = infertrace(&all);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    (Dataset::open(&out).unwrap(), dir)
}

/// Asserts a failure with exit code 2 and a single `error:` line containing every one of `needles`.
fn assert_error(output: &Output, needles: &[&str]) {
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(output));
    let text = stderr(output);
    assert_eq!(text.lines().count(), 1, "one line expected: {text}");
    assert!(text.starts_with("error: "), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} not in {text:?}");
    }
}

fn times(dataset: &Dataset, column: &str) -> Vec<Option<i64>> {
    let array = dataset.requests.column_by_name(column).unwrap();
    array.as_primitive::<TimestampNanosecondType>().iter().collect()
}

fn u32s(dataset: &Dataset, column: &str) -> Vec<Option<u32>> {
    dataset.requests.column_by_name(column).unwrap().as_primitive::<UInt32Type>().iter().collect()
}

fn f64s(dataset: &Dataset, column: &str) -> Vec<Option<f64>> {
    dataset.requests.column_by_name(column).unwrap().as_primitive::<Float64Type>().iter().collect()
}

fn strings(dataset: &Dataset, column: &str) -> Vec<Option<String>> {
    let array =
        arrow::compute::cast(dataset.requests.column_by_name(column).unwrap(), &arrow::datatypes::DataType::Utf8)
            .unwrap();
    array.as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect()
}

fn owned(values: &[Option<&str>]) -> Vec<Option<String>> {
    values.iter().map(|v| v.map(str::to_owned)).collect()
}

#[test]
fn the_azure_2024_mapping_reads_the_week_long_trace_shape() {
    let input = "../../testdata/mapped/azure-2024/week_shape.csv";
    let (dataset, _dir) = normalize(&[input, "--format", "csv", "--map", AZURE_2024]);
    // 2024-05-10T00:00:00Z is 1,715,299,200 s after the epoch, 2024-05-17T00:00:00Z 1,715,904,000 s.
    let may_10 = 1_715_299_200_000_000_000;
    assert_eq!(
        times(&dataset, request::ARRIVAL_TIME),
        [Some(may_10), Some(may_10 + 9_930_000), Some(may_10 + 540_000_000), Some(1_715_903_999_999_999_000)]
    );
    assert_eq!(u32s(&dataset, request::INPUT_TOKENS), [Some(2048), Some(374), Some(1312), Some(4096)]);
    assert_eq!(u32s(&dataset, request::OUTPUT_TOKENS), [Some(28), Some(44), Some(1), Some(0)]);
    let ids = owned(&[Some("week_shape:2"), Some("week_shape:3"), Some("week_shape:4"), Some("week_shape:5")]);
    assert_eq!(strings(&dataset, request::REQUEST_ID), ids);
    assert_eq!(strings(&dataset, request::SOURCE), owned(&[Some("csv"); 4]));
    assert_eq!(strings(&dataset, request::STATUS), owned(&[Some("unknown"); 4]));
    let entry = &dataset.manifest.inputs[0];
    assert_eq!((entry.format.as_str(), entry.format_version.as_deref()), ("csv", Some("azure-llm-2024")));
    assert_eq!(entry.clock_domain.as_str(), "utc");
    assert_eq!(entry.diagnostics.total, 0);
    assert_eq!(entry.details["mapping"]["requests"]["arrival_time"]["clock"], "rfc3339");

    // The built-in adapter reads the same file to the same values.
    let (builtin, _dir) = normalize(&[input]);
    assert_eq!(times(&builtin, request::ARRIVAL_TIME), times(&dataset, request::ARRIVAL_TIME));
    for column in [request::INPUT_TOKENS, request::OUTPUT_TOKENS] {
        assert_eq!(u32s(&builtin, column), u32s(&dataset, column), "{column}");
    }
    assert_eq!(strings(&builtin, request::REQUEST_ID), strings(&dataset, request::REQUEST_ID));
}

#[test]
fn the_vidur_mapping_places_relative_arrivals_at_start() {
    let input = "../../testdata/mapped/vidur/splitwise_code_head.csv";
    let start = "2023-11-16T18:17:03.97996Z";
    let (dataset, _dir) = normalize(&[input, "--format", "csv", "--map", VIDUR, "--start", start]);
    // 2023-11-16T18:17:03Z is 1,700,158,623 s after the epoch; arrived_at 0.0, 0.052, 0.098189, … 1.399087 s.
    let t0 = 1_700_158_623_979_960_000;
    let arrivals = times(&dataset, request::ARRIVAL_TIME);
    assert_eq!(arrivals.len(), 12);
    assert_eq!(arrivals[..3], [Some(t0), Some(t0 + 52_000_000), Some(t0 + 98_189_000)]);
    // The Azure 2023 code trace has this request at 2023-11-16 18:17:05.3790470.
    assert_eq!(arrivals[11], Some(1_700_158_625_379_047_000));
    assert_eq!(u32s(&dataset, request::INPUT_TOKENS)[..3], [Some(4808), Some(3180), Some(110)]);
    assert_eq!(u32s(&dataset, request::OUTPUT_TOKENS)[..3], [Some(10), Some(8), Some(27)]);
    let entry = &dataset.manifest.inputs[0];
    assert_eq!((entry.format_version.as_deref(), entry.clock_domain.as_str()), (Some("vidur-trace"), "relative"));
    assert_eq!(dataset.manifest.assumptions.start, "2023-11-16T18:17:03.979960Z");
}

#[test]
fn the_whole_vidur_splitwise_trace_matches_the_azure_2023_trace_it_came_from() {
    // Vidur's splitwise_code.csv is the Azure 2023 code trace with times made relative to its first request.
    // Computed with Python's csv module over both original files: 8,819 rows each, Σ num_prefill_tokens
    // 18,059,974, Σ num_decode_tokens 245,896, and first timestamp + arrived_at equal to TIMESTAMP on every row.
    let start = "2023-11-16T18:17:03.97996Z";
    let input = "../../testdata/mapped/vidur/splitwise_code.csv.gz";
    let (vidur, _dir) = normalize(&[input, "--format", "csv", "--map", VIDUR, "--start", start]);
    let (azure, _dir) = normalize(&["../../testdata/azure-llm/2023/AzureLLMInferenceTrace_code.csv.gz"]);
    assert_eq!(vidur.requests.num_rows(), 8_819);
    let sum = |d: &Dataset, c: &str| u32s(d, c).iter().flatten().map(|&n| u64::from(n)).sum::<u64>();
    assert_eq!(sum(&vidur, request::INPUT_TOKENS), 18_059_974);
    assert_eq!(sum(&vidur, request::OUTPUT_TOKENS), 245_896);
    assert_eq!(times(&vidur, request::ARRIVAL_TIME), times(&azure, request::ARRIVAL_TIME));
    assert_eq!(u32s(&vidur, request::INPUT_TOKENS), u32s(&azure, request::INPUT_TOKENS));
    assert_eq!(vidur.manifest.inputs[0].diagnostics.total, 0);
}

#[test]
fn an_in_house_jsonl_log_through_its_mapping() {
    let dir = "../../testdata/mapped/in-house";
    let input = format!("{dir}/requests.jsonl");
    let mapping = format!("{dir}/mapping.toml");
    let (dataset, out) = normalize(&[&input, "--format", "jsonl", "--map", &mapping]);
    // 2025-05-01T00:00:00Z is 1,746,057,600 s after the epoch; ts_ms of line 3 is not a number.
    let may_1 = 1_746_057_600_000_000_000;
    assert_eq!(
        times(&dataset, request::ARRIVAL_TIME),
        [Some(may_1), Some(may_1 + 1_500_000_000), None, Some(may_1 + 5_000_000_000)]
    );
    assert_eq!(strings(&dataset, request::REQUEST_ID), owned(&[Some("a1"), Some("a2"), Some("a3"), Some("a5")]));
    assert_eq!(strings(&dataset, request::SESSION_ID), owned(&[Some("u-17"), Some("u-17"), Some("u-4"), Some("u-4")]));
    let models = [Some("llama-3.1-8b"), Some("llama-3.1-8b"), Some("qwen3-32b"), Some("qwen3-32b")];
    assert_eq!(strings(&dataset, request::MODEL), owned(&models));
    // 182.5 ms, 95 ms, null, 40 ms; seconds as given.
    assert_eq!(f64s(&dataset, request::TTFT_S), [Some(0.1825), Some(0.095), None, Some(0.04)]);
    assert_eq!(f64s(&dataset, request::E2E_S), [Some(2.75), Some(0.5), Some(30.0), Some(1.25)]);
    assert_eq!(u32s(&dataset, request::INPUT_TOKENS), [Some(1200), Some(1300), Some(64), None]);
    assert_eq!(u32s(&dataset, request::CACHED_TOKENS), [Some(1024), None, None, None]);
    assert_eq!(u32s(&dataset, request::OUTPUT_TOKENS), [Some(85), Some(12), Some(0), Some(7)]);
    let statuses = [Some("ok"), Some("aborted"), Some("timeout"), Some("ok")];
    assert_eq!(strings(&dataset, request::STATUS), owned(&statuses));
    assert_eq!(strings(&dataset, request::WORKLOAD_CLASS), owned(&[Some("chat"); 4]));
    let source_lines = dataset.requests.column_by_name(request::SOURCE_LINE).unwrap();
    let source_lines: Vec<_> = source_lines.as_primitive::<arrow::datatypes::UInt64Type>().iter().collect();
    assert_eq!(source_lines, [Some(1), Some(2), Some(3), Some(5)]);

    let entry = &dataset.manifest.inputs[0];
    assert_eq!(entry.format_version.as_deref(), Some("in-house-gateway"));
    assert_eq!(entry.diagnostics.total, 3);
    let found: Vec<(String, u64, String)> = entry
        .diagnostics
        .by_kind
        .iter()
        .flat_map(|(kind, s)| s.first.iter().map(move |d| (kind.clone(), d.line, d.message.clone())))
        .collect();
    let expected = [
        ("invalid-value", 3, "`ts_ms` (for arrival_time) is not a number of milliseconds"),
        ("invalid-value", 5, "`usage.prompt` (for input_tokens) is not a whole number from 0 to 4294967295"),
        ("malformed-json", 4, "invalid JSON syntax at column 2"),
    ];
    let expected: Vec<(String, u64, String)> =
        expected.iter().map(|(k, l, m)| (k.to_string(), *l, m.to_string())).collect();
    assert_eq!(found, expected);

    // The log's prompts, its unparsable time and its broken line all hold a canary; none reaches an output.
    for file in fs::read_dir(out.path().join("ds")).unwrap() {
        let bytes = fs::read(file.unwrap().path()).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"CANARY"), "canary found in an output");
    }
}

#[test]
fn a_mapped_column_missing_from_the_header_is_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("m.toml");
    fs::write(&mapping, "[requests]\ninput_tokens = \"ContextTokens\"\ne2e_s = \"Latency\"\n").unwrap();
    let input = "../../testdata/mapped/azure-2024/week_shape.csv";
    let args = ["normalize", input, "--format", "csv", "--map", path(&mapping)];
    let output = infertrace(&[&args[..], &["-o", path(&dir.path().join("a"))]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let warnings = stderr(&output);
    assert_eq!(warnings.lines().count(), 1, "{warnings}");
    assert!(
        warnings.contains(
            "1 × missing-field (first at line 1: the header has no column `Latency` (mapped to e2e_s); \
             it is null in every row)"
        ),
        "{warnings}"
    );
    let strict = infertrace(&[&args[..], &["-o", path(&dir.path().join("b")), "--strict"]].concat());
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
}

#[test]
fn mapping_mistakes_are_one_line_errors_naming_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let input = "../../testdata/mapped/azure-2024/week_shape.csv";
    let write = |name: &str, text: &str| {
        let file = dir.path().join(name);
        fs::write(&file, text).unwrap();
        file
    };
    let cases = [
        (write("syntax.toml", "name = \"x\"\n[requests\n"), "line 2: "),
        (write("column.toml", "[requests]\nttft = \"x\"\n"), "[requests] ttft: unknown canonical column"),
        (write("unit.toml", "[requests]\nttft_s = { from = \"x\", unit = \"min\" }\n"), "unknown variant `min`"),
        (write("clock.toml", "[requests]\narrival_time = \"TIMESTAMP\"\n"), "needs a `clock`"),
        (write("status.toml", "[requests]\nstatus = { from = \"s\", map = { y = \"good\" } }\n"), "\"good\""),
        (write("empty.toml", ""), "[requests] maps no column"),
    ];
    for (mapping, needle) in &cases {
        let output = infertrace(&["normalize", input, "--format", "csv", "--map", path(mapping), "-o", path(&out)]);
        assert_error(&output, &[&format!("mapping {}", mapping.display()), needle]);
    }
    let missing = dir.path().join("nowhere.toml");
    let output = infertrace(&["normalize", input, "--format", "jsonl", "--map", path(&missing), "-o", path(&out)]);
    assert_error(&output, &["cannot read mapping", "nowhere.toml"]);
    assert!(!out.exists(), "no dataset after a failure");
}

#[test]
fn map_and_the_mapped_formats_go_together() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let input = "../../testdata/mapped/azure-2024/week_shape.csv";
    let output = infertrace(&["normalize", input, "--format", "csv", "-o", path(&out)]);
    assert_error(&output, &["--format csv needs --map <FILE>"]);
    let output = infertrace(&["normalize", input, "--map", AZURE_2024, "-o", path(&out)]);
    assert_error(&output, &["--map ../../examples/mappings/azure-2024.toml needs --format csv or --format jsonl"]);
    let output = infertrace(&["normalize", input, "--format", "azure-llm", "--map", AZURE_2024, "-o", path(&out)]);
    assert_error(&output, &["needs --format csv or --format jsonl"]);
    // Never auto-detected: an input no built-in adapter claims says how to read it through a mapping.
    let unknown = dir.path().join("log.csv");
    fs::write(&unknown, "id,latency\na,1\n").unwrap();
    let output = infertrace(&["normalize", path(&unknown), "-o", path(&out)]);
    assert_error(&output, &["log.csv", "or csv/jsonl with --map <mapping.toml>"]);
}

#[test]
fn formats_lists_the_mapped_formats_last() {
    let output = infertrace(&["formats"]);
    let text = String::from_utf8(output.stdout).unwrap();
    let ids: Vec<&str> = text.lines().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(ids[ids.len() - 2..], ["csv", "jsonl"]);
    assert!(text.contains("read through --map <mapping.toml> (never detected)"), "{text}");
}

#[test]
fn example_mappings_all_load() {
    for entry in fs::read_dir("../../examples/mappings").unwrap() {
        let file = entry.unwrap().path();
        let text = fs::read_to_string(&file).unwrap();
        infertrace_adapter_mapped::Mapping::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    assert!(common::testdata().join("mapped").is_dir());
}
