//! The equations of `docs/model.md`, evaluated.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::{Accelerator, Catalog, Model};
use crate::params::Params;

/// Seconds per hour.
const HOUR: f64 = 3600.0;
/// Joules per kWh.
const KWH: f64 = 3.6e6;

/// Where a derived input came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Given in the parameters.
    Given,
    /// Computed from the catalog's model and accelerator (roofline).
    Roofline,
    /// The catalog's default.
    Catalog,
}

/// A derived input and its origin.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Derived {
    /// The value.
    pub value: f64,
    /// Where it came from.
    pub origin: Origin,
}

/// The inputs the equations use, after resolving what was not given from the catalog.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Inputs {
    /// KV-cache bytes per token, before compression.
    pub kv_bytes_per_token: Option<Derived>,
    /// `T_p`: instance-seconds to recompute the typical prefix.
    pub prefix_s: Option<Derived>,
    /// Instance-seconds to prefill what follows the prefix (`input_tokens − prefix_tokens`); 0 when unknown.
    pub suffix_s: Option<Derived>,
    /// `t_d`: instance-seconds per generated token.
    pub decode_s_per_token: Option<Derived>,
    /// `L_i`: seconds to retrieve the typical prefix from each tier, decompression included.
    pub tier_latency_s: BTreeMap<String, Option<Derived>>,
    /// Hit rate of each tier as used (after the hit curve, when one is given).
    pub tier_hit_rate: BTreeMap<String, f64>,
    /// `δ`, s.
    pub delta_s: Option<Derived>,
    /// Accelerators per instance.
    pub tp: f64,
    /// $ per accelerator-hour.
    pub accelerator_per_hour: Option<Derived>,
    /// W per accelerator.
    pub watts: Option<Derived>,
    /// `G = V × (1 + R)`: generated tokens per answer, hidden reasoning included.
    pub generated_tokens: f64,
}

/// Expected prefill-related cost of a continued request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PrefillCost {
    /// `T_p`, the pure-recompute baseline, s.
    pub recompute_s: Option<f64>,
    /// `(1 − Σh_i) T_p + Σ h_i min(L_i, T_p)`, s.
    pub expected_s: Option<f64>,
    /// Each term of the sum: `miss` and one per tier, s.
    pub terms: BTreeMap<String, Option<f64>>,
    /// `recompute_s − expected_s`.
    pub saving_s: Option<f64>,
    /// `saving_s / recompute_s`.
    pub saving_fraction: Option<f64>,
    /// The formula with the numbers substituted.
    pub arithmetic: String,
}

/// What the saving amounts to per day.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Daily {
    /// `sessions × turns_per_hour × 24`.
    pub requests: f64,
    /// `requests × (1 − new_session_fraction)`.
    pub continued_requests: f64,
    /// `continued_requests × saving_s × tp / 3600`.
    pub gpu_hours_saved: Option<f64>,
    /// `requests × recompute_s × tp / 3600`: the prefix prefill of pure recompute.
    pub gpu_hours_recompute: Option<f64>,
    /// The arithmetic.
    pub arithmetic: String,
}

/// Cost of one successful answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Answer {
    /// Prefix prefill of the mix: `f_new × T_p + (1 − f_new) × expected_s`, s.
    pub prefill_s: Option<f64>,
    /// `G × t_d`, s.
    pub decode_s: Option<f64>,
    /// `d × δ`, s.
    pub transfer_s: Option<f64>,
    /// Instance-seconds per request: prefix prefill + suffix prefill + transfer + decode.
    pub instance_s: Option<f64>,
    /// `instance_s × tp`.
    pub gpu_s: Option<f64>,
    /// External-tier reads per request, $.
    pub io_dollars: f64,
    /// `gpu_s × p_gpu / 3600 + io`, $.
    pub request_dollars: Option<f64>,
    /// `request_dollars / s`, $.
    pub cost_per_successful_answer: Option<f64>,
    /// `gpu_s × W / 3.6e6 / s`, kWh.
    pub kwh_per_successful_answer: Option<f64>,
    /// `V / cost_per_successful_answer`.
    pub visible_tokens_per_dollar: Option<f64>,
    /// `G / cost_per_successful_answer`: hidden reasoning included.
    pub generated_tokens_per_dollar: Option<f64>,
    /// `V / kwh_per_successful_answer`.
    pub visible_tokens_per_kwh: Option<f64>,
    /// `G / kwh_per_successful_answer`.
    pub generated_tokens_per_kwh: Option<f64>,
}

