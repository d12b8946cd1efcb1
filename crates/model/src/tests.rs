//! Every equation with hand-computed values, and the properties the model must keep.

use proptest::prelude::*;

use crate::eval::{curve_hit_rate, fmt, min_context_tokens};
use crate::{Catalog, Params, evaluate};

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.unwrap_or_else(|| panic!("expected {expected}, got null"));
    assert!((actual - expected).abs() <= 1e-9 * expected.abs().max(1.0), "expected {expected}, got {actual}");
}

fn coding_agent() -> Params {
    Params::from_toml(include_str!("../../../examples/model/coding-agent.toml")).unwrap()
}

#[test]
fn the_worked_example_of_the_articles() {
    let e = evaluate(&coding_agent(), &Catalog::builtin()).unwrap();
    // (1 − 0.25 − 0.40) × 18 + 0.25 × 0 + 0.40 × 0.9 = 6.3 + 0.36 = 6.66 s.
    close(e.prefill.recompute_s, 18.0);
    close(e.prefill.expected_s, 6.66);
    close(e.prefill.terms["miss"], 6.3);
    close(e.prefill.terms["external"], 0.36);
    close(e.prefill.saving_s, 11.34);
    close(e.prefill.saving_fraction, 0.63);
    assert_eq!(e.prefill.arithmetic, "(1 − 0.25 − 0.4) × 18 s + 0.25 × 0 s + 0.4 × 0.9 s = 6.66 s");
    // 50 × 20 × 24 = 24,000 requests/day, all continued: 24,000 × 11.34 s = 272,160 s = 75.6 h.
    let daily = e.daily.unwrap();
    close(Some(daily.requests), 24_000.0);
    close(daily.gpu_hours_saved, 75.6);
    // Pure recompute: 24,000 × 18 s = 120 h.
    close(daily.gpu_hours_recompute, 120.0);
    // No decode time or price was given: the answer cannot be priced, and the warnings say why.
    assert_eq!(e.answer.cost_per_successful_answer, None);
    assert!(e.warnings.iter().any(|w| w.contains("decode.s_per_token")), "{:?}", e.warnings);
    close(e.inputs.tier_hit_rate.get("hbm").copied(), 0.25);
}

#[test]
fn a_hit_slower_than_recomputing_is_recomputed() {
    let mut p = coding_agent();
    p.set("L.external", 20.0).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    // 0.35 × 18 + 0.40 × min(20, 18) = 6.3 + 7.2.
    close(e.prefill.expected_s, 13.5);
    assert!(e.warnings.iter().any(|w| w.contains("slower than recomputing")));
}

#[test]
fn the_cost_of_an_answer_counts_hidden_reasoning() {
    let mut p = coding_agent();
    p.set("t_d", 0.02).unwrap();
    p.set("p_gpu", 3.6).unwrap();
    p.set("price.watts", 1000.0).unwrap();
    p.set("s", 0.9).unwrap();
    p.set("workload.new_session_fraction", 0.1).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    // G = 400 × (1 + 12) = 5,200 tokens; decode 5,200 × 0.02 = 104 s.
    close(Some(e.inputs.generated_tokens), 5200.0);
    close(e.answer.decode_s, 104.0);
    // Prefix prefill of the mix: 0.1 × 18 + 0.9 × 6.66 = 7.794 s; instance time 111.794 s.
    close(e.answer.prefill_s, 7.794);
    close(e.answer.instance_s, 111.794);
    // $3.6/h = $0.001/s: $0.111794 per request, / 0.9 success.
    close(e.answer.request_dollars, 0.111794);
    close(e.answer.cost_per_successful_answer, 0.111794 / 0.9);
    // 111.794 s × 1 kW = 0.0310539 kWh, / 0.9.
    close(e.answer.kwh_per_successful_answer, 111.794 * 1000.0 / 3.6e6 / 0.9);
    close(e.answer.visible_tokens_per_dollar, 400.0 / (0.111794 / 0.9));
    close(e.answer.generated_tokens_per_dollar, 5200.0 / (0.111794 / 0.9));
    // 24,000 requests of which 21,600 continued: 21,600 × 11.34 / 3600 = 68.04 h.
    close(e.daily.unwrap().gpu_hours_saved, 68.04);
}

