//! `infertrace sweep`: the model over a grid of one or two parameters.
//!
//! Each axis is `NAME=FROM..TO[:STEPS]` (a parameter name or alias of `docs/model.md`, STEPS points from FROM to TO
//! inclusive, evenly spaced; default 11). A grid point whose parameters are out of range (tier hit rates adding up
//! to more than 1, say) is kept with the reason and no figures. The **optimum** is the point with the lowest value of
//! the objective (`cost_per_successful_answer` when the model can price an answer, else `expected_prefill_s`; the
//! first such point in grid order on ties). A **breakeven** is where a signed difference changes sign between two
//! neighbouring points along the last axis, located by linear interpolation:
//!
//! - `retrieve-vs-recompute <tier>`: the tier's retrieval time minus recomputing the prefix;
//! - `disaggregation`: disaggregated minus collocated instance-seconds per request;
//! - `compression`: the net cost of κ per answer.

use serde::Serialize;

use crate::catalog::Catalog;
use crate::eval::{EvalError, Evaluation, evaluate};
use crate::params::{ParamError, Params, canonical_name};

/// One axis of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    /// The parameter as given.
    pub name: String,
    /// Its TOML path.
    pub path: String,
    /// The values, in order.
    pub values: Vec<f64>,
}

/// A sweep specification that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SweepError {
    /// Not `NAME=FROM..TO[:STEPS]`.
    #[error("expected NAME=FROM..TO[:STEPS] in {0:?}, such as R=1..50:50")]
    Syntax(String),
    /// Zero, one or more than two axes.
    #[error("sweep one or two parameters, not {0}")]
    Axes(usize),
    /// The parameter does not exist.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The catalog lacks an entry.
    #[error(transparent)]
    Eval(#[from] EvalError),
}

impl Axis {
    /// Parses `NAME=FROM..TO[:STEPS]`.
    pub fn parse(text: &str) -> Result<Self, SweepError> {
        let syntax = || SweepError::Syntax(text.to_owned());
        let (name, range) = text.split_once('=').ok_or_else(syntax)?;
        let (range, steps) = match range.rsplit_once(':') {
            Some((range, steps)) => (range, steps.trim().parse::<usize>().map_err(|_| syntax())?),
            None => (range, 11),
        };
        let (from, to) = range.split_once("..").ok_or_else(syntax)?;
        let (from, to): (f64, f64) =
            (from.trim().parse().map_err(|_| syntax())?, to.trim().parse().map_err(|_| syntax())?);
        if steps < 2 || !from.is_finite() || !to.is_finite() {
            return Err(syntax());
        }
        let values = (0..steps).map(|i| from + (to - from) * i as f64 / (steps - 1) as f64).collect();
        let name = name.trim().to_owned();
        // Check the name now, on a scratch parameter set, so a typo fails before any work.
        if let Err(ParamError::Unknown(n)) = Params::default().set(&name, from) {
            return Err(ParamError::Unknown(n).into());
        }
        Ok(Self { path: canonical_name(&name), name, values })
    }
}

/// One grid point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The value of each axis.
    pub at: Vec<f64>,
    /// The model there, or why the parameters are out of range.
    pub result: Result<Box<Evaluation>, String>,
}

/// A sign change between two neighbouring points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crossing {
    /// What crosses zero (`retrieve-vs-recompute external`, `disaggregation`, `compression`).
    pub what: String,
    /// Values of the axes before the last, fixing the line it lies on.
    pub at: Vec<f64>,
    /// The interpolated value of the last axis.
    pub value: f64,
}

/// The whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Surface {
    /// The axes, first varying slowest.
    pub axes: Vec<Axis>,
    /// Points in grid order (the last axis varies fastest).
    pub points: Vec<Point>,
    /// The objective minimised.
    pub objective: &'static str,
    /// Index of the best point.
    pub optimum: Option<usize>,
    /// Breakevens found.
    pub crossings: Vec<Crossing>,
}

/// The objective value of an evaluation.
pub fn objective(name: &str, e: &Evaluation) -> Option<f64> {
    match name {
        "cost_per_successful_answer" => e.answer.cost_per_successful_answer,
        _ => e.prefill.expected_s,
    }
}

/// Evaluates the model at every point of the grid.
pub fn sweep(base: &Params, catalog: &Catalog, axes: Vec<Axis>) -> Result<Surface, SweepError> {
    if axes.is_empty() || axes.len() > 2 {
        return Err(SweepError::Axes(axes.len()));
    }
    // Fails early on a catalog error, which no point could escape.
    let reference = evaluate(base, catalog)?;
    let objective_name = if reference.answer.cost_per_successful_answer.is_some() {
        "cost_per_successful_answer"
    } else {
        "expected_prefill_s"
    };
    let mut grid: Vec<Vec<f64>> = vec![Vec::new()];
    for axis in &axes {
        grid = grid
            .into_iter()
            .flat_map(|prefix| axis.values.iter().map(move |v| [prefix.clone(), vec![*v]].concat()))
            .collect();
    }
    let mut points = Vec::with_capacity(grid.len());
    for at in grid {
        let mut params = base.clone();
        let mut result = Ok(());
        for (axis, value) in axes.iter().zip(&at) {
            result = result.and_then(|()| params.set(&axis.name, *value));
        }
        let result = match result {
            Ok(()) => Ok(Box::new(evaluate(&params, catalog)?)),
            Err(e) => Err(e.to_string()),
        };
        points.push(Point { at, result });
    }
    let optimum = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, objective(objective_name, p.result.as_ref().ok()?)?)))
        .fold(None, |best: Option<(usize, f64)>, (i, v)| match best {
            Some((_, b)) if b <= v => best,
            _ => Some((i, v)),
        })
        .map(|(i, _)| i);
    let crossings = crossings(&axes, &points);
    Ok(Surface { axes, points, objective: objective_name, optimum, crossings })
}

/// The signed differences whose zero is a breakeven, by name.
fn signed(e: &Evaluation) -> Vec<(String, Option<f64>)> {
    let mut out: Vec<(String, Option<f64>)> = e
        .breakeven
        .iter()
        .map(|(tier, b)| {
            (format!("retrieve-vs-recompute {tier}"), b.retrieval_s.zip(b.max_retrieval_s).map(|(r, m)| r - m))
        })
        .collect();
    let d = &e.disaggregation;
    out.push(("disaggregation".to_owned(), d.disaggregated_s.zip(d.collocated_s).map(|(a, b)| a - b)));
    out.push(("compression".to_owned(), e.compression.net_dollars_per_answer));
    out
}

fn crossings(axes: &[Axis], points: &[Point]) -> Vec<Crossing> {
    let line = axes.last().map_or(1, |a| a.values.len());
    let mut found = Vec::new();
    for row in points.chunks(line) {
        for pair in row.windows(2) {
            let (Ok(a), Ok(b)) = (&pair[0].result, &pair[1].result) else { continue };
            for ((what, x), (_, y)) in signed(a).into_iter().zip(signed(b)) {
                let (Some(x), Some(y)) = (x, y) else { continue };
                if (x < 0.0 && y >= 0.0) || (x > 0.0 && y <= 0.0) {
                    let (va, vb) = (*pair[0].at.last().unwrap_or(&0.0), *pair[1].at.last().unwrap_or(&0.0));
                    let value = va + (vb - va) * x / (x - y);
                    found.push(Crossing { what, at: pair[0].at[..pair[0].at.len() - 1].to_vec(), value });
                }
            }
        }
    }
    found
}