/// Retrieve versus recompute for one tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Breakeven {
    /// Context length considered: the typical prefix, tokens.
    pub context_tokens: Option<f64>,
    /// Recomputing it, s: the retrieval time below which retrieval wins.
    pub max_retrieval_s: Option<f64>,
    /// The tier's retrieval time for it, s.
    pub retrieval_s: Option<f64>,
    /// Whether retrieval wins at that context length.
    pub retrieval_wins: Option<bool>,
    /// The tier's fixed latency below which retrieval wins, given its bandwidth: `T_p(P) − P a`.
    pub max_base_latency_s: Option<f64>,
    /// The context length above which retrieval wins with the tier's latency and bandwidth (0: always; null: never
    /// or unknown).
    pub min_context_tokens: Option<f64>,
}

/// Collocated against disaggregated serving.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DisaggregationCost {
    /// Instance-seconds per request collocated (no transfer).
    pub collocated_s: Option<f64>,
    /// `(1 − g) × (work with the shared tier's hit rate + Δh) + δ`.
    pub disaggregated_s: Option<f64>,
    /// `δ` used, s.
    pub delta_s: Option<f64>,
    /// The δ at which both cost the same: disaggregation wins below it.
    pub breakeven_delta_s: Option<f64>,
}

/// What compression does.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompressionEffect {
    /// κ evaluated.
    pub kappa: f64,
    /// The compressed tier's hit rate at κ = 1 and at κ (from the hit curve), when one is given.
    pub hit_rate_uncompressed: Option<f64>,
    /// At κ.
    pub hit_rate: Option<f64>,
    /// Cost per successful answer at κ minus at κ = 1, $ (negative: compression pays).
    pub net_dollars_per_answer: Option<f64>,
    /// Instance-seconds per request at κ minus at κ = 1.
    pub net_s_per_request: Option<f64>,
    /// The κ in 1, 1.25, … `kappa_max` with the lowest cost per answer (the lowest κ on ties).
    pub best_kappa: Option<f64>,
    /// Its cost per successful answer, $.
    pub best_cost_per_answer: Option<f64>,
}

/// Everything `infertrace model` reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evaluation {
    /// The inputs after resolution.
    pub inputs: Inputs,
    /// Prefill of a continued request.
    pub prefill: PrefillCost,
    /// Per day, when sessions and turns are given.
    pub daily: Option<Daily>,
    /// Cost of a successful answer.
    pub answer: Answer,
    /// Retrieve versus recompute, per tier.
    pub breakeven: BTreeMap<String, Breakeven>,
    /// Collocated versus disaggregated.
    pub disaggregation: DisaggregationCost,
    /// Compression.
    pub compression: CompressionEffect,
    /// What could not be computed and why, and inconsistent inputs.
    pub warnings: Vec<String>,
}

/// A parameter set that names a catalog entry that does not exist.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// No such model.
    #[error("model {0:?} is not in the catalog (see `infertrace model --list`)")]
    Model(String),
    /// No such accelerator.
    #[error("accelerator {0:?} is not in the catalog (see `infertrace model --list`)")]
    Accelerator(String),
}

/// The roofline of one instance: FLOP/s and bytes/s it achieves, and the model.
#[derive(Debug, Clone, Copy)]
struct Roofline<'c> {
    model: &'c Model,
    accelerator: &'c Accelerator,
    tp: f64,
    flops: f64,
    bytes_per_s: f64,
    dtype_bytes: f64,
    batch: f64,
}

