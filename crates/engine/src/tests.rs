//! Hand-computed expectations on small hand-built datasets.

use std::path::{Path, PathBuf};

use infertrace_query::QueryOptions;
use infertrace_schema::{
    Assumptions, CacheTier, DatasetWriter, EngineSample, Manifest, Producer, RequestRow, Status, metrics,
};

use super::*;

/// The metrics of the datasets at `dirs`, as `infertrace metrics` computes them.
pub(crate) fn compute(dirs: &[PathBuf], options: &MetricsOptions) -> Metrics {
    compute_dirs(dirs, options, &QueryOptions::default()).unwrap()
}

pub(crate) const S: i64 = 1_000_000_000;
/// An arbitrary origin, so that instants are not small numbers.
pub(crate) const T0: i64 = 1_700_000_000 * S;

fn at(seconds: f64) -> Option<i64> {
    Some(T0 + (seconds * 1e9) as i64)
}

pub(crate) fn write(dir: &Path, requests: &[RequestRow], samples: &[EngineSample]) -> PathBuf {
    let mut writer = DatasetWriter::create(dir, false).unwrap();
    for row in requests {
        writer.push_request(row).unwrap();
    }
    for row in samples {
        writer.push_sample(row).unwrap();
    }
    let manifest = Manifest::generated(
        Producer { name: "test".into(), version: "0".into() },
        Assumptions { year: None, utc_offset: "+00:00".into(), start: "1970-01-01T00:00:00Z".into(), block_size: None },
    );
    writer.finish(manifest).unwrap();
    dir.to_owned()
}

/// [`write`], then read back into memory (for [`merge`](crate::merge), which takes datasets read).
pub(crate) fn write_open(dir: &Path, requests: &[RequestRow], samples: &[EngineSample]) -> infertrace_schema::Dataset {
    infertrace_schema::Dataset::open(&write(dir, requests, samples)).unwrap()
}

fn request(id: &str, model: Option<&str>, instance: Option<&str>, status: Status) -> RequestRow {
    RequestRow {
        request_id: id.into(),
        source: "test".into(),
        model: model.map(Into::into),
        instance: instance.map(Into::into),
        status,
        ..RequestRow::default()
    }
}

/// Four requests; the comments give what each contributes.
fn rows() -> Vec<RequestRow> {
    vec![
        // ttft 1 and tpot (3 − 1) / 4 = 0.5, e2e 3 and decode 2, all derived from instants.
        RequestRow {
            arrival_time: at(0.0),
            first_token_time: at(1.0),
            last_token_time: at(3.0),
            input_tokens: Some(100),
            cached_tokens: Some(40),
            cached_tokens_gpu: Some(30),
            cached_tokens_cpu: Some(10),
            output_tokens: Some(5),
            reasoning_tokens: Some(2),
            prefix_hashes: Some(vec![1, 2, 3]),
            block_size: Some(16),
            ..request("r1", Some("m1"), Some("i0"), Status::Ok)
        },
        // ttft 3 and e2e 4 as stored (the completion instant would say 4 too).
        RequestRow {
            arrival_time: at(1.0),
            completion_time: at(5.0),
            ttft_s: Some(3.0),
            e2e_s: Some(4.0),
            input_tokens: Some(200),
            cached_tokens: Some(0),
            cached_tokens_gpu: Some(0),
            output_tokens: Some(10),
            prefix_hashes: Some(vec![1, 2, 4]),
            block_size: Some(16),
            ..request("r2", Some("m1"), Some("i0"), Status::Ok)
        },
        // A failure: e2e 0.5, no tokens out.
        RequestRow {
            arrival_time: at(2.0),
            completion_time: at(2.5),
            input_tokens: Some(50),
            output_tokens: Some(0),
            ..request("r3", Some("m2"), Some("i1"), Status::Error)
        },
        // Outcome unknown: ttft 2, e2e 6, no tpot with one output token; more reasoning than output.
        RequestRow {
            arrival_time: at(4.0),
            first_token_time: at(6.0),
            last_token_time: at(10.0),
            output_tokens: Some(1),
            reasoning_tokens: Some(4),
            prefix_hashes: Some(vec![1, 5]),
            block_size: Some(16),
            ..request("r4", None, None, Status::Unknown)
        },
    ]
}

