//! `mrc`: the LRU hit ratio at every capacity in one pass, from stack distances (exact, or SHARDS-sampled).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use infertrace_schema::RequestRow;
use serde::Serialize;

use crate::CacheError;
use crate::order::{arrival_order, blocks, denominator};
use crate::tiered::{MixHasher, mix64};

/// Block accesses above which [`Sampling::Auto`] samples.
pub const AUTO_EXACT_LIMIT: u64 = 10_000_000;
/// The sampling rate [`Sampling::Auto`] uses above [`AUTO_EXACT_LIMIT`].
pub const AUTO_SAMPLE_RATE: f64 = 0.01;
/// SHARDS keeps a block when `mix64(hash ^ SAMPLE_SEED) mod 2^24 < rate × 2^24`.
const SAMPLE_MODULUS: u64 = 1 << 24;
/// Mixed into hashes before sampling, so that hash 0 (the shared first block of Mooncake traces) is not a fixed
/// point of [`mix64`] that every sample keeps.
const SAMPLE_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// How stack distances are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Exact up to [`AUTO_EXACT_LIMIT`] block accesses, SHARDS at [`AUTO_SAMPLE_RATE`] above.
    Auto,
    /// Every block access.
    Exact,
    /// SHARDS at this rate, in (0, 1].
    Rate(f64),
}

/// The LRU hit-ratio curve of a trace: hit tokens as a step function of the capacity in tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Mrc {
    /// The sampling rate used: 1 when exact.
    pub sample_rate: f64,
    /// Rows taking part (having `prefix_hashes` and a non-zero `block_size`).
    pub requests: u64,
    /// Rows left out.
    pub rows_without_hashes: u64,
    /// Block accesses over the rows taking part.
    pub blocks: u64,
    /// Block accesses whose stack distance was computed (all of them when exact).
    pub sampled_blocks: u64,
    /// Σ`input_tokens` over the rows taking part (blocks × `block_size` where null), as `cache-sim` counts them.
    pub input_tokens: u64,
    /// Distinct (estimated) stack distances in tokens, ascending.
    distances: Vec<u64>,
    /// `cumulative[i]`: tokens (of the sampled accesses) that hit at any capacity ≥ `distances[i]`.
    cumulative: Vec<u64>,
    /// Hit-able tokens of the sampled block accesses (each block's share of its request's `input_tokens`).
    sampled_tokens: u64,
    /// The same over all block accesses.
    covered_tokens: u64,
    /// The smallest block size seen.
    min_block_size: u32,
}

/// Block accesses of the rows that take part: what decides [`Sampling::Auto`].
pub fn block_accesses(rows: &[RequestRow]) -> u64 {
    rows.iter().filter_map(blocks).map(|(hashes, _)| hashes.len() as u64).sum()
}

/// Whether SHARDS at `threshold` (out of 2^24) keeps the block `hash`.
fn sampled(hash: u64, threshold: u64) -> bool {
    mix64(hash ^ SAMPLE_SEED) % SAMPLE_MODULUS < threshold
}

/// Sizes at access times, summed over suffixes: the tokens of the blocks accessed at or after a time. It grows
/// as times are added, doubling, so that it needs no count of the accesses beforehand.
#[derive(Debug, Default)]
struct Fenwick {
    /// 1-based; `tree.len() - 1` is zero or a power of two.
    tree: Vec<u64>,
    total: u64,
}

impl Fenwick {
    /// Makes room for time `at`. Doubling a tree of `n` (a power of two) leaves its nodes as they are: the new
    /// node `2n` covers every time (the total so far), and the other new nodes cover only times after `n`, none of
    /// which has a value yet.
    fn reserve(&mut self, at: usize) {
        let old = self.tree.len().saturating_sub(1);
        if at < old {
            return;
        }
        let mut len = old.max(1);
        while len <= at {
            len *= 2;
        }
        self.tree.resize(len + 1, 0);
        if old > 0 {
            let mut node = old * 2;
            while node <= len {
                self.tree[node] = self.total;
                node *= 2;
            }
        }
    }

    fn add(&mut self, at: usize, value: u64) {
        self.reserve(at);
        self.total += value;
        let mut i = at + 1;
        while i < self.tree.len() {
            self.tree[i] += value;
            i += i & i.wrapping_neg();
        }
    }

