//! Tiered KV-cache simulation over canonical traces: what `infertrace cache-sim` and `infertrace mrc` compute, and
//! the [`TieredCache`] the serving replay uses.
//!
//! Key decision: a request's blocks are touched **last to first**, so that block 0 of every request ends up the
//! most recently used. Along a chain of prefix hashes (hash `i` covers blocks `0..=i`, so a request holding hash
//! `i + 1` also holds hash `i`) this keeps every block more recent than the blocks after it; under LRU the cache
//! then holds whole prefixes (inclusion: if block `i` is cached, blocks `0..i` are), the longest contiguous prefix
//! found is exactly the set of blocks found, and the stack distances of [`mrc`] give the same hits as [`simulate`]
//! with one LRU tier at every capacity, to the token. A test checks this on the Mooncake conversation trace.
//!
//! It deliberately does no I/O, prints nothing and knows no model: capacities arrive in tokens (the CLI turns
//! bytes into tokens with the model catalog), rows arrive as [`RequestRow`](infertrace_schema::RequestRow)s.
//!
//! # Semantics of `cache-sim` ([`simulate`])
//!
//! - **Rows.** A row takes part when it has `prefix_hashes` and a non-zero `block_size`; other rows are counted in
//!   `rows_without_hashes` and are neither hits nor accesses. Rows are replayed in arrival order, rows without an
//!   arrival last, ties in input order (the order of the engine's unbounded-cache reuse). There is no time and no
//!   concurrency: each request is looked up and inserted before the next one.
//! - **Capacity.** Counted in tokens; a block occupies its row's `block_size` tokens (rows of one dataset normally
//!   share a block size; a block re-accessed with another size takes the new one, and then `mrc` may differ from
//!   `cache-sim`, which agree whenever each hash comes with one size).
//! - **Lookup.** A request hits the longest contiguous prefix of its hashes found in the cache; tiers are searched
//!   fastest first and the prefix runs across tiers (block 0 in `gpu`, block 1 in `cpu`: two hit blocks, one per
//!   tier). The lookup sees the cache as it was before the request.
//! - **Hit tokens** = `min(hit blocks × block_size, input_tokens)` (`input_tokens` null: hit blocks ×
//!   `block_size`), split over the tiers cumulatively in tier order: the fastest tier gets
//!   `min(its blocks × block_size, total)`, the next the same over both minus the first, and so on. The hit ratio
//!   divides by Σ`input_tokens` of the rows taking part (blocks × `block_size` where null).
//!   With room for every block this is the unbounded hit ratio, the one definition `metrics`, `report`, `mrc` and
//!   `model --from` share (`schemas/metrics.schema.json`, `cache.reuse`).
//! - **Access.** After the lookup every block of the request is touched, the last block first. Then the tiers are
//!   trimmed to capacity fastest first, each tier evicting by its policy until it fits.
//! - **Exclusive placement** (the default): a block lives in one tier. A touched block is refreshed if it is in the
//!   fastest tier, else promoted to it (removed from the slower tier holding it) or inserted there. Each tier's
//!   victims are demoted to the next tier, keeping their recency and access count; the last tier's victims are
//!   dropped. Every victim counts as an eviction of the tier it left. With LRU this is one global recency order cut
//!   into consecutive segments, so with one block size (and capacities in whole blocks) the tiers together hit
//!   exactly as one LRU tier of their summed capacity, and the fastest `k` tiers as one LRU tier of theirs.
//! - **Inclusive placement**: every tier sees every block of every request (write-through; a hit refreshes the
//!   block in every tier holding it and writes it to the others) and trims itself independently, dropping its
//!   victims (its evictions). A block counts for the fastest tier holding it. With LRU each tier is an
//!   independent LRU cache, so the hits equal one LRU tier of the largest capacity.
//! - **Policies**, each `O(log n)` per block (a hash map and an ordered set per tier):
//!   `lru` evicts the least recently accessed block; `fifo` the block that entered the tier first (hits do not
//!   refresh it; a promoted or demoted block enters its new tier anew); `lfu` the block with the fewest accesses
//!   since it entered the cache (counted across promotions and demotions, reset when dropped), the least recently
//!   used of those on a tie.
//!
//! # Semantics of `mrc` ([`mrc`])
//!
//! The same rows in the same order, one LRU tier, every capacity at once. For each block access the stack
//! distance is the number of tokens of distinct blocks accessed since its previous access, its own included: the
//! smallest capacity at which it is still cached. It is read from a Fenwick tree over access times holding each
//! block's size at its latest access, `O(log N)` per access, `O(N log N)` for `N` accesses. An LRU tier of
//! capacity `C` tokens holds the most recent blocks whose sizes add up to at most `C` (with one block size `b`,
//! `⌊C / b⌋` blocks; with mixed sizes the sizes are summed, which is exactly what `cache-sim`'s trimming keeps), so a
//! block is found iff its distance is ≤ `C`. As in `cache-sim`, distances are taken against the cache before the
//! request and the blocks are then touched last to first; block `i` is counted at the largest distance of blocks
//! `0..=i` (the contiguous prefix; along a consistent chain that is its own distance), and a block never seen
//! before, and every block after it, misses at every capacity. Each block contributes its share of the hit tokens,
//! `min((i + 1) × b, input_tokens) − min(i × b, input_tokens)`, so the curve at `C` equals `cache-sim`'s hit tokens
//! at `C` exactly.
//!
//! **Sampling (SHARDS, fixed rate R).** A block is kept when `mix64(hash ^ seed) mod 2^24 < R × 2^24` (`mix64` is
//! the SplitMix64 finalizer: some traces' hashes are small integers); only kept blocks enter the tree. A kept
//! access's distance is estimated as its own size plus the tokens of the kept blocks above it divided by R, and it
//! counts at that distance alone (the chain makes it the prefix's). Hit tokens follow SHARDS-adj: the sampled hit
//! tokens plus the difference between the expected (R × all hit-able tokens) and the sampled hit-able tokens,
//! counted from the smallest block size on, divided by R. The correction matters when one block is very hot (every
//! Mooncake request starts with block 0, always the most recent). [`Sampling::Auto`] is exact up to 10 M block
//! accesses and samples at R = 0.01 above. The error measured on the Mooncake conversation trace (largest absolute
//! difference of the hit ratio over all capacities, exact vs sampled) is in `docs/replay.md`.
//!
//! # JSON
//!
//! `cache-sim --json` prints [`Simulation`]: `policy`, `placement`, `tiers[]` (`tier`, `capacity_tokens`,
//! `hit_blocks`, `hit_tokens`, `hit_ratio`, `evictions`), then `requests`, `rows_without_hashes`, `blocks`,
//! `hit_blocks`, `input_tokens`, `hit_tokens`, `hit_ratio` (ratios are null when no input token is counted); with
//! `--model` the CLI adds `model` (`id`, `dtype_bytes`, `kappa`, `kv_bytes_per_token`).
//! `mrc --json` prints [`MrcReport`]: `sample_rate` (1 when exact), `requests`, `rows_without_hashes`, `blocks`,
//! `sampled_blocks`, `input_tokens`, `unbounded_hit_ratio`, `points[]` (`capacity_tokens`, `hit_tokens`,
//! `hit_ratio`) and `reaching[]` (`fraction` 0.5, 0.9, 0.99 and the smallest `capacity_tokens` whose hit ratio
//! reaches that fraction of the unbounded one).

mod mrc;
mod order;
mod sim;
mod tiered;

pub use mrc::{
    AUTO_EXACT_LIMIT, AUTO_SAMPLE_RATE, Mrc, MrcBuilder, MrcPoint, MrcReport, REACHING, Reaching, Sampling,
    block_accesses, max_abs_difference, mrc,
};
pub use order::arrival_order;
pub use sim::{SimOptions, Simulation, Simulator, TierOutcome, apply, check_tiers, simulate};
pub use tiered::{Access, HitTokens, Lookup, Placement, Policy, TierSpec, TieredCache};

use infertrace_schema::CacheTier;

/// Why a simulation cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// No tier was given.
    #[error("no cache tier given")]
    NoTier,
    /// A tier was given twice.
    #[error("tier {0} given twice")]
    DuplicateTier(CacheTier),
    /// The SHARDS rate is outside (0, 1].
    #[error("sampling rate {0} is not in (0, 1]")]
    SampleRate(f64),
}

#[cfg(test)]
mod tests;
