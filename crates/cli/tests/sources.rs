//! Measured and simulated rows under their own sources, the simulator on the run's clock, and figures refused over
//! rows whose clocks cannot be compared.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use arrow::array::AsArray;
use arrow::datatypes::TimestampNanosecondType;
use infertrace::metrics::{metrics, render_metrics};
use infertrace_engine::{GroupBy, Latency, MetricsOptions};
use infertrace_schema::{ClockDomain, Dataset, request};

/// The published RTXPRO6000 run: vLLM's measured log, the simulator's output for the same workload, the time
/// series, `vllm_meta.json` (`started_at` 2026-04-25T18:47:18.273385Z) and the cluster `config.json`.
fn run_dir() -> PathBuf {
    common::testdata().join("traces-full/llmservingsim/llmservingsim_vllm_bench_RTXPRO6000_llama31_8b")
}

fn infertrace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

#[test]
fn a_benchmark_run_directory_keeps_measured_and_simulated_rows_apart_on_one_clock() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let report = common::run(&[run_dir()], &out);
    let sim = report.manifest.inputs.iter().find(|i| i.path.ends_with("outputs_sim.csv.zst")).unwrap();
    assert_eq!(sim.clock_domain, ClockDomain::Utc);
    assert_eq!(sim.details["clock_alignment"]["from"], "vllm_meta.json.zst");

    let dataset = Dataset::open(&out).unwrap();
    let rows = &dataset.requests;
    let sources =
        arrow::compute::cast(rows.column_by_name(request::SOURCE).unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let ids = rows.column_by_name(request::REQUEST_ID).unwrap().as_string::<i32>().clone();
    let arrivals =
        rows.column_by_name(request::ARRIVAL_TIME).unwrap().as_primitive::<TimestampNanosecondType>().clone();
    // The arrival of each request of the workload, by index, per source: the bench names it `bench-<i>`, the
    // simulator `<i>`.
    let mut by_source: BTreeMap<String, BTreeMap<u32, i64>> = BTreeMap::new();
    for i in 0..rows.num_rows() {
        let source = sources.as_string::<i32>().value(i).to_owned();
        let index = ids.value(i).trim_start_matches("bench-").parse().unwrap();
        by_source.entry(source).or_default().insert(index, arrivals.value(i));
    }
    assert_eq!(by_source.keys().collect::<Vec<_>>(), ["llmservingsim-sim", "llmservingsim-vllm"]);
    let (sim, measured) = (&by_source["llmservingsim-sim"], &by_source["llmservingsim-vllm"]);
    assert_eq!((sim.len(), measured.len()), (300, 300));
    // On the run's clock, each simulated arrival comes just before vLLM's queue entry for the same request (the
    // dataset's measured arrival): Python over the corpus files (started_at + arrival ns against queued_ts moved
    // onto the epoch by the first row's arrival_time - queued_ts) gives gaps from 1.230 ms to 109.90 ms. Counted
    // from 0 they would be 56 years.
    let gaps: Vec<i64> = sim.iter().map(|(index, at)| measured[index] - at).collect();
    let (least, most) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
    assert!((least - 1_230_001).abs() < 10_000, "{least} ns");
    assert!((most - 109_900_713).abs() < 10_000, "{most} ns");

    // Broken down by source without being asked, each with its own figures: the measured mean TTFT is the run's
    // published 7.10 s.
    let computed = metrics(std::slice::from_ref(&out), &MetricsOptions::default()).unwrap();
    assert_eq!(computed.by, Some(GroupBy::Source));
    let ttft = computed.groups["llmservingsim-vllm"].latency[&Latency::Ttft].mean.unwrap();
    assert!((ttft - 7.10).abs() < 0.005, "{ttft}");
    assert_eq!(computed.groups["llmservingsim-sim"].requests, 300);
    let text = render_metrics(&computed);
    assert!(text.contains("== all requests (measured and simulated taken together; each source below) =="), "{text}");
    assert!(text.contains("== source = llmservingsim-sim (simulated) =="), "{text}");
    assert!(text.contains("== source = llmservingsim-vllm (measured) =="), "{text}");
}

#[test]
fn rows_on_a_relative_clock_beside_rows_on_the_wall_clock_are_refused_unless_broken_down_by_source() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mooncake = common::testdata().join("mooncake/fast25/conversation_trace.jsonl.zst");
    common::run(&[mooncake, run_dir().join("vllm_requests.jsonl.zst")], &out);
    let ds = out.to_str().unwrap();
    let html = dir.path().join("r.html");
    for args in [
        vec!["metrics", ds],
        vec!["metrics", ds, "--json"],
        vec!["report", ds, "-o", html.to_str().unwrap()],
        vec!["compare", ds, ds],
        vec!["metrics", ds, "--by", "model"],
    ] {
        let output = infertrace(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("conversation_trace.jsonl.zst (relative clock"), "{args:?}: {stderr}");
        assert!(stderr.contains("vllm_requests.jsonl.zst (wall clock)"), "{args:?}: {stderr}");
        assert!(stderr.contains("--by source"), "{args:?}: {stderr}");
    }
    assert!(!html.exists());

    // By source, each source's figures stand; over all rows, nothing that needs one time line is given.
    let by_source = MetricsOptions { by: Some(GroupBy::Source), ..MetricsOptions::default() };
    let computed = metrics(&[out], &by_source).unwrap();
    assert_eq!(computed.overall.requests, 12_031 + 300);
    assert_eq!(computed.overall.throughput.span_s, None);
    assert_eq!(computed.overall.throughput.requests_per_s, None);
    assert!(computed.overall.ttft_under_load.is_empty());
    // The Mooncake trace's last arrival is 3,536,999 ms after its first (Python over the file).
    let span = computed.groups["mooncake"].throughput.span_s.unwrap();
    assert!(span >= 3_536.999, "{span}");
    assert!(computed.groups["llmservingsim-vllm"].throughput.span_s.unwrap() < 100.0);
}
