//! `infertrace synth servegen`: a per-request dataset sampled from one model directory of ServeGen statistics.
//!
//! This side reads and hashes the files and assembles the manifest; the sampling itself is
//! `infertrace_synth::servegen`, whose doc says how requests are drawn.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use infertrace_adapter::Input;
use infertrace_adapter::time::format_rfc3339;
use infertrace_schema::{
    Assumptions, ClockDomain, DatasetError, DatasetWriter, DiagnosticSummary, InputEntry, Manifest, Producer,
    RowCounts, SCHEMA_VERSION, SkippedInput,
};
use infertrace_synth::servegen::{self, Client, ClientSummary, LengthTable, SOURCE, SynthError, SynthOptions};
use serde_json::json;

use crate::NormalizeReport;
use crate::paths::display_path;

/// What to sample from ServeGen statistics, and where to write it.
#[derive(Debug, Clone)]
pub struct ServegenOptions {
    /// One model directory of ServeGen's `data/` (holding `chunk-<i>-trace.csv` and `chunk-<i>-dataset.json`).
    pub dir: PathBuf,
    /// Dataset directory to write.
    pub output: PathBuf,
    /// Client ids to include; `None` for every client of the directory.
    pub clients: Option<Vec<u64>>,
    /// Seed of the random streams.
    pub seed: u64,
    /// Seconds into the statistics where the trace begins.
    pub from_s: u64,
    /// Seconds of trace to sample.
    pub duration_s: u64,
    /// Factor applied to every client's rate.
    pub rate_scale: f64,
    /// UTC nanoseconds of the trace's first instant.
    pub start_ns: i64,
    /// Replace an existing output.
    pub force: bool,
}

/// The two statistics files of one client.
#[derive(Debug, Default)]
struct ClientFiles {
    trace: Option<PathBuf>,
    dataset: Option<PathBuf>,
}

/// One statistics file read: its text, recorded path and manifest entry so far.
struct ReadFile {
    text: String,
    display: String,
    entry: InputEntry,
}

