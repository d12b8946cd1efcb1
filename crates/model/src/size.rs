//! `infertrace size`: how many accelerators a workload needs under SLOs, from the roofline.
//!
//! Inputs: the model's parameters (a `[hardware]` model and accelerator are required), the arrival rate λ
//! (requests/s) and SLOs on the mean TTFT and the TPOT. Per instance (`tp` accelerators):
//!
//! - **Decode.** A step over a batch of `B` requests at mean context `C` (prompt + half the output) reads the active
//!   weights and the batch's KV: `t_step(B) = (W + B C k / κ) / (tp × bandwidth × mbu)`. The TPOT SLO bounds it,
//!   `t_step(B) ≤ TPOT`, so `B ≤ (TPOT × bandwidth' − W) / (C k / κ)`; memory bounds it too, weights plus the
//!   batch's KV at full context (prompt + output) within 90% of the instance's HBM. `B` is the largest whole batch
//!   meeting both (at least 1, else the SLO cannot be met). An instance then generates `B / t_step(B)` tokens/s,
//!   and the decode pool needs `⌈λ G / (B / t_step(B))⌉` instances (`G` generated tokens per request, hidden
//!   reasoning included).
//! - **Prefill.** A request takes `S` instance-seconds of prefill: the expected prefix cost under the cache tiers
//!   (see the model) plus the new suffix. With one queue per instance and deterministic service (M/D/1), the mean
//!   wait is `ρ S / (2 (1 − ρ))`, so the mean TTFT `S + ρ S / (2 (1 − ρ))` meets the SLO `T` for
//!   `ρ ≤ 2 (T − S) / (2T − S)` (capped at `max_utilization`). The prefill pool needs `⌈λ S / ρ⌉` instances.
//! - **Collocated.** One pool does both: each request takes `S + G × t_step(B) / B` instance-seconds, at the
//!   utilization the TTFT SLO allows for `S` alone; prefill interfering with decode steps is not modelled, so
//!   this is a lower bound.

use serde::Serialize;

use crate::catalog::Catalog;
use crate::eval::{EvalError, evaluate};
use crate::params::Params;

/// Fraction of HBM usable for weights and KV.
pub const USABLE_HBM: f64 = 0.9;

/// What to size for.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeRequest {
    /// Arrival rate, requests/s.
    pub requests_per_s: f64,
    /// Mean TTFT SLO, s.
    pub ttft_s: f64,
    /// TPOT SLO, s.
    pub tpot_s: f64,
    /// Highest utilization allowed, whatever the SLO permits; default 0.9.
    pub max_utilization: f64,
}

/// One pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Pool {
    /// Instances.
    pub instances: u64,
    /// Accelerators (`instances × tp`).
    pub accelerators: u64,
    /// Utilization each instance runs at.
    pub utilization: f64,
    /// $ per hour for the pool.
    pub dollars_per_hour: f64,
}

/// The sizing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sizing {
    /// Accelerators per instance.
    pub tp: f64,
    /// Decode batch per instance.
    pub batch: u64,
    /// What bounds the batch: `tpot` or `memory`.
    pub batch_bound: &'static str,
    /// Decode step time at that batch, s.
    pub step_s: f64,
    /// Tokens per second one instance generates.
    pub decode_tokens_per_s: f64,
    /// Prefill instance-seconds per request.
    pub prefill_s: f64,
    /// Generated tokens per request.
    pub generated_tokens: f64,
    /// The prefill pool.
    pub prefill: Pool,
    /// The decode pool.
    pub decode: Pool,
    /// Both pools.
    pub disaggregated_accelerators: u64,
    /// One pool doing both.
    pub collocated: Pool,
}

