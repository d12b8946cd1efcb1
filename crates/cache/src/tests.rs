//! Hand-worked examples: every hit, promotion, demotion and eviction is written out in the comments.

use infertrace_schema::{CacheTier, RequestRow};

use crate::{
    Access, HitTokens, Lookup, Placement, Policy, Sampling, SimOptions, Simulator, TierSpec, TieredCache, apply,
    arrival_order, mrc, simulate,
};

fn tiers(gpu: u64, cpu: u64) -> Vec<TierSpec> {
    vec![
        TierSpec { tier: CacheTier::Gpu, capacity_tokens: gpu },
        TierSpec { tier: CacheTier::Cpu, capacity_tokens: cpu },
    ]
}

fn access(hit_blocks: u64, per_tier_blocks: [u64; 2], evicted: [u64; 2]) -> Access {
    Access { hit_blocks, per_tier_blocks: per_tier_blocks.to_vec(), evicted: evicted.to_vec() }
}

/// The six requests of the two-tier examples: (hashes, input tokens), blocks of 10 tokens. Hashes are chained:
/// requests sharing hash 2 share blocks 1 and 2.
const REQUESTS: [(&[u64], u32); 6] =
    [(&[1, 2, 3], 30), (&[1, 2, 4, 5], 35), (&[1, 2, 3, 6], 40), (&[1, 2, 4, 7], 31), (&[1, 8], 15), (&[1, 2, 3], 30)];

#[test]
fn exclusive_lru_two_tiers_by_hand() {
    // gpu holds 2 blocks of 10 tokens, cpu 3. Tier contents are written LRU first; the clock ticks once per touch
    // (and once per demotion, which LRU ignores: a demoted block keeps the time of its last access).
    let mut cache = TieredCache::new(tiers(20, 30), Policy::Lru, Placement::Exclusive);
    let mut got = Vec::new();
    let mut hit = Vec::new();
    for (hashes, input) in REQUESTS {
        let a = cache.access(hashes, 10);
        hit.push(a.hit_tokens(10, Some(input)));
        got.push(a);
    }
    // R1 [1 2 3]: all miss. Touch 3, 2, 1 into gpu: [3 2 1], 30 tokens > 20: 3 is demoted to cpu.
    //   gpu [2 1], cpu [3].
    assert_eq!(got[0], access(0, [0, 0], [1, 0]));
    // R2 [1 2 4 5]: 1 and 2 in gpu, 4 misses: 2 blocks from gpu, 20 tokens.
    //   Touch 5, 4 (new), 2, 1: gpu [5 4 2 1]; demote 5 then 4: cpu [3 5 4] (30 tokens, fits).
    assert_eq!(got[1], access(2, [2, 0], [2, 0]));
    // R3 [1 2 3 6]: 1, 2 in gpu, 3 in cpu, 6 misses: 3 blocks, gpu 2 and cpu 1; tokens gpu 20, cpu 10.
    //   Touch 6 (new), 3 (promoted out of cpu: cpu [5 4]), 2, 1: gpu [6 3 2 1]; demote 6, 3: cpu [5 4 6 3],
    //   40 tokens > 30: 5 is dropped. gpu [2 1], cpu [4 6 3].
    assert_eq!(got[2], access(3, [2, 1], [2, 1]));
    // R4 [1 2 4 7]: 1, 2 gpu, 4 cpu, 7 misses; tokens gpu 20, cpu min(30, 31) − 20 = 10.
    //   Touch 7, 4 (promoted: cpu [6 3]), 2, 1; demote 7, 4: cpu [6 3 7 4], drop 6. gpu [2 1], cpu [3 7 4].
    assert_eq!(got[3], access(3, [2, 1], [2, 1]));
    // R5 [1 8]: 1 gpu, 8 misses: 10 tokens. Touch 8, 1: gpu [2 8 1]; demote 2 (last touched in R4, the most
    //   recent of cpu): cpu [3 7 4 2], drop 3. gpu [8 1], cpu [7 4 2].
    assert_eq!(got[4], access(1, [1, 0], [1, 1]));
    // R6 [1 2 3]: 1 gpu, 2 cpu, 3 was dropped: the prefix runs across tiers, one block each.
    //   Touch 3 (new), 2 (promoted: cpu [7 4]), 1: gpu [8 3 2 1]; demote 8, 3: cpu [7 4 8 3], drop 7.
    assert_eq!(got[5], access(2, [1, 1], [2, 1]));
    assert_eq!(cache.blocks(0), [2, 1]);
    assert_eq!(cache.blocks(1), [4, 8, 3]);
    assert_eq!(cache.used_tokens(), [20, 30]);

    let tokens: Vec<(u64, Vec<u64>)> = hit.into_iter().map(|h| (h.total, h.per_tier)).collect();
    assert_eq!(
        tokens,
        [
            (0, vec![0, 0]),
            (20, vec![20, 0]),
            (30, vec![20, 10]),
            (30, vec![20, 10]),
            (10, vec![10, 0]),
            (20, vec![10, 10])
        ]
    );

    // A lookup is a contiguous prefix: 2 is cached, but 9 before it is not.
    assert_eq!(cache.lookup(&[9, 2]), Lookup { hit_blocks: 0, per_tier_blocks: vec![0, 0] });
    assert_eq!(cache.lookup(&[1, 2, 4]), Lookup { hit_blocks: 3, per_tier_blocks: vec![2, 1] });
}

