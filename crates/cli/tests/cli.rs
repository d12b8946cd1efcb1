//! The binary's exit codes and messages: 0 on success, 1 for diagnostics under `--strict`, 2 for errors, each
//! error one line naming the file concerned.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
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

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

#[test]
fn normalize_prints_a_summary_and_writes_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let output = infertrace(&["normalize", "../../testdata/azure-llm/2024/week_shape.csv", "-o", path(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let row = text.lines().find(|l| l.starts_with("../../testdata/azure-llm/2024/week_shape.csv")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, ["../../testdata/azure-llm/2024/week_shape.csv", "azure-llm", "2024", "5", "4", "0", "0", "0"]);
    assert!(text.contains(&format!("wrote {}", out.display())));
    let mut files = leftovers(&out);
    files.sort();
    assert_eq!(files, ["cache_events.parquet", "manifest.json", "requests.parquet", "samples.parquet"]);
    assert_eq!(leftovers(dir.path()), ["ds"], "no temporary directory is left");
}

#[test]
fn unknown_format_names_the_file_and_the_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let output = infertrace(&["normalize", "../../testdata/invalid/garbage.bin", "-o", path(&out)]);
    assert_error(&output, &["garbage.bin", "--format", "mooncake", "azure-llm"]);
    assert!(leftovers(dir.path()).is_empty(), "no dataset and no temporary directory after a failure");
}

#[test]
fn unrecognised_files_of_a_directory_are_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    fs::create_dir_all(inputs.join("sub")).unwrap();
    fs::copy("../../testdata/mooncake/dynamo-replay/mooncake.jsonl", inputs.join("sub/trace.jsonl")).unwrap();
    fs::write(inputs.join("sub/trace.jsonl.url"), "https://example.com/trace\n").unwrap();
    fs::write(inputs.join("README"), "notes about the run\n").unwrap();
    let out = dir.path().join("ds");
    let output = infertrace(&["normalize", path(&inputs), "-o", path(&out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let warnings = stderr(&output);
    assert!(warnings.contains("skipped in/README (unrecognised); pass --format to read it"), "{warnings}");
    assert!(warnings.contains("skipped in/sub/trace.jsonl.url (unrecognised)"), "{warnings}");
    let manifest: serde_json::Value = serde_json::from_slice(&fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["skipped"],
        serde_json::json!([
            {"path": "in/README", "reason": "unrecognised"},
            {"path": "in/sub/trace.jsonl.url", "reason": "unrecognised"}
        ])
    );
    assert_eq!(manifest["inputs"].as_array().unwrap().len(), 1);

    // A directory with nothing recognisable is an error, and a named unrecognised file is never skipped.
    let empty = dir.path().join("notes");
    fs::create_dir_all(&empty).unwrap();
    fs::write(empty.join("a.txt"), "hello\n").unwrap();
    let output = infertrace(&["normalize", path(&empty), "-o", path(&dir.path().join("ds2"))]);
    assert_error(&output, &["no adapter recognises any input", "1 files skipped"]);
    let output = infertrace(&["normalize", path(&empty.join("a.txt")), "-o", path(&dir.path().join("ds3"))]);
    assert_error(&output, &["a.txt", "--format"]);
}

#[test]
fn a_missing_input_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = infertrace(&["normalize", "no/such/trace.jsonl", "-o", path(&dir.path().join("ds"))]);
    assert_error(&output, &["no/such/trace.jsonl"]);
}

#[test]
fn a_truncated_compressed_input_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        infertrace(&["normalize", "../../testdata/invalid/truncated.jsonl.gz", "-o", path(&dir.path().join("ds"))]);
    assert_error(&output, &["truncated.jsonl.gz"]);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn an_unwritable_output_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "not a directory").unwrap();
    let out = blocker.join("ds");
    let output = infertrace(&["normalize", "../../testdata/azure-llm/2024/week_shape.csv", "-o", path(&out)]);
    assert_error(&output, &["cannot write output", path(&out)]);
}

#[test]
fn an_existing_output_is_replaced_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("keep.txt"), "user data").unwrap();
    let input = "../../testdata/mooncake/dynamo-replay/mooncake.jsonl";
    let output = infertrace(&["normalize", input, "-o", path(&out)]);
    assert_error(&output, &["already exists", "--force"]);
    assert!(out.join("keep.txt").exists(), "the existing output is untouched");

    let output = infertrace(&["normalize", input, "-o", path(&out), "--force"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!out.join("keep.txt").exists());
    assert!(out.join("manifest.json").exists());
    assert_eq!(leftovers(dir.path()), ["ds"]);
}

