//! Byte-identical output: the same inputs and options give the same bytes in every file of the dataset.

#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;

use indicatif::ProgressBar;
use infertrace::{NormalizeOptions, normalize};

fn run(output: &Path, salt: Option<&str>) -> Vec<(String, Vec<u8>)> {
    let options = NormalizeOptions {
        inputs: common::valid_inputs(),
        output: output.to_owned(),
        hash_salt: salt.map(str::to_owned),
        ..Default::default()
    };
    normalize(&options, &ProgressBar::hidden()).unwrap();
    common::dataset_files(output)
}

#[test]
fn two_runs_over_every_valid_input_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for salt in [None, Some("s")] {
        let first = run(&dir.path().join(format!("first-{salt:?}")), salt);
        let second = run(&dir.path().join(format!("second-{salt:?}")), salt);
        let names: Vec<_> = first.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cache_events.parquet", "manifest.json", "requests.parquet", "samples.parquet"]);
        for ((name, a), (_, b)) in first.iter().zip(&second) {
            assert!(a == b, "{name} differs between two runs (salt {salt:?})");
        }
    }
}

/// Reading, parsing and encoding run on their own threads that pass data on in order, so how many cores they get
/// cannot change a byte: the binary pinned to one CPU (`taskset`) writes what it writes with every CPU. (No option
/// chooses a number of worker threads yet: when normalize splits files or chunks, issue #10, compare those too.)
#[test]
fn one_cpu_or_all_write_the_same_bytes() {
    if std::process::Command::new("taskset").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI machines have taskset (util-linux)");
        eprintln!("skipped: taskset not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<String> = common::valid_inputs().iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let run = |name: &str, pinned: bool| {
        let out = dir.path().join(name);
        let mut command = if pinned {
            let mut c = std::process::Command::new("taskset");
            c.args(["-c", "0", env!("CARGO_BIN_EXE_infertrace")]);
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_infertrace"))
        };
        let status = command.arg("normalize").args(&inputs).arg("-o").arg(&out).output().unwrap().status;
        assert!(status.success(), "normalize ({name}) failed");
        common::dataset_files(&out)
    };
    let (all, one) = (run("all-cpus", false), run("one-cpu", true));
    assert_eq!(all.len(), 4);
    for ((name, a), (_, b)) in all.iter().zip(&one) {
        assert!(a == b, "{name} differs between one CPU and all");
    }
}