impl Roofline<'_> {
    /// Seconds to prefill `n` tokens.
    fn prefill_s(&self, n: f64) -> f64 {
        self.model.prefill_flops(n) / self.flops
    }
}

/// The numbers every output is made of, for one parameter set.
#[derive(Debug, Clone, Default)]
struct Core {
    inputs: Inputs,
    prefill: PrefillCost,
    /// Per-request instance-seconds and $, and the answer figures.
    answer: Answer,
    warnings: Vec<String>,
}

fn roofline<'c>(params: &Params, catalog: &'c Catalog) -> Result<Option<Roofline<'c>>, EvalError> {
    let Some(h) = &params.hardware else { return Ok(None) };
    let model = catalog.model(&h.model).ok_or_else(|| EvalError::Model(h.model.clone()))?;
    let accelerator =
        catalog.accelerator(&h.accelerator).ok_or_else(|| EvalError::Accelerator(h.accelerator.clone()))?;
    // A given T_p for the typical prefix calibrates the compute rate, so that recomputing P takes T_p in every
    // equation (the suffix, the breakeven, sizing), not only where T_p is used directly.
    let flops = match (params.prefill.prefix_s, params.workload.prefix_tokens) {
        (Some(t), Some(p)) if t > 0.0 && p > 0.0 => model.prefill_flops(p) / t,
        _ => h.tp * accelerator.bf16_dense_tflops * 1e12 * h.mfu,
    };
    Ok(Some(Roofline {
        model,
        accelerator,
        tp: h.tp,
        flops,
        bytes_per_s: h.tp * accelerator.memory_bandwidth_gbs * 1e9 * h.mbu,
        dtype_bytes: h.dtype_bytes,
        batch: h.batch,
    }))
}

/// Hit rate of the curve at `capacity`: linear between points, flat beyond the ends.
pub fn curve_hit_rate(curve: &[[f64; 2]], capacity: f64) -> Option<f64> {
    let first = curve.first()?;
    if capacity <= first[0] {
        return Some(first[1]);
    }
    for pair in curve.windows(2) {
        let ([x0, y0], [x1, y1]) = (pair[0], pair[1]);
        if capacity <= x1 {
            return Some(if x1 > x0 { y0 + (capacity - x0) / (x1 - x0) * (y1 - y0) } else { y1 });
        }
    }
    curve.last().map(|p| p[1])
}