#[test]
fn inclusive_lru_two_tiers_by_hand() {
    // Each tier is its own LRU cache over every access (gpu 2 blocks, cpu 3); victims are dropped.
    let mut cache = TieredCache::new(tiers(20, 30), Policy::Lru, Placement::Inclusive);
    let got: Vec<Access> = REQUESTS.iter().map(|(hashes, _)| cache.access(hashes, 10)).collect();
    // R1 [1 2 3]: misses. gpu [3 2 1] drops 3 → [2 1]; cpu [3 2 1] fits.
    assert_eq!(got[0], access(0, [0, 0], [1, 0]));
    // R2 [1 2 4 5]: 1, 2 in gpu. gpu [2 1 5 4] → touch 2, 1 → [5 4 2 1], drops 5, 4.
    //   cpu [3 2 1] + 5, 4 → [3 2 1 5 4] → touch 2, 1 → [3 5 4 2 1], drops 3, 5 → [4 2 1].
    assert_eq!(got[1], access(2, [2, 0], [2, 2]));
    // R3 [1 2 3 6]: 1, 2 in gpu, 3 in no tier (dropped from cpu in R2): 2 blocks.
    //   gpu drops 6, 3 → [2 1]; cpu [4 2 1 6 3] → [4 6 3 2 1], drops 4, 6 → [3 2 1].
    assert_eq!(got[2], access(2, [2, 0], [2, 2]));
    // R4 [1 2 4 7]: 1, 2 in gpu, 4 nowhere: 2 blocks. gpu drops 7, 4; cpu [3 2 1 7 4] → [3 7 4 2 1], drops 3, 7.
    assert_eq!(got[3], access(2, [2, 0], [2, 2]));
    // R5 [1 8]: 1 in gpu. gpu [2 1 8] → [2 8 1], drops 2 → [8 1]; cpu [4 2 1 8] → [4 2 8 1], drops 4 → [2 8 1].
    assert_eq!(got[4], access(1, [1, 0], [1, 1]));
    // R6 [1 2 3]: 1 in gpu (and cpu: the fastest counts), 2 only in cpu, 3 nowhere: one block each.
    //   gpu [8 1 3 2] → [8 3 2 1], drops 8, 3; cpu [2 8 1 3] → [8 1 3 2] → [8 3 2 1], drops 8.
    assert_eq!(got[5], access(2, [1, 1], [2, 1]));
    assert_eq!(cache.blocks(0), [2, 1]);
    assert_eq!(cache.blocks(1), [3, 2, 1]);
}

#[test]
fn hit_tokens_are_capped_by_the_input_and_split_fastest_first() {
    let lookup = Lookup { hit_blocks: 3, per_tier_blocks: vec![2, 1] };
    // 3 blocks of 10 = 30 tokens; a 25-token prompt: gpu's 2 blocks give 20, cpu's block the 5 left.
    assert_eq!(lookup.hit_tokens(10, Some(25)), HitTokens { total: 25, per_tier: vec![20, 5] });
    // 15 tokens: gpu's blocks already cover them all.
    assert_eq!(lookup.hit_tokens(10, Some(15)), HitTokens { total: 15, per_tier: vec![15, 0] });
    // No input count: whole blocks.
    assert_eq!(lookup.hit_tokens(10, None), HitTokens { total: 30, per_tier: vec![20, 10] });
}

fn one_tier(policy: Policy, capacity_tokens: u64) -> TieredCache {
    TieredCache::new(vec![TierSpec { tier: CacheTier::Gpu, capacity_tokens }], policy, Placement::Exclusive)
}

fn hits(policy: Policy, requests: &[u64]) -> Vec<u64> {
    // One-block requests of 1 token, a cache of 2 tokens.
    let mut cache = one_tier(policy, 2);
    requests.iter().map(|&h| cache.access(&[h], 1).hit_blocks).collect()
}

