//! `infertrace replay` and `infertrace calibrate`: read datasets and a cluster configuration, simulate, write a
//! canonical dataset.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};
use infertrace_engine::format::{count, percent, seconds};
use infertrace_engine::read;
use infertrace_model::Catalog;
use infertrace_replay::calibrate::{Calibration, Errors, calibrate};
use infertrace_replay::{Config, ReplayOptions, Replayed, replay};
use infertrace_schema::{Assumptions, DatasetWriter, Manifest, Producer, RequestRow, RowCounts, SCHEMA_VERSION};

use crate::metrics::open_datasets;

/// Reads and checks a cluster configuration.
pub fn read_config(path: &Path) -> Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read configuration {}", path.display()))?;
    Config::from_toml(&text).map_err(|e| anyhow!("invalid configuration {}: {e}", path.display()))
}

pub use crate::model::catalog;

/// The request rows of datasets, taken together, durations filled.
pub fn rows(datasets: &[PathBuf]) -> Result<Vec<RequestRow>> {
    Ok(open_datasets(datasets)?.iter().flat_map(read::requests).collect())
}

/// Replays `datasets` on `config` and writes the result to `output`; with `timing`, prints the simulation's wall
/// time (without reading and writing) to stderr — never into an output.
pub fn replay_to(
    datasets: &[PathBuf],
    config_path: &Path,
    catalog: &Catalog,
    options: &ReplayOptions,
    output: &Path,
    force: bool,
    timing: bool,
) -> Result<Replayed> {
    let config = read_config(config_path)?;
    let opened = open_datasets(datasets)?;
    let rows: Vec<RequestRow> = opened.iter().flat_map(read::requests).collect();
    let started = std::time::Instant::now();
    let replayed = replay(&config, catalog, &rows, options).map_err(|e| anyhow!("cannot replay: {e}"))?;
    if timing {
        let wall = started.elapsed().as_secs_f64();
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "timing: {} requests simulated in {:.3} s of wall time ({:.0} requests/s)",
                rows.len(),
                wall,
                rows.len() as f64 / wall
            );
        }
    }
    let write = || -> Result<(), infertrace_schema::DatasetError> {
        let mut writer = DatasetWriter::create(output, force)?;
        for row in &replayed.requests {
            writer.push_request(row)?;
        }
        for sample in &replayed.samples {
            writer.push_sample(sample)?;
        }
        let first = opened.first().map(|d| d.manifest.assumptions.clone());
        writer.finish(Manifest {
            schema_version: SCHEMA_VERSION,
            producer: Producer { name: "infertrace".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
            assumptions: first.unwrap_or(Assumptions {
                year: None,
                utc_offset: "+00:00".into(),
                start: "1970-01-01T00:00:00Z".into(),
            }),
            inputs: opened.iter().flat_map(|d| d.manifest.inputs.iter().cloned()).collect(),
            skipped: Vec::new(),
            merge: None,
            cache_sim: None,
            partition_by: None,
            hash_salt: opened.iter().find_map(|d| d.manifest.hash_salt),
            rows: RowCounts::default(),
        })?;
        Ok(())
    };
    write().with_context(|| format!("cannot write output {}", output.display()))?;
    Ok(replayed)
}

/// What a replay did, for the terminal.
pub fn render_replay(replayed: &Replayed, output: &Path) -> String {
    let mut out = String::new();
    let ok = replayed.requests.iter().filter(|r| r.status == infertrace_schema::Status::Ok).count() as u64;
    writeln!(
        out,
        "replayed {} requests ({} completed, {} rejected for KV memory, {} rows skipped without arrival or input \
         tokens) in {} iterations ({} folded) over {} simulated; {} preemptions; {} KV blocks per instance",
        count(replayed.requests.len() as u64),
        count(ok),
        count(replayed.rejected),
        count(replayed.skipped),
        count(replayed.iterations),
        count(replayed.folded),
        seconds(replayed.makespan_s),
        count(replayed.preemptions),
        count(replayed.blocks_per_instance)
    )
    .unwrap();
    writeln!(out, "wrote {}", output.display()).unwrap();
    out
}

/// Calibrates `config` against the measured datasets.
pub fn calibrate_from(datasets: &[PathBuf], config_path: &Path, catalog: &Catalog) -> Result<(Config, Calibration)> {
    let config = read_config(config_path)?;
    let rows = rows(datasets)?;
    let calibration = calibrate(&config, catalog, &rows).map_err(|e| anyhow!("cannot calibrate: {e}"))?;
    let mut fitted = config;
    fitted.efficiency = calibration.efficiency;
    Ok((fitted, calibration))
}

fn error_cell(e: Option<f64>) -> String {
    e.map_or("-".to_owned(), |e| format!("{:+.1}%", e * 100.0))
}

/// A calibration, for the terminal.
pub fn render_calibration(c: &Calibration) -> String {
    let mut out = String::new();
    let mean = |v: Option<f64>| v.map_or("-".to_owned(), seconds);
    let line = |out: &mut String, name: &str, m: &infertrace_replay::calibrate::Means, e: Option<&Errors>| {
        writeln!(
            out,
            "{name:<10} TTFT {} {}, TPOT {} {}, e2e {} {}",
            mean(m.ttft_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.ttft))),
            mean(m.tpot_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.tpot))),
            mean(m.e2e_s),
            e.map_or(String::new(), |e| format!("({})", error_cell(e.e2e))),
        )
        .unwrap();
    };
    writeln!(out, "means (error against measured):").unwrap();
    line(&mut out, "measured", &c.measured, None);
    line(&mut out, "as given", &c.before, Some(&c.before_errors));
    line(&mut out, "fitted", &c.after, Some(&c.after_errors));
    writeln!(
        out,
        "fitted efficiency: mfu {}, mbu {}, step overhead {} ({} replays)",
        percent(Some(c.efficiency.mfu)),
        percent(Some(c.efficiency.mbu)),
        seconds(c.efficiency.step_overhead_s),
        count(c.replays)
    )
    .unwrap();
    out
}
