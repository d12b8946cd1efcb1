//! `cache-sim` and `mrc` on the Mooncake conversation trace: they agree with each other at every capacity and with
//! an independent reference implementation written here; SHARDS stays within the error documented in
//! `docs/replay.md`; and the commands' outputs, dataset and errors.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use infertrace_cache::{Placement, Policy, Sampling, SimOptions, TierSpec, max_abs_difference, mrc, simulate};
use infertrace_schema::{CacheTier, Dataset, RequestRow, Table as _};

const CONVERSATION: &str = "mooncake/fast25/conversation_trace.jsonl.zst";

/// The conversation trace normalized into `dir` and its request rows.
fn conversation(dir: &Path) -> (std::path::PathBuf, Vec<RequestRow>) {
    let out = dir.join("conversation");
    common::run(&[common::testdata().join(CONVERSATION)], &out);
    let dataset = Dataset::open(&out).unwrap();
    (out.clone(), RequestRow::from_batch(&dataset.requests).unwrap())
}

/// The reference: an LRU cache of whole blocks kept in a `Vec`, least recent first, searched linearly.
/// It shares nothing with the crate but the semantics in its documentation: rows in arrival order (rows without an
/// arrival last, ties in input order); a request hits the longest prefix of its hashes found; then every block is
/// moved to the recent end, the first block last (so it is the most recent); then the oldest blocks go until
/// `capacity_blocks` remain. Returns Σ hit tokens, with hit tokens = min(hit blocks × block size, input tokens).
fn reference_lru(rows: &[RequestRow], capacity_blocks: usize) -> u64 {
    let mut order: Vec<&RequestRow> = rows.iter().collect();
    order.sort_by_key(|r| (r.arrival_time.is_none(), r.arrival_time));
    let mut cache: Vec<u64> = Vec::new();
    let mut hit_tokens = 0u64;
    for row in order {
        let (Some(hashes), Some(block_size)) = (&row.prefix_hashes, row.block_size) else { continue };
        let hit_blocks = hashes.iter().take_while(|h| cache.contains(h)).count() as u64;
        let tokens = hit_blocks * u64::from(block_size);
        hit_tokens += row.input_tokens.map_or(tokens, |n| tokens.min(u64::from(n)));
        for hash in hashes.iter().rev() {
            if let Some(at) = cache.iter().position(|h| h == hash) {
                cache.remove(at);
            }
            cache.push(*hash);
        }
        let excess = cache.len().saturating_sub(capacity_blocks);
        cache.drain(..excess);
    }
    hit_tokens
}

fn one_lru_tier(capacity_tokens: u64) -> SimOptions {
    SimOptions {
        tiers: vec![TierSpec { tier: CacheTier::Gpu, capacity_tokens }],
        policy: Policy::Lru,
        placement: Placement::Exclusive,
    }
}

#[test]
fn cache_sim_mrc_and_the_reference_agree_on_the_mooncake_conversation_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (_, rows) = conversation(dir.path());
    // What the corpus notes say of this trace: 12,031 requests, 512-token blocks.
    assert_eq!(rows.len(), 12_031);
    assert!(rows.iter().all(|r| r.block_size == Some(512) && r.prefix_hashes.is_some()));
    let curve = mrc(&rows, Sampling::Exact).unwrap();
    assert!(curve.is_exact());
    assert_eq!(curve.requests, 12_031);

    // The reference against cache-sim and the curve, at capacities small enough for its linear search.
    for capacity_tokens in [0, 512, 64_000, 1_000_000, 3_000_000] {
        let expected = reference_lru(&rows, (capacity_tokens / 512) as usize);
        let sim = simulate(&rows, &one_lru_tier(capacity_tokens)).unwrap();
        assert_eq!(sim.hit_tokens, expected, "cache-sim at {capacity_tokens} tokens");
        assert_eq!(curve.exact_hit_tokens(capacity_tokens), Some(expected), "mrc at {capacity_tokens} tokens");
    }

    // cache-sim and the curve at the capacities of the reference semantics (docs: public-traces §2.15) and
    // unbounded, to the token.
    for capacity_tokens in [250_000, 500_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, u64::MAX] {
        let sim = simulate(&rows, &one_lru_tier(capacity_tokens)).unwrap();
        assert_eq!(curve.exact_hit_tokens(capacity_tokens), Some(sim.hit_tokens), "{capacity_tokens} tokens");
        assert_eq!(curve.input_tokens, sim.input_tokens);
    }

    // The unbounded cache finds, for each request, the prefix of blocks seen before; along Mooncake's chains that
    // is every block seen before, so it agrees with a set of seen hashes (the engine's unbounded reuse, here capped
    // by input tokens).
    let mut seen = std::collections::HashSet::new();
    let mut order: Vec<&RequestRow> = rows.iter().collect();
    order.sort_by_key(|r| (r.arrival_time.is_none(), r.arrival_time));
    let mut unbounded = 0u64;
    for row in order {
        let hashes = row.prefix_hashes.as_ref().unwrap();
        let hit = hashes.iter().take_while(|h| seen.contains(*h)).count() as u64;
        unbounded += (hit * 512).min(u64::from(row.input_tokens.unwrap()));
        seen.extend(hashes.iter().copied());
    }
    assert_eq!(curve.exact_hit_tokens(u64::MAX), Some(unbounded));

    // Three exclusive LRU tiers (HBM 0.5 M, DRAM 3 M, SSD 20 M tokens): the fastest k tiers hit as one tier of
    // their summed capacity.
    let tiers = [(CacheTier::Gpu, 500_000), (CacheTier::Cpu, 3_000_000), (CacheTier::Disk, 20_000_000)];
    let options = SimOptions {
        tiers: tiers.iter().map(|&(tier, capacity_tokens)| TierSpec { tier, capacity_tokens }).collect(),
        policy: Policy::Lru,
        placement: Placement::Exclusive,
    };
    let sim = simulate(&rows, &options).unwrap();
    let at = |c| curve.exact_hit_tokens(c).unwrap();
    assert_eq!(sim.tiers[0].hit_tokens, at(500_000));
    assert_eq!(sim.tiers[0].hit_tokens + sim.tiers[1].hit_tokens, at(3_500_000));
    assert_eq!(sim.hit_tokens, at(23_500_000));
    // Inclusive: each tier on its own, together the largest.
    let inclusive = simulate(&rows, &SimOptions { placement: Placement::Inclusive, ..options }).unwrap();
    assert_eq!(inclusive.tiers[0].hit_tokens, at(500_000));
    assert_eq!(inclusive.tiers[0].hit_tokens + inclusive.tiers[1].hit_tokens, at(3_000_000));
    assert_eq!(inclusive.hit_tokens, at(20_000_000));
}

