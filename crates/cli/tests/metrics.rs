//! `infertrace metrics` end to end: datasets normalized from committed inputs, then summarised by the binary and
//! by the library.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infertrace::metrics::{metrics, render_metrics};
use infertrace_engine::{GroupBy, Latency, MetricsOptions, Slo};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn llmservingsim_run(run: &str) -> PathBuf {
    common::testdata().join("traces-full/llmservingsim").join(run).join("vllm_requests.jsonl.zst")
}

/// The `duration` table row of `name` in the text report, split into cells.
fn duration_row<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{text}"));
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
}

/// The anchor: the mean TTFT of the LLMServingSim vLLM 0.19 benchmark runs, as their whole request logs give it.
#[test]
fn llmservingsim_vllm_runs_have_their_known_mean_ttft() {
    let dir = tempfile::tempdir().unwrap();
    for (run, mean) in [
        ("llmservingsim_vllm_bench_RTX4090_llama31_8b", "65.5 s"),
        ("llmservingsim_vllm_bench_RTXPRO6000_llama31_8b", "7.10 s"),
    ] {
        let out = dir.path().join(run);
        common::run(&[llmservingsim_run(run)], &out);
        let computed = metrics(&[out], &MetricsOptions::default()).unwrap();
        assert_eq!(computed.overall.requests, 300);
        assert_eq!(computed.overall.latency[&Latency::Ttft].count, 300);
        let text = render_metrics(&computed);
        let row = duration_row(&text, "ttft_s");
        assert_eq!(row[1..3], ["300", mean], "{run}:\n{text}");
    }
}

fn synthetic_dataset(dir: &Path) -> PathBuf {
    // Five benchmark requests with full timings and three workload requests with prefix hashes, in one dataset.
    let out = dir.join("ds");
    common::run(
        &[
            common::testdata().join("traces/llmservingsim/bench-requests/RTXPRO6000_vllm_requests_head.jsonl"),
            common::testdata().join("traces/llmservingsim/workload/sharegpt_llama31_8b_lines_101_110_275.jsonl"),
        ],
        &out,
    );
    out
}