#[test]
fn the_builtin_catalog_has_every_entry_the_issue_names() {
    let catalog = Catalog::builtin();
    let ids: Vec<&str> = catalog.accelerators.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["A100", "A800", "H100", "H800", "H200", "B200", "MI300X", "L40S", "RTX4090", "RTXPRO6000"]);
    // KV bytes per token in bf16: 2 × layers × KV heads × head dim × 2, or 61 × (512 + 64) × 2 for MLA.
    let kv: Vec<(&str, f64)> = catalog.models.iter().map(|m| (m.id.as_str(), m.kv_bytes_per_token(2.0))).collect();
    assert_eq!(
        kv,
        [
            ("Llama-3.1-8B", 131_072.0),
            ("Llama-3.1-70B", 327_680.0),
            ("Llama-3-70B", 327_680.0),
            ("Qwen3-32B", 262_144.0),
            ("Qwen3-30B-A3B", 98_304.0),
            ("DeepSeek-V3", 70_272.0),
        ]
    );
    for a in &catalog.accelerators {
        assert!(!a.spec_sources.is_empty() && !a.price_source.is_empty(), "{} has no sources", a.id);
    }
    for m in &catalog.models {
        assert!(!m.sources.is_empty(), "{} has no sources", m.id);
    }
    // A user catalog replaces an entry by id and adds new ones.
    let mut extended = catalog.clone();
    let user = Catalog::from_toml(
        "[[accelerator]]\nid = \"h100\"\nname = \"mine\"\nbf16_dense_tflops = 1\nhbm_gb = 1\n\
         memory_bandwidth_gbs = 1\npower_watts = 1\nprice_per_hour = 9\n",
    )
    .unwrap();
    extended.extend(user);
    assert_eq!(extended.accelerators.len(), 10);
    assert_eq!(extended.accelerator("H100").unwrap().price_per_hour, 9.0);
    let bad = Catalog::from_toml(
        "[[accelerator]]\nid = \"x\"\nname = \"x\"\nbf16_dense_tflops = 0\nhbm_gb = 1\n\
         memory_bandwidth_gbs = 1\npower_watts = 1\nprice_per_hour = 1\n",
    );
    assert_eq!(bad.unwrap_err().to_string(), "x: bf16_dense_tflops must be a finite number > 0");
}

#[test]
fn kv_bytes_and_prefill_flops_follow_the_architecture() {
    let catalog = Catalog::builtin();
    let llama = catalog.model("llama-3.1-8b").unwrap();
    // 2 × 32 layers × 8 KV heads × 128 × 2 bytes.
    assert_eq!(llama.kv_bytes_per_token(2.0), 131_072.0);
    // 2 × 8.03e9 × 1000 + 2 × 32 × 32 × 128 × 1000².
    assert_eq!(llama.prefill_flops(1000.0), 1.606e13 + 2.62144e11);
    let mla = crate::Model {
        attention: crate::Attention::Mla,
        layers: 61,
        kv_lora_rank: Some(512),
        qk_rope_head_dim: Some(64),
        ..llama.clone()
    };
    // 61 × (512 + 64) × 1 byte (fp8 cache).
    assert_eq!(mla.kv_bytes_per_token(1.0), 35_136.0);
}

