//! Datasets of older schema versions stay readable; datasets of newer ones are refused with a clear message.
//!
//! `testdata/datasets/v1/` is a dataset written by schema version 1 (see `testdata/README.md`) and is never
//! regenerated: it guards that what was written once can still be read.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infertrace_schema::{Dataset, SCHEMA_VERSION};

fn v1() -> PathBuf {
    PathBuf::from("../../testdata/datasets/v1")
}

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

#[test]
fn the_v1_dataset_reads_and_its_metrics_are_what_they_were() {
    let dataset = Dataset::open(&v1()).unwrap();
    assert_eq!(dataset.manifest.schema_version, 1);
    assert_eq!(dataset.manifest.rows.requests, dataset.requests.num_rows() as u64);
    assert_eq!(dataset.requests.num_rows(), 4);
    let output = infertrace(&["metrics", "--json", v1().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let metrics: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let overall = &metrics["overall"];
    assert_eq!(overall["requests"], 4, "{metrics}");
    // 6758 + 7322 + 7236 + 2290 prompt tokens, 500 + 490 + 794 + 316 output tokens (the fixture's first 4 lines).
    assert_eq!(
        (&overall["throughput"]["input_tokens"], &overall["throughput"]["output_tokens"]),
        (&23606.into(), &2100.into())
    );
    assert_eq!(overall["cache"]["reuse"]["hit_blocks"], 3, "block 0 is shared by all four requests");
}

/// Copies the v1 dataset with `version` written into its manifest or into one table's Parquet metadata.
fn newer_copy(dir: &Path, version: u32, in_manifest: bool) -> PathBuf {
    let copy = dir.join(format!("v{version}-{in_manifest}"));
    fs::create_dir(&copy).unwrap();
    for entry in fs::read_dir(v1()).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
    }
    if in_manifest {
        let path = copy.join("manifest.json");
        let text = fs::read_to_string(&path)
            .unwrap()
            .replace("\"schema_version\": 1,", &format!("\"schema_version\": {version},"));
        fs::write(&path, text).unwrap();
    } else {
        // Same length, so the Parquet footer's offsets stay valid: "infertrace.schema_version" then "1" → "2".
        let path = copy.join("samples.parquet");
        let mut bytes = fs::read(&path).unwrap();
        let key = b"infertrace.schema_version";
        let at = bytes.windows(key.len()).position(|w| w == key).expect("the key is in the footer");
        let value = bytes[at + key.len()..].iter().position(|&b| b == b'1').unwrap() + at + key.len();
        bytes[value] = b'0' + version as u8;
        fs::write(&path, bytes).unwrap();
    }
    copy
}

#[test]
fn a_dataset_of_a_newer_schema_version_fails_with_a_clear_message() {
    assert_eq!(SCHEMA_VERSION, 1, "when the version moves, keep testdata/datasets/v1 and add this version's");
    let dir = tempfile::tempdir().unwrap();
    for (in_manifest, file) in [(true, "manifest.json"), (false, "samples.parquet")] {
        let copy = newer_copy(dir.path(), 2, in_manifest);
        let output = infertrace(&["metrics", copy.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let expected = format!(
            "{} has schema version 2, newer than the 1 this infertrace reads; upgrade infertrace",
            copy.join(file).display()
        );
        assert!(stderr.contains(&expected), "{expected:?} not in {stderr:?}");
    }
}
