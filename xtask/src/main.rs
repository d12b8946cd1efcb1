//! Project automation: `cargo xtask <task>`.
//!
//! - `codegen [--check]` writes `schemas/` from the schema crate (or checks it is up to date).
//! - `normalize` normalizes every input under `testdata/` into `target/normalized/<name>/` and prints a summary.
//! - `test [ARGS…]` installs what the tests need (pinned Python packages under `target/python/`, Chromium with apt
//!   when it may) and runs `cargo test --workspace --no-fail-fast ARGS…` (see `test.rs`).
//! - `fuzz-seed` writes starting corpora for the fuzz targets of `fuzz/` from `testdata/` (see `fuzz.rs`).
//! - `bench [--runs N] [--log-mb N] [--rows N] [--no-python] [--threads N] [--formats]` times `infertrace normalize`
//!   on large generated inputs against `wc -l` and the Python baseline of `bench/baseline/`, then the logs compressed
//!   and cut into gzip'd parts, and every input with `--partition-by date` (see `bench.rs`; not part of CI); with
//!   `--formats`, on every other line-oriented format, one thread against all (`bench_formats.rs`).
//! - `bench --scale [--requests 1M,10M,100M] [--runs N] [--no-duckdb]` times the analysis commands on generated
//!   datasets of those sizes, with their peak memory, and DuckDB computing the same figures (`bench_scale.rs`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{env, fs};

use anyhow::{Context as _, Result, bail};
use infertrace::registry;
use infertrace::summary::{self, INPUT_COUNTS_FROM, INPUT_HEADERS};
use infertrace::{NormalizeOptions, normalize};
use infertrace_schema::docs::generated_files;

mod bench;
mod bench_formats;
mod bench_scale;
mod fuzz;
mod test;
mod tidy;

const USAGE: &str = "usage: cargo xtask <codegen [--check] | normalize | test [ARGS…] | fuzz-seed | bench [--runs N] [--log-mb N] [--rows N] [--no-python] [--threads N] [--formats] | bench --scale [--requests N,…] [--runs N] [--no-duckdb]>";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = env::args().skip(1).collect();
    let root = workspace_root();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["codegen"] => codegen(&root, false),
        ["codegen", "--check"] => codegen(&root, true),
        ["normalize"] => normalize_testdata(&root),
        ["fuzz-seed"] => fuzz::seed(&root),
        ["test", rest @ ..] => test::test(&root, &rest.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()),
        ["bench", "--scale", rest @ ..] => {
            let options = bench_scale::ScaleOptions::parse(rest)?;
            bench_scale::bench(&bench::release_binary(&root)?, &root.join("target/bench"), &options)
        }
        ["bench", rest @ ..] => bench::bench(&root, &bench::BenchOptions::parse(rest)?),
        _ => bail!("{USAGE}"),
    }
}

/// The workspace root: the parent of this crate's directory.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace root").to_owned()
}

/// Writes `schemas/`, or with `check` fails when a file there differs from what the code generates.
pub(crate) fn codegen(root: &Path, check: bool) -> Result<()> {
    let dir = root.join("schemas");
    let mut stale = Vec::new();
    for file in generated_files() {
        let path = dir.join(&file.name);
        let current = fs::read_to_string(&path).unwrap_or_default();
        if current == file.contents {
            continue;
        }
        if check {
            stale.push(file.name);
        } else {
            fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            fs::write(&path, &file.contents).with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote schemas/{}", file.name);
        }
    }
    if !stale.is_empty() {
        bail!("schemas/ is stale ({}); run `cargo xtask codegen` and commit the result", stale.join(", "));
    }
    Ok(())
}

/// Normalizes each input under `testdata/` (except the directories of `NOT_INPUTS` and Markdown) into its own dataset.
fn normalize_testdata(root: &Path) -> Result<()> {
    // Relative paths keep the datasets free of this machine's absolute paths.
    env::set_current_dir(root).with_context(|| format!("cannot enter {}", root.display()))?;
    let mut inputs = Vec::new();
    collect(Path::new("testdata"), NOT_INPUTS, &["md"], &mut inputs)?;
    inputs.sort();
    let out_root = Path::new("target/normalized");
    let mut rows = Vec::new();
    for input in &inputs {
        let name = dataset_name(input);
        let options = NormalizeOptions {
            inputs: vec![input.clone()],
            output: out_root.join(&name),
            format: None,
            parse: Default::default(),
            force: true,
            ..Default::default()
        };
        let report = normalize(&options, &indicatif::ProgressBar::hidden())?;
        for mut row in summary::input_rows(&report.manifest) {
            row[0] = name.clone();
            rows.push(row);
        }
    }
    let mut headers = INPUT_HEADERS.to_vec();
    headers[0] = "dataset (target/normalized/…)";
    print!("{}", summary::render_table(&headers, &rows, INPUT_COUNTS_FROM));
    println!("{} datasets from {} formats ({})", rows.len(), registry::ADAPTERS.len(), registry::ids());
    Ok(())
}

/// Directories of `testdata/` that are not `normalize` inputs: `invalid/` must fail, `traces-full/` holds whole corpus
/// files for the aggregate tests, `synth/` statistics for `infertrace synth`, `mapped/` inputs that need `--map`,
/// `datasets/` datasets kept to guard reading older schema versions, `expected/` the hand-read values of the real
/// log excerpts.
const NOT_INPUTS: &[&str] = &["invalid", "traces-full", "synth", "mapped", "datasets", "expected"];

/// The files under `dir`, recursively, except in directories named in `skip_dirs` and with an extension of
/// `skip_extensions` (or none).
pub(crate) fn collect(
    dir: &Path,
    skip_dirs: &[&str],
    skip_extensions: &[&str],
    inputs: &mut Vec<PathBuf>,
) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry.with_context(|| format!("cannot list {}", dir.display()))?.path();
        if path.is_dir() {
            if path.file_name().is_none_or(|n| !skip_dirs.iter().any(|x| n == *x)) {
                collect(&path, skip_dirs, skip_extensions, inputs)?;
            }
        } else if path.extension().is_some_and(|e| !skip_extensions.iter().any(|x| e == *x)) {
            inputs.push(path);
        }
    }
    Ok(())
}

/// `testdata/mooncake/fast25/conversation_trace.jsonl.zst` → `mooncake-fast25-conversation_trace`.
fn dataset_name(input: &Path) -> String {
    let relative = input.strip_prefix("testdata").unwrap_or(input);
    let text = relative.to_string_lossy().replace(['/', '\\'], "-");
    let text = text.strip_suffix(".gz").or_else(|| text.strip_suffix(".zst")).unwrap_or(&text).to_owned();
    text.rsplit_once('.').map_or(text.clone(), |(stem, _)| stem.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_fresh() {
        codegen(&workspace_root(), true).unwrap();
    }

    #[test]
    fn dataset_names_drop_directories_and_extensions() {
        assert_eq!(
            dataset_name(Path::new("testdata/mooncake/fast25/conversation_trace.jsonl.zst")),
            "mooncake-fast25-conversation_trace"
        );
        assert_eq!(dataset_name(Path::new("testdata/azure-llm/2024/week_shape.csv")), "azure-llm-2024-week_shape");
    }
}