#[test]
fn the_roofline_fills_what_is_not_given() {
    let mut p = Params::from_toml(
        "[workload]\nvisible_tokens = 100\nprefix_tokens = 1000\ninput_tokens = 1200\n\
         [hardware]\nmodel = \"Llama-3.1-8B\"\naccelerator = \"H100\"\nbatch = 16\n\
         [tiers.dram]\nhit_rate = 0.5\nbandwidth_gbs = 50\nbase_latency_s = 0.001\n",
    )
    .unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    let flops = 989.4e12 * 0.5;
    // T_p = (1.606e13 + 2.62144e11) / (989.4e12 × 0.5).
    close(e.inputs.prefix_s.map(|d| d.value), (1.606e13 + 2.62144e11) / flops);
    // Suffix: flops(1200) − flops(1000) = 2 × 8.03e9 × 200 + 2 × 32 × 32 × 128 × (1200² − 1000²).
    close(e.inputs.suffix_s.map(|d| d.value), (3.212e12 + 262_144.0 * 440_000.0) / flops);
    // Retrieval: 0.001 + 1000 × 131,072 B / 50 GB/s.
    close(e.inputs.tier_latency_s["dram"].map(|d| d.value), 0.001 + 131_072_000.0 / 50e9);
    // Decode step at batch 16, context 1200 + 50: (8.03e9 × 2 + 16 × 1250 × 131,072) / (3350e9 × 0.7), per token / 16.
    let step = (16.06e9 + 16.0 * 1250.0 * 131_072.0) / (3350e9 * 0.7);
    close(e.inputs.decode_s_per_token.map(|d| d.value), step / 16.0);
    // The catalog's price and power fill the answer.
    close(e.inputs.accelerator_per_hour.map(|d| d.value), 2.69);
    // Retrieval at 50 GB/s: a = 131,072 / 50e9 per token against b = 2 × 8.03e9 / flops per token.
    let (a, b, q) = (131_072.0 / 50e9, 16.06e9 / flops, 262_144.0 / flops);
    let b_dram = &e.breakeven["dram"];
    close(b_dram.min_context_tokens, min_context_tokens(0.001, a, b, q).unwrap());
    close(b_dram.max_base_latency_s, b * 1000.0 + q * 1e6 - a * 1000.0);
    assert_eq!(b_dram.retrieval_wins, Some(true));
    // With a link, δ = 1200 × 131,072 B / 100 GB/s.
    p.set("disaggregation.link_gbs", 100.0).unwrap();
    p.set("d", 1.0).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    close(e.disaggregation.delta_s, 1200.0 * 131_072.0 / 100e9);
}

#[test]
fn disaggregation_breaks_even_where_specialization_pays_for_the_transfer() {
    let mut p = coding_agent();
    p.set("t_d", 0.01).unwrap();
    p.set("delta", 2.0).unwrap();
    p.set("d", 1.0).unwrap();
    p.set("disaggregation.specialization_gain", 0.1).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    // Collocated: 6.66 + 5,200 × 0.01 = 58.66 s; disaggregated: 0.9 × 58.66 + 2 = 54.794 s; δ* = 5.866 s.
    close(e.disaggregation.collocated_s, 58.66);
    close(e.disaggregation.disaggregated_s, 54.794);
    close(e.disaggregation.breakeven_delta_s, 5.866);
    // The answer pays the transfer: 58.66 + 2.
    close(e.answer.instance_s, 60.66);
    // A larger shared cache: 10 points more external hits save 0.1 × (18 − 0.9) = 1.71 s.
    p.set("disaggregation.specialization_gain", 0.0).unwrap();
    p.set("disaggregation.hit_rate_gain", 0.1).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    close(e.disaggregation.breakeven_delta_s, 1.71);
}

#[test]
fn compression_raises_the_hit_rate_along_the_curve() {
    let mut p = coding_agent();
    p.set("t_d", 0.0).unwrap();
    p.set("p_gpu", 3600.0).unwrap();
    p.set("P", 10_000.0).unwrap();
    p.set("compression.capacity_tokens", 1000.0).unwrap();
    p.compression.hit_curve = vec![[0.0, 0.0], [1000.0, 0.25], [3000.0, 0.45]];
    p.set("kappa", 2.0).unwrap();
    p.set("c_dec", 1e-5).unwrap();
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    // κ = 2: capacity 2000 → 0.25 + 0.5 × 0.2 = 0.35 in HBM; 0.35 + 0.40 ≤ 1 so the external tier keeps 0.40.
    close(e.compression.hit_rate_uncompressed, 0.25);
    close(e.compression.hit_rate, 0.35);
    // Every hit pays 10,000 × 1e-5 = 0.1 s to decompress: 0.25 × 18 + 0.35 × 0.1 + 0.40 × 1.0 = 4.935 s,
    // against 6.66 s uncompressed; at $1 per second that is the net per answer.
    close(e.prefill.expected_s, 4.935);
    close(e.compression.net_dollars_per_answer, 4.935 - 6.66);
    // κ = 3 reaches 0.45 and the flat end; κ ≥ 3 gains nothing and pays the same decompression, so 3 is best:
    // 0.15 × 18 + 0.45 × 0.1 + 0.40 × 1.0 = 3.145 s.
    assert_eq!(e.compression.best_kappa, Some(3.0));
    close(e.compression.best_cost_per_answer, 3.145);
}

