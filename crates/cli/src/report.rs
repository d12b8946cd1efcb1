//! `infertrace report`: open datasets, compute their metrics, and write the self-contained HTML report.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use infertrace_engine::series::series_over;
use infertrace_engine::{MetricsOptions, Slo, compute_over};
use infertrace_query::QueryOptions;
use infertrace_report::{ReportInput, render, series_options};

use crate::stream;

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
    /// How the query engine uses the machine.
    pub query: QueryOptions,
}

/// The report of `options.datasets` as HTML (what [`report`] writes).
pub fn report_html(options: &ReportOptions) -> Result<String> {
    let (datasets, title, query) = (&options.datasets, options.title.as_deref(), &options.query);
    let metrics_options = MetricsOptions { slo: options.slo.clone(), by: None, cost: options.cost.clone() };
    // The metrics and the charts' points are queries over one session: nothing holds the rows.
    let session = stream::open(datasets, query)?;
    let (metrics, series) = session
        .block_on(async {
            let metrics = compute_over(session.datasets(), &metrics_options, session.scratch()).await?;
            let series = series_over(session.datasets(), &series_options()).await?;
            Ok((metrics, series))
        })
        .map_err(|e| stream::engine_error(e, query, "compute the report"))?;
    let default_title = datasets.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let input = ReportInput { title: title.unwrap_or(&default_title), series: &series, metrics: &metrics };
    Ok(render(&input))
}

/// Writes the report of `options.datasets` to `options.output`: into a hidden sibling first, then renamed into
/// place, so that a failed run leaves no half-written file.
pub fn report(options: &ReportOptions) -> Result<()> {
    let output = &options.output;
    if output.is_dir() {
        bail!("cannot write report {}: it is a directory", output.display());
    }
    let html = report_html(options)?;
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
