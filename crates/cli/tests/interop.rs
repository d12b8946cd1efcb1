//! A dataset opens in pyarrow with the column names, types and nullability documented in `schemas/`.
//!
//! Needs `python3` with `pyarrow` (`.ci/run` installs it). Outside CI the test is skipped, with a note, when
//! pyarrow is missing; under CI (`CI` set) a missing pyarrow fails it.

#![allow(clippy::print_stderr)]

mod common;

use std::process::Command;

#[test]
fn datasets_open_in_pyarrow_as_documented() {
    let has_pyarrow = Command::new("python3").args(["-c", "import pyarrow"]).output().is_ok_and(|o| o.status.success());
    if !has_pyarrow {
        assert!(std::env::var_os("CI").is_none(), "CI must provide python3 with pyarrow (see .ci/run)");
        eprintln!("skipped: python3 with pyarrow not found (pip install pyarrow)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = common::run(&common::valid_inputs(), &dir.path().join("ds"));
    let output = Command::new("python3")
        .args(["tests/pyarrow_check.py", report.output.to_str().unwrap(), "../../schemas"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    // The script compares every table's row count with the manifest; here the dataset must not be trivial.
    assert!(report.manifest.rows.requests > 40_000 && report.manifest.rows.samples > 0, "{:?}", report.manifest.rows);
    assert!(
        stdout.contains(&format!("requests: {} rows, 44 columns as documented", report.manifest.rows.requests)),
        "{stdout}"
    );
}