#[test]
fn strict_turns_diagnostics_into_exit_code_1_and_still_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let input = "../../testdata/mooncake/malformed/bad_lines.jsonl";
    let output = infertrace(&["normalize", input, "-o", path(&out), "--strict"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(text.contains("warning: ../../testdata/mooncake/malformed/bad_lines.jsonl: 2 × malformed-json (first at line 2: JSON ends early at column 33)"), "{text}");
    assert!(text.lines().last().unwrap().starts_with("error: 7 diagnostics"), "{text}");
    assert!(out.join("requests.parquet").exists());

    let clean = infertrace(&[
        "normalize",
        "../../testdata/mooncake/dynamo-replay/mooncake.jsonl",
        "-o",
        path(&dir.path().join("clean")),
        "--strict",
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));

    let lenient = infertrace(&["normalize", input, "-o", path(&dir.path().join("lenient"))]);
    assert_eq!(lenient.status.code(), Some(0), "diagnostics alone do not fail a run");
}

#[test]
fn format_can_be_forced_and_bad_assumptions_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let output = infertrace(&[
        "normalize",
        "../../testdata/azure-llm/2024/week_shape.csv",
        "--format",
        "mooncake",
        "-o",
        path(&dir.path().join("ds")),
    ]);
    // Forced onto the wrong adapter, every CSV line is a diagnostic, not a crash.
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("5 × malformed-json"), "{}", stderr(&output));

    let output = infertrace(&["normalize", "x", "-o", "y", "--utc-offset", "+25:00"]);
    assert_eq!(output.status.code(), Some(2));
    let output = infertrace(&["normalize", "x", "-o", "y", "--start", "yesterday"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_negative_utc_offset_applies_to_zoneless_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let input = "../../testdata/azure-llm/2023/AzureLLMInferenceTrace_conv_head.csv";
    let output = infertrace(&["normalize", input, "-o", path(&out), "--utc-offset", "-08:00"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = infertrace_schema::Dataset::open(&out).unwrap();
    assert_eq!(dataset.manifest.assumptions.utc_offset, "-08:00");
    let rendered = infertrace_schema::render::render_rows(&dataset.requests, 1, 0);
    // 18:15:46.6805900 at -08:00 is 02:15:46.680590 UTC the next day.
    assert!(rendered.contains("arrival_time=2023-11-17T02:15:46.680590Z"), "{rendered}");
}

#[test]
fn formats_and_schema_list_the_registry_and_the_tables() {
    let output = infertrace(&["formats"]);
    assert_eq!(output.status.code(), Some(0));
    let ids: Vec<String> = stdout(&output).lines().map(|l| l.split_whitespace().next().unwrap().to_owned()).collect();
    assert_eq!(
        ids,
        [
            "mooncake",
            "mooncake-delta",
            "azure-llm",
            "weka-trace",
            "bailian-trace",
            "burstgpt",
            "llmservingsim",
            "ragpulse",
            "tracelab",
            "vllm-log",
            "vllm-bench",
            "vllm-metrics",
            "vllm-otlp",
            "vllm-kv-events",
            "sglang-log",
            "sglang-request-metrics",
            "sglang-metrics",
            "sglang-kv-events",
            "sglang-bench",
            "dynamo-request-trace",
            "dynamo-log",
            "dynamo-kv-events",
            "dynamo-metrics",
            "aiperf",
            "genai-perf",
            "dcgm-exporter",
            "node-exporter",
            "otel-genai",
            "litellm-spend",
            "openai-usage",
            "csv",
            "jsonl"
        ]
    );

    let output = infertrace(&["schema", "--json"]);
    let schema: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let tables: Vec<&str> = schema["tables"].as_array().unwrap().iter().map(|t| t["table"].as_str().unwrap()).collect();
    assert_eq!(tables, ["requests", "samples", "cache_events"]);
    assert_eq!(schema["tables"][0]["columns"][0]["name"], "request_id");

    let output = infertrace(&["schema"]);
    assert!(stdout(&output).contains("| `ttft_s` | `double` | yes | s |"));
}
