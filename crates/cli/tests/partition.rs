//! `normalize --partition-by`: Hive-style partitions that DuckDB and Polars read as one table, and that every
//! infertrace command reads like the plain layout.
//!
//! The DuckDB/Polars part needs `python3` with `pyarrow`, `duckdb` and `polars` (`.ci/run` installs them). Outside
//! CI it is skipped, with a note, when they are missing; under CI (`CI` set) their absence fails the test.

#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;
use std::process::Command;

fn infertrace(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().unwrap();
    assert!(output.status.success(), "infertrace {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Inputs with several sources, instances (rank tags with spaces among them), days, null instances and cache
/// events.
fn inputs() -> Vec<String> {
    ["sglang", "vllm", "dynamo/kv-events-1.6", "dynamo/log-jsonl-1.6-shape"]
        .iter()
        .map(|d| common::testdata().join(d).to_string_lossy().into_owned())
        .collect()
}

fn normalize(out: &Path, partition: Option<&str>) {
    let mut args = vec!["normalize".to_owned()];
    args.extend(inputs());
    args.extend(["-o".to_owned(), out.to_string_lossy().into_owned()]);
    if let Some(key) = partition {
        args.extend(["--partition-by".to_owned(), key.to_owned()]);
    }
    infertrace(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn partitions_read_back_as_the_plain_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    normalize(&plain, None);
    // By source: the inputs hold relative traces beside logs on the wall clock.
    let plain_metrics = infertrace(&["metrics", "--json", "--by", "source", plain.to_str().unwrap()]);
    for key in ["date", "source", "instance"] {
        let out = dir.path().join(key);
        normalize(&out, Some(key));
        // infertrace's own reader restores the key column: every figure is the same.
        let metrics = infertrace(&["metrics", "--json", "--by", "source", out.to_str().unwrap()]);
        assert_eq!(metrics, plain_metrics, "--partition-by {key}");
        let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
        assert!(manifest.contains(&format!("\"partition_by\": \"{key}\"")), "{manifest}");
        assert!(!out.join("requests.parquet").exists());
        // Same inputs, same bytes.
        let again = dir.path().join(format!("{key}-again"));
        normalize(&again, Some(key));
        assert!(
            common::dataset_files(&out) == common::dataset_files(&again),
            "--partition-by {key} is not deterministic"
        );
    }

    let names = |table: &str, key: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join(key).join(table))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // The fixtures' rank tags, percent-encoded; rows without an instance in Hive's null partition.
    let instances = names("samples", "instance");
    for expected in ["instance=DP0%20TP0", "instance=TP0", "instance=__HIVE_DEFAULT_PARTITION__"] {
        assert!(instances.iter().any(|n| n == expected), "{expected} not in {instances:?}");
    }
    // Three adapters wrote requests.
    let sources = names("requests", "source");
    for expected in ["source=dynamo-log", "source=sglang-log", "source=vllm-log"] {
        assert!(sources.iter().any(|n| n == expected), "{expected} not in {sources:?}");
    }
    // Every date directory is a calendar day, or the null partition of rows without a time.
    for name in names("samples", "date") {
        let day = name.strip_prefix("date=").unwrap();
        assert!(day == "__HIVE_DEFAULT_PARTITION__" || (day.len() == 10 && day.as_bytes()[4] == b'-'), "{name}");
    }
    // Hive layout: the key column is in the path, not in the files (date is no column, so files keep them all).
    let part = |key: &str, table: &str| {
        let root = dir.path().join(key).join(table);
        let first = std::fs::read_dir(&root).unwrap().next().unwrap().unwrap().path();
        let file = std::fs::File::open(first.join("part-0.parquet")).unwrap();
        parquet::file::reader::FileReader::metadata(&parquet::file::reader::SerializedFileReader::new(file).unwrap())
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.path().parts()[0].clone())
            .collect::<Vec<_>>()
    };
    assert!(!part("instance", "samples").contains(&"instance".to_owned()));
    assert!(!part("source", "requests").contains(&"source".to_owned()));
    assert!(part("date", "requests").contains(&"arrival_time".to_owned()));

    let has_engines = Command::new("python3")
        .args(["-c", "import pyarrow, duckdb, polars"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_engines {
        assert!(std::env::var_os("CI").is_none(), "CI must provide python3 with pyarrow, duckdb, polars (.ci/run)");
        eprintln!("skipped the DuckDB/Polars part: pip install duckdb polars pyarrow");
        return;
    }
    for key in ["date", "source", "instance"] {
        let output = Command::new("python3")
            .args(["tests/partition_check.py", plain.to_str().unwrap(), dir.path().join(key).to_str().unwrap(), key])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{key}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        for table in ["requests", "samples", "cache_events"] {
            assert!(stdout.contains(&format!("{table}: ")) && stdout.contains("(duckdb, polars agree)"), "{stdout}");
        }
        eprintln!("{stdout}");
    }
}

/// A partition's file is open only while a row group is written to it: 300 instances whose rows interleave are
/// partitioned with 64 file descriptors, where holding a writer open per partition fails with "too many open files".
#[test]
fn many_partitions_need_few_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("fleet.csv");
    let mut text = String::from("t,worker,in\n");
    for i in 0..3000 {
        text.push_str(&format!("{},w{:03},{i}\n", 1_767_225_600 + i, i % 300));
    }
    std::fs::write(&csv, text).unwrap();
    let map = dir.path().join("map.toml");
    std::fs::write(
        &map,
        "name = \"fleet\"\n[requests]\narrival_time = { from = \"t\", clock = \"epoch_s\" }\ninstance = \"worker\"\ninput_tokens = \"in\"\n",
    )
    .unwrap();
    let out = dir.path().join("ds");
    let output = Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_infertrace"), "normalize"])
        .args([&csv, &"-o".into(), &out, &"--format".into(), &"csv".into(), &"--map".into(), &map])
        .args(["--partition-by", "instance"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(std::fs::read_dir(out.join("requests")).unwrap().count(), 300);
    // Worker 7's rows, in input order: lines 7, 307, …, 2707 of the data.
    let part = out.join("requests/instance=w007/part-0.parquet");
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(part).unwrap())
            .unwrap()
            .build()
            .unwrap();
    let mut tokens = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = batch.column_by_name("input_tokens").unwrap();
        let column = arrow::array::AsArray::as_primitive::<arrow::datatypes::UInt32Type>(column.as_ref());
        tokens.extend(column.iter().map(Option::unwrap));
    }
    assert_eq!(tokens, (7..3000).step_by(300).collect::<Vec<u32>>());
}
