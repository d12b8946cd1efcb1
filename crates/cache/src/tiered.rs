//! The tiered block cache: one request's lookup and access under a replacement policy and a placement.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use infertrace_schema::CacheTier;
use serde::{Deserialize, Serialize};

/// One tier of the hierarchy: which tier it stands for and how many tokens of KV it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSpec {
    /// The tier whose `cached_tokens_<tier>` column its hits fill.
    pub tier: CacheTier,
    /// Capacity in tokens; a block occupies its `block_size` tokens.
    pub capacity_tokens: u64,
}

/// Which block a full tier gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Least recently used: the block whose last access is oldest.
    Lru,
    /// First in, first out: the block that entered the tier first; hits do not refresh it.
    Fifo,
    /// Least frequently used: the block accessed the fewest times since it entered the cache, the least recently
    /// used of those on a tie.
    Lfu,
}

impl Policy {
    /// Every policy, in documentation order.
    pub const ALL: &'static [Policy] = &[Policy::Lru, Policy::Fifo, Policy::Lfu];

    /// The spelling of `--policy` and of the JSON output.
    pub const fn as_str(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Fifo => "fifo",
            Policy::Lfu => "lfu",
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How blocks are spread over the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// A block lives in one tier: accessed blocks move to the fastest tier, victims move one tier down, the last
    /// tier's victims are dropped.
    Exclusive,
    /// Every tier sees every access (write-through): each tier is an independent cache of its capacity and
    /// policy, and a block counts for the fastest tier holding it.
    Inclusive,
}

impl Placement {
    /// Every placement, in documentation order.
    pub const ALL: &'static [Placement] = &[Placement::Exclusive, Placement::Inclusive];

    /// The spelling of `--placement` and of the JSON output.
    pub const fn as_str(self) -> &'static str {
        match self {
            Placement::Exclusive => "exclusive",
            Placement::Inclusive => "inclusive",
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a lookup found: the longest contiguous prefix of the hashes held by any tier.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lookup {
    /// Blocks of the contiguous prefix found.
    pub hit_blocks: u64,
    /// Of those, the blocks each tier served (the fastest tier holding each block), in the order of the specs.
    pub per_tier_blocks: Vec<u64>,
}

/// What one request's access did: its lookup, then the blocks each tier evicted while making room.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Access {
    /// Blocks of the contiguous prefix found before the access.
    pub hit_blocks: u64,
    /// Of those, the blocks each tier served, in the order of the specs.
    pub per_tier_blocks: Vec<u64>,
    /// Blocks each tier evicted during this access: demoted to the next tier (exclusive placement) or dropped
    /// (the last tier, and every tier under inclusive placement).
    pub evicted: Vec<u64>,
}

/// Hit tokens of one request, in total and per tier.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HitTokens {
    /// `min(hit_blocks × block_size, input_tokens)`.
    pub total: u64,
    /// The total split over the tiers in their order: the fastest tier's blocks count first.
    pub per_tier: Vec<u64>,
}

impl Lookup {
    /// Hit tokens of a request of `input_tokens` (null: the blocks' tokens are not capped) with blocks of
    /// `block_size` tokens.
    pub fn hit_tokens(&self, block_size: u32, input_tokens: Option<u32>) -> HitTokens {
        hit_tokens(&self.per_tier_blocks, block_size, input_tokens)
    }
}

impl Access {
    /// Hit tokens of a request of `input_tokens` with blocks of `block_size` tokens, as [`Lookup::hit_tokens`].
    pub fn hit_tokens(&self, block_size: u32, input_tokens: Option<u32>) -> HitTokens {
        hit_tokens(&self.per_tier_blocks, block_size, input_tokens)
    }
}

fn hit_tokens(per_tier_blocks: &[u64], block_size: u32, input_tokens: Option<u32>) -> HitTokens {
    let cap = input_tokens.map_or(u64::MAX, u64::from);
    let tokens = |blocks: u64| blocks.saturating_mul(u64::from(block_size)).min(cap);
    let mut blocks = 0;
    let mut before = 0;
    let per_tier = per_tier_blocks
        .iter()
        .map(|&b| {
            blocks += b;
            let upto = tokens(blocks);
            let here = upto - before;
            before = upto;
            here
        })
        .collect();
    HitTokens { total: before, per_tier }
}

/// The tiered cache: a hierarchy of tiers, fastest first, holding blocks by their chained prefix hash.
///
/// See the crate documentation for the exact semantics of [`access`](Self::access).
#[derive(Debug, Clone)]
pub struct TieredCache {
    specs: Vec<TierSpec>,
    policy: Policy,
    placement: Placement,
    tiers: Vec<Tier>,
    /// Increases with every block touched, so that recency is a total order.
    clock: u64,
}

impl TieredCache {
    /// An empty cache with `tiers` in order fastest first.
    pub fn new(tiers: Vec<TierSpec>, policy: Policy, placement: Placement) -> Self {
        let store = tiers.iter().map(|spec| Tier::new(spec.capacity_tokens)).collect();
        Self { specs: tiers, policy, placement, tiers: store, clock: 0 }
    }

    /// The tiers, fastest first.
    pub fn specs(&self) -> &[TierSpec] {
        &self.specs
    }

    /// The replacement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The placement.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Tokens held by each tier, in the order of the specs.
    pub fn used_tokens(&self) -> Vec<u64> {
        self.tiers.iter().map(|t| t.used).collect()
    }

    /// The blocks of tier `index` in eviction order (the next victim first); `O(n)`, for tests and inspection.
    pub fn blocks(&self, index: usize) -> Vec<u64> {
        self.tiers.get(index).map_or_else(Vec::new, |t| t.order.iter().map(|&(_, _, hash)| hash).collect())
    }

