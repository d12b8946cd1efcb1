//! `infertrace calibrate`: the efficiency factors that make a replay of a measured run match it.
//!
//! The measured rows are replayed on the configuration (the run's own arrivals and token counts are the
//! workload), and the mean TTFT and mean TPOT of the replay are compared with the measured ones. The loss is
//! `(ΔTTFT / TTFT)² + (ΔTPOT / TPOT)²` (relative errors of the means; a mean the measured rows lack is left out).
//! It is minimised over `mfu`, `mbu` and `step_overhead_s` by a grid search: a coarse grid (mfu 0.1 … 1 by 0.1,
//! mbu 0.3 … 1 by 0.05, overhead 0, 1, 2, 4, 8, 16 ms), then two finer grids centred on the best point, each with
//! half the previous steps (5 values per factor, clamped to the valid ranges). Ties keep the first point in grid
//! order, so the result is deterministic.

use infertrace_model::Catalog;
use infertrace_schema::RequestRow;
use serde::Serialize;

use crate::config::{Config, Efficiency};
use crate::{ReplayError, ReplayOptions, replay};

/// Means of a set of rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Means {
    /// Mean `ttft_s`.
    pub ttft_s: Option<f64>,
    /// Mean `tpot_s`.
    pub tpot_s: Option<f64>,
    /// Mean `e2e_s`.
    pub e2e_s: Option<f64>,
}

impl Means {
    /// The means over the rows having each duration.
    pub fn of(rows: &[RequestRow]) -> Self {
        let mean = |f: fn(&RequestRow) -> Option<f64>| {
            let values: Vec<f64> = rows.iter().filter_map(f).filter(|v| v.is_finite()).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        Self { ttft_s: mean(|r| r.ttft_s), tpot_s: mean(|r| r.tpot_s), e2e_s: mean(|r| r.e2e_s) }
    }

    /// Relative errors of `self` (replayed) against `measured`, each `(replayed − measured) / measured`.
    pub fn errors(&self, measured: &Means) -> Errors {
        let rel = |a: Option<f64>, b: Option<f64>| a.zip(b).filter(|(_, b)| *b != 0.0).map(|(a, b)| (a - b) / b);
        Errors {
            ttft: rel(self.ttft_s, measured.ttft_s),
            tpot: rel(self.tpot_s, measured.tpot_s),
            e2e: rel(self.e2e_s, measured.e2e_s),
        }
    }
}

/// Relative errors of a replay's means against the measured ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Errors {
    /// Mean TTFT.
    pub ttft: Option<f64>,
    /// Mean TPOT.
    pub tpot: Option<f64>,
    /// Mean e2e (reported, not fitted).
    pub e2e: Option<f64>,
}

impl Errors {
    fn loss(&self) -> f64 {
        self.ttft.map_or(0.0, |e| e * e) + self.tpot.map_or(0.0, |e| e * e)
    }
}

/// The result of a calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// The measured means.
    pub measured: Means,
    /// The replay's means with the configuration as given.
    pub before: Means,
    /// Its errors.
    pub before_errors: Errors,
    /// The fitted factors.
    pub efficiency: Efficiency,
    /// The replay's means with them.
    pub after: Means,
    /// Its errors.
    pub after_errors: Errors,
    /// Replays run.
    pub replays: u64,
}

fn grid(center: f64, step: f64, lo: f64, hi: f64) -> Vec<f64> {
    let mut values: Vec<f64> = (-2..=2).map(|k| (center + f64::from(k) * step).clamp(lo, hi)).collect();
    values.dedup();
    values
}

/// The options of every replay a calibration runs: arrivals as measured, no samples.
pub const CALIBRATION_REPLAY: ReplayOptions = ReplayOptions { rate_scale: 1.0, sample_interval_s: 0.0 };

/// Fits the efficiency factors of `config` to the measured `rows`, held in memory.
pub fn calibrate(config: &Config, catalog: &Catalog, rows: &[RequestRow]) -> Result<Calibration, ReplayError> {
    calibrate_by(config, Means::of(rows), |c| Ok(Means::of(&replay(c, catalog, rows, &CALIBRATION_REPLAY)?.requests)))
}

/// Fits the efficiency factors of `config` to the `measured` means, where `replay(c)` gives the means of the
/// measured rows replayed on configuration `c` with [`CALIBRATION_REPLAY`] (each mean summed over the replayed rows
/// in input order, as [`Means::of`] does). It is called a few hundred times.
pub fn calibrate_by<E>(
    config: &Config,
    measured: Means,
    mut replay: impl FnMut(&Config) -> Result<Means, E>,
) -> Result<Calibration, E> {
    let mut replays = 0u64;
    let mut run = |efficiency: Efficiency| -> Result<(Means, Errors), E> {
        let mut c = config.clone();
        c.efficiency = efficiency;
        replays += 1;
        let means = replay(&c)?;
        Ok((means, means.errors(&measured)))
    };
    let (before, before_errors) = run(config.efficiency)?;
    let coarse_mfu: Vec<f64> = (1..=10).map(|k| f64::from(k) / 10.0).collect();
    let coarse_mbu: Vec<f64> = (6..=20).map(|k| f64::from(k) * 0.05).collect();
    let coarse_overhead = [0.0, 0.001, 0.002, 0.004, 0.008, 0.016];
    let mut best: Option<(f64, Efficiency)> = None;
    let consider = |e: Efficiency, errors: Errors, best: &mut Option<(f64, Efficiency)>| {
        let loss = errors.loss();
        if best.is_none_or(|(b, _)| loss < b) {
            *best = Some((loss, e));
        }
    };
    for &mfu in &coarse_mfu {
        for &mbu in &coarse_mbu {
            for &step_overhead_s in &coarse_overhead {
                let e = Efficiency { mfu, mbu, step_overhead_s };
                let (_, errors) = run(e)?;
                consider(e, errors, &mut best);
            }
        }
    }
    let (mut step_mfu, mut step_mbu, mut step_overhead) = (0.05, 0.025, 0.001);
    for _ in 0..2 {
        let center = best.expect("the coarse grid ran").1;
        for mfu in grid(center.mfu, step_mfu, 0.01, 1.0) {
            for mbu in grid(center.mbu, step_mbu, 0.01, 1.0) {
                for step_overhead_s in grid(center.step_overhead_s, step_overhead, 0.0, 1.0) {
                    let e = Efficiency { mfu, mbu, step_overhead_s };
                    let (_, errors) = run(e)?;
                    consider(e, errors, &mut best);
                }
            }
        }
        (step_mfu, step_mbu, step_overhead) = (step_mfu / 2.0, step_mbu / 2.0, step_overhead / 2.0);
    }
    let efficiency = best.expect("grids ran").1;
    let (after, after_errors) = run(efficiency)?;
    Ok(Calibration { measured, before, before_errors, efficiency, after, after_errors, replays })
}
