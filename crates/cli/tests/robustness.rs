//! The catalogue of bad inputs of `docs/robustness.md`: one test per entry, named as the entry, each asserting
//! the exit code, the diagnostics (kind, line, count) and which rows are kept.
//!
//! Content never fails a run (exit 0, diagnostics in the manifest); only I/O does (exit 2, one line naming the file,
//! and no dataset left behind).
#![allow(clippy::print_stderr)]

mod common;

use std::fs::{self, File};
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{TimestampNanosecondType, UInt64Type};
use infertrace_schema::{Dataset, InputEntry};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `normalize <input> -o <dir>/out <extra…>` and returns the output and the dataset, if one was written.
fn normalize(dir: &Path, input: &Path, extra: &[&str]) -> (Output, Option<Dataset>) {
    let out = dir.join("out");
    let mut args = vec!["normalize", input.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    let output = infertrace(&args);
    let dataset = out.exists().then(|| Dataset::open(&out).unwrap());
    (output, dataset)
}

/// Asserts exit 2 with one `error:` line containing `needle`, and that no dataset (nor a temporary one) is left.
fn assert_fails(dir: &Path, output: &Output, dataset: &Option<Dataset>, needle: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    assert!(text.starts_with("error: ") && text.contains(needle), "{needle:?} not in {text:?}");
    assert!(dataset.is_none(), "no dataset is written");
    let left: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().contains("infertrace-tmp")), "no temporary dataset: {left:?}");
}

/// The only input's manifest entry.
fn entry(dataset: &Dataset) -> &InputEntry {
    assert_eq!(dataset.manifest.inputs.len(), 1);
    &dataset.manifest.inputs[0]
}

/// `(kind, count, first lines)` of every diagnostic kind of the only input.
fn diagnostics(dataset: &Dataset) -> Vec<(String, u64, Vec<u64>)> {
    let by_kind = &entry(dataset).diagnostics.by_kind;
    by_kind.iter().map(|(k, s)| (k.clone(), s.count, s.first.iter().map(|d| d.line).collect())).collect()
}

fn kinds(list: &[(&str, u64, &[u64])]) -> Vec<(String, u64, Vec<u64>)> {
    list.iter().map(|(k, n, lines)| (k.to_string(), *n, lines.to_vec())).collect()
}

/// `source_line` of every row of `batch`.
fn source_lines(batch: &RecordBatch) -> Vec<u64> {
    let column = batch.column_by_name("source_line").unwrap().as_primitive::<UInt64Type>();
    column.iter().map(|v| v.unwrap()).collect()
}

/// A column of strings (plain or dictionary-encoded) as `Option<String>`s.
fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let column = arrow::compute::cast(batch.column_by_name(name).unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let column = column.as_string::<i32>();
    (0..column.len()).map(|i| column.is_valid(i).then(|| column.value(i).to_owned())).collect()
}

/// The `time` column of `batch` in RFC 3339.
fn times(batch: &RecordBatch, name: &str) -> Vec<String> {
    let column = batch.column_by_name(name).unwrap().as_primitive::<TimestampNanosecondType>();
    column.iter().map(|ns| infertrace_adapter::time::format_rfc3339(ns.unwrap())).collect()
}

/// A Mooncake record: one request row per line, so kept lines are easy to see. Its two 512-token blocks hold
/// `512 + extra` tokens (`extra` ≤ 512), so the record is consistent.
fn mooncake(timestamp: u64, extra: u32) -> String {
    let input = 512 + extra.min(512);
    format!(r#"{{"timestamp": {timestamp}, "input_length": {input}, "output_length": 10, "hash_ids": [0, 1]}}"#)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

/// Four Mooncake lines with line 3 replaced by `bad`.
fn mooncake_with_line_3(bad: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in [mooncake(0, 100).as_bytes(), mooncake(1, 200).as_bytes(), bad, mooncake(3, 400).as_bytes()] {
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
    }
    bytes
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "empty.jsonl", b"");
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_fails(dir.path(), &output, &dataset, "no adapter recognises input");
    // Named with its format, an empty file is an empty input: a dataset of no rows.
    let (output, dataset) = normalize(dir.path(), &input, &["--format", "mooncake"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!((entry(&dataset).lines, dataset.manifest.rows.total(), entry(&dataset).diagnostics.total), (0, 0, 0));
}

#[test]
fn binary_garbage() {
    let dir = tempfile::tempdir().unwrap();
    // Bytes of every value, newlines included, in a scrambled order.
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(7919).wrapping_add(13) % 251) as u8).collect();
    let lines = garbage.split(|&b| b == b'\n').count() as u64;
    let input = write(dir.path(), "garbage.bin", &garbage);
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_fails(dir.path(), &output, &dataset, "no adapter recognises input");
    let (output, dataset) = normalize(dir.path(), &input, &["--format", "vllm-log"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).lines, lines);
    assert_eq!(dataset.manifest.rows.total(), 0);
    assert_eq!(entry(&dataset).diagnostics.total, lines, "every line is a diagnostic, none a row");
}

#[test]
fn nul_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input =
        write(dir.path(), "nul.jsonl", &mooncake_with_line_3(b"{\"timestamp\": 2,\0\0\0 \"input_length\": 300}"));
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 1, &[3])]));
    assert_eq!(source_lines(&dataset.requests), [1, 2, 4]);
}