fn core(params: &Params, roof: Option<Roofline<'_>>) -> Core {
    let mut warnings = Vec::new();
    let w = &params.workload;
    let kappa = params.compression.kappa;
    let given = |value: f64| Derived { value, origin: Origin::Given };
    let computed = |value: f64| Derived { value, origin: Origin::Roofline };
    let kv_bytes = roof.map(|r| computed(r.model.kv_bytes_per_token(r.dtype_bytes)));
    let prefix_tokens = w.prefix_tokens;
    let input_tokens = w.input_tokens.or(prefix_tokens);
    let prefix_s = params.prefill.prefix_s.map(given).or_else(|| Some(computed(roof?.prefill_s(prefix_tokens?))));
    let suffix_s = match (roof, prefix_tokens, input_tokens) {
        (Some(r), Some(p), Some(i)) if i > p => Some(computed(r.prefill_s(i) - r.prefill_s(p))),
        _ => None,
    };
    let generated = w.visible_tokens * (1.0 + w.reasoning_multiplier);
    let decode_s_per_token = params.decode.s_per_token.map(given).or_else(|| {
        let r = roof?;
        // Mean context over the answer: the prompt plus half of what is generated.
        let context = input_tokens.unwrap_or(0.0) + generated / 2.0;
        let step = (r.model.active_weight_bytes(r.dtype_bytes)
            + r.batch * context * r.model.kv_bytes_per_token(r.dtype_bytes) / kappa)
            / r.bytes_per_s;
        Some(computed(step / r.batch))
    });

    // Hit rates, with the compressed tier's from the curve when one is given.
    let mut hit: BTreeMap<String, f64> = params.tiers.iter().map(|(n, t)| (n.clone(), t.hit_rate)).collect();
    let c = &params.compression;
    if let Some(capacity) = c.capacity_tokens
        && let Some(h) = curve_hit_rate(&c.hit_curve, capacity * kappa)
    {
        // The compressed tier's extra hits come out of the misses; when the tiers would exceed 1, the other tiers
        // shrink in proportion.
        let others: f64 = hit.iter().filter(|(n, _)| **n != c.tier).map(|(_, h)| h).sum();
        let room = (1.0 - h).max(0.0);
        if others > room {
            for (name, rate) in hit.iter_mut() {
                if *name != c.tier {
                    *rate *= room / others;
                }
            }
        }
        hit.insert(c.tier.clone(), h);
    }
    let decompress = |p: Option<f64>| p.map_or(0.0, |p| p * c.decompress_s_per_token);
    let tier_latency: BTreeMap<String, Option<Derived>> = params
        .tiers
        .iter()
        .map(|(name, t)| {
            let latency = t.latency_s.map(|l| given(l + decompress(prefix_tokens))).or_else(|| {
                let bytes = prefix_tokens? * kv_bytes?.value / kappa;
                Some(computed(t.base_latency_s + bytes / (t.bandwidth_gbs? * 1e9) + decompress(prefix_tokens)))
            });
            (name.clone(), latency)
        })
        .collect();
    if let Some(u) = w.prefix_reuse {
        let total: f64 = hit.values().sum();
        if total > u + 1e-12 {
            warnings.push(format!("the tier hit rates add up to {total}, more than the prefix reuse u = {u}"));
        }
    }

    // Prefill of a continued request.
    let mut prefill = PrefillCost { recompute_s: prefix_s.map(|d| d.value), ..PrefillCost::default() };
    let total_hit: f64 = hit.values().sum();
    let mut expected = prefix_s.map(|t| (1.0 - total_hit) * t.value);
    prefill.terms.insert("miss".to_owned(), expected);
    // Tiers fastest first (then by name), as the formula is usually written.
    let mut order: Vec<(&String, &f64)> = hit.iter().collect();
    let speed = |name: &String| tier_latency.get(name).copied().flatten().map_or(f64::INFINITY, |d| d.value);
    order.sort_by(|a, b| speed(a.0).total_cmp(&speed(b.0)).then(a.0.cmp(b.0)));
    let mut parts = vec![format!(
        "(1 − {}) × {}",
        order.iter().map(|(_, h)| fmt(**h)).collect::<Vec<_>>().join(" − "),
        prefix_s.map_or("T_p".to_owned(), |t| format!("{} s", fmt(t.value)))
    )];
    for (name, rate) in order {
        let latency = tier_latency.get(name).copied().flatten();
        // Retrieve only when faster than recomputing: a hit costs min(L_i, T_p).
        let term = latency.zip(prefix_s).map(|(l, t)| rate * l.value.min(t.value));
        if latency.is_none() && *rate > 0.0 {
            warnings.push(format!("tier {name}: no latency_s, and no bandwidth_gbs with prefix_tokens and a model"));
        }
        if let (Some(l), Some(t)) = (latency, prefix_s)
            && l.value > t.value
            && *rate > 0.0
        {
            warnings.push(format!(
                "tier {name}: retrieval ({} s) is slower than recomputing ({} s); its hits are recomputed",
                fmt(l.value),
                fmt(t.value)
            ));
        }
        if *rate > 0.0 {
            let cost =
                latency.zip(prefix_s).map_or("L".to_owned(), |(l, t)| format!("{} s", fmt(l.value.min(t.value))));
            parts.push(format!("{} × {cost}", fmt(*rate)));
        }
        expected = expected.zip(term).map(|(e, t)| e + t);
        prefill.terms.insert(name.clone(), term);
    }
    if prefix_s.is_none() {
        warnings.push("no prefill.prefix_s, and no prefix_tokens with a model to compute it".to_owned());
    }
    prefill.expected_s = expected;
    prefill.saving_s = prefill.recompute_s.zip(expected).map(|(r, e)| r - e);
    prefill.saving_fraction = prefill.saving_s.zip(prefill.recompute_s).filter(|(_, r)| *r > 0.0).map(|(s, r)| s / r);
    prefill.arithmetic =
        format!("{} = {}", parts.join(" + "), expected.map_or("unknown".to_owned(), |e| format!("{} s", fmt(e))));

    // δ.
    let d = &params.disaggregation;
    let delta = d.delta_s.map(given).or_else(|| {
        let bytes = input_tokens? * kv_bytes?.value / kappa;
        Some(computed(bytes / (d.link_gbs? * 1e9) + d.serialization_s))
    });
    if d.crossing_fraction > 0.0 && delta.is_none() {
        warnings.push("disaggregation: no delta_s, and no link_gbs with input_tokens and a model".to_owned());
    }

    // The answer.
    let tp = roof.map_or(1.0, |r| r.tp);
    let price = params
        .price
        .accelerator_per_hour
        .map(given)
        .or_else(|| roof.map(|r| Derived { value: r.accelerator.price_per_hour, origin: Origin::Catalog }));
    let watts = params
        .price
        .watts
        .map(given)
        .or_else(|| roof.map(|r| Derived { value: r.accelerator.power_watts, origin: Origin::Catalog }));
    let f_new = w.new_session_fraction;
    let prefill_mix = prefix_s.zip(expected).map(|(t, e)| f_new * t.value + (1.0 - f_new) * e);
    let decode_s = decode_s_per_token.map(|t| generated * t.value);
    let transfer_s = if d.crossing_fraction > 0.0 { delta.map(|x| d.crossing_fraction * x.value) } else { Some(0.0) };
    let suffix = suffix_s.map_or(0.0, |s| s.value);
    let instance_s = prefill_mix.zip(decode_s).zip(transfer_s).map(|((p, dec), x)| p + suffix + x + dec);
    let gpu_s = instance_s.map(|s| s * tp);
    let mut io_dollars = 0.0;
    if params.price.io_per_gb > 0.0 {
        let external: f64 = params.tiers.iter().filter(|(_, t)| t.external).map(|(n, _)| hit[n]).sum();
        match (prefix_tokens, kv_bytes) {
            (Some(p), Some(kv)) => {
                io_dollars = (1.0 - f_new) * external * p * kv.value / kappa / 1e9 * params.price.io_per_gb;
            }
            _ => warnings.push("price.io_per_gb needs prefix_tokens and a model (KV bytes per token)".to_owned()),
        }
    }
    let request_dollars = gpu_s.zip(price).map(|(g, p)| g * p.value / HOUR + io_dollars);
    let s = w.success_rate;
    let cost = request_dollars.map(|r| r / s);
    let kwh = gpu_s.zip(watts).map(|(g, wt)| g * wt.value / KWH / s);
    let per = |n: f64, d: Option<f64>| d.filter(|d| *d > 0.0).map(|d| n / d);
    let answer = Answer {
        prefill_s: prefill_mix,
        decode_s,
        transfer_s,
        instance_s,
        gpu_s,
        io_dollars,
        request_dollars,
        cost_per_successful_answer: cost,
        kwh_per_successful_answer: kwh,
        visible_tokens_per_dollar: per(w.visible_tokens, cost),
        generated_tokens_per_dollar: per(generated, cost),
        visible_tokens_per_kwh: per(w.visible_tokens, kwh),
        generated_tokens_per_kwh: per(generated, kwh),
    };
    if decode_s_per_token.is_none() {
        warnings.push("no decode.s_per_token, and no model and accelerator to compute it".to_owned());
    }
    if price.is_none() {
        warnings.push("no price.accelerator_per_hour, and no accelerator in the catalog to take it from".to_owned());
    }
    Core {
        inputs: Inputs {
            kv_bytes_per_token: kv_bytes,
            prefix_s,
            suffix_s,
            decode_s_per_token,
            tier_latency_s: tier_latency,
            tier_hit_rate: hit,
            delta_s: delta,
            tp,
            accelerator_per_hour: price,
            watts,
            generated_tokens: generated,
        },
        prefill,
        answer,
        warnings,
    }
}

