//! `cargo xtask fuzz-seed`: starting corpora for the cargo-fuzz targets of `fuzz/`, cut from `testdata/`.
//!
//! Each input under `testdata/` is decompressed, cut to its first [`SEED_BYTES`] and written to
//! `fuzz/corpus/<id>/`, where `<id>` is the format the registry detects (by extension for `testdata/mapped/`, whose
//! inputs are never detected; `mooncake-delta` gets Mooncake's), and to `fuzz/corpus/normalize/`. Inputs no adapter
//! claims seed only `normalize`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use infertrace::registry;
use infertrace_adapter::Input;
use infertrace_adapter_mapped::InputKind;

/// How much of each input a seed keeps: libFuzzer mutates short inputs far faster, and 16 KiB holds the head and
/// the first records of every format.
const SEED_BYTES: u64 = 16 * 1024;

/// Directories of `testdata/` that hold no adapter input: datasets and published workload statistics.
const NOT_SEEDS: &[&str] = &["datasets", "synth"];

/// Formats never detected, seeded with the inputs of the format they read a variant of.
const ALSO_SEEDS: &[(&str, &str)] = &[("mooncake", "mooncake-delta")];

/// Format ids that have a fuzz target (`fuzz/fuzz_targets/<id>.rs`): every adapter and the two mapped formats.
pub(crate) fn target_ids() -> Vec<&'static str> {
    registry::ADAPTERS.iter().map(|a| a.id()).chain(InputKind::ALL.iter().map(|k| k.id())).collect()
}

/// Writes the seed corpora and prints how many seeds each target got.
pub(crate) fn seed(root: &Path) -> Result<()> {
    let mut inputs = Vec::new();
    super::collect(&root.join("testdata"), NOT_SEEDS, &["md", "toml"], &mut inputs)?;
    inputs.sort();
    let corpus = root.join("fuzz/corpus");
    let mut counts: BTreeMap<&str, usize> = target_ids().into_iter().map(|id| (id, 0)).collect();
    for path in &inputs {
        let relative = path.strip_prefix(root.join("testdata")).unwrap_or(path);
        let (id, seed) = match Input::open(path, None) {
            Ok(mut input) => {
                let id = if relative.starts_with("mapped") {
                    let name = path.to_string_lossy();
                    InputKind::ALL.iter().find(|k| name.contains(&format!(".{}", k.id()))).map(|k| k.id())
                } else {
                    registry::detect(input.head()).ok().map(|a| a.id())
                };
                let mut seed = Vec::new();
                // A stream damaged past its head (a truncated gzip) keeps what was read.
                let _ = input.reader().take(SEED_BYTES).read_to_end(&mut seed);
                (id, seed)
            }
            // A stream too damaged to open seeds `normalize` with its stored bytes.
            Err(_) => {
                let mut seed = Vec::new();
                let file = fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
                file.take(SEED_BYTES)
                    .read_to_end(&mut seed)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                (None, seed)
            }
        };
        let name = super::dataset_name(relative);
        let also = ALSO_SEEDS.iter().filter(|(of, _)| Some(*of) == id).map(|(_, target)| *target);
        for target in id.into_iter().chain(also).chain(["normalize"]) {
            let dir = corpus.join(target);
            fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            fs::write(dir.join(&name), &seed).with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
            *counts.entry(target).or_default() += 1;
        }
    }
    for (target, count) in &counts {
        println!("fuzz/corpus/{target}: {count} seeds");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new adapter without a fuzz target, or a target left behind by a removed one, fails here.
    #[test]
    fn every_format_has_a_fuzz_target_and_no_target_is_stale() {
        let fuzz = crate::workspace_root().join("fuzz");
        let manifest = fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
        let mut expected: Vec<String> = target_ids().iter().map(|id| format!("{id}.rs")).collect();
        expected.push("normalize.rs".to_owned());
        expected.sort();
        let mut files: Vec<String> = fs::read_dir(fuzz.join("fuzz_targets"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files, expected);
        for id in target_ids() {
            let source = fs::read_to_string(fuzz.join(format!("fuzz_targets/{id}.rs"))).unwrap();
            assert!(source.contains(&format!("parse_id(\"{id}\", data)")), "{id}.rs fuzzes another format");
            assert!(manifest.contains(&format!("name = \"{id}\"\npath = \"fuzz_targets/{id}.rs\"")), "{id}");
        }
        assert_eq!(manifest.matches("[[bin]]").count(), expected.len());
    }
}