/// Why a workload cannot be sized.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SizeError {
    /// No `[hardware]`.
    #[error("sizing needs [hardware] with a catalog model and accelerator")]
    NoHardware,
    /// A catalog entry is missing.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The prefill cost is unknown.
    #[error("the prefill cost is unknown: give workload.prefix_tokens (or prefill.prefix_s)")]
    NoPrefill,
    /// The TTFT SLO is below the prefill time itself.
    #[error(
        "a prefill alone takes {prefill_s:.3} s, more than the TTFT SLO of {ttft_s} s: use more accelerators per instance (hardware.tp) or more cache hits"
    )]
    Ttft {
        /// Prefill instance-seconds.
        prefill_s: f64,
        /// The SLO.
        ttft_s: f64,
    },
    /// Not even a batch of one meets the TPOT SLO or fits.
    #[error(
        "even a batch of one misses the TPOT SLO or does not fit in memory: use more accelerators per instance (hardware.tp)"
    )]
    Tpot,
}

/// Sizes the pools for `request` under `params`.
pub fn size(params: &Params, catalog: &Catalog, request: &SizeRequest) -> Result<Sizing, SizeError> {
    let hardware = params.hardware.as_ref().ok_or(SizeError::NoHardware)?;
    let model = catalog.model(&hardware.model).ok_or_else(|| EvalError::Model(hardware.model.clone()))?;
    let accelerator = catalog
        .accelerator(&hardware.accelerator)
        .ok_or_else(|| EvalError::Accelerator(hardware.accelerator.clone()))?;
    let e = evaluate(params, catalog)?;
    let w = &params.workload;
    let tp = hardware.tp;
    let kappa = params.compression.kappa;
    let generated = e.inputs.generated_tokens;
    let input = w.input_tokens.or(w.prefix_tokens).unwrap_or(0.0);
    let prefill_s = e.answer.prefill_s.ok_or(SizeError::NoPrefill)? + e.inputs.suffix_s.map_or(0.0, |s| s.value);

    // Decode.
    let weights = model.active_weight_bytes(hardware.dtype_bytes);
    let kv = model.kv_bytes_per_token(hardware.dtype_bytes) / kappa;
    let bandwidth = tp * accelerator.memory_bandwidth_gbs * 1e9 * hardware.mbu;
    let context = input + generated / 2.0;
    let by_tpot = (request.tpot_s * bandwidth - weights) / (context * kv);
    let memory = tp * accelerator.hbm_gb * 1e9 * USABLE_HBM;
    let by_memory = (memory - model.parameters * hardware.dtype_bytes) / ((input + generated) * kv);
    let (batch, bound) = if by_tpot <= by_memory { (by_tpot, "tpot") } else { (by_memory, "memory") };
    if batch.is_nan() || batch < 1.0 {
        return Err(SizeError::Tpot);
    }
    let batch = batch.floor();
    let step = (weights + batch * context * kv) / bandwidth;
    let tokens_per_s = batch / step;

    // Prefill: the utilization the TTFT SLO allows (M/D/1 mean wait).
    let t = request.ttft_s;
    if prefill_s >= t {
        return Err(SizeError::Ttft { prefill_s, ttft_s: t });
    }
    let rho = (2.0 * (t - prefill_s) / (2.0 * t - prefill_s)).min(request.max_utilization);
    let price = params.price.accelerator_per_hour.unwrap_or(accelerator.price_per_hour);
    let pool = |instances: f64, utilization: f64| {
        let instances = instances.ceil().max(1.0) as u64;
        let accelerators = (instances as f64 * tp).ceil() as u64;
        Pool { instances, accelerators, utilization, dollars_per_hour: accelerators as f64 * price }
    };
    let lambda = request.requests_per_s;
    let prefill = pool(lambda * prefill_s / rho, rho);
    let decode = pool(lambda * generated / (tokens_per_s * request.max_utilization), request.max_utilization);
    let collocated = pool(lambda * (prefill_s + generated * step / batch) / rho, rho);
    Ok(Sizing {
        tp,
        batch: batch as u64,
        batch_bound: bound,
        step_s: step,
        decode_tokens_per_s: tokens_per_s,
        prefill_s,
        generated_tokens: generated,
        disaggregated_accelerators: prefill.accelerators + decode.accelerators,
        prefill,
        decode,
        collocated,
    })
}