#[test]
fn the_binary_prints_tables_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = synthetic_dataset(dir.path());
    let path = dataset.to_str().unwrap();

    let text = stdout(&infertrace(&["metrics", path, "--slo", "ttft=100ms,e2e=30s", "--by", "source"]));
    assert!(text.contains("slo: ttft ≤ 100 ms, e2e ≤ 30.0 s"), "{text}");
    // The bench measured its rows; the workload's are planned (relative clock, synthetic): shown apart.
    assert!(text.contains("== all requests (measured and synthetic taken together; each source below) =="), "{text}");
    assert!(text.contains("== source = llmservingsim-vllm (measured) =="), "{text}");
    assert!(text.contains("== source = llmservingsim-workload (synthetic) =="), "{text}");
    assert!(text.contains("goodput: "), "{text}");
    assert!(text.contains("prefix reuse (unbounded cache): "), "{text}");
    assert_eq!(duration_row(&text, "ttft_s")[1], "5", "{text}");

    // Without --by, rows of two kinds are broken down by source all the same.
    let json = stdout(&infertrace(&["metrics", path, "--json", "--slo", "ttft=100ms"]));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["metrics_version"], 1);
    assert_eq!(value["by"], "source");
    assert_eq!(value["slo"]["ttft"], 0.1);
    assert_eq!(value["overall"]["requests"], 8);
    assert_eq!(value["overall"]["latency"]["ttft"]["count"], 5);
    assert_eq!(value["overall"]["status"]["ok"], 5);
    assert_eq!(value["overall"]["status"]["unknown"], 3);
    assert_eq!(value["overall"]["success_rate"], 1.0);
    // Bench rows 1 to 4 have a TTFT of at most 100 ms (0.0626 s, 0.0794 s, 0.0494 s, 0.0993 s); row 0 has 0.170 s.
    assert_eq!(value["overall"]["goodput"]["requests"], 4);
    assert_eq!(value["overall"]["cache"]["reuse"]["requests"], 3);
    // On two clocks: nothing over all rows that needs one time line.
    assert_eq!(value["overall"]["throughput"]["span_s"], serde_json::Value::Null);
    let groups: Vec<&String> = value["groups"].as_object().unwrap().keys().collect();
    assert_eq!(groups, ["llmservingsim-vllm", "llmservingsim-workload"]);
    assert_eq!(value["groups"]["llmservingsim-vllm"]["requests"], 5);
    // The same again gives the same bytes.
    let again = stdout(&infertrace(&["metrics", path, "--json", "--slo", "ttft=100ms"]));
    assert_eq!(json, again);
    // Another breakdown cannot take the two clocks together.
    let refused = infertrace(&["metrics", path, "--json", "--by", "session_id"]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn bad_arguments_and_missing_datasets_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let output = infertrace(&["metrics", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(text.starts_with("error: cannot read dataset ") && text.contains("nope"), "{text}");
    let output = infertrace(&["metrics", "x", "--slo", "latency=1s"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown SLO"));
    let output = infertrace(&["metrics", "x", "--by", "region"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn groups_by_status_match_the_library() {
    let dir = tempfile::tempdir().unwrap();
    // Two AIPerf records on the wall clock: one cancelled (`was_cancelled: true`, so `aborted`), one complete.
    let aiperf = common::testdata().join("dynamo/aiperf-0.1.1-0.2");
    let dataset = dir.path().join("ds");
    common::run(
        &[
            aiperf.join("aiperf_profile_export_record_docs_failed.json"),
            aiperf.join("aiperf_profile_export_record_docs_success.json"),
        ],
        &dataset,
    );
    let options =
        MetricsOptions { slo: Slo::parse("e2e=20s").unwrap(), by: Some(GroupBy::Status), ..Default::default() };
    let computed = metrics(&[dataset], &options).unwrap();
    let keys: Vec<&str> = computed.groups.keys().map(String::as_str).collect();
    assert_eq!(keys, ["aborted", "ok"]);
    assert_eq!(computed.groups["ok"].requests, 1);
    assert_eq!(computed.groups["aborted"].goodput.as_ref().unwrap().requests, 0);
}

/// `compare`: the first five requests of the two LLMServingSim runs (the same prompts on two GPUs).
#[test]
fn compare_pairs_every_figure_of_two_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let head = |gpu: &str| {
        let out = dir.path().join(gpu);
        let input = format!("traces/llmservingsim/bench-requests/{gpu}_vllm_requests_head.jsonl");
        common::run(&[common::testdata().join(input)], &out);
        out
    };
    let (a, b) = (head("RTXPRO6000"), head("RTX4090"));
    let json = stdout(&infertrace(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--json", "--all"]));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let row = |path: &str| rows.iter().find(|r| r["path"] == path).unwrap_or_else(|| panic!("{path}: {json}"));
    // Python over the two files: mean(first_token_ts - queued_ts) = 0.0920522… s and 0.4311272… s.
    let ttft = row("overall.latency.ttft.mean");
    let (ta, tb) = (ttft["a"].as_f64().unwrap(), ttft["b"].as_f64().unwrap());
    assert!((ta - 0.092_052_228_6).abs() < 1e-9 && (tb - 0.431_127_151_0).abs() < 1e-9, "{ttft}");
    assert!((ttft["delta"].as_f64().unwrap() - (tb - ta)).abs() < 1e-12);
    assert!((ttft["relative"].as_f64().unwrap() - (tb - ta) / ta).abs() < 1e-12);
    // Both heads hold five requests with 3,364 output tokens in all: equal figures, no change.
    let requests = row("overall.requests");
    assert_eq!(
        (requests["a"].as_f64(), requests["b"].as_f64(), requests["delta"].as_f64()),
        (Some(5.0), Some(5.0), Some(0.0))
    );
    // Without --all, equal figures are left out; the table shows the change in percent.
    let text = stdout(&infertrace(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]));
    assert!(!text.lines().any(|l| l.starts_with("overall.requests ")), "{text}");
    let line = text.lines().find(|l| l.starts_with("overall.latency.ttft.mean ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with(&format!("{:+.1}%", (tb - ta) / ta * 100.0)), "{line}");
}

/// The client export of `testdata/dynamo/same-run`: requests 1 and 3 ok, 2 cancelled; the span runs from the
/// first `request_start_ns` (…599 998.5 ms) to the last `request_end_ns` (…600 541.5 ms): 0.543 s. At
/// $3,600 per accelerator-hour one accelerator costs $1 per second.
#[test]
fn a_cost_profile_prices_the_span_and_the_successful_answers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    common::run(&[common::testdata().join("dynamo/same-run/profile_export.jsonl")], &out);
    let profile = dir.path().join("profile.toml");
    std::fs::write(&profile, "[accelerator]\ncount = 1\nprice_per_hour = 3600\nwatts = 1000\n").unwrap();
    let output = infertrace(&["metrics", out.to_str().unwrap(), "--cost", profile.to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let cost = &json["overall"]["cost"];
    let close = |name: &str, expected: f64| {
        let actual = cost[name].as_f64().unwrap_or_else(|| panic!("{name}: {cost}"));
        assert!((actual - expected).abs() < 1e-9, "{name}: {actual} ≠ {expected}");
    };
    close("total_dollars", 0.543);
    // 1 kW for 0.543 s.
    close("energy_kwh", 0.543 / 3600.0);
    assert_eq!(cost["successful_answers"], 2);
    close("per_successful_answer", 0.2715);
    // Raw: (550 + 9) + 1200 + (800 + 2) = 2561 tokens (the cancelled request has no output count); effective 1361.
    assert_eq!((cost["raw_tokens"].as_u64(), cost["effective_tokens"].as_u64()), (Some(2561), Some(1361)));
    close("effective_fraction", 1361.0 / 2561.0);
    let text = stdout(&infertrace(&["metrics", out.to_str().unwrap(), "--cost", profile.to_str().unwrap()]));
    assert!(text.contains("cost: $0.543 over 0.000151 h: accelerators $0.543; 0.000151 kWh (nameplate)\n"), "{text}");
    assert!(text.contains("per successful answer: $0.272 (2 answers)\n"), "{text}");

    // A mistake in the profile is a one-line error naming it.
    std::fs::write(&profile, "[accelerator]\ncount = 1\nprice_per_hour = -2\n").unwrap();
    let bad = infertrace(&["metrics", out.to_str().unwrap(), "--cost", profile.to_str().unwrap()]);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        stderr,
        format!(
            "error: invalid cost profile {}: accelerator.price_per_hour must be a finite number ≥ 0\n",
            profile.display()
        )
    );
    std::fs::write(&profile, "[accelerator]\ncount = 1\nprice = 2\n").unwrap();
    let bad = infertrace(&["metrics", out.to_str().unwrap(), "--cost", profile.to_str().unwrap()]);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert!(
        stderr
            .starts_with(&format!("error: invalid cost profile {}: line 3: unknown field `price`", profile.display())),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// Past its memory limit, DataFusion stops with "Resources exhausted"; the user is told which option to raise.
#[test]
fn too_little_memory_says_which_option_to_raise() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    common::run(&[llmservingsim_run("llmservingsim_vllm_bench_RTX4090_llama31_8b")], &out);
    let output = infertrace(&["metrics", out.to_str().unwrap(), "--memory-limit", "1K"]);
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8_lossy(&output.stderr);
    assert_eq!(text, "error: cannot compute the metrics within --memory-limit (1 KiB): give it more memory\n");
}