#[test]
fn invalid_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "utf8.jsonl", &mooncake_with_line_3(b"{\"timestamp\": 2, \"x\": \"\xff\xfe\"}"));
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(diagnostics(&dataset), kinds(&[("invalid-utf8", 1, &[3])]));
    assert_eq!(source_lines(&dataset.requests), [1, 2, 4]);
}

#[test]
fn crlf_and_lone_cr() {
    let dir = tempfile::tempdir().unwrap();
    // CRLF: the same rows as LF.
    let crlf = format!("{}\r\n{}\r\n{}\r\n", mooncake(0, 100), mooncake(1, 200), mooncake(2, 300));
    let input = write(dir.path(), "crlf.jsonl", crlf.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!((source_lines(&dataset.requests), entry(&dataset).diagnostics.total), (vec![1, 2, 3], 0));
    // A lone CR does not end a line: three records separated by CR are one line of JSON with trailing content.
    let cr = format!("{}\r{}\r{}\r", mooncake(0, 100), mooncake(1, 200), mooncake(2, 300));
    let input = write(dir.path(), "cr.jsonl", cr.as_bytes());
    fs::remove_dir_all(dir.path().join("out")).unwrap();
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).lines, 1);
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 1, &[1])]));
    assert_eq!(dataset.manifest.rows.total(), 0);
}

fn truncated(compressed: Vec<u8>, name: &str, compression: &str) {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), name, &compressed[..compressed.len() * 2 / 3]);
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_fails(dir.path(), &output, &dataset, &format!("the {compression} stream ends early"));
    // Named by the path as given, made relative (no absolute path of the machine is shown or recorded).
    assert!(stderr(&output).contains(&format!("error: cannot read input {name}: ")), "{}", stderr(&output));
}

fn many_mooncake_lines() -> String {
    (0..20_000).map(|i| mooncake(i, (i * 7919 % 5000) as u32) + "\n").collect()
}

#[test]
fn truncated_gzip() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(many_mooncake_lines().as_bytes()).unwrap();
    truncated(gz.finish().unwrap(), "cut.jsonl.gz", "gzip");
}

#[test]
fn truncated_zstd() {
    truncated(zstd::encode_all(many_mooncake_lines().as_bytes(), 3).unwrap(), "cut.jsonl.zst", "zstd");
}

#[test]
fn decompression_bomb() {
    let dir = tempfile::tempdir().unwrap();
    // 200 MiB of one repeated record compress to a few KiB: far beyond 1000:1 once the first 64 MiB are read.
    let line = mooncake(0, 100) + "\n";
    let mut encoder = zstd::Encoder::new(Vec::new(), 1).unwrap();
    for _ in 0..(200 << 20) / line.len() {
        encoder.write_all(line.as_bytes()).unwrap();
    }
    let input = write(dir.path(), "bomb.jsonl.zst", &encoder.finish().unwrap());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_fails(dir.path(), &output, &dataset, "which looks like a decompression bomb; pass --max-ratio");
    // The absolute cap, on an ordinary input.
    let small = write(dir.path(), "small.jsonl.zst", &zstd::encode_all(many_mooncake_lines().as_bytes(), 3).unwrap());
    let (output, dataset) = normalize(dir.path(), &small, &["--max-decompressed", "64K"]);
    assert_fails(
        dir.path(),
        &output,
        &dataset,
        "decompresses to more than 65536 bytes, the limit; pass --max-decompressed",
    );
}

