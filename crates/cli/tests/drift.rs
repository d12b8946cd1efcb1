//! Logs of releases, forks and wrappers this version has not seen (issue #43): fields read by name wherever they
//! stand, unknown fields counted by name, envelopes found rather than enumerated. Expected values are read by hand
//! from the lines (`testdata/expected/` for the real excerpts).

mod common;

use std::collections::BTreeMap;

use infertrace_schema::{Dataset, DriftSummary, Table as _};

/// Samples by source line, metric → value.
fn samples(dataset: &Dataset) -> BTreeMap<u64, BTreeMap<String, f64>> {
    let mut by_line: BTreeMap<u64, BTreeMap<String, f64>> = BTreeMap::new();
    for row in infertrace_schema::EngineSample::from_batch(&dataset.samples).unwrap() {
        by_line.entry(row.source_line.unwrap()).or_default().insert(row.metric.to_string(), row.value);
    }
    by_line
}

fn normalize(relative: &str) -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let input = common::testdata().join(relative);
    common::pin_modified(&input);
    common::run(&[input], &dir.path().join("out"));
    let dataset = Dataset::open(&dir.path().join("out")).unwrap();
    (dir, dataset)
}

fn drift(dataset: &Dataset) -> DriftSummary {
    dataset.manifest.inputs[0].drift.clone().expect("log adapters report drift")
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(k, n)| (k.to_owned(), n)).collect()
}

fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

#[test]
fn vllm_fields_appended_inserted_and_enveloped_are_read() {
    let (_dir, ds) = normalize("vllm/shapes-drift/issue-43-envelopes-and-new-fields.log");
    let by_line = samples(&ds);
    // Line 2: `MFU: 11.3 TF/s/GPU 772.8 GB/s/GPU` appended after the prefix cache hit rate.
    assert_eq!(
        by_line[&2],
        values(&[
            ("prompt_throughput_tps", 0.0),
            ("generation_throughput_tps", 12.3),
            ("requests_running", 2.0),
            ("requests_waiting", 1.0),
            ("kv_cache_usage", 0.015),
            ("prefix_cache_hit_rate", 0.0),
        ])
    );
    // Line 3: `Max iteration time` and `Avg time/tok:` inserted in the middle of a 0.3-era line.
    assert_eq!(
        by_line[&3],
        values(&[
            ("prompt_throughput_tps", 382.6),
            ("generation_throughput_tps", 118.5),
            ("requests_running", 35.0),
            ("requests_swapped", 0.0),
            ("requests_waiting", 115.0),
            ("kv_cache_usage", 0.99),
            ("cpu_kv_cache_usage", 0.0),
        ])
    );
    // Lines 5 to 10: `Running: 3 reqs` … `Running: 8 reqs`, each in another envelope.
    for (line, running) in (5..=10).zip(3..) {
        assert_eq!(by_line[&line]["requests_running"], f64::from(running), "line {line}");
    }
    assert_eq!(by_line[&9]["requests_waiting"], 3.0, "Frobnication rate is skipped, not the line");
    // Line 4: KServe's re-emitted request line, with a new SamplingParams parameter and a new field.
    let requests = infertrace_schema::RequestRow::from_batch(&ds.requests).unwrap();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.request_id, "chatcmpl-k1");
    assert_eq!((request.max_tokens, request.input_tokens), (Some(4082), Some(5)));
    // `2025-11-20 10:00:10.901`, the re-emitter's local time (`--utc-offset` +00:00).
    assert_eq!(request.arrival_time, Some(1_763_632_810_901_000_000));
    let drift = drift(&ds);
    assert_eq!(
        drift.unknown_fields,
        counts(&[
            ("Avg time/tok", 1),
            ("Frobnication rate", 1),
            ("MFU", 1),
            ("Max iteration time", 1),
            ("brand_new_field", 1),
        ])
    );
    for envelope in [
        "re-emitted",
        "lost-escapes",
        "colour-codes",
        "docker-desktop",
        "compose",
        "docker-timestamps",
        "custom-prefix",
    ] {
        assert_eq!(drift.envelopes.get(envelope), Some(&1), "{envelope}: {:?}", drift.envelopes);
    }
    // The re-emitted line and the docker-timestamped one are timed by their prefixes; the rest by vLLM's stamp.
    assert_eq!(drift.times_from, counts(&[("prefix", 2), ("record", 7)]));
    assert_eq!(drift.lines_used, Some(9));
}