fn samples() -> Vec<EngineSample> {
    let sample = |instance: Option<&str>, metric: &str, value| EngineSample {
        time: T0,
        source: "test".into(),
        instance: instance.map(Into::into),
        metric: metric.into(),
        value,
        ..EngineSample::default()
    };
    vec![
        sample(Some("i0"), metrics::KV_CACHE_USAGE, 0.9),
        sample(Some("i0"), metrics::KV_CACHE_USAGE, 0.2),
        sample(Some("i0"), metrics::KV_CACHE_USAGE, 0.4),
        sample(Some("i0"), metrics::REQUESTS_WAITING, 0.0),
        sample(Some("i0"), metrics::REQUESTS_WAITING, 2.0),
        sample(Some("i0"), metrics::REQUESTS_RUNNING, 3.0),
        sample(Some("i1"), metrics::KV_CACHE_USAGE, 0.5),
        sample(None, metrics::REQUESTS_WAITING, 7.0),
    ]
}

fn dataset(dir: &tempfile::TempDir) -> PathBuf {
    write(&dir.path().join("d"), &rows(), &samples())
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.unwrap_or_else(|| panic!("expected {expected}, got null"));
    assert!((actual - expected).abs() < 1e-9, "expected {expected}, got {actual}");
}

#[test]
fn overall_figures_match_hand_computation() {
    let dir = tempfile::tempdir().unwrap();
    let slo = Slo::parse("ttft=2s,e2e=5s").unwrap();
    let m = compute(&[dataset(&dir)], &MetricsOptions { slo, ..Default::default() });
    let g = &m.overall;
    assert_eq!(g.requests, 4);
    let status: Vec<_> = g.status.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    assert_eq!(status, [("ok", 2), ("error", 1), ("aborted", 0), ("timeout", 0), ("unknown", 1)]);
    close(g.success_rate, 2.0 / 3.0);

    // ttft: 1, 2, 3.
    let ttft = &g.latency[&Latency::Ttft];
    assert_eq!(ttft.count, 3);
    close(ttft.mean, 2.0);
    close(ttft.p50, 2.0);
    close(ttft.p90, 2.8);
    close(ttft.p95, 2.9);
    close(ttft.p99, 2.98);
    close(ttft.max, 3.0);
    // e2e: 0.5, 3, 4, 6; h = 3p.
    let e2e = &g.latency[&Latency::E2e];
    assert_eq!(e2e.count, 4);
    close(e2e.mean, 3.375);
    close(e2e.p50, 3.5);
    close(e2e.p90, 5.4);
    close(e2e.max, 6.0);
    assert_eq!(g.latency[&Latency::Tpot].count, 1);
    close(g.latency[&Latency::Tpot].mean, 0.5);
    assert_eq!(g.latency[&Latency::Decode].count, 2);
    close(g.latency[&Latency::Decode].mean, 3.0);
    assert_eq!(g.latency[&Latency::KvTransfer], Distribution::default());

    // Span 0 s to 10 s.
    close(g.throughput.span_s, 10.0);
    close(g.throughput.requests_per_s, 0.4);
    assert_eq!((g.throughput.input_tokens, g.throughput.output_tokens), (350, 16));
    close(g.throughput.input_tokens_per_s, 35.0);
    close(g.throughput.output_tokens_per_s, 1.6);

    // Only r1 is ok with ttft ≤ 2 and e2e ≤ 5 (r2's ttft is 3; r4's outcome is unknown).
    let goodput = g.goodput.as_ref().unwrap();
    assert_eq!(goodput.requests, 1);
    close(goodput.fraction, 0.25);
    close(goodput.requests_per_s, 0.1);

    // Rows r1 and r2 have both columns: 40 / 300; tiers: gpu 30 / 300, cpu 10 / 100, none for disk.
    assert_eq!((g.cache.total.requests, g.cache.total.input_tokens, g.cache.total.cached_tokens), (2, 300, 40));
    close(g.cache.total.hit_rate, 40.0 / 300.0);
    close(g.cache.tiers[&CacheTier::Gpu].hit_rate, 0.1);
    close(g.cache.tiers[&CacheTier::Cpu].hit_rate, 0.1);
    assert_eq!(g.cache.tiers[&CacheTier::Cpu].requests, 1);
    assert_eq!(g.cache.tiers[&CacheTier::Disk], HitRate::default());
    // Replay [1, 2, 3], [1, 2, 4], [1, 5]: hits 0 + 2 + 1 of 8 blocks, 0 + 32 + 16 tokens (none past its input),
    // over the input tokens 100 + 200 and, for r4 without them, its 2 blocks of 16.
    let reuse = &g.cache.reuse;
    assert_eq!((reuse.requests, reuse.blocks, reuse.hit_blocks, reuse.tokens, reuse.hit_tokens), (3, 8, 3, 332, 48));
    close(reuse.hit_rate, 48.0 / 332.0);

    // (2 + 4) / ((5 − 2) + 0).
    assert_eq!((g.reasoning.requests, g.reasoning.reasoning_tokens, g.reasoning.answer_tokens), (2, 6, 3));
    close(g.reasoning.multiplier, 2.0);

    // i0 kv usage 0.2, 0.4, 0.9: p95 at h = 1.9.
    let instances: Vec<_> = g.engine.keys().map(String::as_str).collect();
    assert_eq!(instances, [NULL_GROUP, "i0", "i1"]);
    let i0 = &g.engine["i0"];
    assert_eq!(i0.kv_cache_usage.count, 3);
    close(i0.kv_cache_usage.mean, 0.5);
    close(i0.kv_cache_usage.p95, 0.85);
    close(i0.kv_cache_usage.max, 0.9);
    close(i0.requests_waiting.mean, 1.0);
    assert_eq!(g.engine["i1"].requests_waiting.count, 0);
    close(g.engine[NULL_GROUP].requests_waiting.max, 7.0);
    assert!(m.groups.is_empty());
}