#[test]
fn line_of_1_gib() {
    let dir = tempfile::tempdir().unwrap();
    // Line 2 is 1 GiB of NUL bytes, written as a hole: no disk space, and read back at memory speed.
    let path = dir.path().join("huge.jsonl");
    let mut file = File::create(&path).unwrap();
    writeln!(file, "{}", mooncake(0, 100)).unwrap();
    file.seek(SeekFrom::Current(1 << 30)).unwrap();
    write!(file, "\n{}\n", mooncake(2, 300)).unwrap();
    drop(file);
    let (output, dataset) = normalize(dir.path(), &path, &["--format", "mooncake"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).lines, 3);
    assert_eq!(diagnostics(&dataset), kinds(&[("line-too-long", 1, &[2])]));
    assert_eq!(source_lines(&dataset.requests), [1, 3], "the rest of the file is still parsed");
}

#[test]
fn mixed_formats() {
    let dir = tempfile::tempdir().unwrap();
    // Mooncake first (so detected as Mooncake), then a vLLM log line and a CSV line.
    let text = format!(
        "{}\n{}\nINFO 05-11 12:04:17 [engine.py:310] Added request r1.\ntimestamp,input,output\n{}\n",
        mooncake(0, 100),
        mooncake(1, 200),
        mooncake(4, 500)
    );
    let input = write(dir.path(), "mixed.jsonl", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).format, "mooncake");
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 2, &[3, 4])]));
    assert_eq!(source_lines(&dataset.requests), [1, 2, 5]);
}

/// Two vLLM requests whose lines alternate, as two processes writing one log would leave them.
#[test]
fn interleaved_processes() {
    let dir = tempfile::tempdir().unwrap();
    let text = "\
INFO 05-11 12:04:17 [logger.py:39] Received request a: prompt: 'x', params: SamplingParams(n=1, max_tokens=10), prompt_token_ids: [1, 2, 3], lora_request: None, prompt_adapter_request: None.
INFO 05-11 12:04:17 [logger.py:39] Received request b: prompt: 'y', params: SamplingParams(n=1, max_tokens=20), prompt_token_ids: [4, 5], lora_request: None, prompt_adapter_request: None.
INFO 05-11 12:04:18 [engine.py:310] Added request b.
INFO 05-11 12:04:18 [engine.py:310] Added request a.
INFO 05-11 12:04:19 [metrics.py:486] Avg prompt throughput: 13.2 tokens/s, Avg generation throughput: 13.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.
";
    let input = write(dir.path(), "two.log", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &["--year", "2025"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    let mut ids = strings(&dataset.requests, "request_id");
    ids.sort();
    assert_eq!(ids, [Some("a".to_owned()), Some("b".to_owned())]);
    let tokens = dataset.requests.column_by_name("input_tokens").unwrap();
    let tokens = tokens.as_primitive::<arrow::datatypes::UInt32Type>();
    let by_id: Vec<_> = strings(&dataset.requests, "request_id").into_iter().zip(tokens.iter()).collect();
    assert!(by_id.contains(&(Some("a".to_owned()), Some(3))) && by_id.contains(&(Some("b".to_owned()), Some(2))));
}

#[test]
fn lines_concatenated_without_newline() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{}\n{}{}\n{}\n", mooncake(0, 100), mooncake(1, 200), mooncake(2, 300), mooncake(3, 400));
    let input = write(dir.path(), "glued.jsonl", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 1, &[2])]));
    assert_eq!(source_lines(&dataset.requests), [1, 3]);
}

#[test]
fn timestamps_going_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{}\n{}\n{}\n", mooncake(5000, 100), mooncake(1000, 200), mooncake(9000, 300));
    let input = write(dir.path(), "back.jsonl", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    // Kept as written, in input order: ordering is the reader's business (metrics sort by arrival).
    assert_eq!(
        times(&dataset.requests, "arrival_time"),
        ["1970-01-01T00:00:05Z", "1970-01-01T00:00:01Z", "1970-01-01T00:00:09Z"]
    );
    assert_eq!(entry(&dataset).diagnostics.total, 0);
}

