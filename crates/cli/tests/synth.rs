//! `infertrace synth servegen`: sampled traces against the statistics they come from, determinism, and one-line
//! errors naming the file.
//!
//! Expected counts and means are computed from the statistics with Python, independently of the code:
//!
//! ```sh
//! # For each client: Σ round(rate·600) over active windows, and the count-weighted means of the length
//! # distributions in force (latest dataset window at or before the trace window, windows with "{}" left out);
//! # multimodal input = E[text] + Σ_medium E[count]·E[tokens]; reasoning = E[reason_ratio]·E[output].
//! python3 - testdata/synth/servegen/mm-image <<'EOF'
//! import json, sys, glob, ast, subprocess
//! def load(p):
//!     data = subprocess.run(['zstd','-dc',p],capture_output=True).stdout if p.endswith('.zst') else open(p,'rb').read()
//!     return json.loads(data)
//! def mean(d): return sum(k*v for k,v in d.items())/sum(d.values())
//! for t in sorted(glob.glob(sys.argv[1]+'/chunk-*-trace.csv')):
//!     ds = glob.glob(t.replace('trace.csv','dataset.json')+'*')[0]
//!     lw = {int(k):{f:ast.literal_eval(s) for f,s in v.items()} for k,v in load(ds).items()}
//!     lw = {k:v for k,v in lw.items() if all(v.values())}
//!     n=si=so=sr=0
//!     for l in open(t):
//!         ts,r,cv,p,a,b=l.strip().split(','); ts=int(ts); c=round(float(r)*600)
//!         if not p or c==0: continue
//!         w = lw[max(k for k in lw if k<=ts)]
//!         if 'input_tokens' in w: mi=mean(w['input_tokens'])
//!         else:
//!             mi=mean(w['text_tokens'])
//!             for m in ['image','audio','video']:
//!                 if m+'_tokens' in w: mi+=mean(w[m+'_tokens'])*(mean(w[m+'_count']) if m+'_count' in w else 1)
//!         n+=c; si+=c*mi; so+=c*mean(w['output_tokens'])
//!         if 'reason_ratio' in w: sr+=c*mean(w['reason_ratio'])*mean(w['output_tokens'])
//!     print(t, n, si/n, so/n, sr/n)
//! EOF
//! ```

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Int32Type, TimestampNanosecondType, UInt32Type, UInt64Type};
use infertrace::{NormalizeReport, ServegenOptions, synth_servegen};
use infertrace_adapter::time::parse_rfc3339;
use infertrace_schema::{Dataset, request};

fn statistics(model: &str) -> PathBuf {
    PathBuf::from("../../testdata/synth/servegen").join(model)
}

fn options(model: &str, output: &Path, duration_s: u64) -> ServegenOptions {
    ServegenOptions {
        dir: statistics(model),
        output: output.to_owned(),
        clients: None,
        seed: 0,
        from_s: 0,
        duration_s,
        rate_scale: 1.0,
        start_ns: 0,
        force: false,
    }
}

fn run(options: &ServegenOptions) -> (NormalizeReport, Dataset) {
    let report = synth_servegen(options).unwrap_or_else(|e| panic!("synth {:?}: {e:#}", options.dir));
    let dataset = Dataset::open(&report.output).unwrap();
    (report, dataset)
}

/// Per client (the `<i>` of `request_id`), in client order: (requests, Σ input, Σ output, Σ reasoning).
fn per_client(dataset: &Dataset) -> Vec<(u64, u64, u64, u64, u64)> {
    let ids = dataset.requests.column_by_name(request::REQUEST_ID).unwrap().as_string::<i32>();
    let column = |name| dataset.requests.column_by_name(name).unwrap().as_primitive::<UInt32Type>().clone();
    let (input, output, reasoning) =
        (column(request::INPUT_TOKENS), column(request::OUTPUT_TOKENS), column(request::REASONING_TOKENS));
    let mut sums = std::collections::BTreeMap::<u64, (u64, u64, u64, u64)>::new();
    for row in 0..ids.len() {
        let client = ids.value(row).split(':').nth(1).unwrap().parse().unwrap();
        let entry = sums.entry(client).or_default();
        entry.0 += 1;
        entry.1 += u64::from(input.value(row));
        entry.2 += u64::from(output.value(row));
        entry.3 += if reasoning.is_null(row) { 0 } else { u64::from(reasoning.value(row)) };
    }
    sums.into_iter().map(|(c, (n, i, o, r))| (c, n, i, o, r)).collect()
}