#[test]
fn groups_split_rows_and_attributable_samples() {
    let dir = tempfile::tempdir().unwrap();
    let data = [dataset(&dir)];
    let by_model = compute(&data, &MetricsOptions { by: Some(GroupBy::Model), ..Default::default() });
    let keys: Vec<_> = by_model.groups.keys().map(String::as_str).collect();
    assert_eq!(keys, [NULL_GROUP, "m1", "m2"]);
    let m1 = &by_model.groups["m1"];
    assert_eq!(m1.requests, 2);
    // Its own span: 0 s to 5 s.
    close(m1.throughput.span_s, 5.0);
    // r2 hits two blocks of 16 of its 200 input tokens; r1 none of its 100.
    close(m1.cache.reuse.hit_rate, 32.0 / 300.0);
    assert!(m1.goodput.is_none());
    // Samples have no model.
    assert!(m1.engine.is_empty());
    assert_eq!(by_model.groups["m2"].success_rate, Some(0.0));
    assert_eq!(by_model.groups[NULL_GROUP].success_rate, None);

    let by_instance = compute(&data, &MetricsOptions { by: Some(GroupBy::Instance), ..Default::default() });
    let i0 = &by_instance.groups["i0"];
    assert_eq!(i0.requests, 2);
    let instances: Vec<_> = i0.engine.keys().map(String::as_str).collect();
    assert_eq!(instances, ["i0"]);
    close(by_instance.groups[NULL_GROUP].engine[NULL_GROUP].requests_waiting.mean, 7.0);

    let by_status = compute(&data, &MetricsOptions { by: Some(GroupBy::Status), ..Default::default() });
    let keys: Vec<_> = by_status.groups.keys().map(String::as_str).collect();
    assert_eq!(keys, ["error", "ok", "unknown"]);
}

#[test]
fn datasets_are_taken_together() {
    let dir = tempfile::tempdir().unwrap();
    let one = dataset(&dir);
    let two = write(&dir.path().join("e"), &rows()[..1], &[]);
    let m = compute(&[one, two], &MetricsOptions::default());
    assert_eq!(m.overall.requests, 5);
    // r1 again: its three blocks all hit now.
    assert_eq!(m.overall.cache.reuse.hit_blocks, 6);
    assert!(m.overall.goodput.is_none());
}

