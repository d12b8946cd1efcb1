//! Properties over random traces: the curve equals the simulation at every capacity, hit ratios grow with capacity
//! under LRU, and the LRU tiers compose as the crate documentation says.

use infertrace_cache::{Placement, Policy, Sampling, SimOptions, TierSpec, mrc, simulate};
use infertrace_schema::{CacheTier, RequestRow};
use proptest::prelude::*;

fn gpu(capacity_tokens: u64) -> Vec<TierSpec> {
    vec![TierSpec { tier: CacheTier::Gpu, capacity_tokens }]
}

fn run(
    rows: &[RequestRow],
    tiers: Vec<TierSpec>,
    policy: Policy,
    placement: Placement,
) -> infertrace_cache::Simulation {
    simulate(rows, &SimOptions { tiers, policy, placement }).unwrap()
}

/// Rows of chained prefixes: each request extends a random earlier request's prefix (or starts a new chain) by a
/// few fresh blocks, as conversations do; arrivals repeat (ties) and some are missing; input tokens are sometimes
/// short of the last block, sometimes null.
fn chained(block_size: u32) -> impl Strategy<Value = Vec<RequestRow>> {
    prop::collection::vec((0usize..8, 0usize..6, 1usize..5, prop::option::of(0i64..6), 0u32..3), 1..40).prop_map(
        move |specs| {
            let mut prefixes: Vec<Vec<u64>> = Vec::new();
            let mut next = 1u64;
            specs
                .into_iter()
                .map(|(parent, keep, fresh, arrival, trim)| {
                    let mut hashes: Vec<u64> = match prefixes.get(parent) {
                        Some(p) => p[..keep.min(p.len())].to_vec(),
                        None => Vec::new(),
                    };
                    for _ in 0..fresh {
                        hashes.push(next * 1_000_003);
                        next += 1;
                    }
                    let blocks = hashes.len() as u32;
                    let input = match trim {
                        0 => None,
                        t => Some(blocks * block_size - (t - 1).min(block_size - 1)),
                    };
                    prefixes.push(hashes.clone());
                    RequestRow {
                        arrival_time: arrival,
                        prefix_hashes: Some(hashes),
                        block_size: Some(block_size),
                        input_tokens: input,
                        ..Default::default()
                    }
                })
                .collect()
        },
    )
}

/// Rows whose hashes are arbitrary (no chain): repeated and out-of-order hashes, to check the contiguous-prefix
/// rule itself rather than the chain.
fn unchained() -> impl Strategy<Value = Vec<RequestRow>> {
    prop::collection::vec((prop::collection::vec(0u64..12, 0..6), prop::option::of(0i64..4), 1u32..4), 1..30).prop_map(
        |specs| {
            specs
                .into_iter()
                .map(|(hashes, arrival, size)| RequestRow {
                    arrival_time: arrival,
                    input_tokens: Some(hashes.len() as u32 * size),
                    prefix_hashes: Some(hashes),
                    block_size: Some(size),
                    ..Default::default()
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_curve_is_the_one_tier_lru_simulation(rows in chained(4)) {
        let curve = mrc(&rows, Sampling::Exact).unwrap();
        for capacity in [0, 3, 4, 8, 12, 16, 28, 40, 64, 1000] {
            let sim = run(&rows, gpu(capacity), Policy::Lru, Placement::Exclusive);
            prop_assert_eq!(curve.exact_hit_tokens(capacity), Some(sim.hit_tokens), "capacity {}", capacity);
            prop_assert_eq!(curve.input_tokens, sim.input_tokens);
        }
    }

    #[test]
    fn the_curve_is_the_simulation_without_chains_and_with_mixed_block_sizes(rows in unchained()) {
        // Each row has its own block size here, so a hash may come back with another size: equality then needs
        // the hash to keep its size, which is why the sizes are tied to the hashes below.
        let rows: Vec<RequestRow> = rows
            .into_iter()
            .map(|mut r| {
                let size = r.block_size.unwrap();
                r.prefix_hashes = r.prefix_hashes.map(|h| h.into_iter().map(|x| x * 10 + u64::from(size)).collect());
                r
            })
            .collect();
        let curve = mrc(&rows, Sampling::Exact).unwrap();
        for capacity in 0..24 {
            let sim = run(&rows, gpu(capacity), Policy::Lru, Placement::Exclusive);
            prop_assert_eq!(curve.exact_hit_tokens(capacity), Some(sim.hit_tokens), "capacity {}", capacity);
        }
    }

    #[test]
    fn lru_hits_grow_with_capacity(rows in chained(3), extra in 1u64..20) {
        let mut previous = 0;
        for capacity in (0..60).step_by(extra as usize) {
            let sim = run(&rows, gpu(capacity), Policy::Lru, Placement::Exclusive);
            prop_assert!(sim.hit_tokens >= previous, "capacity {}: {} < {}", capacity, sim.hit_tokens, previous);
            previous = sim.hit_tokens;
        }
    }

    #[test]
    fn lru_tiers_compose(rows in chained(2), a in 0u64..12, b in 0u64..12) {
        // Block size 2 and even capacities: whole blocks.
        let (a, b) = (a * 2, b * 2);
        let curve = mrc(&rows, Sampling::Exact).unwrap();
        let tiers = vec![
            TierSpec { tier: CacheTier::Gpu, capacity_tokens: a },
            TierSpec { tier: CacheTier::Cpu, capacity_tokens: b },
        ];
        // Exclusive: gpu is one LRU tier of a, gpu and cpu together one of a + b.
        let exclusive = run(&rows, tiers.clone(), Policy::Lru, Placement::Exclusive);
        prop_assert_eq!(Some(exclusive.tiers[0].hit_tokens), curve.exact_hit_tokens(a));
        prop_assert_eq!(Some(exclusive.hit_tokens), curve.exact_hit_tokens(a + b));
        // Inclusive: each tier is its own LRU cache; together they hit as the largest.
        let inclusive = run(&rows, tiers, Policy::Lru, Placement::Inclusive);
        prop_assert_eq!(Some(inclusive.tiers[0].hit_tokens), curve.exact_hit_tokens(a));
        prop_assert_eq!(Some(inclusive.hit_tokens), curve.exact_hit_tokens(a.max(b)));
    }

    #[test]
    fn every_policy_and_placement_keeps_its_books(rows in chained(4), a in 0u64..40, b in 0u64..40) {
        for policy in Policy::ALL {
            for placement in Placement::ALL {
                let tiers = vec![
                    TierSpec { tier: CacheTier::Gpu, capacity_tokens: a },
                    TierSpec { tier: CacheTier::Disk, capacity_tokens: b },
                ];
                let sim = run(&rows, tiers, *policy, *placement);
                let per_tier: u64 = sim.tiers.iter().map(|t| t.hit_tokens).sum();
                prop_assert_eq!(per_tier, sim.hit_tokens);
                prop_assert!(sim.hit_tokens <= sim.input_tokens);
                // Nothing beats an unbounded cache.
                let unbounded = run(&rows, gpu(u64::MAX), *policy, *placement);
                prop_assert!(sim.hit_tokens <= unbounded.hit_tokens);
            }
        }
    }
}
