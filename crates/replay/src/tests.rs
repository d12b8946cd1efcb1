//! Replays small enough to follow by hand on a toy model and accelerator whose roofline has round numbers.

use infertrace_model::Catalog;
use infertrace_schema::{RequestRow, Status};

use crate::config::Config;
use crate::{ReplayOptions, replay};

/// One layer, one head of dimension 1: KV is 2 × 1 × 1 × 1 × 2 = 4 bytes per token and a pair of tokens costs
/// 4 × (2 × 1 × 1 × 1) … = 4 FLOPs of attention. 0.5e9 active parameters: 1e9 FLOPs and 1e9 weight bytes per token
/// and iteration. At 1 TFLOP/s and 100 GB/s (both fully used), a prompt token costs 1 ms of compute and an
/// iteration reads the weights in 10 ms.
fn catalog() -> Catalog {
    Catalog::from_toml(
        r#"
        [[accelerator]]
        id = "toy"
        name = "toy"
        bf16_dense_tflops = 1
        hbm_gb = 100
        memory_bandwidth_gbs = 100
        power_watts = 100
        price_per_hour = 1
        [[model]]
        id = "toy"
        layers = 1
        hidden_size = 1
        attention_heads = 1
        kv_heads = 1
        head_dim = 1
        parameters = 0.5e9
        active_parameters = 0.5e9
        attention = "gqa"
        "#,
    )
    .unwrap()
}

fn config(extra: &str) -> Config {
    Config::from_toml(&format!(
        "[hardware]\nmodel = \"toy\"\naccelerator = \"toy\"\n[efficiency]\nmfu = 1\nmbu = 1\n{extra}"
    ))
    .unwrap()
}

const S: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * S;

fn request(id: &str, arrival_s: f64, prompt: u32, output: u32) -> RequestRow {
    RequestRow {
        request_id: id.into(),
        source: "trace".into(),
        arrival_time: Some(T0 + (arrival_s * 1e9) as i64),
        input_tokens: Some(prompt),
        output_tokens: Some(output),
        ..RequestRow::default()
    }
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.unwrap_or_else(|| panic!("expected {expected}, got null"));
    assert!((actual - expected).abs() < 1e-9, "expected {expected}, got {actual}");
}

/// Iteration time of `tokens` new tokens at KV offset `offset`, alone: max(compute, memory).
fn step(tokens: f64, offset: f64) -> f64 {
    let compute = (1e9 * tokens + 4.0 * (tokens * offset + tokens * tokens / 2.0)) / 1e12;
    let memory = (1e9 + offset * 4.0) / 1e11;
    compute.max(memory)
}

#[test]
fn one_request_prefills_then_decodes() {
    let replayed = replay(&config(""), &catalog(), &[request("a", 0.0, 100, 3)], &ReplayOptions::default()).unwrap();
    let r = &replayed.requests[0];
    // Prefill: 100 tokens, compute-bound: 0.1 s + 4 × 5000 FLOPs. Then two decode steps at KV 100 and 101,
    // memory-bound: 10 ms + 400 (then 404) bytes / 100 GB/s.
    let (first, second, third) = (step(100.0, 0.0), step(1.0, 100.0), step(1.0, 101.0));
    close(Some(first), 0.1 + 20_000.0 / 1e12);
    close(Some(second), 0.01 + 400.0 / 1e11);
    close(r.ttft_s, first);
    close(r.e2e_s, first + second + third);
    close(r.tpot_s, (second + third) / 2.0);
    assert_eq!((r.source.as_str(), r.status, r.instance.as_deref()), ("replay", Status::Ok, Some("replay-0")));
    assert_eq!(r.queue_s, Some(0.0));
    assert_eq!(replayed.iterations, 3);
}

