//! `infertrace model`, `sweep` and `size` end to end.

mod common;

use std::process::{Command, Output};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr_line(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    text
}

const EXAMPLE: &str = "../../examples/model/coding-agent.toml";

/// The worked example of the articles, with one command (docs/model.md compares it with the article).
#[test]
fn the_worked_example_of_the_articles() {
    insta::assert_snapshot!(stdout(&infertrace(&["model", EXAMPLE])));
}

#[test]
fn json_carries_the_figures_and_the_parameters() {
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&infertrace(&["model", EXAMPLE, "--json", "--set", "R=4"]))).unwrap();
    // --set overrides the file: G = 400 × (1 + 4).
    assert_eq!(json["params"]["workload"]["reasoning_multiplier"], 4.0);
    assert_eq!(json["evaluation"]["inputs"]["generated_tokens"], 2000.0);
    let expected = json["evaluation"]["prefill"]["expected_s"].as_f64().unwrap();
    assert!((expected - 6.66).abs() < 1e-12, "{expected}");
}

#[test]
fn a_sweep_writes_the_surface_and_names_the_breakeven() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let text = stdout(&infertrace(&[
        "sweep",
        EXAMPLE,
        "--vary",
        "L.external=0..30:4",
        "--set",
        "t_d=0.01",
        "--set",
        "p_gpu=3600",
        "-o",
        csv.to_str().unwrap(),
    ]));
    // At $1 per instance-second: 6.3 + 0.4 L + 52 s for L ≤ 18, 0.35 × 18 + 0.4 × 18 + 52 beyond.
    assert!(text.contains("optimum (cost_per_successful_answer): 58.3 at L.external = 0\n"), "{text}");
    assert!(text.contains("breakeven retrieve-vs-recompute external: L.external = 18\n"), "{text}");
    let surface = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = surface.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines[0]
            .starts_with("tiers.external.latency_s,expected_prefill_s,saving_s,instance_s,cost_per_successful_answer,")
    );
    assert!(lines[0].ends_with(",invalid"));
    // L = 10: 6.3 + 4 = 10.3 s expected; 20: 6.3 + 0.4 × 18 = 13.5 s.
    assert!(lines[2].starts_with("10,10.3,"), "{}", lines[2]);
    assert!(lines[3].starts_with("20,13.5,4.5,65.5,65.5,"), "{}", lines[3]);
}

#[test]
fn sizing_prints_the_pools() {
    let text = stdout(&infertrace(&[
        "size",
        "--model",
        "Llama-3.1-8B",
        "--accelerator",
        "H100",
        "--set",
        "V=100",
        "--set",
        "P=1000",
        "--rate",
        "1000",
        "--slo",
        "ttft=500ms,tpot=50ms",
    ]));
    // Hand-computed in crates/model/src/tests.rs (sizing_follows_the_roofline_and_the_slos): 37 + 9, 46 collocated.
    assert!(text.contains("disaggregated: 46 accelerators; collocated: 46\n"), "{text}");
    assert!(text.contains("decode batch 387 per instance (bound by memory)"), "{text}");
}

#[test]
fn mistakes_are_one_line_errors() {
    let unknown = infertrace(&["model", EXAMPLE, "--set", "frobnicate=1"]);
    assert!(stderr_line(&unknown).starts_with("error: --set frobnicate=1: unknown parameter \"frobnicate\""));
    let range = infertrace(&["model", EXAMPLE, "--set", "h.hbm=0.9"]);
    assert!(stderr_line(&range).contains("the sum of tier hit rates = 1.3 is out of range (0 to 1)"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[workload]\nvisible = 3\n").unwrap();
    let file = infertrace(&["model", bad.to_str().unwrap()]);
    let line = stderr_line(&file);
    assert!(
        line.starts_with(&format!("error: invalid parameters {}: line 2: unknown field `visible`", bad.display())),
        "{line}"
    );
    let model = infertrace(&["model", EXAMPLE, "--model", "GPT-9"]);
    assert!(stderr_line(&model).contains("model \"GPT-9\" is not in the catalog"));
    let size = infertrace(&["size", EXAMPLE, "--rate", "1", "--slo", "ttft=1s,tpot=50ms"]);
    assert!(stderr_line(&size).starts_with("error: sizing needs [hardware]"));
}

#[test]
fn parameters_can_be_measured_from_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    // The Dynamo request trace of one synthetic run: three requests with prefix hashes and hit rates.
    common::run(&[common::testdata().join("dynamo/same-run/dynamo-request-trace.000000.jsonl.gz")], &out);
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&infertrace(&["model", "--from", out.to_str().unwrap(), "--json"]))).unwrap();
    let measured = &json["measured"]["params"];
    // Mean input (550 + 1200 + 800) / 3 = 850 tokens; mean output (9 + 32 + 2) / 3 = 14.33.
    assert_eq!(measured["workload.input_tokens"]["value"], 850.0);
    let visible = measured["workload.visible_tokens"]["value"].as_f64().unwrap();
    assert!((visible - 43.0 / 3.0).abs() < 1e-12, "{visible}");
    // The measured values reach the parameters.
    assert_eq!(json["params"]["workload"]["input_tokens"], 850.0);
}

