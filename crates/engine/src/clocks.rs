//! Which request rows can be put on one time line, and which must be shown apart.
//!
//! Each input of a dataset records its `clock_domain` in the manifest: `relative` times count from a start given to
//! `normalize` (`--start`, the epoch by default), `utc` and `assumed-offset` are on the wall clock. Rows of the two
//! cannot be compared: a span from a relative arrival near 0 to a wall-clock completion is 56 years, and the
//! throughput over it is 0. So figures over rows of both are refused unless they are broken down by `source`; then
//! the figures that need one time line (span, rates, TTFT under load, the fleet's hours) are left out of the
//! overall figures, and out of any source whose own files are on both clocks. And rows of different kinds
//! (measured, simulated, synthetic: `SourceKind`) are broken down by source by default, so a measured run and its
//! simulation are never read as one number.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use infertrace_query::{Datasets, QueryError};
use infertrace_schema::{ClockDomain, SourceKind};

use crate::GroupBy;

/// Whether times are on the wall clock or count from a start of the user's choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Clock {
    Absolute,
    Relative,
}

impl Clock {
    fn of(domain: ClockDomain) -> Clock {
        match domain {
            ClockDomain::Relative => Clock::Relative,
            ClockDomain::Utc | ClockDomain::AssumedOffset => Clock::Absolute,
        }
    }
}

/// How the rows of some datasets are to be grouped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The grouping asked for, or `source` when the rows mix kinds and none was asked for.
    pub by: Option<GroupBy>,
    /// Rows on both clocks, broken down by source: figures over all rows that need a time line (throughput, rates,
    /// TTFT under load) are left out.
    pub mixed_clocks: bool,
    /// The sources whose own rows are on both clocks (two traces of one format): their figures that need a time
    /// line are left out too.
    pub mixed_sources: BTreeSet<String>,
}

/// The grouping of `datasets` when `by` was asked for, or the error that says why their rows cannot be taken
/// together.
pub(crate) async fn plan(datasets: &Datasets, by: Option<GroupBy>) -> Result<Plan, QueryError> {
    // The clock of every input file, by its recorded path (a path may be in several datasets).
    let mut clocks: BTreeMap<&str, BTreeSet<Clock>> = BTreeMap::new();
    for manifest in datasets.manifests() {
        for input in &manifest.inputs {
            clocks.entry(input.path.as_str()).or_default().insert(Clock::of(input.clock_domain));
        }
    }
    let pairs = datasets
        .sql("SELECT DISTINCT CAST(source AS VARCHAR) AS source, CAST(source_file AS VARCHAR) AS file FROM requests")
        .await?
        .collect()
        .await?;
    // Per source, the first file (in path order) of each clock.
    let mut by_source: BTreeMap<String, BTreeMap<Clock, String>> = BTreeMap::new();
    for batch in &pairs {
        // The engine's strings may come as views: one type to read.
        let text = |i: usize| arrow::compute::cast(batch.column(i), &arrow::datatypes::DataType::Utf8);
        let (sources, files) = (text(0)?, text(1)?);
        let (sources, files) = (sources.as_string::<i32>(), files.as_string::<i32>());
        for i in 0..batch.num_rows() {
            let source = if sources.is_null(i) { "" } else { sources.value(i) };
            let files_of = by_source.entry(source.to_owned()).or_default();
            if files.is_null(i) {
                continue;
            }
            let file = files.value(i);
            for &clock in clocks.get(file).into_iter().flatten() {
                let first = files_of.entry(clock).or_insert_with(|| file.to_owned());
                if file < first.as_str() {
                    *first = file.to_owned();
                }
            }
        }
    }
    let kinds: BTreeSet<SourceKind> = by_source.keys().map(|s| SourceKind::of(s)).collect();
    let by = by.or((kinds.len() > 1).then_some(GroupBy::Source));
    let first_of =
        |clock: Clock| by_source.values().filter_map(|files| files.get(&clock)).min().cloned().unwrap_or_default();
    let mixed_clocks = by_source.values().any(|f| f.contains_key(&Clock::Relative))
        && by_source.values().any(|f| f.contains_key(&Clock::Absolute));
    if mixed_clocks && by != Some(GroupBy::Source) {
        return Err(QueryError::MixedClocks {
            relative: first_of(Clock::Relative),
            absolute: first_of(Clock::Absolute),
        });
    }
    let mixed_sources = by_source.into_iter().filter(|(_, files)| files.len() > 1).map(|(source, _)| source).collect();
    Ok(Plan { by, mixed_clocks, mixed_sources })
}