fn assert_close(what: &str, got: f64, expected: f64, tolerance: f64) {
    let error = (got - expected).abs() / expected;
    assert!(error <= tolerance, "{what}: got {got:.2}, statistics say {expected:.2} ({:.1} % off)", error * 100.0);
}

#[test]
fn a_day_of_mm_image_has_the_recorded_counts_and_mean_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let (report, dataset) = run(&options("mm-image", &dir.path().join("ds"), 86_400));
    // From the Python above: client, requests, mean input (text + images), mean output.
    let expected: &[(u64, u64, f64, f64)] = &[
        (0, 43_802, 1545.98, 40.48),
        (2, 4_326, 710.25, 25.55),
        (9, 4_099, 69.38, 22.65),
        (14, 2_015, 60.42, 24.44),
        (16, 673, 156.98, 2.32),
        (25, 2_856, 324.30, 2.00),
    ];
    let got = per_client(&dataset);
    assert_eq!(got.len(), expected.len());
    for (&(client, requests, input, output), &(c, n, si, so, sr)) in expected.iter().zip(&got) {
        assert_eq!((c, n), (client, requests), "rates are counts per 600 s, so whole windows give exact counts");
        // Thousands of draws from the length distributions: their means agree to a few per cent.
        let tolerance = if n < 1_000 { 0.08 } else { 0.04 };
        assert_close(&format!("client {c} input"), si as f64 / n as f64, input, tolerance);
        assert_close(&format!("client {c} output"), so as f64 / n as f64, output, tolerance);
        assert_eq!(sr, 0, "no reasoning outside reasoning models");
    }
    assert_eq!(report.manifest.rows.requests, 57_771);
    let entry = &report.manifest.inputs[0];
    assert_eq!(entry.path, "../../testdata/synth/servegen/mm-image/chunk-0-trace.csv");
    assert_eq!(entry.details["requests"], 43_802);
    assert!((entry.details["expected_requests"].as_f64().unwrap() - 43_802.0).abs() < 1e-6);
    // 144 windows, of which the Python above counts 144 − 2 idle for client 0.
    let windows = entry.details["active_windows"].as_u64().unwrap() + entry.details["idle_windows"].as_u64().unwrap();
    assert_eq!(windows, 144);
}

#[test]
fn reasoning_and_language_statistics_give_their_means() {
    let dir = tempfile::tempdir().unwrap();
    let (report, dataset) = run(&options("deepseek-r1", &dir.path().join("r1"), 86_400));
    // From the Python above: 10,815 requests, mean input 172.50, output 910.11, reasoning 905.84.
    let [(1, n, si, so, sr)] = per_client(&dataset)[..] else { panic!("one client, 1") };
    assert_eq!(n, 10_815);
    assert_close("r1 input", si as f64 / n as f64, 172.50, 0.04);
    assert_close("r1 output", so as f64 / n as f64, 910.11, 0.04);
    assert_close("r1 reasoning", sr as f64 / n as f64, 905.84, 0.04);
    assert_eq!(report.manifest.inputs[0].format_version.as_deref(), Some("reason"));
    assert_eq!(report.manifest.inputs[1].compression, "zstd");

    // Fourteen days of a language model, only five windows of which are active.
    let (report, dataset) = run(&options("m-small", &dir.path().join("small"), 14 * 86_400));
    let [(0, n, si, so, _)] = per_client(&dataset)[..] else { panic!("one client, 0") };
    assert_eq!(n, 98_147, "46 + 101 + 6,796 + 50,750 + 40,454");
    assert_close("m-small input", si as f64 / n as f64, 251.55, 0.04);
    assert_close("m-small output", so as f64 / n as f64, 26.65, 0.04);
    assert_eq!(report.manifest.inputs[0].format_version.as_deref(), Some("language"));
    assert_eq!(report.manifest.inputs[0].details["idle_windows"], 2011);
}

fn times(dataset: &Dataset) -> Vec<i64> {
    let array = dataset.requests.column_by_name(request::ARRIVAL_TIME).unwrap();
    array.as_primitive::<TimestampNanosecondType>().iter().map(|t| t.unwrap()).collect()
}

