//! `cache-sim`: a trace's requests through one [`TieredCache`], with token-weighted hit ratios per tier.

use infertrace_schema::{CacheTier, RequestRow};
use serde::Serialize;

use crate::CacheError;
use crate::order::{arrival_order, blocks, denominator};
use crate::tiered::{HitTokens, Placement, Policy, TierSpec, TieredCache};

/// The cache a trace is simulated against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Tiers, fastest first; each tier at most once.
    pub tiers: Vec<TierSpec>,
    /// Replacement policy of every tier.
    pub policy: Policy,
    /// Placement across tiers.
    pub placement: Placement,
}

/// What a simulation found: the JSON object of `infertrace cache-sim --json` (described in the crate
/// documentation) and the hit tokens of every row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulation {
    /// Replacement policy.
    pub policy: Policy,
    /// Placement across tiers.
    pub placement: Placement,
    /// Per tier, fastest first.
    pub tiers: Vec<TierOutcome>,
    /// Rows simulated (having `prefix_hashes` and a non-zero `block_size`).
    pub requests: u64,
    /// Rows left out: no `prefix_hashes`, or a null or zero `block_size`.
    pub rows_without_hashes: u64,
    /// Blocks accessed, over the simulated rows.
    pub blocks: u64,
    /// Blocks found, in any tier.
    pub hit_blocks: u64,
    /// Σ`input_tokens` over the simulated rows (blocks × `block_size` where `input_tokens` is null).
    pub input_tokens: u64,
    /// Σ hit tokens over the simulated rows.
    pub hit_tokens: u64,
    /// `hit_tokens / input_tokens`; null when no input token is counted.
    pub hit_ratio: Option<f64>,
    /// Per input row (in input order): its hit tokens, or `None` for a row left out.
    #[serde(skip)]
    pub rows: Vec<Option<HitTokens>>,
}

/// One tier's share of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierOutcome {
    /// The tier.
    pub tier: CacheTier,
    /// Its capacity in tokens.
    pub capacity_tokens: u64,
    /// Blocks it served.
    pub hit_blocks: u64,
    /// Tokens it served.
    pub hit_tokens: u64,
    /// `hit_tokens` over the simulation's `input_tokens`.
    pub hit_ratio: Option<f64>,
    /// Blocks it evicted: demoted to the next tier (exclusive placement) or dropped.
    pub evictions: u64,
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// Checks that `tiers` is not empty and names each tier at most once.
pub fn check_tiers(tiers: &[TierSpec]) -> Result<(), CacheError> {
    if tiers.is_empty() {
        return Err(CacheError::NoTier);
    }
    for (i, spec) in tiers.iter().enumerate() {
        if tiers[..i].iter().any(|s| s.tier == spec.tier) {
            return Err(CacheError::DuplicateTier(spec.tier));
        }
    }
    Ok(())
}

/// Replays `rows` in arrival order through a new cache of `options`, one [`TieredCache::access`] per row.
pub fn simulate(rows: &[RequestRow], options: &SimOptions) -> Result<Simulation, CacheError> {
    check_tiers(&options.tiers)?;
    let mut cache = TieredCache::new(options.tiers.clone(), options.policy, options.placement);
    let n = options.tiers.len();
    let mut sim = Simulation {
        policy: options.policy,
        placement: options.placement,
        tiers: options
            .tiers
            .iter()
            .map(|spec| TierOutcome {
                tier: spec.tier,
                capacity_tokens: spec.capacity_tokens,
                hit_blocks: 0,
                hit_tokens: 0,
                hit_ratio: None,
                evictions: 0,
            })
            .collect(),
        requests: 0,
        rows_without_hashes: 0,
        blocks: 0,
        hit_blocks: 0,
        input_tokens: 0,
        hit_tokens: 0,
        hit_ratio: None,
        rows: vec![None; rows.len()],
    };
    for index in arrival_order(rows) {
        let row = &rows[index];
        let Some((hashes, block_size)) = blocks(row) else {
            sim.rows_without_hashes += 1;
            continue;
        };
        let access = cache.access(hashes, block_size);
        let tokens = access.hit_tokens(block_size, row.input_tokens);
        sim.requests += 1;
        sim.blocks += hashes.len() as u64;
        sim.hit_blocks += access.hit_blocks;
        sim.input_tokens += denominator(row, hashes, block_size);
        sim.hit_tokens += tokens.total;
        for t in 0..n {
            let outcome = &mut sim.tiers[t];
            outcome.hit_blocks += access.per_tier_blocks[t];
            outcome.hit_tokens += tokens.per_tier[t];
            outcome.evictions += access.evicted[t];
        }
        sim.rows[index] = Some(tokens);
    }
    sim.hit_ratio = ratio(sim.hit_tokens, sim.input_tokens);
    for outcome in &mut sim.tiers {
        outcome.hit_ratio = ratio(outcome.hit_tokens, sim.input_tokens);
    }
    Ok(sim)
}

/// Writes the simulation's hit tokens into `rows` (the rows it was computed from): `cached_tokens` and the
/// `cached_tokens_<tier>` of each simulated tier get the simulated values; the columns of tiers not simulated, and
/// all five columns of rows left out, become null. Counts above `u32::MAX` saturate.
pub fn apply(rows: &mut [RequestRow], sim: &Simulation) {
    let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    for (row, hit) in rows.iter_mut().zip(&sim.rows) {
        row.cached_tokens = None;
        row.cached_tokens_gpu = None;
        row.cached_tokens_cpu = None;
        row.cached_tokens_disk = None;
        row.cached_tokens_remote = None;
        let Some(hit) = hit else { continue };
        row.cached_tokens = Some(narrow(hit.total));
        for (outcome, &tokens) in sim.tiers.iter().zip(&hit.per_tier) {
            let column = match outcome.tier {
                CacheTier::Gpu => &mut row.cached_tokens_gpu,
                CacheTier::Cpu => &mut row.cached_tokens_cpu,
                CacheTier::Disk => &mut row.cached_tokens_disk,
                CacheTier::Remote => &mut row.cached_tokens_remote,
            };
            *column = Some(narrow(tokens));
        }
    }
}