/// Evaluates every output of the model for `params`, with `catalog` for the roofline.
pub fn evaluate(params: &Params, catalog: &Catalog) -> Result<Evaluation, EvalError> {
    let roof = roofline(params, catalog)?;
    let base = core(params, roof);
    let daily = daily(params, &base);
    let breakeven = breakeven(params, roof, &base);
    let disaggregation = disaggregation(params, roof, &base);
    let compression = compression(params, roof, &base);
    Ok(Evaluation {
        inputs: base.inputs,
        prefill: base.prefill,
        daily,
        answer: base.answer,
        breakeven,
        disaggregation,
        compression,
        warnings: base.warnings,
    })
}

fn daily(params: &Params, base: &Core) -> Option<Daily> {
    let w = &params.workload;
    if w.sessions <= 0.0 || w.turns_per_hour <= 0.0 {
        return None;
    }
    let tp = base.inputs.tp;
    let requests = w.sessions * w.turns_per_hour * 24.0;
    let continued = requests * (1.0 - w.new_session_fraction);
    let saved = base.prefill.saving_s.map(|s| continued * s * tp / HOUR);
    let recompute = base.prefill.recompute_s.map(|t| requests * t * tp / HOUR);
    let arithmetic = format!(
        "{} sessions × {} turns/h × 24 h = {} requests/day; × (1 − {}) continued = {}; × {} s saved{} = {} GPU-hours/day",
        fmt(w.sessions),
        fmt(w.turns_per_hour),
        fmt(requests),
        fmt(w.new_session_fraction),
        fmt(continued),
        base.prefill.saving_s.map_or("?".to_owned(), fmt),
        if tp == 1.0 { String::new() } else { format!(" × {} accelerators", fmt(tp)) },
        saved.map_or("?".to_owned(), fmt),
    );
    Some(Daily {
        requests,
        continued_requests: continued,
        gpu_hours_saved: saved,
        gpu_hours_recompute: recompute,
        arithmetic,
    })
}

