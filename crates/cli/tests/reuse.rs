//! One definition of the unbounded-cache hit ratio: `metrics`, `report`, `mrc`, `cache-sim` and `model --from` give
//! the same number on the Mooncake conversation trace.

mod common;

use std::process::Command;

use serde_json::Value;

/// Python over the original file (rows sorted by timestamp, ties in file order; a set of the hash ids seen): each
/// request hits the ids seen before, 105,710 blocks in all; Σ min(hits × 512, input_length) = 54,098,411 tokens over
/// Σ input_length = 144,793,823.
const HIT_TOKENS: u64 = 54_098_411;
const INPUT_TOKENS: u64 = 144_793_823;

fn json(args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs");
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_command_gives_the_same_unbounded_hit_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    common::run(&[common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst")], &ds);
    let ds = ds.to_str().unwrap();
    let expected = HIT_TOKENS as f64 / INPUT_TOKENS as f64;

    let metrics = json(&["metrics", ds, "--json"]);
    let reuse = &metrics["overall"]["cache"]["reuse"];
    assert_eq!((reuse["hit_blocks"].as_u64(), reuse["hit_tokens"].as_u64()), (Some(105_710), Some(HIT_TOKENS)));
    assert_eq!(reuse["tokens"].as_u64(), Some(INPUT_TOKENS));
    assert_eq!(reuse["hit_rate"].as_f64(), Some(expected));

    // A tier with room for every block (288,500 blocks of 512 tokens) evicts nothing.
    let sim = json(&["cache-sim", ds, "--tier", "gpu=1G", "--json"]);
    assert_eq!((sim["hit_tokens"].as_u64(), sim["input_tokens"].as_u64()), (Some(HIT_TOKENS), Some(INPUT_TOKENS)));
    assert_eq!(sim["hit_ratio"].as_f64(), Some(expected));

    let mrc = json(&["mrc", ds, "--exact", "--json"]);
    assert_eq!(mrc["unbounded_hit_ratio"].as_f64(), Some(expected));

    let model = json(&["model", "--from", ds, "--json"]);
    assert_eq!(model["params"]["workload"]["prefix_reuse"].as_f64(), Some(expected));

    let html = dir.path().join("r.html");
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["report", ds, "-o", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success());
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains("prefix reuse (unbounded cache)</th><td>37.4% of 144,793,823 tokens (12,031 requests)"),
        "the report's reuse row is missing or differs"
    );
}
