//! `--hash-salt`: one keyed transform of every prefix and block hash. Two salts share no hash; one salt gives the
//! same bytes every time; and what only compares hashes (cache simulation, exact miss-ratio curves) is unchanged.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::array::AsArray;
use arrow::datatypes::UInt64Type;
use infertrace_schema::{Dataset, HashSalt};

fn infertrace(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs");
    assert_eq!(output.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// A Mooncake trace with shared prefixes, and a vLLM KV-event stream (block and parent hashes).
const INPUTS: [&str; 2] = [
    "../../testdata/mooncake/fast25/conversation_trace_excerpt.jsonl",
    "../../testdata/vllm/kv-events-0.24/subscriber.jsonl",
];

fn normalize(dir: &Path, name: &str, salt: Option<&str>) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec!["normalize", "-o", out.to_str().unwrap()];
    args.extend(INPUTS);
    if let Some(salt) = salt {
        args.extend(["--hash-salt", salt]);
    }
    infertrace(&args);
    out
}

/// Every hash of the dataset: `prefix_hashes` elements, `block_hash` and `parent_hash`.
fn hashes(dir: &Path) -> BTreeSet<u64> {
    let dataset = Dataset::open(dir).unwrap();
    let mut all = BTreeSet::new();
    let lists = dataset.requests.column_by_name("prefix_hashes").unwrap().as_list::<i32>();
    all.extend(lists.values().as_primitive::<UInt64Type>().iter().flatten());
    for name in ["block_hash", "parent_hash"] {
        all.extend(dataset.cache_events.column_by_name(name).unwrap().as_primitive::<UInt64Type>().iter().flatten());
    }
    all
}

#[test]
fn salts_key_every_hash_and_keep_what_hashes_are_compared_for() {
    let dir = tempfile::tempdir().unwrap();
    let plain = normalize(dir.path(), "plain", None);
    let (a, a2, b) = (
        normalize(dir.path(), "a", Some("tenant-a")),
        normalize(dir.path(), "a2", Some("tenant-a")),
        normalize(dir.path(), "b", Some("tenant-b")),
    );
    let (plain_hashes, a_hashes, b_hashes) = (hashes(&plain), hashes(&a), hashes(&b));
    assert!(plain_hashes.len() > 100, "the inputs carry hashes: {}", plain_hashes.len());
    assert_eq!(a_hashes.len(), plain_hashes.len(), "keying is one-to-one on these hashes");
    assert_eq!(a_hashes.intersection(&b_hashes).count(), 0, "two salts share no hash");
    assert_eq!(a_hashes.intersection(&plain_hashes).count(), 0, "a salt shares no hash with no salt");

    for file in ["requests.parquet", "samples.parquet", "cache_events.parquet", "manifest.json"] {
        assert_eq!(fs::read(a.join(file)).unwrap(), fs::read(a2.join(file)).unwrap(), "{file}: same salt, same bytes");
    }
    let manifest = fs::read_to_string(a.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"hash_salt\": \"keyed\""), "{manifest}");
    assert!(!manifest.contains("tenant-a"), "the salt is never stored");
    assert_eq!(Dataset::open(&a).unwrap().manifest.hash_salt, Some(HashSalt::Keyed));
    assert!(!fs::read_to_string(plain.join("manifest.json")).unwrap().contains("hash_salt"));

    // Cache simulation and the exact miss-ratio curve compare hashes only: salted or not, the same hits.
    for args in [&["cache-sim", "--tier", "gpu=20k", "--json"][..], &["mrc", "--exact", "--json"][..]] {
        let run = |dataset: &Path| {
            let mut all = vec![args[0], dataset.to_str().unwrap()];
            all.extend(&args[1..]);
            String::from_utf8(infertrace(&all).stdout).unwrap()
        };
        let (unsalted, salted) = (run(&plain), run(&a));
        assert!(unsalted.contains("hit"), "{unsalted}");
        assert_eq!(salted.replace("/a\"", "/plain\""), unsalted, "{}", args[0]);
    }
}