#[test]
fn rows_are_sorted_and_lie_in_the_window_that_made_them() {
    let dir = tempfile::tempdir().unwrap();
    let start = parse_rfc3339("2025-01-06T00:00:00Z").unwrap();
    let (_, dataset) = run(&ServegenOptions { start_ns: start, ..options("mm-image", &dir.path().join("ds"), 7_200) });
    let times = times(&dataset);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let lines = dataset.requests.column_by_name(request::SOURCE_LINE).unwrap().as_primitive::<UInt64Type>();
    for (time, line) in times.iter().zip(lines.iter()) {
        // Row `line` of a trace file is the window starting at (line − 1) · 600 s.
        let offset = (time - start) as f64 / 1e9;
        let window = (line.unwrap() - 1) as f64 * 600.0;
        assert!((window..window + 600.0).contains(&offset), "{offset} s outside the window of line {line:?}");
    }
    let ids = dataset.requests.column_by_name(request::REQUEST_ID).unwrap().as_string::<i32>();
    assert!(ids.iter().any(|id| id == Some("mm-image:2:0")));
    let column = |name| dataset.requests.column_by_name(name).unwrap().as_dictionary::<Int32Type>().clone();
    for (name, value) in [(request::SOURCE, "servegen-synth"), (request::MODEL, "mm-image")] {
        let values = column(name);
        let values = values.values().as_string::<i32>();
        assert_eq!(values.iter().collect::<Vec<_>>(), [Some(value)], "{name}");
    }
}

#[test]
fn from_cuts_windows_and_keeps_their_rate() {
    let dir = tempfile::tempdir().unwrap();
    let span = |from_s, duration_s, name: &str| {
        let (_, dataset) =
            run(&ServegenOptions { from_s, duration_s, ..options("m-small", &dir.path().join(name), 0) });
        times(&dataset)
    };
    // m-small's window at 338,400 s holds 50,750 requests, the next 40,454.
    let whole = span(338_400, 600, "whole");
    assert_eq!(whole.len(), 50_750);
    assert!(whole.iter().all(|&t| (0..600_000_000_000).contains(&t)), "times count from --from");
    // Half of each: 25,375 + 20,227.
    assert_eq!(span(338_700, 600, "halves").len(), 45_602);
}

#[test]
fn the_same_seed_gives_byte_identical_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let base = options("mm-image", &dir.path().join("a"), 3_600);
    run(&base);
    run(&ServegenOptions { output: dir.path().join("b"), ..base.clone() });
    let a = common::dataset_files(&dir.path().join("a"));
    assert_eq!(a.len(), 4);
    assert_eq!(a, common::dataset_files(&dir.path().join("b")));
    run(&ServegenOptions { output: dir.path().join("c"), seed: 1, ..base.clone() });
    let c = common::dataset_files(&dir.path().join("c"));
    assert_ne!(a[2], c[2], "another seed, other requests");
    assert_eq!(a[2].0, "requests.parquet");

    // A client's requests do not depend on which other clients are sampled.
    let (_, all) = run(&ServegenOptions { output: dir.path().join("all"), ..base.clone() });
    let (report, alone) = run(&ServegenOptions { output: dir.path().join("2"), clients: Some(vec![2]), ..base });
    assert_eq!(report.manifest.inputs.len(), 2);
    let rows_of = |dataset: &Dataset| {
        let ids = dataset.requests.column_by_name(request::REQUEST_ID).unwrap().as_string::<i32>();
        let times = times(dataset);
        let input = dataset.requests.column_by_name(request::INPUT_TOKENS).unwrap().as_primitive::<UInt32Type>();
        (0..ids.len())
            .filter(|&i| ids.value(i).starts_with("mm-image:2:"))
            .map(|i| (ids.value(i).to_owned(), times[i], input.value(i)))
            .collect::<Vec<_>>()
    };
    assert_eq!(rows_of(&all), rows_of(&alone));
    assert!(!rows_of(&alone).is_empty());
}