#[test]
fn empty_datasets_give_nulls_not_nans() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(&dir.path().join("d"), &[], &[]);
    let m = compute(
        &[empty],
        &MetricsOptions { slo: Slo::parse("ttft=1s").unwrap(), by: Some(GroupBy::Model), ..Default::default() },
    );
    assert_eq!(m.overall.requests, 0);
    assert_eq!(m.overall.success_rate, None);
    assert_eq!(m.overall.throughput.span_s, None);
    assert_eq!(m.overall.goodput.as_ref().unwrap().fraction, None);
    assert!(m.groups.is_empty());
}

/// A small JSON Schema checker: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`, `$ref`.
fn check(value: &serde_json::Value, schema: &serde_json::Value, root: &serde_json::Value, at: &str) {
    use serde_json::Value;
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.strip_prefix("#/$defs/").expect("local $defs references only");
        return check(value, &root["$defs"][name], root, at);
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type at {at}"),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let ok = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
        assert!(ok, "{at}: {actual} is not one of {types:?}");
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        assert!(allowed.contains(value), "{at}: {value} not in enum");
    }
    if let Value::Object(object) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            assert!(object.contains_key(required.as_str().unwrap()), "{at}: missing {required}");
        }
        for (key, item) in object {
            let at = format!("{at}.{key}");
            match (properties.and_then(|p| p.get(key)), schema.get("additionalProperties")) {
                (Some(sub), _) => check(item, sub, root, &at),
                (None, Some(Value::Bool(false))) | (None, None) => panic!("{at} is not in the schema"),
                (None, Some(Value::Bool(true))) => {}
                (None, Some(sub)) => check(item, sub, root, &at),
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(item, sub, root, &format!("{at}[{i}]"));
        }
    }
}

/// Checks `metrics` against `schemas/metrics.schema.json`.
pub(crate) fn follows_the_schema(metrics: &Metrics) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/metrics.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    check(&serde_json::to_value(metrics).unwrap(), &schema, &schema, "$");
}

#[test]
fn json_follows_the_committed_schema() {
    let dir = tempfile::tempdir().unwrap();
    let data = [dataset(&dir)];
    let profile = crate::CostProfile {
        accelerator: Some(crate::cost::AcceleratorCost { count: 1, price_per_hour: 2.0, ..Default::default() }),
        ..Default::default()
    };
    for (by, cost) in [
        (None, None),
        (Some(GroupBy::Instance), None),
        (Some(GroupBy::WorkloadClass), None),
        (Some(GroupBy::Model), Some(profile)),
    ] {
        let options = MetricsOptions { slo: Slo::parse("ttft=2s,tpot=100ms").unwrap(), by, cost };
        follows_the_schema(&compute(&data, &options));
    }
    let empty = write(&dir.path().join("e"), &[], &[]);
    follows_the_schema(&compute(&[empty], &MetricsOptions::default()));
}