#[test]
fn sglang_custom_formatters_and_new_keys_are_read() {
    let (_dir, ds) = normalize("sglang/shapes-drift/issue-43-custom-formatter-and-new-keys.log");
    let by_line = samples(&ds);
    assert_eq!(
        by_line[&2],
        values(&[
            ("requests_running", 32.0),
            ("kv_cache_tokens", 12345.0),
            ("kv_cache_usage", 0.12),
            ("generation_throughput_tps", 1234.56),
            ("requests_waiting", 0.0),
        ])
    );
    assert_eq!(by_line[&3]["requests_running"], 30.0);
    assert_eq!(by_line[&4]["requests_running"], 3.0);
    assert_eq!(by_line[&4]["kv_cache_tokens"], 10.0, "read past the unknown key before it");
    let rows = infertrace_schema::EngineSample::from_batch(&ds.samples).unwrap();
    let instance = |line: u64| rows.iter().find(|r| r.source_line == Some(line)).unwrap().instance.clone();
    assert_eq!(instance(2).as_deref(), Some("DP3 TP3 EP3"));
    assert_eq!(instance(3).as_deref(), Some("DP15 TP15 EP15"), "padded bracket");
    // `2025-10-20 03:02:22` from the formatter's own date.
    assert_eq!(rows[0].time, 1_760_929_342_000_000_000);
    let drift = drift(&ds);
    assert_eq!(drift.unknown_fields, counts(&[("another new key (x/s)", 1), ("brand-new-key", 1)]));
    assert_eq!(drift.envelopes, counts(&[("custom-formatter", 2), ("plain", 1)]));
    assert_eq!(ds.manifest.inputs[0].diagnostics.total, 1, "the comment line only");
}

#[test]
fn real_excerpts_read_as_their_hand_read_values() {
    // vllm#30738: `… Prefix cache hit rate: 0.0%, MFU: 6.6 TF/s/GPU 105.0 GB/s/GPU` (expected/vllm/vllm-30738…).
    let (_d, ds) = normalize("vllm/0.13-dev/vllm-30738_v0.13-dev-guess_plain_engine000-MFU.log");
    assert_eq!(
        samples(&ds)[&5],
        values(&[
            ("prompt_throughput_tps", 3599.9),
            ("generation_throughput_tps", 199.6),
            ("requests_running", 6.0),
            ("requests_waiting", 0.0),
            ("kv_cache_usage", 0.001),
            ("prefix_cache_hit_rate", 0.0),
        ])
    );
    assert_eq!(drift(&ds).unknown_fields, counts(&[("MFU", 1)]));

    // kserve#4470: `… kserve.trace Received request chatcmpl-017e…: … max_tokens=4082 …`, then vLLM's own
    // `Added request` for the same id: one request.
    let (_d, ds) = normalize("vllm/0.8.5/kserve-4470_v0.8.5-guess_kserve-trace_received-added-request_stats.log");
    let requests = infertrace_schema::RequestRow::from_batch(&ds.requests).unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].request_id, "chatcmpl-017ee87d69ed40e9b67198e5c5e0ee7d");
    assert_eq!(requests[0].max_tokens, Some(4082));
    assert_eq!(drift(&ds).envelopes.get("re-emitted"), Some(&1));

    // sglang-omni#712: `2026-06-07 10:59:31,659 [INFO] sglang.srt.managers.scheduler_metrics_mixin: Decode batch,
    // #running-req: 1, #token: 227, token usage: 0.00, cuda graph: True, gen throughput (token/s): 126.29, …`.
    let (_d, ds) = normalize("sglang/custom-formatter/sglang-omni-712_omni-2026-06_custom-formatter-loggername.log");
    let by_line = samples(&ds);
    assert_eq!(
        by_line[&5],
        values(&[
            ("requests_running", 1.0),
            ("kv_cache_tokens", 227.0),
            ("kv_cache_usage", 0.0),
            ("generation_throughput_tps", 126.29),
            ("requests_waiting", 0.0),
        ])
    );
    assert_eq!(by_line.len(), 5, "five batch lines");
    let rows = infertrace_schema::EngineSample::from_batch(&ds.samples).unwrap();
    assert_eq!(rows[0].time, 1_780_829_971_659_000_000, "2026-06-07 10:59:31.659");
    assert_eq!(drift(&ds).envelopes, counts(&[("custom-formatter", 5), ("none", 2)]));
}

#[test]
fn explain_names_envelopes_times_and_unknown_fields() {
    let (_dir, ds) = normalize("sglang/shapes-drift/issue-43-custom-formatter-and-new-keys.log");
    let text = infertrace::summary::explain(&ds.manifest);
    let expected = "\
../../testdata/sglang/shapes-drift/issue-43-custom-formatter-and-new-keys.log: sglang-log (one generation)
  lines      4 read, 3 made rows (75.0 %), 1 diagnostics; the rest carry no data
  envelopes  custom-formatter ×2, plain ×1
  times from prefix ×2, record ×1
  clock      assumed-offset
  unknown    another new key (x/s) ×1, brand-new-key ×1
  diagnostic not-a-record ×1 (first at line 1: not an SGLang log record)
";
    assert_eq!(text, expected);
}