#[test]
fn the_manifest_records_the_statistics_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = run(&ServegenOptions {
        clients: Some(vec![9]),
        seed: 42,
        rate_scale: 0.5,
        ..options("mm-image", &dir.path().join("ds"), 1_200)
    });
    let manifest = &report.manifest;
    let paths: Vec<&str> = manifest.inputs.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "../../testdata/synth/servegen/mm-image/chunk-9-trace.csv",
            "../../testdata/synth/servegen/mm-image/chunk-9-dataset.json"
        ]
    );
    // `sha256sum testdata/synth/servegen/mm-image/chunk-9-*`
    assert_eq!(manifest.inputs[0].sha256, "c66382a9db85f92a4c706ae18873a42c2569f7c340c0c0d91456787b998c1a9c");
    assert_eq!(manifest.inputs[1].sha256, "14cc65899667d3fc460d9448b79a241de028d52f0ad54f611e4e2c9b38ce13fd");
    assert_eq!((manifest.inputs[0].lines, manifest.inputs[0].bytes), (144, 3_524));
    assert!(manifest.inputs.iter().all(|i| i.format == "servegen-synth" && i.diagnostics.total == 0));
    assert_eq!(manifest.inputs[0].format_version.as_deref(), Some("multimodal"));
    let details = &manifest.inputs[0].details;
    assert_eq!(details["synth"], serde_json::json!({"seed": 42, "from_s": 0, "duration_s": 1200, "rate_scale": 0.5}));
    assert_eq!(details["client"], 9);
    assert_eq!(details["requests"].as_u64(), Some(manifest.rows.requests));
    assert_eq!(manifest.inputs[1].records.requests, 0);
    assert_eq!(manifest.assumptions.start, "1970-01-01T00:00:00Z");
    assert!(manifest.skipped.is_empty());
}

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

/// Asserts exit code 2 and a single `error:` line containing every one of `needles`.
fn assert_error(output: &Output, needles: &[&str]) {
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(output.status.code(), Some(2), "stderr: {text}");
    assert_eq!(text.lines().count(), 1, "one line expected: {text}");
    assert!(text.starts_with("error: "), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} not in {text:?}");
    }
}

/// A copy of mm-image's client 9 in a temporary directory, with `edit` applied to `file`.
fn broken(dir: &Path, file: &str, edit: impl FnOnce(String) -> String) -> String {
    let model = dir.join("model");
    fs::create_dir_all(&model).unwrap();
    for name in ["chunk-9-trace.csv", "chunk-9-dataset.json"] {
        fs::copy(statistics("mm-image").join(name), model.join(name)).unwrap();
    }
    let path = model.join(file);
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, edit(text)).unwrap();
    model.to_str().unwrap().to_owned()
}

#[test]
fn bad_statistics_and_options_are_one_line_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let synth = |model: &str, extra: &[&str]| {
        let mut args = vec!["synth", "servegen", model, "-o", out, "--duration", "1h"];
        args.extend(extra);
        infertrace(&args)
    };

    let model = broken(&dir.path().join("csv"), "chunk-9-trace.csv", |t| t.replacen("\n", "\n1,2,3\n", 2));
    assert_error(&synth(&model, &[]), &["invalid statistics", "chunk-9-trace.csv", "line 2", "6 comma-separated"]);

    let model = broken(&dir.path().join("json"), "chunk-9-dataset.json", |t| t.replace("0.", "-0."));
    assert_error(&synth(&model, &[]), &["invalid statistics", "chunk-9-dataset.json", "probability"]);

    let model = broken(&dir.path().join("alone"), "chunk-9-trace.csv", |t| t);
    fs::remove_file(Path::new(&model).join("chunk-9-dataset.json")).unwrap();
    assert_error(&synth(&model, &[]), &["chunk-9-trace.csv", "has no chunk-9-dataset.json"]);

    let mm_image = statistics("mm-image");
    let mm_image = mm_image.to_str().unwrap();
    assert_error(
        &synth(mm_image, &["--from", "84600"]),
        &["go past the end of the statistics (86400 s", "chunk-0-trace.csv"],
    );
    assert_error(&synth(mm_image, &["--clients", "9,99"]), &["mm-image has no client 99"]);
    assert_error(&synth("../../testdata/synth", &[]), &["testdata/synth holds no chunk-<i>-trace.csv"]);
    assert!(!Path::new(out).exists(), "no dataset is left behind");

    let ok = synth(mm_image, &["--clients", "9"]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_error(&synth(mm_image, &["--clients", "9"]), &["already exists", "--force"]);
}