    fn sub(&mut self, at: usize, value: u64) {
        self.total -= value;
        let mut i = at + 1;
        while i < self.tree.len() {
            self.tree[i] -= value;
            i += i & i.wrapping_neg();
        }
    }

    /// Σ over times `0..at`.
    fn before(&self, at: usize) -> u64 {
        let mut sum = 0;
        let mut i = at;
        while i > 0 {
            sum += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// Σ over times `at..`.
    fn from(&self, at: usize) -> u64 {
        self.total - self.before(at)
    }
}

impl Sampling {
    /// The rate this sampling uses on a trace of `block_accesses` (see [`block_accesses`]): 1 when exact.
    pub fn rate(self, block_accesses: u64) -> Result<f64, CacheError> {
        match self {
            Sampling::Exact => Ok(1.0),
            Sampling::Auto if block_accesses <= AUTO_EXACT_LIMIT => Ok(1.0),
            Sampling::Auto => Ok(AUTO_SAMPLE_RATE),
            Sampling::Rate(rate) if rate > 0.0 && rate <= 1.0 => Ok(rate),
            Sampling::Rate(rate) => Err(CacheError::SampleRate(rate)),
        }
    }
}

/// A curve in progress: rows are pushed one at a time, in replay order, and [`finish`](Self::finish) gives the
/// curve. Memory holds one entry per distinct (sampled) block and one per (sampled) access.
#[derive(Debug)]
pub struct MrcBuilder {
    rate: f64,
    threshold: u64,
    fenwick: Fenwick,
    /// Per block: the time of its last access and the size it occupies.
    last: HashMap<u64, (usize, u32), BuildHasherDefault<MixHasher>>,
    histogram: BTreeMap<u64, u64>,
    now: usize,
    curve: Mrc,
}

impl MrcBuilder {
    /// An empty curve sampled at `rate` (1 for exact; see [`Sampling::rate`]).
    pub fn new(rate: f64) -> Result<Self, CacheError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(CacheError::SampleRate(rate));
        }
        Ok(Self {
            rate,
            threshold: (rate * SAMPLE_MODULUS as f64).round() as u64,
            fenwick: Fenwick::default(),
            last: HashMap::default(),
            histogram: BTreeMap::new(),
            now: 0,
            curve: Mrc {
                sample_rate: rate,
                requests: 0,
                rows_without_hashes: 0,
                blocks: 0,
                sampled_blocks: 0,
                input_tokens: 0,
                distances: Vec::new(),
                cumulative: Vec::new(),
                sampled_tokens: 0,
                covered_tokens: 0,
                min_block_size: u32::MAX,
            },
        })
    }

    fn exact(&self) -> bool {
        self.rate == 1.0
    }

    fn keep(&self, hash: u64) -> bool {
        self.exact() || sampled(hash, self.threshold)
    }

    /// Adds `row`, the next row in replay order ([`arrival_order`](crate::arrival_order)).
    pub fn push(&mut self, row: &RequestRow) {
        let Some((hashes, block_size)) = blocks(row) else {
            self.curve.rows_without_hashes += 1;
            return;
        };
        let exact = self.exact();
        let curve = &mut self.curve;
        curve.requests += 1;
        curve.blocks += hashes.len() as u64;
        curve.input_tokens += denominator(row, hashes, block_size);
        curve.min_block_size = curve.min_block_size.min(block_size);
        let cap = row.input_tokens.map_or(u64::MAX, u64::from);
        let size = u64::from(block_size);

        // Distances against the cache as it was before the request (as cache-sim looks up before inserting).
        // Exact: block i hits at capacity C iff blocks 0..=i all do, so its distance is the largest of theirs;
        // a block never seen before misses at every capacity, and so does the rest of the request.
        let mut prefix: Option<u64> = Some(0);
        for (i, &hash) in hashes.iter().enumerate() {
            let i = i as u64;
            let share = ((i + 1) * size).min(cap) - (i * size).min(cap);
            self.curve.covered_tokens += share;
            if !self.keep(hash) {
                continue;
            }
            self.curve.sampled_blocks += 1;
            self.curve.sampled_tokens += share;
            // The tokens of the blocks accessed since this one's last access, its own included.
            let own = self.last.get(&hash).map(|&(time, stored)| (self.fenwick.from(time), u64::from(stored)));
            let distance = if exact {
                prefix = prefix.zip(own).map(|(a, (b, _))| a.max(b));
                prefix
            } else {
                // The block itself, plus the sampled blocks above it standing for 1 / rate as many.
                own.map(|(d, stored)| stored + ((d - stored) as f64 / self.rate).round() as u64)
            };
            if let Some(d) = distance
                && share > 0
            {
                *self.histogram.entry(d).or_default() += share;
            }
        }
        // Then the accesses, the last block first, so that block 0 ends up the most recent.
        for &hash in hashes.iter().rev() {
            if !self.keep(hash) {
                continue;
            }
            if let Some(&(time, stored)) = self.last.get(&hash) {
                self.fenwick.sub(time, u64::from(stored));
            }
            self.fenwick.add(self.now, size);
            self.last.insert(hash, (self.now, block_size));
            self.now += 1;
        }
    }

