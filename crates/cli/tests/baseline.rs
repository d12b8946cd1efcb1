//! The benchmark's Python anchor (`bench/baseline/normalize.py`) writes the same columns, with the same values, as
//! `infertrace normalize` on each of the three benchmark inputs, generated small here. The two are independent
//! implementations (regexes, `json`, the `xxhash` package), so this checks that `cargo xtask bench` compares like
//! with like, and infertrace's prefix hashes, percentages, clock and session turns against a second reading.
//!
//! Needs `python3` with `pyarrow` and `xxhash` (`.ci/run` installs them). Outside CI it is skipped, with a note, when
//! they are missing; under CI (`CI` set) their absence fails the test.

#![allow(clippy::print_stderr)]

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap()
}

#[test]
fn the_python_baseline_writes_what_normalize_writes() {
    let ready =
        Command::new("python3").args(["-c", "import pyarrow, xxhash"]).output().is_ok_and(|o| o.status.success());
    if !ready {
        assert!(std::env::var_os("CI").is_none(), "CI must provide python3 with pyarrow and xxhash (see .ci/run)");
        eprintln!("skipped: python3 with pyarrow and xxhash not found (pip install pyarrow xxhash)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let create = |name: &str| std::fs::File::create(dir.path().join(name)).unwrap();
    let vllm = {
        use infertrace_adapter_vllm::generate::{Generation, LogOptions, write_log};
        let options = LogOptions { requests: 60, prompt_tokens: (10, 3_000), seed: 5 };
        write_log(&mut create("vllm.log"), Generation::V0_14, options).unwrap()
    };
    let sglang = {
        use infertrace_adapter_sglang::generate::{Generation, write_log};
        write_log(&mut create("sglang.log"), Generation::V0_5_10, 3_000, 5).unwrap()
    };
    // Sessions of five turns: later turns have a delay instead of a timestamp.
    let mooncake =
        infertrace_adapter_traces::generate::write_mooncake(&mut create("mooncake.jsonl"), 200, 5, false, 5).unwrap();
    assert!(vllm.prompt_tokens > 0 && vllm.aborted > 0 && mooncake.derived_arrivals == 800);

    // What each comparison must have covered: the generators' own counts, and the baseline's filled columns. vLLM
    // logs carry no year: the baseline assumes 2026, as `--year` tells normalize.
    let cases = [
        ("vllm", "vllm.log", &["--year", "2026"][..], (vllm.requests, vllm.samples, 13, 12)),
        ("sglang", "sglang.log", &[], (sglang.requests, sglang.samples, 12, 10)),
        ("mooncake", "mooncake.jsonl", &[], (mooncake.requests, 0, 0, 12)),
    ];
    for (format, input, options, (requests, samples, metrics, columns)) in cases {
        let run = |program: &Path, args: &[&str]| {
            let output = Command::new(program).args(args).current_dir(dir.path()).output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(output.status.success(), "{format}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
            stdout
        };
        let dataset = format!("{format}-ds");
        let normalize = [&["normalize", input, "-o", &dataset][..], options].concat();
        run(Path::new(env!("CARGO_BIN_EXE_infertrace")), &normalize);
        let baseline = format!("{format}-baseline.parquet");
        let script = root().join("bench/baseline/normalize.py");
        run(Path::new("python3"), &[script.to_str().unwrap(), format, input, &baseline]);
        let check = root().join("crates/cli/tests/baseline_check.py");
        let stdout = run(Path::new("python3"), &[check.to_str().unwrap(), &dataset, &baseline]);
        let counts: serde_json::Value =
            serde_json::from_str(stdout.trim().strip_prefix("tables agree: ").expect(&stdout)).unwrap();
        assert_eq!(
            [&counts["requests"], &counts["samples"], &counts["metrics"], &counts["columns"]],
            [requests, samples, metrics, columns].map(serde_json::Value::from).each_ref(),
            "{format}: {stdout}"
        );
    }
}
