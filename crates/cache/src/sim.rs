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
/// documentation).
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

/// A simulation in progress: rows are pushed one at a time, in replay order, and [`finish`](Self::finish) gives
/// the figures. Memory holds the cache, not the rows.
#[derive(Debug)]
pub struct Simulator {
    cache: TieredCache,
    sim: Simulation,
}

impl Simulator {
    /// An empty cache of `options`.
    pub fn new(options: &SimOptions) -> Result<Self, CacheError> {
        check_tiers(&options.tiers)?;
        let sim = Simulation {
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
        };
        Ok(Self { cache: TieredCache::new(options.tiers.clone(), options.policy, options.placement), sim })
    }

    /// Looks up and then accesses the blocks of `row`, the next row in replay order ([`arrival_order`]): its hit
    /// tokens, or `None` for a row left out.
    pub fn push(&mut self, row: &RequestRow) -> Option<HitTokens> {
        let sim = &mut self.sim;
        let Some((hashes, block_size)) = blocks(row) else {
            sim.rows_without_hashes += 1;
            return None;
        };
        let access = self.cache.access(hashes, block_size);
        let tokens = access.hit_tokens(block_size, row.input_tokens);
        sim.requests += 1;
        sim.blocks += hashes.len() as u64;
        sim.hit_blocks += access.hit_blocks;
        sim.input_tokens += denominator(row, hashes, block_size);
        sim.hit_tokens += tokens.total;
        for (t, outcome) in sim.tiers.iter_mut().enumerate() {
            outcome.hit_blocks += access.per_tier_blocks[t];
            outcome.hit_tokens += tokens.per_tier[t];
            outcome.evictions += access.evicted[t];
        }
        Some(tokens)
    }

    /// The figures of the rows pushed.
    pub fn finish(mut self) -> Simulation {
        let sim = &mut self.sim;
        sim.hit_ratio = ratio(sim.hit_tokens, sim.input_tokens);
        for outcome in &mut sim.tiers {
            outcome.hit_ratio = ratio(outcome.hit_tokens, sim.input_tokens);
        }
        self.sim
    }
}

/// Replays `rows` in arrival order through a new cache of `options`: a [`Simulator`] over rows held in memory.
pub fn simulate(rows: &[RequestRow], options: &SimOptions) -> Result<Simulation, CacheError> {
    let mut simulator = Simulator::new(options)?;
    for index in arrival_order(rows) {
        simulator.push(&rows[index]);
    }
    Ok(simulator.finish())
}

/// Writes a row's simulated hit tokens (`hit`, from [`Simulator::push`]) into `row`: `cached_tokens` and the
/// `cached_tokens_<tier>` of each simulated tier (`tiers`, in the simulation's order) get the simulated values;
/// the columns of tiers not simulated, and all five columns of a row left out, become null. Counts above
/// `u32::MAX` saturate.
pub fn apply(row: &mut RequestRow, tiers: &[TierOutcome], hit: Option<&HitTokens>) {
    let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    row.cached_tokens = None;
    row.cached_tokens_gpu = None;
    row.cached_tokens_cpu = None;
    row.cached_tokens_disk = None;
    row.cached_tokens_remote = None;
    let Some(hit) = hit else { return };
    row.cached_tokens = Some(narrow(hit.total));
    for (outcome, &tokens) in tiers.iter().zip(&hit.per_tier) {
        let column = match outcome.tier {
            CacheTier::Gpu => &mut row.cached_tokens_gpu,
            CacheTier::Cpu => &mut row.cached_tokens_cpu,
            CacheTier::Disk => &mut row.cached_tokens_disk,
            CacheTier::Remote => &mut row.cached_tokens_remote,
        };
        *column = Some(narrow(tokens));
    }
}