#[test]
fn curves_interpolate_and_stay_flat_beyond_their_ends() {
    let curve = [[100.0, 0.1], [200.0, 0.3]];
    close(curve_hit_rate(&curve, 50.0), 0.1);
    close(curve_hit_rate(&curve, 150.0), 0.2);
    close(curve_hit_rate(&curve, 500.0), 0.3);
    assert_eq!(curve_hit_rate(&[], 1.0), None);
}

#[test]
fn parameters_are_named_and_checked() {
    let mut p = Params::default();
    p.set("h.dram", 0.3).unwrap();
    assert_eq!(p.tiers["dram"].hit_rate, 0.3);
    assert_eq!(
        p.set("h.flash", 0.8).unwrap_err().to_string(),
        "the sum of tier hit rates = 1.1 is out of range (0 to 1)"
    );
    assert!(p.set("frobnicate", 1.0).unwrap_err().to_string().starts_with("unknown parameter \"frobnicate\""));
    assert!(
        Params::from_toml("[workload]\nvisible = 3\n").unwrap_err().to_string().starts_with("line 2: unknown field")
    );
    assert_eq!(fmt(6.66), "6.66");
    assert_eq!(fmt(24_000.0), "24,000");
    assert_eq!(fmt(4000.0), "4000");
    assert_eq!(fmt(-1_234_567.0), "-1,234,567");
    assert_eq!(fmt(0.000_123_46), "0.0001235");
}

proptest! {
    #[test]
    fn the_breakeven_context_and_latency_are_inverse(base in 0.0f64..10.0, a in 1e-7f64..1e-3, b in 1e-7f64..1e-3, q in 1e-12f64..1e-7) {
        // At the context n* where retrieval starts to win, the largest base latency that wins is `base` again.
        let n = min_context_tokens(base, a, b, q).unwrap();
        let max_base = b * n + q * n * n - a * n;
        prop_assert!((max_base - base).abs() <= 1e-6 * base.max(1.0) || n == 0.0);
    }

    #[test]
    fn more_hit_rate_never_costs_more(h1 in 0.0f64..0.5, h2 in 0.0f64..0.5, extra in 0.0f64..0.5, l in 0.0f64..40.0) {
        let mut p = coding_agent();
        p.set("h.hbm", h1).unwrap();
        p.set("h.external", h2).unwrap();
        p.set("L.external", l).unwrap();
        p.set("t_d", 0.01).unwrap();
        p.set("p_gpu", 2.0).unwrap();
        let before = evaluate(&p, &Catalog::builtin()).unwrap();
        p.set("h.external", (h2 + extra).min(1.0 - h1)).unwrap();
        let after = evaluate(&p, &Catalog::builtin()).unwrap();
        prop_assert!(after.prefill.expected_s.unwrap() <= before.prefill.expected_s.unwrap() + 1e-12);
        prop_assert!(after.answer.cost_per_successful_answer.unwrap() <= before.answer.cost_per_successful_answer.unwrap() + 1e-12);
    }
}

#[test]
fn a_sweep_finds_the_optimum_and_the_breakeven() {
    use crate::sweep::{Axis, sweep};
    let mut p = coding_agent();
    p.set("t_d", 0.01).unwrap();
    p.set("p_gpu", 3600.0).unwrap();
    // External-tier latency 0, 10, 20, 30 s: retrieval stops beating the 18 s recompute between 10 and 20, at
    // 10 + 10 × (10 − 18) / ((10 − 18) − (20 − 18)) = 18 s.
    let axis = Axis::parse("L.external=0..30:4").unwrap();
    assert_eq!(axis.values, [0.0, 10.0, 20.0, 30.0]);
    assert_eq!(axis.path, "tiers.external.latency_s");
    let s = sweep(&p, &Catalog::builtin(), vec![axis]).unwrap();
    assert_eq!(s.objective, "cost_per_successful_answer");
    assert_eq!(s.optimum, Some(0));
    let c = s.crossings.iter().find(|c| c.what == "retrieve-vs-recompute external").unwrap();
    close(Some(c.value), 18.0);
    // Two axes: 3 × 2 points, the last axis fastest; hit rates over 1 are kept as invalid points.
    let s = sweep(
        &p,
        &Catalog::builtin(),
        vec![Axis::parse("h.hbm=0.2..0.6:3").unwrap(), Axis::parse("h.external=0.3..0.5:2").unwrap()],
    )
    .unwrap();
    let at: Vec<Vec<f64>> = s.points.iter().map(|p| p.at.clone()).collect();
    assert_eq!(at, [[0.2, 0.3], [0.2, 0.5], [0.4, 0.3], [0.4, 0.5], [0.6, 0.3], [0.6, 0.5]]);
    assert!(s.points[5].result.as_ref().unwrap_err().contains("sum of tier hit rates"));
    // The most hits (0.6, 0.3) are cheapest.
    assert_eq!(s.optimum, Some(4));
    assert!(Axis::parse("R=1..").is_err());
    assert!(Axis::parse("nope=1..2").unwrap_err().to_string().starts_with("unknown parameter"));
}