#[test]
fn ttft_under_load_and_the_split_of_request_time() {
    let dir = tempfile::tempdir().unwrap();
    let timed = |id: &str, arrival: f64, completion: Option<f64>, ttft: f64| RequestRow {
        arrival_time: at(arrival),
        completion_time: completion.and_then(at),
        ttft_s: Some(ttft),
        ..request(id, None, None, Status::Ok)
    };
    let mut r1 = timed("r1", 0.0, Some(10.0), 1.0);
    (r1.queue_s, r1.prefill_s, r1.decode_s, r1.e2e_s) = (Some(0.5), Some(1.0), Some(8.5), Some(10.0));
    let rows = [
        // Arrives to an idle server: load 0.
        r1,
        // r1 is in flight (0 ≤ 2 < 10): load 1.
        timed("r2", 2.0, Some(4.0), 2.0),
        // r1 in flight, r2 done at 4: load 1.
        timed("r3", 5.0, Some(6.0), 3.0),
        // r1 and r3 in flight at 5.5: load 2, the 2–3 bucket (r4 has no end, so it is no one's load).
        timed("r4", 5.5, None, 7.0),
        // No arrival: not bucketed.
        RequestRow { ttft_s: Some(9.0), ..request("r5", None, None, Status::Ok) },
    ];
    let data = [write(&dir.path().join("d"), &rows, &[])];
    let m = compute(&data, &MetricsOptions::default()).overall;
    let buckets: Vec<_> =
        m.ttft_under_load.iter().map(|b| (b.in_flight_min, b.in_flight_max, b.ttft.count, b.ttft.mean)).collect();
    assert_eq!(buckets, [(0, 0, 1, Some(1.0)), (1, 1, 2, Some(2.5)), (2, 3, 1, Some(7.0))]);
    // Only r1 has all four durations: 0.5 / 10, 1 / 10, 8.5 / 10.
    assert_eq!(m.time_split.requests, 1);
    close(m.time_split.queue, 0.05);
    close(m.time_split.prefill, 0.1);
    close(m.time_split.decode, 0.85);
    assert_eq!([0, 1, 3, 5, 8].map(crate::compute::load_bucket), [(0, 0), (1, 1), (2, 3), (4, 7), (8, 15)]);
}

#[test]
fn reuse_with_mixed_block_sizes_weighs_the_first_sight() {
    let dir = tempfile::tempdir().unwrap();
    let row = |id: &str, model: &str, arrival: f64, block_size: u32, hashes: &[u64]| RequestRow {
        arrival_time: at(arrival),
        block_size: Some(block_size),
        prefix_hashes: Some(hashes.to_vec()),
        ..request(id, Some(model), None, Status::Ok)
    };
    // Written out of arrival order: "late" (block size 32) is first in the file but arrives last.
    let rows = [
        row("late", "m1", 9.0, 32, &[1, 2, 5]),
        row("early", "m1", 1.0, 16, &[1, 2, 3]),
        row("mid", "m2", 5.0, 16, &[1, 4]),
    ];
    let data = [write(&dir.path().join("d"), &rows, &[])];
    let m = compute(&data, &MetricsOptions::default());
    let reuse = &m.overall.cache.reuse;
    // 8 blocks, 5 distinct hashes: 3 hit. Tokens: 3 × 32 + 5 × 16 = 176. Misses weigh the block size of the row
    // that first had the hash, by arrival: 1, 2, 3 from "early" (16 each), 4 from "mid" (16), 5 from "late" (32).
    assert_eq!((reuse.requests, reuse.blocks, reuse.hit_blocks, reuse.tokens), (3, 8, 3, 176));
    assert_eq!(reuse.hit_tokens, 176 - (4 * 16 + 32));
    // By model, m2 has one block size: the distinct hashes are counted per group (hash 1 misses in each).
    let by_model = compute(&data, &MetricsOptions { by: Some(GroupBy::Model), ..Default::default() });
    let m2 = &by_model.groups["m2"].cache.reuse;
    assert_eq!((m2.blocks, m2.hit_blocks, m2.tokens, m2.hit_tokens), (2, 0, 32, 0));
    let m1 = &by_model.groups["m1"].cache.reuse;
    assert_eq!((m1.blocks, m1.hit_blocks, m1.tokens, m1.hit_tokens), (6, 2, 144, 144 - (3 * 16 + 32)));
}