fn breakeven(params: &Params, roof: Option<Roofline<'_>>, base: &Core) -> BTreeMap<String, Breakeven> {
    let w = &params.workload;
    let c = &params.compression;
    let recompute = base.inputs.prefix_s.map(|d| d.value);
    params
        .tiers
        .iter()
        .map(|(name, tier)| {
            let retrieval = base.inputs.tier_latency_s.get(name).copied().flatten().map(|d| d.value);
            let mut b = Breakeven {
                context_tokens: w.prefix_tokens,
                max_retrieval_s: recompute,
                retrieval_s: retrieval,
                retrieval_wins: retrieval.zip(recompute).map(|(l, t)| l < t),
                ..Breakeven::default()
            };
            if let (Some(r), Some(bandwidth)) = (roof, tier.bandwidth_gbs) {
                // Retrieval of n tokens: base + a n; recompute: b n + q n².
                let flops = r.flops;
                let a =
                    r.model.kv_bytes_per_token(r.dtype_bytes) / c.kappa / (bandwidth * 1e9) + c.decompress_s_per_token;
                let (lin, quad) =
                    (2.0 * r.model.active_parameters / flops, r.model.attention_flops_per_token_squared() / flops);
                b.max_base_latency_s = w.prefix_tokens.map(|p| lin * p + quad * p * p - a * p);
                b.min_context_tokens = min_context_tokens(tier.base_latency_s, a, lin, quad);
            }
            (name.clone(), b)
        })
        .collect()
}

