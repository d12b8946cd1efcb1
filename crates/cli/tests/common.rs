//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use infertrace::{NormalizeOptions, NormalizeReport, normalize};
use infertrace_adapter::ParseOptions;

/// `testdata/` as seen from this crate's directory, where cargo runs its tests: relative, so recorded paths are.
pub fn testdata() -> PathBuf {
    PathBuf::from("../../testdata")
}

/// Normalizes `inputs` into `output` with default assumptions and auto-detection.
pub fn run(inputs: &[PathBuf], output: &Path) -> NormalizeReport {
    run_with(inputs, output, ParseOptions::default())
}

/// Normalizes `inputs` into `output` with `parse` assumptions and auto-detection.
pub fn run_with(inputs: &[PathBuf], output: &Path, parse: ParseOptions) -> NormalizeReport {
    let options = NormalizeOptions { inputs: inputs.to_vec(), output: output.to_owned(), parse, ..Default::default() };
    normalize(&options, &ProgressBar::hidden()).unwrap_or_else(|e| panic!("normalize {inputs:?}: {e:#}"))
}

/// Sets the modification time of `path` to 2025-06-01T00:00:00Z: inputs without times of their own (Prometheus
/// scrapes) or without a year fall back to it, and a clone sets it to the day of the clone.
pub fn pin_modified(path: &Path) {
    let pinned = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_748_736_000);
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_modified(pinned).unwrap();
}

/// Every valid input under `testdata/` (all of it but the directories of `NOT_INPUTS` and the README), sorted.
pub fn valid_inputs() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(testdata()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().is_some_and(|n| !NOT_INPUTS.iter().any(|x| n == *x)) {
            collect(&path, &mut found);
        }
    }
    found.sort();
    found
}

/// Directories of `testdata/` that are not `normalize` inputs: `invalid/` must fail, `traces-full/` holds whole corpus
/// files for the aggregate tests, `synth/` statistics for `infertrace synth`, `mapped/` inputs that need `--map`,
/// `datasets/` datasets kept to guard reading older schema versions, `expected/` the hand-read values of the real
/// log excerpts.
const NOT_INPUTS: &[&str] = &["invalid", "traces-full", "synth", "mapped", "datasets", "expected"];

fn collect(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { collect(&path, found) } else { found.push(path) }
    }
}

/// Every file under `dir` (recursively, so partitioned tables too) with its bytes, by path relative to `dir`,
/// sorted: what "the same output" compares.
pub fn dataset_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                found.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

/// Whether `python3` can import `module` (with the `PYTHONPATH` `cargo xtask test` sets).
pub fn has_python_module(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