#[test]
fn fifo_and_lfu_diverge_from_lru() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    // A B A C A with room for two blocks.
    // LRU: A miss, B miss, A hit (A now newest: [B A]), C miss evicts B ([A C]), A hit.
    assert_eq!(hits(Policy::Lru, &[A, B, A, C, A]), [0, 0, 1, 0, 1]);
    // FIFO: the hit on A does not refresh it, so C evicts A, the first in ([B C]); the last A misses.
    assert_eq!(hits(Policy::Fifo, &[A, B, A, C, A]), [0, 0, 1, 0, 0]);
    // LFU: A has 2 accesses, B 1: C evicts B, as LRU does.
    assert_eq!(hits(Policy::Lfu, &[A, B, A, C, A]), [0, 0, 1, 0, 1]);

    // A A B C A: after A A B, LRU's oldest is A (B is newer), but A has 2 accesses and B 1.
    // LRU: C evicts A ([B C]), the last A misses. FIFO likewise evicts A (first in).
    assert_eq!(hits(Policy::Lru, &[A, A, B, C, A]), [0, 1, 0, 0, 0]);
    assert_eq!(hits(Policy::Fifo, &[A, A, B, C, A]), [0, 1, 0, 0, 0]);
    // LFU: C evicts B (1 access) and the last A hits.
    assert_eq!(hits(Policy::Lfu, &[A, A, B, C, A]), [0, 1, 0, 0, 1]);
}

#[test]
fn lfu_counts_survive_demotion_and_ties_go_to_the_least_recent() {
    // gpu 1 token, cpu 2 tokens, one-token blocks. A A: A has 2 accesses in gpu.
    // B: gpu [A B] over capacity; victim is B (1 access < 2) → cpu [B]. C: victim C (1) vs A (2) → cpu [B C].
    // D: victim D → cpu [B C D] over 2: B and C have 1 access each, and D 1: the least recent, B, is dropped.
    let mut cache = TieredCache::new(tiers(1, 2), Policy::Lfu, Placement::Exclusive);
    for h in [1, 1, 2, 3, 4] {
        cache.access(&[h], 1);
    }
    assert_eq!(cache.blocks(0), [1]);
    assert_eq!(cache.blocks(1), [3, 4]);
}

#[test]
fn fifo_demotes_in_order_of_entry() {
    // gpu 2 tokens, cpu 2 tokens, FIFO. [1 2] enters as 2 then 1 (last block first): gpu [2 1].
    // [3]: gpu [2 1 3] → 2 (first in) moves to cpu. [4]: 1 moves to cpu: cpu [2 1]. [5]: 3 moves to cpu and 2, the
    // first to have entered cpu, is dropped: cpu [1 3].
    let mut cache = TieredCache::new(tiers(2, 2), Policy::Fifo, Placement::Exclusive);
    for hashes in [&[1u64, 2][..], &[3], &[4], &[5]] {
        cache.access(hashes, 1);
    }
    assert_eq!(cache.blocks(0), [4, 5]);
    assert_eq!(cache.blocks(1), [1, 3]);
}

fn row(arrival: Option<i64>, hashes: Option<&[u64]>, input: u32) -> RequestRow {
    RequestRow {
        arrival_time: arrival,
        prefix_hashes: hashes.map(<[u64]>::to_vec),
        block_size: hashes.map(|_| 4),
        input_tokens: Some(input),
        cached_tokens: Some(1),
        cached_tokens_cpu: Some(1),
        ..Default::default()
    }
}