    /// The curve of the rows pushed.
    pub fn finish(self) -> Mrc {
        let mut curve = self.curve;
        let mut running = 0;
        for (distance, tokens) in self.histogram {
            running += tokens;
            curve.distances.push(distance);
            curve.cumulative.push(running);
        }
        if curve.min_block_size == u32::MAX {
            curve.min_block_size = 1;
        }
        curve
    }
}

/// Computes the LRU curve of `rows`: the same replay as [`simulate`](crate::simulate) with one LRU tier, at every
/// capacity at once (see the crate documentation for why the two agree exactly). An [`MrcBuilder`] over rows held
/// in memory.
pub fn mrc(rows: &[RequestRow], sampling: Sampling) -> Result<Mrc, CacheError> {
    let mut builder = MrcBuilder::new(sampling.rate(block_accesses(rows))?)?;
    for index in arrival_order(rows) {
        builder.push(&rows[index]);
    }
    Ok(builder.finish())
}

/// The fractions of the unbounded hit ratio whose smallest capacity [`Mrc::report`] lists.
pub const REACHING: [f64; 3] = [0.5, 0.9, 0.99];

/// The curve at some capacities: the JSON object of `infertrace mrc --json` (described in the crate documentation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MrcReport {
    /// 1 when exact, else the SHARDS sampling rate.
    pub sample_rate: f64,
    /// Rows taking part.
    pub requests: u64,
    /// Rows left out (no `prefix_hashes`, or a null or zero `block_size`).
    pub rows_without_hashes: u64,
    /// Block accesses.
    pub blocks: u64,
    /// Block accesses sampled.
    pub sampled_blocks: u64,
    /// Σ`input_tokens` over the rows taking part.
    pub input_tokens: u64,
    /// Hit ratio of an unbounded LRU cache (contiguous prefixes of blocks seen before).
    pub unbounded_hit_ratio: Option<f64>,
    /// The curve at the capacities asked for, ascending.
    pub points: Vec<MrcPoint>,
    /// The smallest capacity reaching each fraction of the unbounded hit ratio.
    pub reaching: Vec<Reaching>,
}

/// The curve at one capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MrcPoint {
    /// Capacity in tokens.
    pub capacity_tokens: u64,
    /// Hit tokens (estimated and rounded when sampled).
    pub hit_tokens: u64,
    /// Hit tokens over `input_tokens`.
    pub hit_ratio: Option<f64>,
}

/// The smallest capacity reaching a fraction of the unbounded hit ratio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reaching {
    /// The fraction of the unbounded hit ratio.
    pub fraction: f64,
    /// The capacity in tokens; null when nothing ever hits.
    pub capacity_tokens: Option<u64>,
}

impl Mrc {
    /// Whether every block access was counted.
    pub fn is_exact(&self) -> bool {
        self.sample_rate == 1.0
    }

    fn sampled_hit_tokens(&self, capacity_tokens: u64) -> u64 {
        let i = self.distances.partition_point(|&d| d <= capacity_tokens);
        if i == 0 { 0 } else { self.cumulative[i - 1] }
    }

