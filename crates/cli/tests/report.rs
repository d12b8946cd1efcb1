//! `infertrace report` end to end: a dataset normalized from committed inputs, written as HTML by the binary.

mod common;

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Five benchmark requests with full timings (LLMServingSim's vLLM bench log head).
fn bench_dataset(dir: &std::path::Path) -> PathBuf {
    let out = dir.join("bench");
    common::run(
        &[common::testdata().join("traces/llmservingsim/bench-requests/RTXPRO6000_vllm_requests_head.jsonl")],
        &out,
    );
    out
}

#[test]
fn report_writes_one_html_file_titled_by_the_paths_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = bench_dataset(dir.path());
    let html_path = dir.path().join("report.html");
    let args = ["report", dataset.to_str().unwrap(), "-o", html_path.to_str().unwrap(), "--slo", "ttft=100ms"];
    let output = infertrace(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), format!("wrote {}\n", html_path.display()));
    let html = fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(&format!("<title>{}</title>", dataset.display())), "the default title is the path");
    assert_eq!(html.matches("<svg").count(), infertrace_report::CHARTS);
    // Five requests, all with a TTFT; rows 1 to 4 have a TTFT of at most 100 ms (0.0626, 0.0794, 0.0494 and
    // 0.0993 s; row 0 has 0.170 s), so 4 of 5 meet the SLO.
    assert!(html.contains("<tr><th>requests</th><td>5</td></tr>"), "{html}");
    assert!(html.contains("80.0% of requests (4) meet ttft ≤ 100 ms"), "{html}");
    assert!(html.contains("<title>TTFT CDF</title>") && !html.contains("no data: no request has ttft_s"));
    assert!(!html.contains("Cost and efficiency"), "no cost section without a profile");
    // No temporary file is left beside it, and the same run gives the same bytes.
    let mut names: Vec<String> =
        fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["bench", "report.html"]);
    assert_eq!(infertrace(&args).status.code(), Some(0));
    assert_eq!(fs::read_to_string(&html_path).unwrap(), html);
}

#[test]
fn a_cost_profile_adds_the_cost_section() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = bench_dataset(dir.path());
    let (html_path, profile) = (dir.path().join("report.html"), dir.path().join("cost.toml"));
    fs::write(&profile, "[accelerator]\ncount = 2\nprice_per_hour = 1800\nwatts = 500\n").unwrap();
    let args = [
        "report",
        dataset.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
        "--slo",
        "ttft=100ms",
        "--cost",
        profile.to_str().unwrap(),
    ];
    let output = infertrace(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let html = fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<h2>Cost and efficiency</h2>"), "{html}");
    // The four requests meeting the SLO are the successful answers; 2 × $1,800/h is $1 per second of span.
    assert!(html.contains("(4 answers)"), "{html}");
    assert!(html.contains("<tr><th>total</th><td>$"), "{html}");
}

#[test]
fn a_given_title_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = bench_dataset(dir.path());
    let html_path = dir.path().join("r.html");
    let output = infertrace(&[
        "report",
        dataset.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
        "--title",
        "<i>run</i> & co",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let html = fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<h1>&lt;i&gt;run&lt;/i&gt; &amp; co</h1>"), "{html}");
}

#[test]
fn errors_are_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = bench_dataset(dir.path());
    // A directory is never written over.
    let output = infertrace(&["report", dataset.to_str().unwrap(), "-o", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert_eq!(text, format!("error: cannot write report {}: it is a directory\n", dir.path().display()));
    // A missing dataset names itself.
    let missing = dir.path().join("nope");
    let out = dir.path().join("x.html");
    let output = infertrace(&["report", missing.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("error: cannot read dataset ") && text.contains("nope"), "{text}");
    assert!(!out.exists());
    // An output in a missing directory names the report.
    let nowhere = dir.path().join("no/such/dir/r.html");
    let output = infertrace(&["report", dataset.to_str().unwrap(), "-o", nowhere.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with(&format!("error: cannot write report {}: ", nowhere.display())), "{text}");
}