#[test]
fn reuse_counts_no_hit_past_a_requests_input() {
    let dir = tempfile::tempdir().unwrap();
    let row = |id: &str, model: &str, arrival: f64, input: u32, hashes: &[u64]| RequestRow {
        arrival_time: at(arrival),
        input_tokens: Some(input),
        block_size: Some(16),
        prefix_hashes: Some(hashes.to_vec()),
        ..request(id, Some(model), None, Status::Ok)
    };
    // Written out of arrival order; blocks of 16 tokens, the last one partly filled.
    let rows = [
        row("e", "m2", 4.0, 20, &[1, 2, 3, 4]),
        row("b", "m1", 1.0, 44, &[1, 2, 3]),
        row("d", "m2", 3.0, 20, &[1, 2]),
        row("a", "m1", 0.0, 40, &[1, 2, 3]),
        row("c", "m1", 2.0, 60, &[1, 2, 3, 4]),
    ];
    let data = [write(&dir.path().join("d"), &rows, &[])];
    let m = compute(&data, &MetricsOptions::default());
    let reuse = &m.overall.cache.reuse;
    // By arrival: a hits nothing; b all 3 blocks, 48 tokens capped at its 44; c 3 blocks, 48 of 60; d both blocks, 32
    // capped at 20; e all 4 (more blocks than its input needs), 64 capped at 20. Were b replayed before a, a would
    // hit 40 and b nothing: 128, not 132.
    assert_eq!((reuse.requests, reuse.blocks, reuse.hit_blocks), (5, 16, 12));
    assert_eq!((reuse.tokens, reuse.hit_tokens), (40 + 44 + 60 + 20 + 20, 44 + 48 + 20 + 20));
    // Each model its own cache: m1 as above; in m2, d misses and e hits 1 and 2, 32 capped at 20.
    let by_model = compute(&data, &MetricsOptions { by: Some(GroupBy::Model), ..Default::default() });
    let m1 = &by_model.groups["m1"].cache.reuse;
    assert_eq!((m1.blocks, m1.hit_blocks, m1.tokens, m1.hit_tokens), (10, 6, 144, 92));
    let m2 = &by_model.groups["m2"].cache.reuse;
    assert_eq!((m2.blocks, m2.hit_blocks, m2.tokens, m2.hit_tokens), (6, 2, 40, 20));

    // Above, hash 3 holds 8 tokens of a and 12 of b: which came first matters, and the query engine finds it. Here
    // every hash holds the same tokens wherever it is (as where a partly filled block's hash covers its tokens),
    // and the distinct hashes suffice: a misses; b hits 3 blocks, 40 tokens (its input); c hits 1 and 2, 32; e all
    // 4, 16 + 16 + 16 + 12 = 60, its input.
    let rows = [
        row("e", "m1", 3.0, 60, &[1, 2, 4, 5]),
        row("a", "m1", 0.0, 40, &[1, 2, 3]),
        row("b", "m1", 1.0, 40, &[1, 2, 3]),
        row("c", "m1", 2.0, 60, &[1, 2, 4, 5]),
    ];
    let data = [write(&dir.path().join("same"), &rows, &[])];
    let reuse = compute(&data, &MetricsOptions::default()).overall.cache.reuse;
    assert_eq!((reuse.blocks, reuse.hit_blocks, reuse.tokens, reuse.hit_tokens), (14, 9, 200, 40 + 32 + 60));
}

#[test]
fn reuse_by_group_counts_each_groups_hashes_apart() {
    let dir = tempfile::tempdir().unwrap();
    let row = |id: &str, instance: &str, arrival: f64, hashes: &[u64]| RequestRow {
        arrival_time: at(arrival),
        block_size: Some(16),
        prefix_hashes: Some(hashes.to_vec()),
        ..request(id, None, Some(instance), Status::Ok)
    };
    let rows = [row("a", "i0", 0.0, &[7, 8]), row("b", "i1", 1.0, &[7, 8, 9]), row("c", "i0", 2.0, &[7, 8, 10])];
    let data = [write(&dir.path().join("d"), &rows, &[])];
    let by_instance = compute(&data, &MetricsOptions { by: Some(GroupBy::Instance), ..Default::default() });
    // i0 sees 7 and 8 twice: 2 of 5 blocks hit; i1 sees its three once.
    let i0 = &by_instance.groups["i0"].cache.reuse;
    assert_eq!((i0.requests, i0.blocks, i0.hit_blocks, i0.hit_tokens), (2, 5, 2, 32));
    let i1 = &by_instance.groups["i1"].cache.reuse;
    assert_eq!((i1.requests, i1.blocks, i1.hit_blocks), (1, 3, 0));
    // Overall, 7 and 8 hit in b and c: 4 of 8.
    assert_eq!(by_instance.overall.cache.reuse.hit_blocks, 4);
}
