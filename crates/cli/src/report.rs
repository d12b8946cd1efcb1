//! `infertrace report`: open datasets, compute their metrics, and write the self-contained HTML report.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use infertrace_engine::read::{self, Sample};
use infertrace_engine::{MetricsOptions, Slo};
use infertrace_query::QueryOptions;
use infertrace_report::{ReportInput, render};
use infertrace_schema::RequestRow;

use crate::metrics::{metrics_with, open_datasets};

/// What `infertrace report` reads and writes.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Dataset directories, taken together as one trace.
    pub datasets: Vec<PathBuf>,
    /// The HTML file to write (replaced if it exists; a directory is refused).
    pub output: PathBuf,
    /// Bounds for goodput.
    pub slo: Slo,
    /// Page title; by default the dataset paths as given.
    pub title: Option<String>,
    /// Cost profile, for the cost section.
    pub cost: Option<infertrace_engine::CostProfile>,
}

/// The report of `datasets` as HTML (what [`report`] writes).
pub fn report_html(
    datasets: &[PathBuf],
    slo: &Slo,
    title: Option<&str>,
    cost: Option<&infertrace_engine::CostProfile>,
) -> Result<String> {
    let options = MetricsOptions { slo: slo.clone(), by: None, cost: cost.cloned() };
    let metrics = metrics_with(datasets, &options, &QueryOptions::default())?;
    let opened = open_datasets(datasets)?;
    let requests: Vec<RequestRow> = opened.iter().flat_map(read::requests).collect();
    let samples: Vec<Sample> = opened.iter().flat_map(read::samples).collect();
    let default_title = datasets.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let input = ReportInput {
        title: title.unwrap_or(&default_title),
        requests: &requests,
        samples: &samples,
        metrics: &metrics,
    };
    Ok(render(&input))
}

/// Writes the report of `options.datasets` to `options.output`: into a hidden sibling first, then renamed into
/// place, so that a failed run leaves no half-written file.
pub fn report(options: &ReportOptions) -> Result<()> {
    let output = &options.output;
    if output.is_dir() {
        bail!("cannot write report {}: it is a directory", output.display());
    }
    let html = report_html(&options.datasets, &options.slo, options.title.as_deref(), options.cost.as_ref())?;
    let temp = sibling(output);
    fs::write(&temp, html).with_context(|| format!("cannot write report {}", output.display()))?;
    fs::rename(&temp, output).map_err(|e| {
        let _ = fs::remove_file(&temp);
        anyhow::Error::new(e).context(format!("cannot write report {}", output.display()))
    })
}

fn sibling(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "report".to_owned());
    path.with_file_name(format!(".{name}.infertrace-tmp"))
}