    /// The longest contiguous prefix of `hashes` held by the cache and the tier serving each of its blocks, without
    /// changing anything.
    pub fn lookup(&self, hashes: &[u64]) -> Lookup {
        let mut per_tier_blocks = vec![0; self.tiers.len()];
        let mut hit_blocks = 0;
        for hash in hashes {
            let Some(index) = self.tiers.iter().position(|t| t.entries.contains_key(hash)) else { break };
            per_tier_blocks[index] += 1;
            hit_blocks += 1;
        }
        Lookup { hit_blocks, per_tier_blocks }
    }

    /// One request: looks `hashes` up (as [`lookup`](Self::lookup)), then inserts or refreshes every block, the
    /// last first so that block 0 ends up the most recent, then trims the tiers to their capacities, fastest first.
    pub fn access(&mut self, hashes: &[u64], block_size: u32) -> Access {
        let Lookup { hit_blocks, per_tier_blocks } = self.lookup(hashes);
        let mut evicted = vec![0; self.tiers.len()];
        if self.tiers.is_empty() {
            return Access { hit_blocks, per_tier_blocks, evicted };
        }
        let policy = self.policy;
        for &hash in hashes.iter().rev() {
            self.clock += 1;
            let now = self.clock;
            match self.placement {
                Placement::Exclusive => {
                    if !self.tiers[0].touch(policy, hash, block_size, now) {
                        // Promote from the slower tier holding it, carrying its access count, or insert it new.
                        let previous = self.tiers[1..].iter_mut().find_map(|t| t.remove(policy, hash));
                        let hits = previous.map_or(0, |e| e.hits);
                        let entry = Entry { size: block_size, hits: hits + 1, last: now, entered: now };
                        self.tiers[0].insert(policy, hash, entry);
                    }
                }
                Placement::Inclusive => {
                    for tier in &mut self.tiers {
                        if !tier.touch(policy, hash, block_size, now) {
                            tier.insert(policy, hash, Entry { size: block_size, hits: 1, last: now, entered: now });
                        }
                    }
                }
            }
        }
        for (index, evictions) in evicted.iter_mut().enumerate() {
            while self.tiers[index].used > self.tiers[index].capacity {
                let (hash, mut entry) =
                    self.tiers[index].pop_victim(policy).expect("a tier over capacity holds blocks");
                *evictions += 1;
                if self.placement == Placement::Exclusive
                    && let Some(next) = self.tiers.get_mut(index + 1)
                {
                    // A demoted block keeps its recency and count; it enters the next tier now.
                    self.clock += 1;
                    entry.entered = self.clock;
                    next.insert(policy, hash, entry);
                }
            }
        }
        Access { hit_blocks, per_tier_blocks, evicted }
    }
}

/// One block in one tier.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Tokens it occupies.
    size: u32,
    /// Accesses since it entered the cache (carried along demotions and promotions under exclusive placement).
    hits: u64,
    /// Clock of its last access.
    last: u64,
    /// Clock of its entry into this tier.
    entered: u64,
}

impl Entry {
    /// Its place in the eviction order: the smallest key is the next victim.
    fn key(&self, policy: Policy, hash: u64) -> (u64, u64, u64) {
        match policy {
            Policy::Lru => (self.last, 0, hash),
            Policy::Fifo => (self.entered, 0, hash),
            Policy::Lfu => (self.hits, self.last, hash),
        }
    }
}

/// One tier: its blocks by hash and in eviction order.
#[derive(Debug, Clone)]
struct Tier {
    capacity: u64,
    used: u64,
    entries: HashMap<u64, Entry, BuildHasherDefault<MixHasher>>,
    order: BTreeSet<(u64, u64, u64)>,
}

impl Tier {
    fn new(capacity: u64) -> Self {
        Self { capacity, used: 0, entries: HashMap::default(), order: BTreeSet::new() }
    }

    /// Refreshes `hash` if the tier holds it; false otherwise.
    fn touch(&mut self, policy: Policy, hash: u64, size: u32, now: u64) -> bool {
        let Some(entry) = self.entries.get_mut(&hash) else { return false };
        self.order.remove(&entry.key(policy, hash));
        entry.hits += 1;
        entry.last = now;
        self.used = self.used - u64::from(entry.size) + u64::from(size);
        entry.size = size;
        self.order.insert(entry.key(policy, hash));
        true
    }

    fn insert(&mut self, policy: Policy, hash: u64, entry: Entry) {
        self.used += u64::from(entry.size);
        self.order.insert(entry.key(policy, hash));
        let previous = self.entries.insert(hash, entry);
        debug_assert!(previous.is_none(), "insert is called for blocks the tier does not hold");
    }

    fn remove(&mut self, policy: Policy, hash: u64) -> Option<Entry> {
        let entry = self.entries.remove(&hash)?;
        self.order.remove(&entry.key(policy, hash));
        self.used -= u64::from(entry.size);
        Some(entry)
    }

    fn pop_victim(&mut self, policy: Policy) -> Option<(u64, Entry)> {
        let (_, _, hash) = *self.order.first()?;
        self.remove(policy, hash).map(|entry| (hash, entry))
    }
}

/// The 64-bit finalizer of SplitMix64: a bijection that spreads every input bit over the output.
///
/// Block hashes of some traces are small integers (Mooncake's `hash_ids`), so they are mixed before being used as
/// table hashes or sampled.
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hasher for `u64` keys: [`mix64`]. Iteration order of the maps never reaches an output.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = mix64(self.0 ^ n);
    }
}