#[test]
fn a_two_parameter_sweep_draws_a_heat_map() {
    let dir = tempfile::tempdir().unwrap();
    let (surface, svg) = (dir.path().join("s.parquet"), dir.path().join("s.svg"));
    let text = stdout(&infertrace(&[
        "sweep",
        EXAMPLE,
        "--vary",
        "h.hbm=0..0.6:4",
        "--vary",
        "h.external=0..0.6:4",
        "-o",
        surface.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]));
    // 0.6 + 0.6 is the only pair over 1 of the 16 (0.4 + 0.6 = 1 is allowed).
    assert!(text.contains("16 points (15 valid) over tiers.hbm.hit_rate × tiers.external.hit_rate\n"), "{text}");
    // No price: the objective is E; least at 0.6 in HBM and 0.4 outside: 0.4 × 0.9 = 0.36 s.
    assert!(text.contains("optimum (expected_prefill_s): 0.36 at h.hbm = 0.6, h.external = 0.4\n"), "{text}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(svg.matches("<rect x=").count(), 16);
    assert!(std::fs::metadata(&surface).unwrap().len() > 0);
}

#[test]
fn a_hit_curve_comes_from_mrc_or_from_the_datasets() {
    let dir = tempfile::tempdir().unwrap();
    // A curve file as `infertrace mrc --json` writes it: hbm at 400 tokens × κ 2 = 800 → 0.5 × 800 / 1000 = 0.4.
    let curve = dir.path().join("mrc.json");
    std::fs::write(
        &curve,
        r#"{"points": [{"capacity_tokens": 0, "hit_ratio": 0.0}, {"capacity_tokens": 1000, "hit_ratio": 0.5}]}"#,
    )
    .unwrap();
    let args = ["model", EXAMPLE, "--hit-curve", curve.to_str().unwrap(), "--set", "compression.capacity_tokens=400"];
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&infertrace(&[&args[..], &["--set", "kappa=2", "--json"]].concat()))).unwrap();
    let c = &json["evaluation"]["compression"];
    assert_eq!((c["hit_rate_uncompressed"].as_f64(), c["hit_rate"].as_f64()), (Some(0.2), Some(0.4)));

    // From a dataset with prefix hashes: the Mooncake conversation trace (512-token blocks).
    let out = dir.path().join("mc");
    common::run(&[common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst")], &out);
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&infertrace(&["model", "--from", out.to_str().unwrap(), "--json"]))).unwrap();
    let points = json["params"]["compression"]["hit_curve"].as_array().unwrap();
    // Powers of two from the block size; the last point is the unbounded cache, the reuse the metrics report.
    assert_eq!(points[0][0], 512.0);
    assert_eq!(points[1][0], 1024.0);
    // The last point is the unbounded cache: 37.4% of input tokens (docs/replay.md; the paper gives 40%).
    let last = points.last().unwrap()[1].as_f64().unwrap();
    assert!((last - 0.3736).abs() < 0.0001, "{last}");
    // Ascending capacities, non-decreasing hit ratios (LRU's stack property).
    for pair in points.windows(2) {
        assert!(pair[0][0].as_f64() < pair[1][0].as_f64() && pair[0][1].as_f64() <= pair[1][1].as_f64(), "{pair:?}");
    }
}