/// The largest absolute difference of the sampled curve from the exact one allowed at each rate: the errors
/// measured on this trace (docs/replay.md) rounded up.
const SHARDS_BOUNDS: [(f64, f64); 5] = [(0.5, 0.01), (0.2, 0.015), (0.1, 0.02), (0.05, 0.03), (0.01, 0.04)];

#[test]
fn shards_stays_within_the_documented_error() {
    let dir = tempfile::tempdir().unwrap();
    let (_, rows) = conversation(dir.path());
    let exact = mrc(&rows, Sampling::Exact).unwrap();
    for (rate, bound) in SHARDS_BOUNDS {
        let sampled = mrc(&rows, Sampling::Rate(rate)).unwrap();
        assert!(!sampled.is_exact());
        assert!(sampled.sampled_blocks < sampled.blocks);
        let error = max_abs_difference(&exact, &sampled);
        assert!(
            error <= bound,
            "rate {rate}: {} of {} accesses sampled, max abs difference {error} > {bound}",
            sampled.sampled_blocks,
            sampled.blocks
        );
    }
}

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn the_commands_print_write_and_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let (dataset, rows) = conversation(dir.path());
    let dataset = dataset.to_str().unwrap();
    let output = dir.path().join("simulated");
    let output_arg = output.to_str().unwrap();

    // --json is the simulation of the library (sim below); the tiers come out fastest first whatever the order given.
    let run = infertrace(&["cache-sim", dataset, "--tier", "cpu=3M", "--tier", "gpu=500k", "--json", "-o", output_arg]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let options = SimOptions {
        tiers: vec![
            TierSpec { tier: CacheTier::Gpu, capacity_tokens: 500_000 },
            TierSpec { tier: CacheTier::Cpu, capacity_tokens: 3_000_000 },
        ],
        policy: Policy::Lru,
        placement: Placement::Exclusive,
    };
    let sim = simulate(&rows, &options).unwrap();
    // Compared as text: parsing floats back is not exact.
    assert_eq!(text(&run.stdout), serde_json::to_string_pretty(&sim).unwrap() + "\n");
    assert_eq!(json["tiers"][0]["tier"], "gpu");
    assert_eq!(json["policy"], "lru");

    // The dataset written: the simulated columns, the untouched tiers null, the record in the manifest.
    let written = Dataset::open(&output).unwrap();
    let out_rows = RequestRow::from_batch(&written.requests).unwrap();
    assert_eq!(out_rows.len(), rows.len());
    let sum = |f: fn(&RequestRow) -> Option<u32>| out_rows.iter().filter_map(f).map(u64::from).sum::<u64>();
    assert_eq!(sum(|r| r.cached_tokens), sim.hit_tokens);
    assert_eq!(sum(|r| r.cached_tokens_gpu), sim.tiers[0].hit_tokens);
    assert_eq!(sum(|r| r.cached_tokens_cpu), sim.tiers[1].hit_tokens);
    assert!(out_rows.iter().all(|r| r.cached_tokens_disk.is_none() && r.cached_tokens_remote.is_none()));
    assert!(out_rows.iter().zip(&rows).all(|(a, b)| a.request_id == b.request_id && a.input_tokens == b.input_tokens));
    let record = written.manifest.cache_sim.as_ref().unwrap();
    assert_eq!(record.dataset, dataset);
    assert_eq!((record.tiers[0].capacity.as_str(), record.tiers[0].capacity_tokens), ("500k", 500_000));
    assert_eq!(record.hit_tokens, sim.hit_tokens);
    assert_eq!(written.manifest.inputs, Dataset::open(Path::new(dataset)).unwrap().manifest.inputs);

    // The requests are sorted by arrival through the query engine: one thread and a 16 MiB budget give the same
    // figures and the same bytes; a budget below what a sort needs is a one-line error naming the option.
    let small = dir.path().join("small");
    let run = infertrace(&[
        "cache-sim",
        dataset,
        "--tier",
        "cpu=3M",
        "--tier",
        "gpu=500k",
        "--json",
        "-o",
        small.to_str().unwrap(),
        "--threads",
        "1",
        "--memory-limit",
        "16M",
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), serde_json::to_string_pretty(&sim).unwrap() + "\n");
    let bytes = |d: &Path| std::fs::read(d.join("requests.parquet")).unwrap();
    assert!(bytes(&small) == bytes(&output), "requests.parquet differs with one thread and 16 MiB");
    // The trace is in arrival order, so it is read as it is, without a sort: 1 MiB is enough. Writing the dataset
    // sorts the hits back into input order, and a sort needs more: a one-line error names the option.
    let tight = ["cache-sim", dataset, "--tier", "cpu=3M", "--tier", "gpu=500k", "--json", "--memory-limit", "1M"];
    let run = infertrace(&tight);
    assert_eq!(text(&run.stdout), serde_json::to_string_pretty(&sim).unwrap() + "\n", "{}", text(&run.stderr));
    let tight_out = dir.path().join("tight");
    let run = infertrace(&[&tight[..], &["-o", tight_out.to_str().unwrap()]].concat());
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("--memory-limit (1 MiB)"), "{}", text(&run.stderr));
    assert!(!tight_out.exists(), "a failed run leaves no dataset");

    // Writing again needs --force.
    let again = infertrace(&["cache-sim", dataset, "--tier", "gpu=1M", "-o", output_arg]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("--force"), "{}", text(&again.stderr));

    // The table names every tier and the total.
    let table = infertrace(&["cache-sim", dataset, "--tier", "gpu=1M", "--policy", "lfu", "--placement", "inclusive"]);
    let table = text(&table.stdout);
    assert!(table.starts_with("policy lfu, placement inclusive\n"), "{table}");
    assert!(table.contains("all tiers"), "{table}");

    // mrc: the JSON report at the points asked for equals cache-sim there; the SVG is a standalone document.
    let svg = dir.path().join("mrc.svg");
    let run = infertrace(&["mrc", dataset, "--json", "--points", "1M,3M", "--svg", svg.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["sample_rate"], 1.0);
    for (point, capacity) in report["points"].as_array().unwrap().iter().zip([1_000_000, 3_000_000]) {
        let sim = simulate(&rows, &one_lru_tier(capacity)).unwrap();
        assert_eq!(point["capacity_tokens"], capacity);
        assert_eq!(point["hit_tokens"], sim.hit_tokens);
    }
    assert_eq!(report["reaching"].as_array().unwrap().len(), 3);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{}", &svg[..80]);

    // Bytes through a catalog model: Llama-3.1-70B keeps 80 layers × 8 KV heads × 128 × 2 (K and V) × 2 bytes =
    // 327,680 bytes per token, so 80 GB hold ⌊80e9 / 327,680⌋ = 244,140 tokens, and with κ = 2, 488,281.
    let run = infertrace(&["cache-sim", dataset, "--tier", "gpu=80GB", "--model", "Llama-3.1-70B", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(json["tiers"][0]["capacity_tokens"], 244_140);
    assert_eq!(json["model"]["kv_bytes_per_token"], 327_680.0);
    let run =
        infertrace(&["cache-sim", dataset, "--tier", "gpu=80GB", "--model", "Llama-3.1-70B", "--kappa", "2", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(json["tiers"][0]["capacity_tokens"], 488_281);

    // One-line errors.
    for (args, needle) in [
        (vec!["cache-sim", dataset, "--tier", "gpu=80GB"], "--model"),
        (vec!["cache-sim", dataset, "--tier", "gpu=1M", "--tier", "gpu=2M"], "tier gpu given twice"),
        (vec!["cache-sim", "no-such-dataset", "--tier", "gpu=1M"], "no-such-dataset"),
        (vec!["mrc", dataset, "--sample", "2"], "sampling rate 2"),
    ] {
        let run = infertrace(&args);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        let err = text(&run.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }
}
