//! No prompt or completion text and no raw token id reaches an output.
//!
//! For every format `infertrace formats` lists, a fixture of that format gets a canary string planted in every
//! free-text position it has (prompts, completions, messages, error texts, tool arguments), the canary token-id
//! sequence 918273, 918274, … in every token-id list, and extra lines that carry both where a number or a record is
//! expected. The planted input is normalized by the binary, and then every value of every column of every table,
//! the manifest, stdout and stderr are searched, and so are the files `export` makes of the dataset for load
//! generators (text formats included). `--show-lines` is the one way to see the lines, on stderr only.
#![allow(clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use infertrace::registry::{self, ADAPTERS};
use infertrace_adapter::Input;
use infertrace_schema::Dataset;
use regex::{Captures, Regex};

const CANARY: &str = "CANARY-7f3a9c";
/// First id of the canary token-id sequence; the sequence is `FIRST_ID..FIRST_ID + IDS`.
const FIRST_ID: u64 = 918_273;
const IDS: u64 = 64;

fn canary_ids(n: usize) -> String {
    (0..n as u64).map(|i| (FIRST_ID + i % IDS).to_string()).collect::<Vec<_>>().join(", ")
}

/// Keys whose string values are free text a user or a model wrote.
static TEXT_KEY: &str = r"(?i)prompt|text|content|completion|generated|response|error|err_msg|message|arguments|reasoning|query|question|answer|output_str|input_str|messages|detail|reason_text";
/// Keys whose integer lists are token ids.
static IDS_KEY: &str = r"(?i)token_ids|input_ids|output_ids|prompt_ids";

/// JSON: `"key": "text"` for text keys.
static JSON_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#""([A-Za-z_.]*(?:{TEXT_KEY})[A-Za-z_.]*)"(\s*:\s*)"(?:[^"\\]|\\.)*""#)).unwrap()
});
/// JSON: `"key": [1, 2, 3]` for token-id keys.
static JSON_IDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#""([A-Za-z_.]*(?:{IDS_KEY})[A-Za-z_.]*)"(\s*:\s*)\[([0-9,\s]+)\]"#)).unwrap()
});
/// Python reprs and `key: value` logs: `prompt: '…'`, `text='…'`, `prompt_token_ids: [1, 2]`, `input_ids=[…]`.
static REPR_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#"\b((?:{TEXT_KEY})\w*)(: |=)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"#)).unwrap()
});
static REPR_IDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r#"\b(\w*(?:{IDS_KEY})\w*)(: |=)\[([0-9,\s]+)\]"#)).unwrap());
/// OTLP/JSON: an attribute `{"key": "gen_ai.input.messages", "value": {"stringValue": "…"}}` whose key names content
/// (messages, prompts, completions, system instructions, tool arguments and results, OpenInference's input and
/// output values).
static OTLP_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"("key"\s*:\s*"([A-Za-z_.0-9]*(?:{TEXT_KEY}|input|output|result|instructions)[A-Za-z_.0-9]*)"\s*,\s*"value"\s*:\s*\{{\s*"stringValue"\s*:\s*)"(?:[^"\\]|\\.)*""#
    ))
    .unwrap()
});

/// JSON: a numeric value of a key that is not an id, to be replaced by the canary (a type confusion).
static JSON_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([a-z_]+)"(\s*:\s*)-?[0-9][0-9.eE+-]*"#).unwrap());

