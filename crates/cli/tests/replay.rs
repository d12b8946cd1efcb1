//! `infertrace replay` and `calibrate` on the LLMServingSim validation runs: vLLM 0.19 serving Llama-3.1-8B on one
//! RTX PRO 6000 and on one RTX 4090, 300 ShareGPT requests at 10 requests/s (testdata/traces-full/llmservingsim).
//!
//! The measured means (TTFT 7.10 s and 65.5 s, TPOT 32.5 ms and 32.4 ms) are the runs' own. The replay takes the
//! measured run as its workload (same arrivals and token counts) and the configurations of `examples/replay/`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infertrace_replay::calibrate::Means;
use infertrace_schema::{Dataset, RequestRow, Table as _};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn ok(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn measured(gpu: &str, dir: &Path) -> PathBuf {
    let run = common::testdata()
        .join(format!("traces-full/llmservingsim/llmservingsim_vllm_bench_{gpu}_llama31_8b/vllm_requests.jsonl.zst"));
    common::run(&[run], &dir.join(format!("measured-{gpu}"))).output
}

fn means(dataset: &Path) -> Means {
    Means::of(&RequestRow::from_batch(&Dataset::open(dataset).unwrap().requests).unwrap())
}

fn relative(a: Option<f64>, b: Option<f64>) -> f64 {
    (a.unwrap() - b.unwrap()) / b.unwrap()
}

#[test]
fn the_rtx_pro_6000_run_replays_within_the_aims_from_the_spec_sheet() {
    let dir = tempfile::tempdir().unwrap();
    let measured = measured("RTXPRO6000", dir.path());
    let out = dir.path().join("replay");
    let config = "../../examples/replay/llmservingsim-rtxpro6000.toml";
    let text =
        ok(&infertrace(&["replay", measured.to_str().unwrap(), "--config", config, "-o", out.to_str().unwrap()]));
    assert!(text.starts_with("replayed 300 requests (300 completed, 0 rejected"), "{text}");
    let (m, r) = (means(&measured), means(&out));
    // The published measured means.
    assert!((m.ttft_s.unwrap() - 7.10).abs() < 0.005 && (m.tpot_s.unwrap() - 0.0325).abs() < 0.0005, "{m:?}");
    // Spec-only: TTFT within 20%, TPOT within 10% (docs/replay.md records the figures).
    let (ttft, tpot) = (relative(r.ttft_s, m.ttft_s), relative(r.tpot_s, m.tpot_s));
    assert!(ttft.abs() < 0.20 && tpot.abs() < 0.10, "ttft {ttft:+.3}, tpot {tpot:+.3}");
    // The replay is a canonical dataset: metrics read it, with engine samples per instance.
    let metrics = ok(&infertrace(&["metrics", out.to_str().unwrap()]));
    assert!(metrics.contains("requests: 300 (ok 300)") && metrics.contains("replay-0"), "{metrics}");

    // The requests stream from a sort by arrival and come back in input order, each with its own id (the bench
    // client's `bench-<n>`, in order); one thread and a 16 MiB budget write the same bytes.
    let rows = RequestRow::from_batch(&Dataset::open(&out).unwrap().requests).unwrap();
    let source = RequestRow::from_batch(&Dataset::open(&measured).unwrap().requests).unwrap();
    assert!(rows.iter().zip(&source).all(|(r, s)| r.request_id == s.request_id && r.session_id == s.session_id));
    assert_eq!((rows[0].request_id.as_str(), rows[299].request_id.as_str()), ("bench-0", "bench-299"));
    let small = dir.path().join("replay-small");
    let small_args = ["--threads", "1", "--memory-limit", "16M", "-o", small.to_str().unwrap()];
    ok(&infertrace(&[&["replay", measured.to_str().unwrap(), "--config", config][..], &small_args[..]].concat()));
    for table in ["requests.parquet", "samples.parquet"] {
        assert!(std::fs::read(out.join(table)).unwrap() == std::fs::read(small.join(table)).unwrap(), "{table}");
    }
}

#[test]
fn calibration_brings_both_runs_within_five_percent() {
    let dir = tempfile::tempdir().unwrap();
    for (gpu, config) in [("RTXPRO6000", "rtxpro6000"), ("RTX4090", "rtx4090")] {
        let measured = measured(gpu, dir.path());
        let fitted = dir.path().join(format!("{config}.toml"));
        let config = format!("../../examples/replay/llmservingsim-{config}.toml");
        let json = ok(&infertrace(&[
            "calibrate",
            measured.to_str().unwrap(),
            "--config",
            &config,
            "-o",
            fitted.to_str().unwrap(),
            "--json",
        ]));
        let c: serde_json::Value = serde_json::from_str(&json).unwrap();
        let (ttft, tpot) = (c["after_errors"]["ttft"].as_f64().unwrap(), c["after_errors"]["tpot"].as_f64().unwrap());
        assert!(ttft.abs() < 0.05 && tpot.abs() < 0.05, "{gpu}: {json}");
        // The fitted configuration replays to the same means.
        let out = dir.path().join(format!("replay-{gpu}"));
        ok(&infertrace(&[
            "replay",
            measured.to_str().unwrap(),
            "--config",
            fitted.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]));
        let (m, r) = (means(&measured), means(&out));
        assert!(relative(r.ttft_s, m.ttft_s).abs() < 0.05 && relative(r.tpot_s, m.tpot_s).abs() < 0.05, "{gpu}");
    }
}

#[test]
fn a_disaggregated_configuration_replays_and_bad_configurations_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let measured = measured("RTXPRO6000", dir.path());
    let config = dir.path().join("pd.toml");
    std::fs::write(
        &config,
        "[hardware]\nmodel = \"Llama-3.1-8B\"\naccelerator = \"H100\"\n\
         [cluster]\nprefill_instances = 1\ndecode_instances = 2\nlink_gbs = 25\nrouting = \"least-loaded\"\n",
    )
    .unwrap();
    let out = dir.path().join("pd");
    ok(&infertrace(&[
        "replay",
        measured.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
    let rows = RequestRow::from_batch(&Dataset::open(&out).unwrap().requests).unwrap();
    assert_eq!(rows.len(), 300);
    // Every request crossed the link: KV of prompt + 1 tokens at 131,072 bytes each.
    for r in &rows {
        assert_eq!(r.kv_transfer_bytes, Some(u64::from(r.input_tokens.unwrap() + 1) * 131_072), "{}", r.request_id);
        assert_eq!(r.prefill_instance.as_deref(), Some("prefill-0"));
        assert!(matches!(r.decode_instance.as_deref(), Some("decode-0" | "decode-1")));
    }
    std::fs::write(&config, "[hardware]\nmodel = \"GPT-9\"\naccelerator = \"H100\"\n").unwrap();
    let bad = infertrace(&["replay", measured.to_str().unwrap(), "--config", config.to_str().unwrap(), "-o", "x"]);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr, "error: cannot replay: model \"GPT-9\" is not in the catalog (see `infertrace model --list`)\n");
    std::fs::write(&config, "[hardware]\nmodel = \"Llama-3.1-8B\"\n").unwrap();
    let bad = infertrace(&["replay", measured.to_str().unwrap(), "--config", config.to_str().unwrap(), "-o", "x"]);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!(
            "error: invalid configuration {}: line 1: missing field `accelerator`",
            config.display()
        )),
        "{stderr}"
    );
}