#[test]
fn a_full_batch_queues_the_next_request() {
    let rows = [request("a", 0.0, 100, 3), request("b", 0.0, 100, 3)];
    let replayed =
        replay(&config("[scheduler]\nmax_num_seqs = 1\n"), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    let (a, b) = (&replayed.requests[0], &replayed.requests[1]);
    // b is admitted when a finishes, and then runs exactly as a did.
    assert_eq!(b.scheduled_time, a.completion_time);
    close(b.queue_s, a.e2e_s.unwrap());
    close(b.e2e_s, 2.0 * a.e2e_s.unwrap());
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks() {
    let replayed = replay(
        &config("[scheduler]\nmax_num_batched_tokens = 64\n"),
        &catalog(),
        &[request("a", 0.0, 100, 1)],
        &ReplayOptions::default(),
    )
    .unwrap();
    // 64 tokens, then 36 at offset 64; the second chunk ends with the only token.
    close(replayed.requests[0].ttft_s, step(64.0, 0.0) + step(36.0, 64.0));
    assert_eq!(replayed.iterations, 2);
    // Without chunking the prompt goes whole even over the budget, alone.
    let whole = replay(
        &config("[scheduler]\nmax_num_batched_tokens = 64\nchunked_prefill = false\n"),
        &catalog(),
        &[request("a", 0.0, 100, 1)],
        &ReplayOptions::default(),
    )
    .unwrap();
    close(whole.requests[0].ttft_s, step(100.0, 0.0));
}

#[test]
fn running_out_of_kv_blocks_preempts_the_newest() {
    // 6 blocks of 16 tokens. c keeps the instance busy while a and b arrive; then both prompts fit together
    // (3 + 3 blocks); a's first decode needs a 4th block (KV 49), so b, admitted last, is preempted and recomputes
    // its 40-token prompt later.
    let rows = [request("c", 0.0, 16, 1), request("a", 0.001, 48, 40), request("b", 0.001, 40, 40)];
    let replayed = replay(&config("[memory]\nkv_tokens = 96\n"), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    assert_eq!(replayed.blocks_per_instance, 6);
    assert_eq!(replayed.preemptions, 1);
    let (a, b) = (&replayed.requests[1], &replayed.requests[2]);
    assert_eq!((a.status, b.status), (Status::Ok, Status::Ok));
    // Both were scheduled in the first iteration, and b got its first token there too.
    assert_eq!(a.scheduled_time, b.scheduled_time);
    assert_eq!(a.first_token_time, b.first_token_time);
    assert!(b.completion_time > a.completion_time);
    // A prompt that cannot fit at all is rejected.
    let too_long = replay(
        &config("[memory]\nkv_tokens = 96\n"),
        &catalog(),
        &[request("c", 0.0, 200, 1)],
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!((too_long.rejected, too_long.requests[0].status), (1, Status::Error));
    // One that fits but cannot grow to its output alone is dropped, never stuck.
    let stuck = replay(
        &config("[memory]\nkv_tokens = 96\n"),
        &catalog(),
        &[request("d", 0.0, 90, 20)],
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(stuck.requests[0].error.as_deref(), Some("out of KV memory"));
}

#[test]
fn disaggregated_requests_move_their_kv_over_the_link() {
    let cfg = config("[cluster]\nprefill_instances = 1\ndecode_instances = 1\nlink_gbs = 1\nlink_latency_s = 0.5\n");
    let replayed = replay(&cfg, &catalog(), &[request("a", 0.0, 100, 3)], &ReplayOptions::default()).unwrap();
    let r = &replayed.requests[0];
    // KV of 101 tokens × 4 bytes over 1 GB/s after 0.5 s of latency.
    close(r.kv_transfer_s, 0.5 + 404.0 / 1e9);
    assert_eq!(r.kv_transfer_bytes, Some(404));
    assert_eq!((r.prefill_instance.as_deref(), r.decode_instance.as_deref()), (Some("prefill-0"), Some("decode-0")));
    close(r.ttft_s, step(100.0, 0.0));
    // The decode instance starts on arrival of the KV: two steps at KV 100 and 101.
    let expected = step(100.0, 0.0) + 0.5 + 404.0 / 1e9 + step(1.0, 100.0) + step(1.0, 101.0);
    close(r.e2e_s, expected);
}

#[test]
fn a_rate_scale_compresses_arrivals() {
    let rows = [request("a", 0.0, 10, 1), request("b", 4.0, 10, 1)];
    let replayed =
        replay(&config(""), &catalog(), &rows, &ReplayOptions { rate_scale: 2.0, sample_interval_s: 1.0 }).unwrap();
    assert_eq!(replayed.requests[1].arrival_time, Some(T0 + 2 * S));
    // Samples every second up to the last event (b's token at 2 s + a step): instants 0, 1, 2; 3 metrics each.
    assert_eq!(replayed.samples.len(), 9);
    // Same input, same output.
    let again =
        replay(&config(""), &catalog(), &rows, &ReplayOptions { rate_scale: 2.0, sample_interval_s: 1.0 }).unwrap();
    assert_eq!(replayed, again);
}

#[test]
fn calibration_recovers_the_factors_of_a_replayed_run() {
    // A "measured" run made by the replay itself with mfu 0.6, mbu 0.5 and 2 ms of overhead: calibration from
    // mfu = mbu = 1 and no overhead must find factors that reproduce its means.
    let rows: Vec<RequestRow> =
        (0..40).map(|i| request(&format!("r{i}"), f64::from(i) * 0.05, 200 + 10 * i, 20 + i % 7)).collect();
    let truth =
        Config { efficiency: crate::config::Efficiency { mfu: 0.6, mbu: 0.5, step_overhead_s: 0.002 }, ..config("") };
    let measured = replay(&truth, &catalog(), &rows, &ReplayOptions::default()).unwrap().requests;
    let fitted = crate::calibrate::calibrate(&config(""), &catalog(), &measured).unwrap();
    let errors = fitted.after_errors;
    assert!(errors.ttft.unwrap().abs() < 0.01 && errors.tpot.unwrap().abs() < 0.01, "{fitted:?}");
    assert!(fitted.before_errors.tpot.unwrap().abs() > 0.1, "the defaults are off: {fitted:?}");
}

#[test]
fn folding_decode_only_iterations_changes_nothing() {
    use crate::sim::{Request, simulate_folding};
    let catalog = catalog();
    let (model, accelerator) = (catalog.model("toy").unwrap(), catalog.accelerator("toy").unwrap());
    // Staggered arrivals, mixed lengths, a KV memory small enough to preempt, two instances.
    let requests: Vec<Request> = (0..60u32)
        .map(|i| Request {
            arrival: f64::from(i) * 0.37 + f64::from(i % 5) * 0.011,
            prompt: 50 + (i * 37) % 400,
            output: 5 + (i * 53) % 300,
            // Four shared first blocks, then the request's own: reuse through both cache tiers below.
            hashes: vec![u64::from(i % 4) + 1, 100 + u64::from(i)],
            hash_block: 16,
        })
        .collect();
    let cached = format!("[cache]\n[[cache.tiers]]\ntier = \"gpu\"\ncapacity_tokens = 32\n{CPU_TIER}");
    for extra in [
        "".to_owned(),
        "[memory]\nkv_tokens = 4000\n[cluster]\ninstances = 2\nrouting = \"least-loaded\"\n".to_owned(),
        format!("[cluster]\ninstances = 2\nrouting = \"prefix-aware\"\n{cached}"),
    ] {
        let cfg = config(&extra);
        let folded = simulate_folding(&cfg, model, accelerator, &requests, 0.0, true).unwrap();
        let plain = simulate_folding(&cfg, model, accelerator, &requests, 0.0, false).unwrap();
        assert_eq!(folded.outcomes, plain.outcomes, "{extra}");
        assert_eq!(folded.iterations, plain.iterations);
        assert_eq!(folded.makespan_s, plain.makespan_s);
        // Folding did happen, and only when asked.
        assert!(folded.folded > folded.iterations / 4, "{} of {}", folded.folded, folded.iterations);
        assert_eq!(plain.folded, 0);
        if extra.contains("cache") {
            // Prefixes were loaded from the cpu tier, so Ready events interleaved with the folds.
            assert!(folded.outcomes.iter().any(|o| o.load_s > 0.0));
        }
    }
}

fn hashed(id: &str, arrival_s: f64, prompt: u32, output: u32, hashes: &[u64]) -> RequestRow {
    RequestRow { prefix_hashes: Some(hashes.to_vec()), block_size: Some(16), ..request(id, arrival_s, prompt, output) }
}

const CPU_TIER: &str = "[[cache.tiers]]\ntier = \"cpu\"\ncapacity_tokens = 1000\nbandwidth_gbs = 1\nlatency_s = 0.01\n";

#[test]
fn a_prefix_in_accelerator_memory_is_not_recomputed() {
    // a fills the cache with 6 blocks of 16 tokens; b, later, shares them: 96 of its 100 tokens are reused and
    // only 4 computed, at offset 96.
    let blocks = [1, 2, 3, 4, 5, 6];
    let rows = [hashed("a", 0.0, 100, 2, &blocks), hashed("b", 10.0, 100, 2, &blocks)];
    let cfg = config("[cache]\n[[cache.tiers]]\ntier = \"gpu\"\n");
    let replayed = replay(&cfg, &catalog(), &rows, &ReplayOptions::default()).unwrap();
    let (a, b) = (&replayed.requests[0], &replayed.requests[1]);
    assert_eq!((a.cached_tokens, a.cached_tokens_gpu), (Some(0), Some(0)));
    assert_eq!((b.cached_tokens, b.cached_tokens_gpu, b.cached_tokens_cpu), (Some(96), Some(96), None));
    close(b.ttft_s, step(4.0, 96.0));
    // Without a cache the columns stay null.
    let plain = replay(&config(""), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    assert_eq!(plain.requests[1].cached_tokens, None);
    close(plain.requests[1].ttft_s, step(100.0, 0.0));
}

#[test]
fn a_lower_tier_is_loaded_only_when_faster_than_recomputing() {
    // The gpu tier holds one block: a's access keeps block 0 there (the prefix is the most recent) and demotes
    // blocks 1–5 to cpu. b finds 16 tokens in gpu and 80 in cpu; loading 80 × 4 bytes at 1 GB/s after 10 ms takes
    // 0.01 + 3.2e-7 s, computing them at offset 16 takes (80e9 + 4 × (80 × 16 + 3200)) / 1e12 = 0.08 s: load.
    let blocks = [1, 2, 3, 4, 5, 6];
    let rows = [hashed("a", 0.0, 100, 2, &blocks), hashed("b", 10.0, 100, 2, &blocks)];
    let tiers = |retrieve: &str, latency: f64| {
        config(&format!(
            "[cache]\nretrieve = \"{retrieve}\"\n[[cache.tiers]]\ntier = \"gpu\"\ncapacity_tokens = 16\n{}",
            CPU_TIER.replace("latency_s = 0.01", &format!("latency_s = {latency}"))
        ))
    };
    let loaded = replay(&tiers("faster", 0.01), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    let b = &loaded.requests[1];
    assert_eq!((b.cached_tokens, b.cached_tokens_gpu, b.cached_tokens_cpu), (Some(96), Some(16), Some(80)));
    close(b.ttft_s, 0.01 + 320.0 / 1e9 + step(4.0, 96.0));
    // Never loading: only the gpu block is reused.
    let never = replay(&tiers("never", 0.01), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    let b = &never.requests[1];
    assert_eq!((b.cached_tokens, b.cached_tokens_cpu), (Some(16), Some(0)));
    close(b.ttft_s, step(84.0, 16.0));
    // A 1 s latency is slower than the 0.08 s of computing: recomputed under `faster`, loaded under `always`.
    let slow = replay(&tiers("faster", 1.0), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    assert_eq!(slow.requests[1].cached_tokens_cpu, Some(0));
    let always = replay(&tiers("always", 1.0), &catalog(), &rows, &ReplayOptions::default()).unwrap();
    close(always.requests[1].ttft_s, 1.0 + 320.0 / 1e9 + step(4.0, 96.0));
}

#[test]
fn prefix_aware_routing_follows_the_cached_prefix() {
    // a goes to instance 0 (both idle, lowest index). c, unrelated and short, goes to the idle instance 1 and is
    // done by 0.15 s. b shares a's prefix and arrives at 0.5 s, when a (0.1 s of prefill, then 10 ms per token) has
    // 100 − 41 = 59 tokens left: least-loaded picks instance 1 (no work); prefix-aware weighs instance 0 at
    // 59 + 100 − 96 = 63 tokens against instance 1 at 0 + 100 and picks 0, where the prefix is.
    let rows = [
        hashed("a", 0.0, 100, 100, &[1, 2, 3, 4, 5, 6]),
        hashed("c", 0.001, 50, 10, &[9]),
        hashed("b", 0.5, 100, 2, &[1, 2, 3, 4, 5, 6]),
    ];
    let cache = "[cache]\n[[cache.tiers]]\ntier = \"gpu\"\n";
    let aware = config(&format!("{cache}[cluster]\ninstances = 2\nrouting = \"prefix-aware\"\n"));
    let loaded = config(&format!("{cache}[cluster]\ninstances = 2\nrouting = \"least-loaded\"\n"));
    let by_prefix = replay(&aware, &catalog(), &rows, &ReplayOptions::default()).unwrap();
    let by_load = replay(&loaded, &catalog(), &rows, &ReplayOptions::default()).unwrap();
    assert_eq!(by_prefix.requests[2].instance.as_deref(), Some("replay-0"));
    assert_eq!(by_prefix.requests[2].cached_tokens, Some(96));
    assert_eq!(by_load.requests[2].instance.as_deref(), Some("replay-1"));
    assert_eq!(by_load.requests[2].cached_tokens, Some(0));
}

#[test]
fn replayed_rows_are_simulated() {
    assert_eq!(infertrace_schema::SourceKind::of(crate::SOURCE), infertrace_schema::SourceKind::Simulated);
}