/// The smallest context `n ≥ 0` at which retrieval (`base + a n`) is no slower than recomputing (`b n + q n²`):
/// the non-negative root of `q n² + (b − a) n − base = 0`; `None` when retrieval never wins.
pub fn min_context_tokens(base: f64, a: f64, b: f64, q: f64) -> Option<f64> {
    if q > 0.0 {
        let slope = b - a;
        Some(((-slope + (slope * slope + 4.0 * q * base).sqrt()) / (2.0 * q)).max(0.0))
    } else if b > a {
        Some(base / (b - a))
    } else if base == 0.0 && b == a {
        Some(0.0)
    } else {
        None
    }
}

fn disaggregation(params: &Params, roof: Option<Roofline<'_>>, base: &Core) -> DisaggregationCost {
    let d = &params.disaggregation;
    let collocated = {
        let mut p = params.clone();
        p.disaggregation.crossing_fraction = 0.0;
        core(&p, roof).answer.instance_s
    };
    let shared =
        d.shared_tier.clone().or_else(|| params.tiers.iter().find(|(_, t)| t.external).map(|(n, _)| n.clone()));
    let work = {
        let mut p = params.clone();
        p.disaggregation.crossing_fraction = 0.0;
        if let Some(tier) = shared.as_ref().and_then(|n| p.tiers.get_mut(n)) {
            tier.hit_rate = (tier.hit_rate + d.hit_rate_gain).min(1.0);
        }
        core(&p, roof).answer.instance_s
    };
    let delta = base.inputs.delta_s.map(|x| x.value);
    let specialized = work.map(|w| (1.0 - d.specialization_gain) * w);
    DisaggregationCost {
        collocated_s: collocated,
        disaggregated_s: specialized.zip(delta).map(|(w, x)| w + x),
        delta_s: delta,
        breakeven_delta_s: collocated.zip(specialized).map(|(c, s)| c - s),
    }
}

fn compression(params: &Params, roof: Option<Roofline<'_>>, base: &Core) -> CompressionEffect {
    let c = &params.compression;
    let at = |kappa: f64| {
        let mut p = params.clone();
        p.compression.kappa = kappa;
        if kappa == 1.0 {
            p.compression.decompress_s_per_token = 0.0;
        }
        core(&p, roof)
    };
    let plain = at(1.0);
    let hit = |core: &Core| {
        (c.capacity_tokens.is_some() && !c.hit_curve.is_empty())
            .then(|| core.inputs.tier_hit_rate.get(&c.tier).copied())
            .flatten()
    };
    let mut best: Option<(f64, f64)> = None;
    let steps = ((c.kappa_max - 1.0) / 0.25).floor() as u32;
    for i in 0..=steps {
        let kappa = 1.0 + f64::from(i) * 0.25;
        if let Some(cost) = at(kappa).answer.cost_per_successful_answer
            && best.is_none_or(|(_, b)| cost < b)
        {
            best = Some((kappa, cost));
        }
    }
    CompressionEffect {
        kappa: c.kappa,
        hit_rate_uncompressed: hit(&plain),
        hit_rate: hit(base),
        net_dollars_per_answer: base
            .answer
            .cost_per_successful_answer
            .zip(plain.answer.cost_per_successful_answer)
            .map(|(a, b)| a - b),
        net_s_per_request: base.answer.instance_s.zip(plain.answer.instance_s).map(|(a, b)| a - b),
        best_kappa: best.map(|b| b.0),
        best_cost_per_answer: best.map(|b| b.1),
    }
}

/// A number for the arithmetic strings: four decimals (more below 0.001, to keep four significant digits), no
/// trailing zeros: `6.66`, `11.34`, `0.00012`, `4000`, `24,000`.
pub fn fmt(value: f64) -> String {
    if value == value.trunc() && value.abs() < 1e15 {
        // Whole numbers from 10,000 with thousands separators.
        let digits = format!("{:.0}", value.abs());
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && digits.len() >= 5 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        return if value < 0.0 { format!("-{grouped}") } else { grouped };
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(4, 12) as usize;
    let text = format!("{value:.decimals$}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}