#[test]
fn duplicate_request_ids() {
    let dir = tempfile::tempdir().unwrap();
    let record = |ts: u64, tokens: u32| {
        format!(
            r#"{{"req": "dup", "user": {{"id": "u"}}, "model": "m", "ts_ms": {ts}, "latency": {{"ttft_ms": 100, "total_s": 1.5}}, "usage": {{"prompt": {tokens}, "completion": 5}}, "outcome": "success"}}"#
        )
    };
    let text = format!("{}\n{}\n", record(1_700_000_000_000, 10), record(1_700_000_001_000, 20));
    let input = write(dir.path(), "dup.jsonl", text.as_bytes());
    let (output, dataset) =
        normalize(dir.path(), &input, &["--format", "jsonl", "--map", "../../testdata/mapped/in-house/mapping.toml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    // Both rows are kept with their id: a log records what happened, and a retried id is two requests.
    assert_eq!(strings(&dataset.requests, "request_id"), [Some("dup".to_owned()), Some("dup".to_owned())]);
    assert_eq!(source_lines(&dataset.requests), [1, 2]);
}

const STATS: &str = "[metrics.py:486] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, \
                     Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.";

/// The first sample time of each stats line of a vLLM log.
fn stats_times(dataset: &Dataset) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for time in times(&dataset.samples, "time") {
        if !seen.contains(&time) {
            seen.push(time);
        }
    }
    seen
}

#[test]
fn year_roll_over() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("INFO 12-31 23:59:55 {STATS}\nINFO 01-01 00:00:05 {STATS}\nINFO 01-01 00:00:15 {STATS}\n");
    let input = write(dir.path(), "newyear.log", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &["--year", "2024"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(stats_times(&dataset), ["2024-12-31T23:59:55Z", "2025-01-01T00:00:05Z", "2025-01-01T00:00:15Z"]);
}

#[test]
fn utc_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("INFO 05-25 06:50:29 {STATS}\n");
    let input = write(dir.path(), "local.log", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &["--year", "2025", "--utc-offset", "+02:00"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stats_times(&dataset.unwrap()), ["2025-05-25T04:50:29Z"]);
    fs::remove_dir_all(dir.path().join("out")).unwrap();
    let (_, dataset) = normalize(dir.path(), &input, &["--year", "2025", "--utc-offset", "-05:30"]);
    assert_eq!(stats_times(&dataset.unwrap()), ["2025-05-25T12:20:29Z"]);
}

/// Whether this process can write where permissions say it cannot (root, or a capability): then permission tests
/// prove nothing and are skipped.
fn permissions_bind() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).unwrap();
    set_mode(&locked, 0o555);
    let bound = File::create(locked.join("probe")).is_err();
    set_mode(&locked, 0o755);
    bound
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn directory_with_unreadable_files() {
    if !permissions_bind() {
        eprintln!("skipped: this process writes and reads regardless of permissions (root?)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    fs::create_dir(&inputs).unwrap();
    write(&inputs, "a.jsonl", (mooncake(0, 100) + "\n").as_bytes());
    let locked = write(&inputs, "b.jsonl", (mooncake(1, 200) + "\n").as_bytes());
    set_mode(&locked, 0o000);
    let (output, dataset) = normalize(dir.path(), &inputs, &[]);
    set_mode(&locked, 0o644);
    // The directory's last component starts the recorded path: no absolute path of the machine is shown.
    assert_fails(dir.path(), &output, &dataset, "error: cannot read input inputs/b.jsonl: Permission denied");
}

#[test]
fn read_only_output() {
    if !permissions_bind() {
        eprintln!("skipped: this process writes regardless of permissions (root?)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "in.jsonl", (mooncake(0, 100) + "\n").as_bytes());
    let parent = dir.path().join("ro");
    fs::create_dir(&parent).unwrap();
    set_mode(&parent, 0o555);
    let out = parent.join("out");
    let output = infertrace(&["normalize", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    set_mode(&parent, 0o755);
    let text = stderr(&output);
    assert_eq!((output.status.code(), text.lines().count()), (Some(2), 1), "{text}");
    assert!(text.contains(&format!("cannot write output {}", out.display())), "{text}");
    assert_eq!(fs::read_dir(&parent).unwrap().count(), 0, "nothing is left in the read-only directory");
}

/// A full disk, modelled by a file-size limit (`ulimit -f`, with SIGXFSZ ignored so that writes fail with EFBIG
/// instead of killing the process): it binds root too.
#[test]
fn full_disk() {
    let dir = tempfile::tempdir().unwrap();
    let text = many_mooncake_lines();
    let input = write(dir.path(), "in.jsonl", text.as_bytes());
    let out = dir.path().join("out");
    let script = format!(
        "trap '' XFSZ; ulimit -f 16; exec '{}' normalize '{}' -o '{}'",
        env!("CARGO_BIN_EXE_infertrace"),
        input.display(),
        out.display()
    );
    let output = Command::new("sh").args(["-c", &script]).output().unwrap();
    let text = stderr(&output);
    assert_eq!((output.status.code(), text.lines().count()), (Some(2), 1), "{text}");
    assert!(text.starts_with(&format!("error: cannot write output {}", out.display())), "{text}");
    assert!(text.contains("File too large"), "{text}");
    let left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["in.jsonl"], "neither the dataset nor its temporary directory is left");
}

/// OTLP/JSON of GenAI spans: a line that is no JSON, a span whose parent never comes (its trace has no root), and
/// a protobuf file cut inside its second message.
#[test]
fn otlp_spans_cut_or_without_root() {
    let dir = tempfile::tempdir().unwrap();
    let span = |trace: &str, id: &str, parent: &str, tokens: u32| {
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"{trace}","spanId":"{id}","parentSpanId":"{parent}","name":"chat m","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}},{{"key":"gen_ai.usage.input_tokens","value":{{"intValue":"{tokens}"}}}}]}}]}}]}}]}}"#
        )
    };
    let text = format!("{}\n{{\"resourceSpans\": [\n{}\n", span("aa", "01", "", 10), span("bb", "02", "ff", 20));
    let input = write(dir.path(), "spans.jsonl", text.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).format, "otel-genai");
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 1, &[2])]));
    // The rooted trace is written after the next export; the root-less one at the end of the input.
    assert_eq!(source_lines(&dataset.requests), [1, 3]);
    assert_eq!(entry(&dataset).details["traces_without_root"], 1);
}