/// Samples the dataset `options.output` from the statistics in `options.dir`.
///
/// Fails, leaving no dataset behind, when the directory holds no ServeGen statistics, a client lacks one of its
/// two files, a file is unreadable or invalid (the message names it, with the line when known), a requested client
/// does not exist, the span goes past the statistics, or the output cannot be written.
pub fn synth_servegen(options: &ServegenOptions) -> Result<NormalizeReport> {
    let dir = &options.dir;
    let (files, skipped) = list_statistics(dir)?;
    if files.is_empty() {
        bail!(
            "input directory {} holds no chunk-<i>-trace.csv files; pass one model directory of ServeGen's data/ \
             (such as data/language/m-large)",
            dir.display()
        );
    }
    let selected: BTreeSet<u64> = match &options.clients {
        None => files.keys().copied().collect(),
        Some(ids) => {
            if let Some(missing) = ids.iter().find(|id| !files.contains_key(id)) {
                bail!("input directory {} has no client {missing} (no chunk-{missing}-trace.csv)", dir.display());
            }
            ids.iter().copied().collect()
        }
    };
    let mut clients = Vec::new();
    let mut entries = Vec::new();
    for (&id, pair) in &files {
        let (Some(trace), Some(dataset)) = (&pair.trace, &pair.dataset) else {
            let (have, lacks) = match &pair.trace {
                Some(trace) => (trace, format!("chunk-{id}-dataset.json")),
                None => (pair.dataset.as_ref().expect("a listed client has a file"), format!("chunk-{id}-trace.csv")),
            };
            bail!("input {} has no {lacks} beside it", display_path(dir, have));
        };
        if !selected.contains(&id) {
            // Left out on purpose, so not `skipped`: the inputs list says which clients were sampled.
            continue;
        }
        let trace = read(dir, trace)?;
        let dataset = read(dir, dataset)?;
        let windows = servegen::parse_trace(&trace.text).map_err(|e| invalid(&trace.display, e))?;
        let mut lengths = servegen::parse_lengths(&dataset.text).map_err(|e| invalid(&dataset.display, e))?;
        let first_used = windows.iter().map(|w| w.start_s).take_while(|&s| s <= options.from_s).last();
        keep_span(
            &mut lengths,
            first_used.unwrap_or(options.from_s),
            options.from_s.saturating_add(options.duration_s),
        );
        clients.push(Client {
            id,
            trace_file: trace.display.clone(),
            dataset_file: dataset.display.clone(),
            windows,
            lengths,
        });
        entries.push((trace.entry, dataset.entry));
    }

    let synth = SynthOptions {
        model: model_name(dir),
        seed: options.seed,
        from_s: options.from_s,
        duration_s: options.duration_s,
        rate_scale: options.rate_scale,
        start_ns: options.start_ns,
    };
    // Before creating the output, so a bad option leaves an existing dataset alone.
    servegen::check(&clients, &synth).map_err(synth_error)?;
    let mut writer = DatasetWriter::create(&options.output, options.force).map_err(|e| match e {
        DatasetError::Exists { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(format!("cannot write output {}", options.output.display())),
    })?;
    let summaries = servegen::generate(&clients, &synth, &mut |row| writer.push_request(row)).map_err(|e| match e {
        SynthError::Write(e) => {
            anyhow::Error::new(e).context(format!("cannot write output {}", options.output.display()))
        }
        other => synth_error(other),
    })?;

    let mut inputs = Vec::with_capacity(entries.len() * 2);
    for ((mut trace, mut dataset), (client, summary)) in entries.into_iter().zip(clients.iter().zip(&summaries)) {
        let version = category(&client.lengths);
        trace.format_version = Some(version.to_owned());
        dataset.format_version = Some(version.to_owned());
        trace.records.requests = summary.requests;
        trace.details = trace_details(client.id, summary, &synth);
        dataset.details = BTreeMap::from([
            ("client".to_owned(), json!(client.id)),
            ("length_windows_used".to_owned(), json!(client.lengths.len())),
        ]);
        inputs.push(trace);
        inputs.push(dataset);
    }
    let manifest = Manifest {
        schema_version: SCHEMA_VERSION,
        producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
        assumptions: Assumptions {
            year: None,
            utc_offset: "+00:00".to_owned(),
            start: format_rfc3339(options.start_ns),
            block_size: None,
        },
        inputs,
        skipped,
        merge: None,
        cache_sim: None,
        partition_by: None,
        hash_salt: None,
        capture: None,
        rows: RowCounts::default(),
    };
    let manifest =
        writer.finish(manifest).with_context(|| format!("cannot write output {}", options.output.display()))?;
    Ok(NormalizeReport { manifest, output: options.output.clone(), shown_lines: Vec::new(), parsed_twice: 0 })
}

/// The clients of `dir` by id, and the other (non-hidden) files, which are skipped. Not recursive: a model
/// directory is flat.
fn list_statistics(dir: &Path) -> Result<(BTreeMap<u64, ClientFiles>, Vec<SkippedInput>)> {
    let list_error = || format!("cannot list input directory {}; check the path exists and is readable", dir.display());
    let mut paths = fs::read_dir(dir)
        .with_context(list_error)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(list_error)?;
    paths.sort();
    let mut files: BTreeMap<u64, ClientFiles> = BTreeMap::new();
    let mut skipped = Vec::new();
    for path in paths {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        match statistics_file(&name) {
            Some((id, true)) if path.is_file() => files.entry(id).or_default().trace = Some(path),
            Some((id, false)) if path.is_file() => files.entry(id).or_default().dataset = Some(path),
            _ => skipped.push(SkippedInput { path: display_path(dir, &path), reason: "unrecognised".to_owned() }),
        }
    }
    Ok((files, skipped))
}

/// `chunk-<i>-trace.csv` → `(i, true)`, `chunk-<i>-dataset.json` → `(i, false)`, either optionally `.gz`/`.zst`.
fn statistics_file(name: &str) -> Option<(u64, bool)> {
    let name = name.strip_suffix(".gz").or_else(|| name.strip_suffix(".zst")).unwrap_or(name);
    let rest = name.strip_prefix("chunk-")?;
    let (id, trace) = match rest.strip_suffix("-trace.csv") {
        Some(id) => (id, true),
        None => (rest.strip_suffix("-dataset.json")?, false),
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((id.parse().ok()?, trace))
}

fn read(dir: &Path, path: &Path) -> Result<ReadFile> {
    let display = display_path(dir, path);
    let read_error = || format!("cannot read input {display}");
    let mut input = Input::open(path, None).with_context(read_error)?;
    let mut bytes = Vec::new();
    input.reader().read_to_end(&mut bytes).with_context(read_error)?;
    let compression = input.compression().as_str().to_owned();
    let digest = input.finish().with_context(read_error)?;
    let Ok(text) = String::from_utf8(bytes) else {
        bail!("invalid statistics {display}: not UTF-8 text");
    };
    let entry = InputEntry {
        path: display.clone(),
        bytes: digest.bytes,
        sha256: digest.sha256,
        compression,
        format: SOURCE.to_owned(),
        format_version: None,
        clock_domain: ClockDomain::Relative,
        year: None,
        lines: text.lines().count() as u64,
        records: RowCounts::default(),
        diagnostics: DiagnosticSummary::default(),
        details: BTreeMap::new(),
        drift: None,
    };
    Ok(ReadFile { text, display, entry })
}

fn invalid(display: &str, error: servegen::StatsError) -> anyhow::Error {
    anyhow::anyhow!("invalid statistics {display}: {error}")
}

fn synth_error(error: SynthError) -> anyhow::Error {
    match error {
        SynthError::Statistics { .. } => anyhow::anyhow!("invalid statistics {error}"),
        other => anyhow::Error::new(other),
    }
}

/// Drops the length windows the span `[from, end)` cannot use: those after it, and those before the last one
/// starting at or before `from`. Keeps memory to what is sampled.
fn keep_span(lengths: &mut LengthTable, from: u64, end: u64) {
    let _ = lengths.split_off(&end);
    if let Some((&first_used, _)) = lengths.range(..=from).next_back() {
        *lengths = lengths.split_off(&first_used);
    }
}

/// The model: the directory's own name (`m-large`, `mm-image`, `deepseek-r1`).
fn model_name(dir: &Path) -> String {
    std::path::absolute(dir)
        .ok()
        .and_then(|d| d.components().next_back().map(|c| c.as_os_str().to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty() && n != "/")
        .unwrap_or_else(|| "servegen".to_owned())
}

/// ServeGen's category, from the fields of the statistics: `reason`, `multimodal` or `language`.
fn category(lengths: &LengthTable) -> &'static str {
    if lengths.values().any(|l| l.reason_ratio.is_some()) {
        "reason"
    } else if lengths.values().any(|l| l.text.is_some() || l.media.iter().any(Option::is_some)) {
        "multimodal"
    } else {
        "language"
    }
}

fn trace_details(client: u64, summary: &ClientSummary, synth: &SynthOptions) -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([
        ("client".to_owned(), json!(client)),
        ("requests".to_owned(), json!(summary.requests)),
        ("expected_requests".to_owned(), json!(summary.expected_requests)),
        ("active_windows".to_owned(), json!(summary.active_windows)),
        ("idle_windows".to_owned(), json!(summary.idle_windows)),
        ("input_tokens".to_owned(), json!(summary.input_tokens)),
        ("output_tokens".to_owned(), json!(summary.output_tokens)),
        (
            "synth".to_owned(),
            json!({
                "seed": synth.seed,
                "from_s": synth.from_s,
                "duration_s": synth.duration_s,
                "rate_scale": synth.rate_scale,
            }),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_file_names() {
        assert_eq!(statistics_file("chunk-12-trace.csv"), Some((12, true)));
        assert_eq!(statistics_file("chunk-0-dataset.json"), Some((0, false)));
        assert_eq!(statistics_file("chunk-1-dataset.json.zst"), Some((1, false)));
        assert_eq!(statistics_file("chunk--trace.csv"), None);
        assert_eq!(statistics_file("chunk-+1-trace.csv"), None);
        assert_eq!(statistics_file("chunk-1-trace.csv.url"), None);
        assert_eq!(statistics_file("README.md"), None);
    }

    #[test]
    fn the_span_keeps_the_length_windows_it_uses() {
        let lengths = servegen::parse_lengths(
            r#"{"0": {"input_tokens": "{1: 1.0}", "output_tokens": "{1: 1.0}"},
                "21600": {"input_tokens": "{2: 1.0}", "output_tokens": "{1: 1.0}"},
                "43200": {"input_tokens": "{3: 1.0}", "output_tokens": "{1: 1.0}"},
                "64800": {"input_tokens": "{4: 1.0}", "output_tokens": "{1: 1.0}"}}"#,
        )
        .unwrap();
        let kept = |from, end| {
            let mut l = lengths.clone();
            keep_span(&mut l, from, end);
            l.keys().copied().collect::<Vec<_>>()
        };
        assert_eq!(kept(30000, 50000), [21600, 43200]);
        assert_eq!(kept(21600, 21601), [21600]);
        assert_eq!(kept(0, 100000), [0, 21600, 43200, 64800]);
    }
}