#[test]
fn simulation_replays_in_arrival_order_and_fills_the_columns() {
    let mut rows = vec![
        row(Some(20), Some(&[1, 2]), 8),
        row(None, Some(&[1, 2, 3]), 12),
        row(Some(10), Some(&[1]), 4),
        row(Some(5), None, 9),
        row(Some(10), Some(&[1, 2]), 6),
    ];
    let options = SimOptions {
        tiers: vec![TierSpec { tier: CacheTier::Gpu, capacity_tokens: 100 }],
        policy: Policy::Lru,
        placement: Placement::Exclusive,
    };
    let sim = simulate(&rows, &options).unwrap();
    // Order: row 2 (t=10), row 4 (t=10, after row 2 in input order), row 0 (t=20), row 1 (no arrival); row 3 has
    // no hashes. Row 2 misses; row 4 hits block 1: min(4, 6) = 4; row 0 hits both blocks: 8; row 1 hits 1 and 2:
    // min(8, 12) = 8.
    assert_eq!(sim.requests, 4);
    assert_eq!(sim.rows_without_hashes, 1);
    assert_eq!(sim.blocks, 1 + 2 + 2 + 3);
    assert_eq!(sim.hit_blocks, 1 + 2 + 2);
    assert_eq!(sim.input_tokens, 4 + 6 + 8 + 12);
    assert_eq!(sim.hit_tokens, 4 + 8 + 8);
    assert_eq!(sim.hit_ratio, Some(20.0 / 30.0));
    assert_eq!(sim.tiers[0].hit_tokens, 20);
    // The same replay row by row, the hit tokens written back in input order.
    let mut simulator = Simulator::new(&options).unwrap();
    let mut hits = vec![None; rows.len()];
    for index in arrival_order(&rows) {
        hits[index] = simulator.push(&rows[index]);
    }
    assert_eq!(simulator.finish(), sim);
    for (row, hit) in rows.iter_mut().zip(&hits) {
        apply(row, &sim.tiers, hit.as_ref());
    }
    let cached: Vec<_> = rows.iter().map(|r| (r.cached_tokens, r.cached_tokens_gpu, r.cached_tokens_cpu)).collect();
    assert_eq!(
        cached,
        [
            (Some(8), Some(8), None),
            (Some(8), Some(8), None),
            (Some(0), Some(0), None),
            (None, None, None),
            (Some(4), Some(4), None)
        ]
    );

    // The curve at 100 tokens is the same replay: 20 hit tokens.
    let curve = mrc(&rows, Sampling::Exact).unwrap();
    assert_eq!(curve.exact_hit_tokens(100), Some(20));
    assert_eq!(curve.rows_without_hashes, 1);
}

#[test]
fn tiers_must_be_given_once() {
    let options = SimOptions { tiers: tiers(1, 1), policy: Policy::Lru, placement: Placement::Exclusive };
    let mut twice = options.clone();
    twice.tiers[1].tier = CacheTier::Gpu;
    assert_eq!(simulate(&[], &twice).unwrap_err().to_string(), "tier gpu given twice");
    assert!(simulate(&[], &SimOptions { tiers: vec![], ..options }).is_err());
    assert!(mrc(&[], Sampling::Rate(0.0)).is_err());
}

#[test]
fn stack_distances_by_hand() {
    // Blocks of 10 tokens; requests [1 2 3] (30 tokens), [1 2 4] (25), [1 2 3] (30).
    // R1: all new. Touch 3, 2, 1: stack (most recent first) 1 2 3.
    // R2: 1 at 10 tokens, 2 at 20; 4 new. Shares: 10, 10, 5 (25 tokens). Stack after: 1 2 4 3.
    // R3: 1 at 10, 2 at 20, 3 at 40 (below 1 2 4). Shares 10 each.
    // Hits: below 10 nothing; 10..20: blocks 1 of R2 and R3 = 20; 20..40: + blocks 2 = 40; from 40: + R3's 3 = 50.
    let rows: Vec<RequestRow> = [(&[1u64, 2, 3][..], 30), (&[1, 2, 4], 25), (&[1, 2, 3], 30)]
        .iter()
        .enumerate()
        .map(|(i, (h, input))| RequestRow {
            arrival_time: Some(i as i64),
            prefix_hashes: Some(h.to_vec()),
            block_size: Some(10),
            input_tokens: Some(*input),
            ..Default::default()
        })
        .collect();
    let curve = mrc(&rows, Sampling::Exact).unwrap();
    let at = |c| curve.exact_hit_tokens(c).unwrap();
    assert_eq!([at(9), at(10), at(19), at(20), at(39), at(40), at(u64::MAX)], [0, 20, 20, 40, 40, 50, 50]);
    assert_eq!(curve.input_tokens, 85);
    // 50 % of the unbounded 50 tokens is 25: first reached at 20 tokens; 90 % (45) at 40.
    assert_eq!(curve.capacity_reaching(0.5), Some(20));
    assert_eq!(curve.capacity_reaching(0.9), Some(40));
    assert_eq!(curve.default_capacities(), [16, 32, 64]);
    for capacity in [10, 20, 30, 40] {
        let sim = simulate(
            &rows,
            &SimOptions {
                tiers: vec![TierSpec { tier: CacheTier::Gpu, capacity_tokens: capacity }],
                policy: Policy::Lru,
                placement: Placement::Exclusive,
            },
        )
        .unwrap();
        assert_eq!(sim.hit_tokens, at(capacity), "capacity {capacity}");
    }
}
