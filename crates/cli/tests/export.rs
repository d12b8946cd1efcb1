//! `infertrace export`: round trips through the Mooncake format on three kinds of dataset (a public trace, WEKA
//! agentic sessions, a vLLM log), the segment and sampling options with hand-computed counts, and the formats
//! checked by AIPerf's own loaders (`aiperf_check.py`).

#![allow(clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use infertrace_adapter::ParseOptions;
use infertrace_schema::{RequestRow, Table, read_table};

fn infertrace(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "infertrace {args:?}: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

fn rows(dir: &Path) -> Vec<RequestRow> {
    RequestRow::from_batch(&read_table::<RequestRow>(dir).unwrap()).unwrap()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Arrival (ms), prompt and output tokens, session and turn of a request.
type Replayed = (i64, u32, u32, Option<String>, Option<u32>);

/// What a replay must keep of each request: its arrival in whole milliseconds from the first arrival (rounded to
/// the nearest), its prompt and output lengths, its session and turn. Sorted, so two datasets compare as sets.
fn replayed(rows: &[RequestRow], output_or_limit: bool) -> Vec<Replayed> {
    let first = rows.iter().filter_map(|r| r.arrival_time).min().unwrap();
    let mut kept: Vec<_> = rows
        .iter()
        .map(|r| {
            let offset = r.arrival_time.unwrap() - first;
            let ms = (offset + 500_000).div_euclid(1_000_000);
            let output = if output_or_limit { r.output_tokens.or(r.max_tokens) } else { r.output_tokens };
            (ms, r.input_tokens.unwrap(), output.unwrap(), r.session_id.clone(), r.turn)
        })
        .collect();
    kept.sort();
    kept
}

/// Each tier's and the overall hit ratio and hit tokens of `cache-sim --json` with `tiers`.
fn hit_ratios(dataset: &Path, tiers: &[&str]) -> Vec<(String, f64, u64)> {
    let mut args = vec!["cache-sim", text(dataset), "--json"];
    for tier in tiers {
        args.extend(["--tier", tier]);
    }
    let json: serde_json::Value = serde_json::from_str(&infertrace(&args)).unwrap();
    let mut got: Vec<(String, f64, u64)> = json["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tier"].as_str().unwrap().to_owned(),
                t["hit_ratio"].as_f64().unwrap(),
                t["hit_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    got.push(("all".to_owned(), json["hit_ratio"].as_f64().unwrap(), json["hit_tokens"].as_u64().unwrap()));
    got
}

/// Exports `source` as Mooncake at `block_size`, normalizes the export back, and checks that arrivals (to the ms),
/// lengths, sessions and cache-sim hit ratios under `tiers` are the source's. Returns the manifest and the rows.
fn round_trip(source: &Path, block_size: u32, tiers: &[&str], dir: &Path) -> (serde_json::Value, Vec<RequestRow>) {
    let exported = dir.join("trace.jsonl");
    let size = block_size.to_string();
    infertrace(&["export", text(source), "--format", "mooncake", "--block-size", &size, "-o", text(&exported)]);
    let back = dir.join("back");
    infertrace(&["normalize", text(&exported), "--format", "mooncake", "--block-size", &size, "-o", text(&back)]);
    // What vLLM's `timed_trace` (vllm 0.34.0, vllm/benchmarks/datasets/datasets.py, TimedTrace) requires of each
    // line: `timestamp`, `input_length` and `output_length`, and ceil(input_length / block size) `hash_ids`, or its
    // prompt comes out short; SGLang's `mooncake` reader (sglang 0.5.23, benchmark/datasets/mooncake.py) reads
    // `timestamp`, `hash_ids` and `output_length`. Neither can be installed here (both need torch).
    for line in std::fs::read_to_string(&exported).unwrap().lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = line["input_length"].as_u64().unwrap();
        assert!(line["timestamp"].is_i64() && line["output_length"].is_u64(), "{line}");
        assert_eq!(line["hash_ids"].as_array().unwrap().len() as u64, input.div_ceil(u64::from(block_size)), "{line}");
    }
    let back_manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(back.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(back_manifest["inputs"][0]["diagnostics"]["total"], 0, "the export reads back without a diagnostic");
    let (before, after) = (rows(source), rows(&back));
    assert_eq!(after.len(), before.len());
    assert_eq!(replayed(&after, false), replayed(&before, true));
    // Every arrival is a whole millisecond after the round trip: nothing below a millisecond is made up.
    assert!(after.iter().all(|r| r.arrival_time.unwrap() % 1_000_000 == 0));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.jsonl.manifest.json")).unwrap()).unwrap();
    let (want, got) = (hit_ratios(source, tiers), hit_ratios(&back, tiers));
    assert_eq!(got.last(), want.last(), "the overall hit tokens and ratio");
    assert!(want.last().unwrap().1 > 0.0, "a round trip of a trace without reuse would prove little: {want:?}");
    // A dataset that hashes full blocks only (vLLM, WEKA) gains one block of its own per prompt with a partial tail,
    // as Mooncake requires. Never hit, it changes no hit, but it takes room in a tier under pressure, so hits can
    // move to the next tier by at most that many tokens.
    let own_tokens = manifest["counts"]["blocks_own"].as_u64().unwrap() * u64::from(block_size);
    for ((tier, _, want), (_, _, got)) in want.iter().zip(&got) {
        assert!(want.abs_diff(*got) <= own_tokens, "{tier}: {want} before, {got} after, {own_tokens} own tokens");
    }
    if own_tokens == 0 {
        assert_eq!(got, want);
    }
    (manifest, after)
}

#[test]
fn mooncake_conversation_trace_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("conversation");
    common::run(&[common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst")], &source);
    let (manifest, _) = round_trip(&source, 512, &["gpu=1M", "cpu=10M"], dir.path());
    // 12,031 requests of one hour, every prompt hashed by Mooncake itself, partial last blocks included.
    assert_eq!(manifest["counts"]["requests"], 12_031);
    assert_eq!(manifest["counts"]["blocks_own"], 0);
    // The export is the trace itself: Mooncake's ids are dense and first-seen ordered already.
    let original = zstd::decode_all(
        std::fs::File::open(common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst")).unwrap(),
    )
    .unwrap();
    let first_line = String::from_utf8(original).unwrap().lines().next().unwrap().replace(' ', "");
    let exported = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    assert_eq!(exported.lines().next().unwrap(), first_line);
}

#[test]
fn weka_agentic_sessions_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("weka");
    let weka = common::testdata().join("traces/weka");
    common::run(
        &[weka.join("trace_0504.json"), weka.join("trace_0187.json"), weka.join("trace_0291.json.zst")],
        &source,
    );
    // WEKA hashes 64-token blocks, full ones only: each prompt's partial tail gets an id of its own.
    let (manifest, back) = round_trip(&source, 64, &["gpu=100k", "cpu=1M"], dir.path());
    let counts = &manifest["counts"];
    assert_eq!(counts["requests"], 38);
    // Three conversations, two of them with sub-agents: trace_0291 has two Explore agents.
    let sessions: std::collections::BTreeSet<_> = back.iter().filter_map(|r| r.session_id.clone()).collect();
    assert_eq!(counts["sessions"], sessions.len() as u64);
    assert!(sessions.contains("trace_0291/agent_001") && sessions.contains("trace_0504"), "{sessions:?}");
    // Σ ceil(in / 64) − Σ floor(in / 64) own blocks: one per prompt whose length is not a multiple of 64.
    let before = rows(&source);
    let tails = before.iter().filter(|r| r.input_tokens.unwrap() % 64 != 0).count() as u64;
    assert_eq!(counts["blocks_own"], tails);
    let hashed: u64 = before.iter().map(|r| r.prefix_hashes.as_ref().unwrap().len() as u64).sum();
    assert_eq!(counts["blocks_shared"], hashed);
}

/// The `params:` of vLLM 0.8.5's Received line (V1 `SamplingParams`), with `max_tokens` given.
fn sampling(max_tokens: u32) -> String {
    format!(
        "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, \
         top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], \
         include_stop_str_in_output=False, ignore_eos=False, max_tokens={max_tokens}, min_tokens=0, logprobs=None, \
         prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, \
         truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)"
    )
}

#[test]
fn vllm_log_dataset_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    // A vLLM 0.8.5 log (logger.py:39 `Received request` with prompt_token_ids, 1 s timestamps) of 12 requests: a
    // 40-token system prompt shared by all, and every third request continuing the one before it.
    let mut log = String::new();
    let mut previous: Vec<u32> = Vec::new();
    for i in 0..12u32 {
        let mut ids: Vec<u32> = if i % 3 == 2 { previous.clone() } else { (1..=40).collect() };
        ids.extend((0..(7 + 13 * i % 50)).map(|k| 1000 + 100 * i + k));
        let tokens = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        log.push_str(&format!(
            "INFO 05-11 12:04:{:02} [logger.py:39] Received request cmpl-{i}: prompt: 'x', params: {}, \
             prompt_token_ids: [{tokens}], lora_request: None, prompt_adapter_request: None.\n",
            10 + i / 2,
            sampling(16 + i),
        ));
        previous = ids;
    }
    let input = dir.path().join("vllm.log");
    std::fs::write(&input, log).unwrap();
    let source = dir.path().join("vllm");
    common::run_with(&[input], &source, ParseOptions { year: Some(2025), ..ParseOptions::default() });
    let before = rows(&source);
    assert_eq!(before.len(), 12);
    assert!(before.iter().all(|r| r.output_tokens.is_none() && r.block_size == Some(16)));
    let (manifest, _) = round_trip(&source, 16, &["gpu=64", "cpu=100k"], dir.path());
    // V1 logs no output counts: the request's max_tokens is its output length, counted.
    assert_eq!(manifest["counts"]["output_from_max_tokens"], 12);
}

/// A small Mooncake trace with sessions, written by hand.
fn sessions_trace(dir: &Path) -> PathBuf {
    let lines = [
        r#"{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2], "session_id": "a"}"#,
        r#"{"timestamp": 1000, "input_length": 300, "output_length": 5, "hash_ids": [7]}"#,
        r#"{"timestamp": 2000, "input_length": 900, "output_length": 10, "hash_ids": [1, 2], "session_id": "a"}"#,
        r#"{"timestamp": 3000, "input_length": 100, "output_length": 5, "hash_ids": [9], "session_id": "b"}"#,
        r#"{"timestamp": 4000, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}"#,
        r#"{"timestamp": 5000, "input_length": 400, "output_length": 5, "hash_ids": [9], "session_id": "b"}"#,
        r#"{"timestamp": 6000, "input_length": 50, "output_length": 5, "hash_ids": [3]}"#,
    ];
    let input = dir.join("sessions.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let source = dir.join("sessions");
    common::run(&[input], &source);
    source
}

#[test]
fn segments_sampling_scaling_and_clipping_are_applied_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let source = sessions_trace(dir.path());
    let export = |name: &str, extra: &[&str]| -> (Vec<serde_json::Value>, serde_json::Value) {
        let out = dir.path().join(name);
        let mut args = vec!["export", text(&source), "--format", "mooncake", "-o", text(&out)];
        args.extend(extra);
        infertrace(&args);
        let lines = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let manifest = std::fs::read_to_string(dir.path().join(format!("{name}.manifest.json"))).unwrap();
        (lines, serde_json::from_str(&manifest).unwrap())
    };

    // [1.5 s, 5 s): the rows at 2, 3 and 4 s; timestamps count from 1.5 s, halved.
    let (lines, manifest) =
        export("segment.jsonl", &["--from", "1.5s", "--to", "1970-01-01T00:00:05Z", "--time-scale", "0.5"]);
    let stamps: Vec<i64> = lines.iter().map(|l| l["timestamp"].as_i64().unwrap()).collect();
    assert_eq!(stamps, [250, 750, 1250]);
    assert_eq!(
        (manifest["counts"]["outside_segment"].as_u64(), manifest["counts"]["requests"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(manifest["segment"]["from"], "1970-01-01T00:00:01.500Z");
    assert_eq!(manifest["segment"]["to"], "1970-01-01T00:00:05Z");

    // Clipping to 512 tokens: the 600-, 900- and 700-token prompts, 88 + 388 + 188 tokens removed; a 512-token
    // prompt keeps one block.
    let (lines, manifest) = export("clipped.jsonl", &["--max-input-tokens", "512"]);
    assert_eq!(manifest["counts"]["clipped"], 3);
    assert_eq!(manifest["counts"]["clipped_tokens"], 88 + 388 + 188);
    assert_eq!(lines[0]["input_length"], 512);
    assert_eq!(lines[0]["hash_ids"], serde_json::json!([0]));

    // Sampling keeps whole sessions: every row of a kept session, none of a dropped one. Units: a, b and the three
    // rows without a session.
    for n in 1..=5u64 {
        let (lines, manifest) = export("sampled.jsonl", &["--sessions", &n.to_string(), "--force"]);
        let mut units: BTreeMap<String, usize> = BTreeMap::new();
        for (i, line) in lines.iter().enumerate() {
            let unit = line["session_id"].as_str().map_or(format!("row {i}"), str::to_owned);
            *units.entry(unit).or_default() += 1;
        }
        assert_eq!(units.len() as u64, n, "{units:?}");
        for session in ["a", "b"] {
            assert!(units.get(session).is_none_or(|&turns| turns == 2), "{session}: {units:?}");
        }
        let requests = manifest["counts"]["requests"].as_u64().unwrap();
        assert_eq!(requests + manifest["counts"]["sampled_out"].as_u64().unwrap(), 7);
    }
    // The segment as a dataset keeps the same requests, unchanged: the production side of `compare`.
    let (lines, _) = export("three.jsonl", &["--sessions", "3", "--from", "1s"]);
    let segment = dir.path().join("segment");
    infertrace(&[
        "export",
        text(&source),
        "--format",
        "dataset",
        "--sessions",
        "3",
        "--from",
        "1s",
        "-o",
        text(&segment),
    ]);
    let kept = rows(&segment);
    let offsets: Vec<i64> = kept.iter().map(|r| r.arrival_time.unwrap() / 1_000_000 - 1_000).collect();
    let stamps: Vec<i64> = lines.iter().map(|l| l["timestamp"].as_i64().unwrap()).collect();
    assert_eq!(offsets, stamps);
    assert!(kept.iter().all(|r| r.source == "mooncake" && r.prefix_hashes.is_some()));
    let compared = infertrace(&["compare", text(&source), text(&segment)]);
    let requests = compared.lines().find(|l| l.starts_with("overall.status.unknown ")).unwrap_or_default();
    assert_eq!(
        requests.split_whitespace().take(3).collect::<Vec<_>>(),
        ["overall.status.unknown", "7", &kept.len().to_string()]
    );

    let (lines, _) = export("all.jsonl", &["--sample", "1"]);
    assert_eq!(lines.len(), 7);
    let (lines, manifest) = export("none.jsonl", &["--sample", "0"]);
    assert!(lines.is_empty());
    assert_eq!(manifest["counts"]["sampled_out"], 7);
}

#[test]
fn the_same_export_twice_is_the_same_bytes_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let source = sessions_trace(dir.path());
    for format in ["mooncake", "aiperf-mooncake", "aiperf-multi-turn", "vllm-custom"] {
        let mut written = Vec::new();
        for name in ["one", "two"] {
            // Run where the dataset is, with relative paths, as a user would.
            let out = format!("{name}-{format}.jsonl");
            let status = Command::new(env!("CARGO_BIN_EXE_infertrace"))
                .args(["export", "sessions", "--format", format, "--sample", "0.6", "-o", &out])
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
            let manifest = std::fs::read_to_string(dir.path().join(format!("{out}.manifest.json")));
            let manifest = manifest.unwrap().replace(&format!("{name}-"), "");
            written.push((std::fs::read(dir.path().join(&out)).unwrap(), manifest));
        }
        assert_eq!(written[0], written[1], "{format}");
        assert!(
            written[0].1.contains(
                r#""datasets": [
    "sessions"
  ]"#
            ),
            "{}",
            written[0].1
        );
    }
    let out = dir.path().join("one-mooncake.jsonl");
    let refused = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["export", text(&source), "--format", "mooncake", "-o", text(&out)])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("exists; pass --force"));
}

#[test]
fn vllm_custom_lines_follow_vllms_custom_dataset() {
    // vLLM 0.34.0, vllm/benchmarks/datasets/datasets.py, CustomDataset.load_data: a `.jsonl` file read with
    // `pd.read_json(lines=True, dtype={"prompt": str})`, a `prompt` column required, `output_tokens` read as an
    // int when `--custom-output-len -1`. The prompt's words are one token each (`infertrace-export` tests).
    let dir = tempfile::tempdir().unwrap();
    let source = sessions_trace(dir.path());
    let out = dir.path().join("custom.jsonl");
    infertrace(&["export", text(&source), "--format", "vllm-custom", "-o", text(&out)]);
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let lengths: Vec<(usize, u64)> = lines
        .iter()
        .map(|l| {
            let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["output_tokens", "prompt"]);
            (l["prompt"].as_str().unwrap().split(' ').skip(1).count(), l["output_tokens"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(lengths, [(600, 10), (300, 5), (900, 10), (100, 5), (700, 5), (400, 5), (50, 5)]);
    // Rows 0, 2 and 4 share hash ids 1 and 2 (1,024 tokens at Mooncake's 512): the 600-token prompt is all shared.
    let words =
        |i: usize| lines[i]["prompt"].as_str().unwrap().split(' ').skip(1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(2)[..600], words(0)[..]);
    assert_eq!(words(4)[..700], words(2)[..700]);
    assert_ne!(words(6)[..10], words(0)[..10]);
}

#[test]
fn aiperf_loads_every_aiperf_export_with_its_own_loaders() {
    if !common::has_python_module("aiperf") {
        assert!(std::env::var_os("CI").is_none(), "CI must provide AIPerf (cargo xtask test installs it)");
        eprintln!("skipped: python3 with aiperf not found (pip install aiperf==0.13.0)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let weka = common::testdata().join("traces/weka");
    let source = dir.path().join("weka");
    common::run(&[weka.join("trace_0504.json"), weka.join("trace_0291.json.zst")], &source);
    let conversation = dir.path().join("conversation");
    common::run(&[common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst")], &conversation);
    let files = [
        (&conversation, "mooncake", &["--to", "20s"][..]),
        (&source, "aiperf-mooncake", &[][..]),
        (&source, "aiperf-multi-turn", &[][..]),
    ];
    let mut args: Vec<PathBuf> = vec![PathBuf::from("tests/aiperf_check.py"), dir.path().join("tokenizer")];
    for (dataset, format, extra) in files {
        let out = dir.path().join(format!("{format}.jsonl"));
        let mut command = vec!["export", text(dataset), "--format", format, "-o", text(&out)];
        command.extend(extra);
        infertrace(&command);
        args.push(out);
    }
    let output = Command::new("python3").args(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let weka_rows = rows(&source);
    let sessions: std::collections::BTreeSet<_> = weka_rows.iter().filter_map(|r| r.session_id.clone()).collect();
    // The first 20 s of the conversation trace: every request a conversation of one turn, each prompt exactly
    // its input_length under the tokenizer AIPerf was given.
    let first_20s = rows(&conversation).iter().filter(|r| r.arrival_time.unwrap() < 20_000_000_000).count();
    assert_eq!(report["mooncake"]["conversations"], first_20s);
    assert_eq!(report["mooncake"]["length_mismatches"], 0);
    assert_eq!(report["mooncake"]["shared_prefix_pairs_checked"].as_u64().map(|n| n > 0), Some(true));
    for format in ["aiperf-mooncake", "aiperf-multi-turn"] {
        // A turn whose prompt does not continue the previous prompt and output (Claude Code drops earlier
        // thinking from the context) starts a conversation of its own, counted in the manifest.
        let manifest = std::fs::read_to_string(dir.path().join(format!("{format}.jsonl.manifest.json"))).unwrap();
        let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        let restarted = manifest["counts"]["sessions_restarted"].as_u64().unwrap();
        assert!(restarted > 0, "the WEKA sessions have turns that shrink the context");
        let conversations = sessions.len() as u64 + restarted;
        assert_eq!(report[format]["conversations"], conversations, "{format}");
        assert_eq!(report[format]["turns"], weka_rows.len(), "{format}");
        assert_eq!(report[format]["timestamps"], conversations, "{format}: one per conversation, on its first turn");
        assert_eq!(report[format]["length_mismatches"], 0, "{format}");
    }
}