/// Gateway logs: a LiteLLM CSV row with fewer fields than its header, and usage lines without usage.
#[test]
fn gateway_logs_with_short_rows_and_no_usage() {
    let dir = tempfile::tempdir().unwrap();
    let csv = "request_id,call_type,startTime,endTime,prompt_tokens,completion_tokens,status\n\
               r1,acompletion,2025-01-24 09:20:46.847,2025-01-24 09:20:47.5,10,20,success\n\
               r2,acompletion,2025-01-24 09:20:48\n\
               r3,aembedding,2025-01-24 09:20:49,2025-01-24 09:20:49.1,5,0,success\n\
               r4,acompletion,2025-01-24 09:20:50,2025-01-24 09:20:51,7,3,failure\n";
    let input = write(dir.path(), "spend.csv", csv.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).format, "litellm-spend");
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-csv", 1, &[3])]));
    // The embedding is not a generation: counted, not a row.
    assert_eq!(source_lines(&dataset.requests), [2, 5]);
    assert_eq!(entry(&dataset).details["calls_not_generating"], serde_json::json!({"aembedding": 1}));
    assert_eq!(strings(&dataset.requests, "status"), [Some("ok".to_owned()), Some("error".to_owned())]);

    let usage = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","usage":{"prompt_tokens":3,"completion_tokens":2}}
{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000001,"model":"m","choices":[]}
{"id":"chatcmpl-3","object":"chat.completion","created":1700000002,"model":"m"}
{"id":"chatcmpl-4","object":"chat.completion","created":1700000003,"model":"m","usage":5}
"#;
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "usage.jsonl", usage.as_bytes());
    let (output, dataset) = normalize(dir.path(), &input, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let dataset = dataset.unwrap();
    assert_eq!(entry(&dataset).format, "openai-usage");
    assert_eq!(diagnostics(&dataset), kinds(&[("malformed-json", 1, &[4]), ("missing-field", 1, &[3])]));
    assert_eq!(source_lines(&dataset.requests), [1]);
    assert_eq!(entry(&dataset).details["chunks_without_usage"], 1);
}