#[test]
fn sizing_follows_the_roofline_and_the_slos() {
    use crate::size::{SizeRequest, size};
    let p = Params::from_toml(
        "[workload]\nvisible_tokens = 100\nprefix_tokens = 1000\n\
         [hardware]\nmodel = \"Llama-3.1-8B\"\naccelerator = \"H100\"\n",
    )
    .unwrap();
    let request = SizeRequest { requests_per_s: 1000.0, ttft_s: 0.5, tpot_s: 0.05, max_utilization: 0.9 };
    let s = size(&p, &Catalog::builtin(), &request).unwrap();
    // Memory: (80e9 × 0.9 − 16.06e9) / ((1000 + 100) × 131,072) = 387.99 < TPOT's
    // (0.05 × 3350e9 × 0.7 − 16.06e9) / (1050 × 131,072) = 735.3: a batch of 387, bound by memory.
    assert_eq!((s.batch, s.batch_bound), (387, "memory"));
    let step = (16.06e9 + 387.0 * 1050.0 * 131_072.0) / (3350e9 * 0.7);
    close(Some(s.step_s), step);
    // Prefill S = flops(1000) / (989.4e12 × 0.5) = 0.03299; the SLO allows ρ = 2(0.5 − S)/(1 − S) = 0.966 > 0.9.
    let prefill = (1.606e13 + 2.62144e11) / (989.4e12 * 0.5);
    close(Some(s.prefill_s), prefill);
    close(Some(s.prefill.utilization), 0.9);
    // ⌈1000 × 0.03299 / 0.9⌉ = ⌈36.66⌉; ⌈1000 × 100 / (387 / step × 0.9)⌉ = ⌈8.49⌉;
    // collocated ⌈1000 × (0.03299 + 100 × step / 387) / 0.9⌉ = ⌈45.15⌉.
    assert_eq!((s.prefill.instances, s.decode.instances, s.collocated.instances), (37, 9, 46));
    assert_eq!(s.disaggregated_accelerators, 46);
    close(Some(s.decode.dollars_per_hour), 9.0 * 2.69);
    // A TTFT SLO shorter than the prefill itself cannot be met.
    let tight = SizeRequest { ttft_s: 0.02, ..request };
    assert!(
        size(&p, &Catalog::builtin(), &tight).unwrap_err().to_string().starts_with("a prefill alone takes 0.033 s")
    );
}

#[test]
fn a_given_prefill_time_calibrates_the_breakeven() {
    let mut p = coding_agent();
    p.set("P", 50_000.0).unwrap();
    p.set("tiers.external.bandwidth_gbs", 20.0).unwrap();
    p.hardware = Some(crate::params::Hardware {
        model: "Llama-3.1-70B".into(),
        accelerator: "H100".into(),
        tp: 4.0,
        ..Default::default()
    });
    let e = evaluate(&p, &Catalog::builtin()).unwrap();
    // Recomputing the 50,000-token prefix takes the given 18 s; moving it at 20 GB/s takes
    // 50,000 × 327,680 B / 20e9 B/s = 0.8192 s, so any fixed latency below 18 − 0.8192 s wins.
    close(e.breakeven["external"].max_base_latency_s, 18.0 - 0.8192);
    // The 0.9 s given for the tier is compared with the same 18 s.
    assert_eq!(e.breakeven["external"].retrieval_wins, Some(true));
}
