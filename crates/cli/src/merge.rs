//! `infertrace merge`: open datasets, join their request rows with the engine, write one dataset.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use infertrace_engine::{MergeOptions, merge as merge_rows};
use infertrace_schema::{Assumptions, Dataset, DatasetWriter, Manifest, Producer, RowCounts, SCHEMA_VERSION};

use crate::registry::CLIENT_FORMATS;

/// What to merge and how.
#[derive(Debug, Clone)]
pub struct MergeArgs {
    /// Datasets, as given on the command line.
    pub datasets: Vec<PathBuf>,
    /// Output directory.
    pub output: PathBuf,
    /// Largest arrival difference of rows joined by time, in seconds.
    pub tolerance_s: f64,
    /// Largest token-count difference of rows joined by time.
    pub token_slack: u32,
    /// Sources to take as client-observed besides the benchmark formats ([`CLIENT_FORMATS`]).
    pub client_sources: Vec<String>,
    /// Replace an existing output.
    pub force: bool,
}

/// Merges the datasets into `args.output` and returns the manifest written.
///
/// The manifest lists the inputs of every merged dataset (their paths as those manifests recorded them), takes the
/// assumptions of the first, and records what the merge did under `merge`.
pub fn merge(args: &MergeArgs) -> Result<Manifest> {
    let datasets = args
        .datasets
        .iter()
        .map(|path| Dataset::open(path).with_context(|| format!("cannot read dataset {}", path.display())))
        .collect::<Result<Vec<_>>>()?;
    let client_sources: BTreeSet<String> =
        CLIENT_FORMATS.iter().map(|s| (*s).to_owned()).chain(args.client_sources.iter().cloned()).collect();
    let options = MergeOptions {
        tolerance_ns: (args.tolerance_s * 1e9).round() as u64,
        token_slack: args.token_slack,
        client_sources,
    };
    let merged = merge_rows(&datasets, &options).map_err(|e| {
        let path = args.datasets.get(e.index).map_or_else(String::new, |p| p.display().to_string());
        anyhow::anyhow!("cannot merge dataset {path}: table {}: {}; is it an infertrace dataset?", e.table, e.source)
    })?;
    let output = &args.output;
    let write = || -> Result<Manifest, infertrace_schema::DatasetError> {
        let mut writer = DatasetWriter::create(output, args.force)?;
        for row in &merged.requests {
            writer.push_request(row)?;
        }
        for row in &merged.samples {
            writer.push_sample(row)?;
        }
        for row in &merged.cache_events {
            writer.push_cache_event(row)?;
        }
        let mut record = merged.record.clone();
        record.datasets = args.datasets.iter().map(|p| display(p)).collect();
        let first = datasets.first().map(|d| &d.manifest);
        writer.finish(Manifest {
            schema_version: SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: first.map_or_else(
                || Assumptions { year: None, utc_offset: "+00:00".into(), start: "1970-01-01T00:00:00Z".into() },
                |m| m.assumptions.clone(),
            ),
            inputs: datasets.iter().flat_map(|d| d.manifest.inputs.iter().cloned()).collect(),
            skipped: datasets.iter().flat_map(|d| d.manifest.skipped.iter().cloned()).collect(),
            merge: Some(record),
            cache_sim: None,
            partition_by: None,
            hash_salt: datasets.iter().find_map(|d| d.manifest.hash_salt),
            rows: RowCounts::default(),
        })
    };
    write().with_context(|| format!("cannot write output {}", output.display()))
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// What the merge did, in a few lines for the terminal.
pub fn render_merge(manifest: &Manifest, output: &Path) -> String {
    use crate::summary::count;
    let Some(m) = &manifest.merge else { return String::new() };
    let rows_in: u64 = m.rows_in.values().sum();
    let per_source = |map: &std::collections::BTreeMap<String, u64>| {
        map.iter().map(|(s, n)| format!("{s} {}", count(*n))).collect::<Vec<_>>().join(", ")
    };
    let mut out = format!(
        "request rows: {} ({})\nrequests: {}, of which {} from several sources ({} rows joined by id, {} by time, {} \
         of them with several candidates)\nunmatched rows: {}\n",
        count(rows_in),
        per_source(&m.rows_in),
        count(manifest.rows.requests),
        count(m.merged_requests),
        count(m.matched_by_id),
        count(m.matched_by_time),
        count(m.ambiguous),
        per_source(&m.unmatched),
    );
    out.push_str(&format!(
        "samples: {}, cache events: {}\nwrote {}\n",
        count(manifest.rows.samples),
        count(manifest.rows.cache_events),
        output.display()
    ));
    out
}
