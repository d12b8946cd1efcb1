//! Goldens of `metrics --json` for the testdata datasets, one per format family, and an independent check of their
//! figures by a Python script (pyarrow, no shared code) reading the same Parquet files.
//!
//! Each family's files (`testdata/<family>/**`) are normalized into one dataset, then summarised by source with an
//! SLO and the example cost profile, so that every part of the object is exercised. By source: a family holds
//! relative traces beside logs on the wall clock, which only a breakdown by source may take together.

#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;
use std::process::Command;

use infertrace::metrics::{metrics, metrics_json, read_cost_profile};
use infertrace_engine::{GroupBy, MetricsOptions, Slo};

const FAMILIES: &[&str] = &["azure-llm", "dynamo", "mooncake", "sglang", "traces", "vllm"];
const SLO: &str = "ttft=2s,tpot=100ms,e2e=30s";

fn family_dataset(family: &str, dir: &Path) -> std::path::PathBuf {
    let prefix = common::testdata().join(family);
    let inputs: Vec<_> = common::valid_inputs().into_iter().filter(|p| p.starts_with(&prefix)).collect();
    assert!(!inputs.is_empty(), "no inputs under {}", prefix.display());
    // Timestamps without a year, and scrapes without times, take them from the file's modification time, which a
    // clone sets to the day of the clone: pin it, as `golden.rs` does (not `--year`, which would outrank the year
    // some logs' wrappers write).
    for input in &inputs {
        common::pin_modified(input);
    }
    common::run(&inputs, &dir.join(family)).output
}

fn options() -> MetricsOptions {
    MetricsOptions {
        slo: Slo::parse(SLO).unwrap(),
        by: Some(GroupBy::Source),
        cost: Some(read_cost_profile(Path::new("../../examples/cost/h100-fleet.toml")).unwrap()),
    }
}

#[test]
fn metrics_json_of_each_family() {
    let dir = tempfile::tempdir().unwrap();
    for family in FAMILIES {
        let dataset = family_dataset(family, dir.path());
        let json = metrics_json(&metrics(&[dataset], &options()).unwrap());
        insta::assert_snapshot!(format!("metrics_{family}"), json);
    }
}

/// The script recomputes status counts, every latency distribution (linear quantiles), throughput, goodput, the
/// cache hit rates and the reasoning multiplier from the Parquet files and compares them with `metrics --json`.
#[test]
fn an_independent_implementation_agrees() {
    let has_pyarrow = Command::new("python3").args(["-c", "import pyarrow"]).output().is_ok_and(|o| o.status.success());
    if !has_pyarrow {
        assert!(std::env::var_os("CI").is_none(), "CI must provide python3 with pyarrow (see .ci/run)");
        eprintln!("skipped: python3 with pyarrow not found (pip install pyarrow)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for family in FAMILIES {
        let dataset = family_dataset(family, dir.path());
        let json_path = dir.path().join(format!("{family}.json"));
        std::fs::write(&json_path, metrics_json(&metrics(std::slice::from_ref(&dataset), &options()).unwrap()))
            .unwrap();
        let output = Command::new("python3")
            .args(["tests/metrics_check.py", dataset.to_str().unwrap(), json_path.to_str().unwrap(), SLO])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{family}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("figures agree"), "{family}: {stdout}");
    }
}