/// `text` with the canary in every free-text and token-id position the patterns above find.
fn plant(text: &str) -> String {
    let ids = |c: &Captures<'_>| format!("{}{}[{}]", &c[1], &c[2], canary_ids(c[3].split(',').count()));
    let text = JSON_TEXT.replace_all(text, |c: &Captures<'_>| {
        // A log record's own `message` is what the format parses (`request completed`, …): kept readable.
        if &c[1] == "message" { c[0].to_owned() } else { format!(r#""{}"{}"{CANARY} said {CANARY}""#, &c[1], &c[2]) }
    });
    let text = JSON_IDS.replace_all(&text, |c: &Captures<'_>| format!("\"{}\"{}", &c[1], &ids(c)[c[1].len()..]));
    let text = OTLP_TEXT.replace_all(&text, |c: &Captures<'_>| {
        // Names and ids under such keys (`gen_ai.response.model`, `gen_ai.response.id`, `gen_ai.output.type`) are
        // not text anyone wrote: formats copy them as they should.
        let named = [".model", ".id", ".finish_reasons", ".name", ".type"].iter().any(|end| c[2].ends_with(end));
        if named { c[0].to_owned() } else { format!(r#"{}"{CANARY} said {CANARY}""#, &c[1]) }
    });
    let text = REPR_TEXT.replace_all(&text, |c: &Captures<'_>| format!("{}{}'{CANARY}'", &c[1], &c[2]));
    REPR_IDS.replace_all(&text, ids).into_owned()
}

/// Lines appended to a line-oriented input: a record made of canaries, a canary where the first record has a
/// number, and free text.
fn extra_lines(text: &str, csv: bool, confuse: bool) -> String {
    // In a CSV, numbers in a row are counts of its columns, rightly copied: token ids go only into other formats.
    let ids = if csv { String::new() } else { format!(", \"prompt_token_ids\": [{}]", canary_ids(8)) };
    let mut extra = format!("{{\"prompt\": \"{CANARY}\"{ids}, \"error\": \"{CANARY}\"}}\n");
    if confuse && let Some(first) = text.lines().find(|l| l.trim_start().starts_with('{')) {
        let confused = JSON_NUMBER.replace(first, |c: &Captures<'_>| {
            if c[1].contains("id") { c[0].to_owned() } else { format!(r#""{}"{}"{CANARY}""#, &c[1], &c[2]) }
        });
        extra.push_str(&confused);
        extra.push('\n');
    }
    if let Some(first) = text.lines().find(|l| !l.trim().is_empty() && !l.starts_with('{') && !l.starts_with('#')) {
        // A text line with its words after the first few replaced: a record of the format cut into canaries.
        let words: Vec<&str> = first.split(' ').collect();
        let keep = words.len().min(4);
        extra.push_str(&format!("{} {CANARY} prompt: '{CANARY}' {CANARY}\n", words[..keep].join(" ")));
    }
    extra.push_str(&format!("{CANARY},{CANARY},{CANARY}\n"));
    if !csv {
        extra.push_str(&format!("prompt_token_ids: [{}] {CANARY}\n", canary_ids(4)));
    }
    extra
}

/// Formats whose records are a benchmark run's summary: they copy the run's scalar settings (backend, dataset,
/// tag: what the operator chose) into the manifest's `details`, except text under text keys
/// (`json::is_free_text_key`). A canary put where a number belongs is such a setting, so they get none there.
const SUMMARIES: &[&str] = &["sglang-bench", "vllm-bench", "aiperf", "genai-perf", "llmservingsim"];

/// The decompressed content of `path`.
fn content(path: &Path) -> Vec<u8> {
    let mut input = Input::open(path, None).unwrap();
    let mut bytes = Vec::new();
    input.reader().read_to_end(&mut bytes).unwrap();
    bytes
}

/// One fixture per adapter id: of the valid text inputs the registry detects as it, the one where [`plant`] puts
/// the most canaries and canary ids (the first in sorted order on a tie).
fn fixtures() -> BTreeMap<&'static str, PathBuf> {
    let mut found: BTreeMap<&'static str, (usize, PathBuf)> = BTreeMap::new();
    for path in common::valid_inputs() {
        let head = Input::open(&path, None).unwrap().head().to_vec();
        if let Ok(adapter) = registry::detect(&head) {
            // Text only: planting rewrites text, and would corrupt a binary (msgpack) input.
            let Ok(text) = String::from_utf8(content(&path)) else { continue };
            let planted = plant(&text);
            let planted = planted.matches(CANARY).count() + planted.matches(&FIRST_ID.to_string()).count();
            match found.get(adapter.id()) {
                Some((best, _)) if *best >= planted => {}
                _ => {
                    found.insert(adapter.id(), (planted, path));
                }
            }
        }
    }
    found.into_iter().map(|(id, (_, path))| (id, path)).collect()
}

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

/// Every place the canary could hide in a dataset: each value of each column formatted, and the manifest.
/// Returns the findings as `table.column: value`.
fn leaks(dir: &Path) -> Vec<String> {
    let dataset = Dataset::open(dir).unwrap();
    let mut found = Vec::new();
    let ids: Vec<String> = (FIRST_ID..FIRST_ID + IDS).map(|i| i.to_string()).collect();
    let tables: [(&str, &RecordBatch); 3] =
        [("requests", &dataset.requests), ("samples", &dataset.samples), ("cache_events", &dataset.cache_events)];
    for (table, batch) in tables {
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            // Times as their nanoseconds: the formatter cannot render a named zone without chrono-tz.
            let column = match column.data_type() {
                DataType::Timestamp(..) => arrow::compute::cast(column, &DataType::Int64).unwrap(),
                _ => column.clone(),
            };
            let formatter = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default()).unwrap();
            for row in 0..column.len() {
                let value = formatter.value(row).to_string();
                let id = value.split(|c: char| !c.is_ascii_digit()).any(|token| ids.iter().any(|i| i == token));
                if value.contains("CANARY") || id {
                    found.push(format!("{table}.{}: {value}", field.name()));
                }
            }
        }
    }
    let manifest = fs::read_to_string(dir.join("manifest.json")).unwrap();
    if manifest.contains("CANARY") || ids.iter().any(|i| manifest.contains(i.as_str())) {
        found.push(format!("manifest.json: {manifest}"));
    }
    found
}

#[test]
fn no_canary_text_or_token_id_reaches_any_output_of_any_format() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures();
    let mut ids: Vec<&str> = ADAPTERS.iter().map(|a| a.id()).collect();
    ids.extend(["csv", "jsonl"]);
    let mut planted_somewhere = 0;
    let mut exported = 0;
    let mut failures = Vec::new();
    for id in ids {
        let (source, map) = match id {
            "csv" => (PathBuf::from("../../testdata/mapped/azure-2024/week_shape.csv"), Some("azure-2024.toml")),
            "jsonl" => (PathBuf::from("../../testdata/mapped/in-house/requests.jsonl"), Some("../testdata-in-house")),
            // Never detected: it must be chosen.
            "mooncake-delta" => (PathBuf::from("../../testdata/mooncake/dynamo-replay/mooncake-delta.jsonl"), None),
            _ => (fixtures.get(id).unwrap_or_else(|| panic!("no fixture of {id} in testdata")).clone(), None),
        };
        let original = String::from_utf8_lossy(&content(&source)).into_owned();
        let mut planted = plant(&original);
        let whole_document = serde_json::from_str::<serde_json::Value>(original.trim()).is_ok();
        if whole_document && let Some(at) = planted.find('{') {
            // A member no format reads, at the top of the document: unknown text must not be copied either.
            planted.insert_str(at + 1, &format!("\n  \"prompt\": \"{CANARY}\","));
        }
        if !whole_document {
            if !planted.ends_with('\n') {
                planted.push('\n');
            }
            let csv = source.to_string_lossy().contains(".csv");
            planted.push_str(&extra_lines(&original, csv, !SUMMARIES.contains(&id)));
        }
        let carries = planted.matches(CANARY).count();
        let carries_ids = planted.contains(&FIRST_ID.to_string());
        if carries > 0 {
            planted_somewhere += 1;
        }
        let name = source.file_name().unwrap().to_string_lossy().replace(".gz", "").replace(".zst", "");
        let input = dir.path().join(format!("{id}-{name}"));
        fs::write(&input, &planted).unwrap();
        let out = dir.path().join(format!("{id}-out"));
        let map_path = match map {
            Some("azure-2024.toml") => Some(PathBuf::from("../../examples/mappings/azure-2024.toml")),
            Some(_) => Some(PathBuf::from("../../testdata/mapped/in-house/mapping.toml")),
            None => None,
        };
        let mut args = vec!["normalize", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--format", id];
        if let Some(map) = &map_path {
            args.extend(["--map", map.to_str().unwrap()]);
        }
        let output = infertrace(&args);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        assert_eq!(output.status.code(), Some(0), "{id}: content never fails a run: {stderr}");
        let dataset = Dataset::open(&out).unwrap();
        let rows = dataset.manifest.rows.total();
        // Planting kept the records readable: as many rows as the fixture gives (some give only facts for the
        // manifest, such as LLMServingSim's meta.json or a benchmark's console summary).
        let unplanted = dir.path().join(format!("{id}-unplanted"));
        let mut original_args = args.clone();
        original_args[1] = source.to_str().unwrap();
        original_args[3] = unplanted.to_str().unwrap();
        assert_eq!(infertrace(&original_args).status.code(), Some(0));
        let original_rows = Dataset::open(&unplanted).unwrap().manifest.rows.total();
        assert!(
            rows > 0 || original_rows == 0,
            "{id}: planting lost every row of {} ({original_rows} before)",
            source.display()
        );
        eprintln!("{id:24} {carries:>3} canaries, ids {carries_ids:5}, {rows:>5} rows ({original_rows:>5} unplanted)");
        let mut found = leaks(&out);
        // The input was named by an absolute path: the manifest records it relative, never the machine's path.
        let manifest = fs::read_to_string(out.join("manifest.json")).unwrap();
        if manifest.contains(dir.path().to_str().unwrap()) {
            found.push(format!("manifest.json: an absolute path {}", dir.path().display()));
        }
        for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            if text.contains("CANARY") || text.contains(&FIRST_ID.to_string()) {
                found.push(format!("{stream}: {text}"));
            }
        }
        // What the dataset is exported as for a load generator, text formats included, carries none either.
        for format in ["mooncake", "aiperf-multi-turn", "vllm-custom"] {
            let file = dir.path().join(format!("{id}-{format}.jsonl"));
            let output =
                infertrace(&["export", out.to_str().unwrap(), "--format", format, "-o", file.to_str().unwrap()]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() {
                assert!(stderr.contains("nothing to replay"), "{id}: export as {format}: {stderr}");
                continue;
            }
            exported += 1;
            let manifest = dir.path().join(format!("{id}-{format}.jsonl.manifest.json"));
            let written = fs::read_to_string(&file).unwrap() + &fs::read_to_string(manifest).unwrap();
            let text = format!("{written}{}{stderr}", String::from_utf8_lossy(&output.stdout));
            if text.contains("CANARY") || text.contains(&FIRST_ID.to_string()) {
                found.push(format!("export as {format}: {text}"));
            }
        }
        if !found.is_empty() {
            failures.push(format!("{id}:\n  {}", found.join("\n  ")));
        }

        // With --show-lines, the offending lines are shown on stderr, and still not written to the dataset.
        if !whole_document {
            let shown = dir.path().join(format!("{id}-shown"));
            let mut args = args.clone();
            args[3] = shown.to_str().unwrap();
            args.push("--show-lines");
            let output = infertrace(&args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.contains(CANARY), "{id}: --show-lines shows the offending lines: {stderr}");
            let found = leaks(&shown);
            assert!(found.is_empty(), "{id}: --show-lines changes nothing in the dataset: {found:?}");
        }
    }
    assert!(failures.is_empty(), "canaries reached outputs:\n{}", failures.join("\n"));
    assert_eq!(planted_somewhere, ADAPTERS.len() + 2, "every format's input carried the canary");
    // 18 formats have requests with arrivals to export (the others hold samples, events or summaries only).
    assert!(exported >= 3 * 18, "only {exported} exports ran");
}

#[test]
fn show_lines_prints_the_offending_lines_to_stderr_with_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.jsonl");
    let text = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [0, 1]}\n\
                not json \x1b[31m red\n{\"timestamp\": 1}\n";
    fs::write(&input, text).unwrap();
    let out = dir.path().join("out");
    let output = infertrace(&["normalize", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--show-lines"]);
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let shown: Vec<&str> = stderr.lines().filter(|l| l.starts_with("line ")).collect();
    assert_eq!(
        shown,
        [
            "line a.jsonl:2 (malformed-json): not json \\u{1b}[31m red",
            "line a.jsonl:3 (missing-field): {\"timestamp\": 1}"
        ]
    );
    let manifest = fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(!manifest.contains("not json") && !manifest.contains("31m red"), "{manifest}");
}