    /// Hit tokens of one LRU tier of `capacity_tokens`; when sampled, the SHARDS-adj estimate: the sampled hits
    /// plus the difference between the expected (rate × all hit-able tokens) and the sampled hit-able tokens, that
    /// difference counted at the smallest possible distance (the smallest block size), all divided by the rate.
    pub fn hit_tokens(&self, capacity_tokens: u64) -> f64 {
        let sampled = self.sampled_hit_tokens(capacity_tokens);
        if self.is_exact() {
            return sampled as f64;
        }
        // The first bucket: the smallest distance any block can have, its own size.
        if self.distances.is_empty() || capacity_tokens < u64::from(self.min_block_size) {
            return 0.0;
        }
        let adjustment = self.sample_rate * self.covered_tokens as f64 - self.sampled_tokens as f64;
        ((sampled as f64 + adjustment) / self.sample_rate).clamp(0.0, self.covered_tokens as f64)
    }

    /// Hit tokens at `capacity_tokens` as an exact integer; `None` when the curve is sampled.
    pub fn exact_hit_tokens(&self, capacity_tokens: u64) -> Option<u64> {
        self.is_exact().then(|| self.sampled_hit_tokens(capacity_tokens))
    }

    /// Hit tokens over input tokens at `capacity_tokens`; `None` when no input token is counted.
    pub fn hit_ratio(&self, capacity_tokens: u64) -> Option<f64> {
        (self.input_tokens > 0).then(|| self.hit_tokens(capacity_tokens) / self.input_tokens as f64)
    }

    /// The hit ratio of an unbounded cache.
    pub fn unbounded_hit_ratio(&self) -> Option<f64> {
        self.hit_ratio(u64::MAX)
    }

    /// The smallest capacity in tokens whose hit tokens reach `fraction` of the unbounded cache's; `None` when
    /// nothing hits.
    pub fn capacity_reaching(&self, fraction: f64) -> Option<u64> {
        let total = *self.cumulative.last().filter(|&&t| t > 0)?;
        let target = fraction * total as f64;
        let i = self.cumulative.partition_point(|&c| (c as f64) < target);
        self.distances.get(i).or(self.distances.last()).copied()
    }

    /// The steps of the curve: each (estimated) stack distance in tokens and the hit ratio from that capacity on.
    pub fn steps(&self) -> impl Iterator<Item = (u64, Option<f64>)> + '_ {
        self.distances.iter().map(|&d| (d, self.hit_ratio(d)))
    }

    /// Powers of two from the smallest block size up to the first one at which the curve is flat (unbounded).
    pub fn default_capacities(&self) -> Vec<u64> {
        let mut capacity = u64::from(self.min_block_size).next_power_of_two();
        let top = self.distances.last().copied().unwrap_or(0);
        let mut capacities = vec![capacity];
        while capacity < top {
            capacity = capacity.saturating_mul(2);
            capacities.push(capacity);
        }
        capacities
    }

    /// The curve at `capacities` (sorted and deduplicated) and the capacities reaching [`REACHING`].
    pub fn report(&self, capacities: &[u64]) -> MrcReport {
        let mut capacities = capacities.to_vec();
        capacities.sort_unstable();
        capacities.dedup();
        MrcReport {
            sample_rate: self.sample_rate,
            requests: self.requests,
            rows_without_hashes: self.rows_without_hashes,
            blocks: self.blocks,
            sampled_blocks: self.sampled_blocks,
            input_tokens: self.input_tokens,
            unbounded_hit_ratio: self.unbounded_hit_ratio(),
            points: capacities
                .into_iter()
                .map(|c| MrcPoint {
                    capacity_tokens: c,
                    hit_tokens: self.hit_tokens(c).round() as u64,
                    hit_ratio: self.hit_ratio(c),
                })
                .collect(),
            reaching: REACHING
                .iter()
                .map(|&fraction| Reaching { fraction, capacity_tokens: self.capacity_reaching(fraction) })
                .collect(),
        }
    }
}

/// The largest absolute difference of the hit ratios of two curves over all capacities (both are step functions,
/// so it is taken at their steps).
pub fn max_abs_difference(a: &Mrc, b: &Mrc) -> f64 {
    let ratio = |m: &Mrc, c| m.hit_ratio(c).unwrap_or(0.0);
    a.distances.iter().chain(&b.distances).map(|&c| (ratio(a, c) - ratio(b, c)).abs()).fold(0.0, f64::max)
}
