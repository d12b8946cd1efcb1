use infertrace_adapter::{CollectSink, ParseOptions};
use infertrace_schema::{ClockDomain, Status, metrics};
use serde_json::json;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::*;

fn parse_with(text: &str, source_file: &str, options: ParseOptions) -> (CollectSink, ParseReport) {
    let mut sink = CollectSink::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let report = LlmServingSim.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
    (sink, report)
}

fn parse(text: &str, source_file: &str) -> (CollectSink, ParseReport) {
    parse_with(text, source_file, ParseOptions::default())
}

fn found(sink: &CollectSink) -> Vec<(u64, &str, &str)> {
    sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect()
}

const S: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

const BENCH: &str = r#"{"request_id": "bench-0", "input_toks": 10, "output_toks": 5, "arrival_time": 1000.5, "queued_ts": 100.25, "scheduled_ts": 100.5, "first_token_ts": 101.0, "last_token_ts": 103.0}
{"request_id": "bench-1", "input_toks": 8, "output_toks": 1, "arrival_time": 1001.0, "queued_ts": 100.8, "scheduled_ts": 100.8, "first_token_ts": 101.3, "last_token_ts": 101.3}
{"request_id": "bench-2", "input_toks": 7, "output_toks": 3, "arrival_time": null, "queued_ts": null, "scheduled_ts": null, "first_token_ts": null, "last_token_ts": null}
{"request_id": "bench-3", "input_toks": 1, "output_toks": 2, "arrival_time": 1002.0, "queued_ts": 101.75, "scheduled_ts": 102.0, "first_token_ts": 101.875, "last_token_ts": 102.5}
"#;

#[test]
fn bench_requests_are_aligned_on_the_first_row_and_timed_on_the_monotonic_clock() {
    let (sink, report) = parse(BENCH, "run/vllm_requests.jsonl");
    assert_eq!(report.format_version.as_deref(), Some("bench-requests"));
    assert_eq!(report.clock_domain, ClockDomain::Utc);
    assert_eq!(found(&sink), [(4, "inconsistent", "stamps out of order; left empty: prefill_s")]);
    let r = &sink.requests;
    // Offset = 1000.5 - 100.25 = 900.25 s: bench-0 is queued at its frontend arrival, 1000.5 s.
    assert_eq!(r[0].request_id, "bench-0");
    assert_eq!(r[0].arrival_time, Some(1000 * S + 500 * MS));
    assert_eq!(r[0].scheduled_time, Some(1000 * S + 750 * MS));
    assert_eq!(r[0].first_token_time, Some(1001 * S + 250 * MS));
    assert_eq!(r[0].last_token_time, Some(1003 * S + 250 * MS));
    assert_eq!(
        (r[0].queue_s, r[0].prefill_s, r[0].ttft_s, r[0].decode_s, r[0].e2e_s, r[0].tpot_s),
        (Some(0.25), Some(0.5), Some(0.75), Some(2.0), Some(2.75), Some(0.5)),
        "tpot = 2 s over 4 tokens after the first"
    );
    assert_eq!((r[0].input_tokens, r[0].output_tokens, r[0].status), (Some(10), Some(5), Status::Ok));
    // bench-1 is queued at 100.8 + 900.25 = 1001.05 s, 50 ms after its frontend arrival; one output token, no TPOT.
    assert_eq!(r[1].arrival_time, Some(1001 * S + 50 * MS));
    assert_eq!((r[1].ttft_s, r[1].tpot_s), (Some(0.5), None));
    // bench-2: vLLM returned no metrics.
    assert_eq!((r[2].arrival_time, r[2].ttft_s, r[2].status), (None, None, Status::Unknown));
    assert_eq!(r[2].input_tokens, Some(7));
    // bench-3: the first token before the scheduling stamp; the other durations stand.
    assert_eq!((r[3].prefill_s, r[3].ttft_s, r[3].status), (None, Some(0.125), Status::Unknown));
    assert_eq!(r[3].queue_s, Some(0.25));

    let alignment = &report.details["clock_alignment"];
    assert_eq!(alignment["anchor_line"], 1);
    assert_eq!(alignment["anchor_request_id"], "bench-0");
    assert_eq!(alignment["monotonic_to_epoch_offset_s"], 900.25);
    assert_eq!(alignment["rows_queued_before_arrival"], 0);
    // Delays: 0, 50 ms and 0 (bench-3: 101.75 + 900.25 = 1002.0).
    assert_eq!(alignment["frontend_to_queue_s"]["min"], 0.0);
    assert_eq!(alignment["frontend_to_queue_s"]["max"], 0.05);
    let mean = alignment["frontend_to_queue_s"]["mean"].as_f64().unwrap();
    assert!((mean - 0.05 / 3.0).abs() < 1e-12, "{mean}");
    assert_eq!(report.details["requests_without_timing"], 1);
}

#[test]
fn rows_before_the_anchor_get_durations_only_and_early_queues_are_counted() {
    let text = r#"{"request_id": "a", "input_toks": 1, "output_toks": 1, "arrival_time": null, "queued_ts": 5.0, "scheduled_ts": 5.5, "first_token_ts": 6.0, "last_token_ts": 6.0}
{"request_id": "b", "input_toks": 1, "output_toks": 1, "arrival_time": 100.0, "queued_ts": 10.0, "scheduled_ts": 10.0, "first_token_ts": 11.0, "last_token_ts": 11.0}
{"request_id": "c", "input_toks": 1, "output_toks": 1, "arrival_time": 101.0, "queued_ts": 10.5, "scheduled_ts": 10.5, "first_token_ts": 11.0, "last_token_ts": 11.0}
"#;
    let (sink, report) = parse(text, "r.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!((sink.requests[0].arrival_time, sink.requests[0].ttft_s), (None, Some(1.0)));
    assert_eq!(sink.requests[0].status, Status::Ok);
    // Offset 90 s from "b"; "c" is queued at 100.5 s, half a second before its frontend arrival.
    assert_eq!(sink.requests[2].arrival_time, Some(100 * S + 500 * MS));
    assert_eq!(report.details["requests_before_alignment"], 1);
    assert_eq!(report.details["clock_alignment"]["rows_queued_before_arrival"], 1);
    assert_eq!(report.details["clock_alignment"]["frontend_to_queue_s"]["min"], -0.5);
}

#[test]
fn workload_rows_hash_token_ids_and_never_copy_them() {
    let ids: Vec<u32> = (0..20).collect();
    let id_list = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let text = format!(
        "{{\"input_toks\": 20, \"output_toks\": 2, \"arrival_time_ns\": 1500, \"input_tok_ids\": [{id_list}], \"output_tok_ids\": [7, 8]}}\n\
         {{\"input_toks\": 3, \"output_toks\": 1, \"arrival_time_ns\": 2500, \"input_tok_ids\": [1, 2], \"output_tok_ids\": [9, 9]}}\n\
         {{\"input_toks\": 4, \"output_toks\": 4}}\n\
         {{\"sub_requests\": [{{\"input_toks\": 1}}], \"tool_duration_ns\": 5}}\n\
         {{\"input_toks\": \"x\"}}\n"
    );
    let start = 1_700_000_000 * S;
    let (sink, report) =
        parse_with(&text, "w/sharegpt.jsonl", ParseOptions { start_ns: start, ..ParseOptions::default() });
    assert_eq!(report.format_version.as_deref(), Some("workload"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert_eq!(
        found(&sink),
        [
            (2, "inconsistent", "input_tok_ids has a different length than input_toks"),
            (2, "inconsistent", "output_tok_ids has a different length than output_toks"),
            (3, "missing-field", "missing arrival_time_ns"),
            (4, "malformed-record", "agentic session rows (sub_requests) are not read"),
            (5, "malformed-json", "a field has the wrong type or an out-of-range value (column 18)"),
        ]
    );
    let r = &sink.requests;
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].request_id, "sharegpt:1");
    assert_eq!(r[0].arrival_time, Some(start + 1500));
    assert_eq!((r[0].input_tokens, r[0].output_tokens, r[0].status), (Some(20), Some(2), Status::Unknown));
    // One full 16-token block: xxh3 of its ids as little-endian u32, seed 0. The last 4 ids are a partial block.
    let block: Vec<u8> = ids[..16].iter().flat_map(|id| id.to_le_bytes()).collect();
    assert_eq!(r[0].prefix_hashes, Some(vec![xxh3_64_with_seed(&block, 0)]));
    assert_eq!(r[0].block_size, Some(16));
    // Fewer than 16 ids: no full block, no hashes.
    assert_eq!((r[1].prefix_hashes.clone(), r[1].block_size), (None, None));
    assert_eq!(r[2].arrival_time, None);
    assert_eq!(report.details["block_size"], 16);
    assert_eq!(report.details["rows_without_token_ids"], 1);
    assert_eq!(report.details["session_rows_skipped"], 1);
}

const TIMESERIES: &str = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct
1.0,9069.0,166.0,9,0,0.0
2.0,0.0,1.0,0,0,0.0
3.0,1,2,3,4,13.22
x,1,2,3,4,5
4.0,a,2,3,4,5
";

#[test]
fn timeseries_rows_become_canonical_samples_from_the_start() {
    let start = 1_777_142_838 * S;
    let (sink, report) =
        parse_with(TIMESERIES, "vllm_timeseries.csv", ParseOptions { start_ns: start, ..ParseOptions::default() });
    assert_eq!(report.format_version.as_deref(), Some("bench-timeseries"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert_eq!(
        found(&sink),
        [
            (5, "invalid-value", "t is not a non-negative number of seconds"),
            (6, "invalid-value", "prompt_throughput is not a number")
        ]
    );
    let samples: Vec<_> =
        sink.samples.iter().map(|s| (s.source_line.unwrap(), (s.time - start) / MS, &*s.metric, s.value)).collect();
    assert_eq!(
        samples,
        [
            // Line 2: 0 % KV usage with 9 requests running is the stat logger's old bug: withheld.
            (2, 1000, metrics::PROMPT_THROUGHPUT_TPS, 9069.0),
            (2, 1000, metrics::GENERATION_THROUGHPUT_TPS, 166.0),
            (2, 1000, metrics::REQUESTS_RUNNING, 9.0),
            (2, 1000, metrics::REQUESTS_WAITING, 0.0),
            // Line 3: idle, so 0 % is plausible and kept.
            (3, 2000, metrics::PROMPT_THROUGHPUT_TPS, 0.0),
            (3, 2000, metrics::GENERATION_THROUGHPUT_TPS, 1.0),
            (3, 2000, metrics::REQUESTS_RUNNING, 0.0),
            (3, 2000, metrics::REQUESTS_WAITING, 0.0),
            (3, 2000, metrics::KV_CACHE_USAGE, 0.0),
            (4, 3000, metrics::PROMPT_THROUGHPUT_TPS, 1.0),
            (4, 3000, metrics::GENERATION_THROUGHPUT_TPS, 2.0),
            (4, 3000, metrics::REQUESTS_RUNNING, 3.0),
            (4, 3000, metrics::REQUESTS_WAITING, 4.0),
            (4, 3000, metrics::KV_CACHE_USAGE, 0.1322),
            (6, 4000, metrics::GENERATION_THROUGHPUT_TPS, 2.0),
            (6, 4000, metrics::REQUESTS_RUNNING, 3.0),
            (6, 4000, metrics::REQUESTS_WAITING, 4.0),
            (6, 4000, metrics::KV_CACHE_USAGE, 0.05),
        ]
    );
    assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)));
    assert_eq!(report.details["kv_cache_pct_withheld"], 1);
    assert!(!report.details.contains_key("unmapped_columns"));
}

#[test]
fn the_detailed_timeseries_maps_preemptions_and_lists_the_split_throughputs() {
    let text = "t,prompt_throughput,prompt_compute_throughput,prompt_cached_throughput,gen_throughput,running,waiting,preempted,kv_cache_pct\n\
                1.0,100.0,60.0,40.0,5.0,2,0,1,3.5\n";
    let (sink, report) = parse(text, "timeseries.csv");
    assert_eq!(sink.diagnostics, []);
    let metrics: Vec<_> = sink.samples.iter().map(|s| (&*s.metric, s.value)).collect();
    assert_eq!(
        metrics,
        [
            (metrics::PROMPT_THROUGHPUT_TPS, 100.0),
            (metrics::GENERATION_THROUGHPUT_TPS, 5.0),
            (metrics::REQUESTS_RUNNING, 2.0),
            (metrics::REQUESTS_WAITING, 0.0),
            (metrics::PREEMPTIONS, 1.0),
            (metrics::KV_CACHE_USAGE, 0.035),
        ]
    );
    assert_eq!(report.details["unmapped_columns"], json!(["prompt_compute_throughput", "prompt_cached_throughput"]));
}

#[test]
fn simulator_output_rows_take_their_times_from_the_arrival() {
    let text = "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\n\
                0,0,meta-llama/Llama-3.1-8B,2358,531,46926808,14602802369,14555875561,82945408,102441621,27270630,\"[11506465, 11506529]\"\n\
                1,7,meta-llama/Llama-3.1-8B,10,2,100,300,150,0,50,10,\"[10]\"\n\
                0,8,m,x,2,100,300,200,0,50,10,\"[10\n";
    let (sink, report) = parse(text, "outputs_sim.csv");
    assert_eq!(report.format_version.as_deref(), Some("sim-output"));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert_eq!(
        found(&sink),
        [
            (3, "inconsistent", "latency differs from end_time - arrival"),
            (4, "malformed-csv", "a quoted field is not closed")
        ]
    );
    let r = &sink.requests[0];
    assert_eq!((r.request_id.as_str(), r.instance.as_deref()), ("0", Some("0")));
    assert_eq!(r.model.as_deref(), Some("meta-llama/Llama-3.1-8B"));
    assert_eq!((r.input_tokens, r.output_tokens, r.status), (Some(2358), Some(531), Status::Ok));
    assert_eq!(r.arrival_time, Some(46_926_808));
    assert_eq!(r.scheduled_time, Some(46_926_808 + 82_945_408));
    assert_eq!(r.first_token_time, Some(46_926_808 + 102_441_621));
    assert_eq!(r.last_token_time, Some(14_602_802_369));
    assert_eq!(
        (r.queue_s, r.ttft_s, r.tpot_s, r.e2e_s),
        (Some(0.082_945_408), Some(0.102_441_621), Some(0.027_270_63), Some(14.555_875_561))
    );
    assert_eq!(sink.requests[1].instance.as_deref(), Some("1"));
    assert_eq!(sink.requests.len(), 2);
}

const META_PRO6000: &str = r#"{
  "schema_version": 1,
  "model": "meta-llama/Llama-3.1-8B",
  "vllm_version": "0.19.0",
  "engine_kwargs": {
    "model": "meta-llama/Llama-3.1-8B",
    "tensor_parallel_size": 1,
    "max_model_len": null,
    "seed": 42
  },
  "dataset_path": "workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl",
  "dataset_hash": "05e48b32da530d4a3dd77f3d47c6fe694ac8308d611aa088e38bb10fba2b3b3a",
  "num_requests": 300,
  "started_at": "2026-04-25T18:47:18.273385Z",
  "tick_seconds": 1.0,
  "kv_cache": {"num_gpu_blocks": 2588, "block_size": 16, "nested": {"x": 1}},
  "resolved_config": {"cache_config": {"block_size": 16}, "model_config": "CANARY-unread"}
}"#;

#[test]
fn meta_json_becomes_details_and_no_rows() {
    let (sink, report) = parse(META_PRO6000, "vllm_meta.json");
    assert_eq!(sink, CollectSink::default(), "details only");
    assert_eq!(report.format_version.as_deref(), Some("bench-meta"));
    assert_eq!(report.lines, 18);
    let expected = json!({
        "schema_version": 1,
        "model": "meta-llama/Llama-3.1-8B",
        "vllm_version": "0.19.0",
        "engine_kwargs": {"model": "meta-llama/Llama-3.1-8B", "tensor_parallel_size": 1, "seed": 42},
        "dataset_path": "sharegpt-llama-3.1-8b-300-sps10.jsonl",
        "dataset_hash": "05e48b32da530d4a3dd77f3d47c6fe694ac8308d611aa088e38bb10fba2b3b3a",
        "num_requests": 300,
        "started_at": "2026-04-25T18:47:18.273385Z",
        "tick_seconds": 1.0,
        "kv_cache": {"num_gpu_blocks": 2588, "block_size": 16},
    });
    assert_eq!(serde_json::to_value(&report.details).unwrap(), expected);
}

#[test]
fn a_broken_meta_json_is_one_diagnostic_and_every_line_is_counted() {
    let (sink, report) = parse("{\n  \"model\": \"m\",\n  \"num_requests\": \n}\n", "meta.json");
    assert_eq!(found(&sink), [(4, "malformed-json", "invalid JSON syntax at column 1")]);
    assert_eq!(report.lines, 4);
    assert!(report.details.is_empty());
}

#[test]
fn canary_text_never_reaches_rows_details_or_diagnostics() {
    let canary = "CANARY-user-prompt";
    let inputs = [
        format!("{{\"input_toks\": \"{canary}\", \"output_toks\": 1, \"arrival_time_ns\": 1}}\n"),
        format!("{{\"request_id\": \"r\", \"input_toks\": 1, \"output_toks\": 1, \"arrival_time\": \"{canary}\"}}\n"),
        format!("t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n1.0,{canary},1,1,1,1\n"),
        format!(
            "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\n\
             0,1,m,{canary},1,{canary},3,3,0,1,1,\"[{canary}]\"\n"
        ),
        META_PRO6000.replace("CANARY-unread", canary),
        format!("{{\n \"model\": {canary}\n}}"),
    ];
    for text in &inputs {
        let (sink, report) = parse(text, "x.jsonl");
        let everything = format!("{:?}{:?}{:?}", sink, report.details, report.format_version);
        assert!(!everything.contains(canary), "{everything}");
    }
}

#[test]
fn detection_claims_each_generation_and_nothing_else() {
    let workload =
        r#"{"input_toks": 2358, "output_toks": 531, "arrival_time_ns": 46926808, "input_tok_ids": [5971, 2927"#;
    let yes: &[&[u8]] = &[
        BENCH.as_bytes(),
        workload.as_bytes(),
        TIMESERIES.as_bytes(),
        b"t,prompt_throughput,prompt_compute_throughput,prompt_cached_throughput,gen_throughput,running,waiting,preempted,kv_cache_pct\n",
        b"instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\r\n0,",
        META_PRO6000.as_bytes(),
    ];
    for head in yes {
        assert_eq!(LlmServingSim.detect(head), Some(Confidence::High), "{}", String::from_utf8_lossy(head));
    }
    let no: &[&[u8]] = &[
        b"{\n    \"num_nodes\": 1,\n    \"link_bw\": 16,\n    \"nodes\": []\n}",
        br#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}"#,
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n",
        b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
        br#"{"date": "20240101-000000", "duration": 1.0, "completed": 3, "ttfts": [0.1]}"#,
        b"",
    ];
    for head in no {
        assert_eq!(LlmServingSim.detect(head), None, "{}", String::from_utf8_lossy(head));
    }
}

#[test]
fn an_unknown_csv_is_reported_line_by_line() {
    let (sink, report) = parse("a,b\n1,2\n", "x.csv");
    assert_eq!(
        found(&sink),
        [
            (1, "missing-field", "no LLMServingSim header (t,prompt_throughput,… or instance id,request id,…)"),
            (2, "unrecognized-line", "not an LLMServingSim CSV")
        ]
    );
    assert_eq!(report.format_version, None);
}

/// One file beside the input, by name.
#[derive(Debug)]
struct OneSidecar(&'static str, &'static str);

impl infertrace_adapter::Sidecars for OneSidecar {
    fn read(&self, relative: &str) -> Option<Vec<u8>> {
        (relative == self.0).then(|| self.1.as_bytes().to_vec())
    }
}

#[test]
fn simulated_rows_have_their_own_source_and_the_run_clock_when_its_meta_is_beside() {
    let sim = "instance id,request id,model,input,output,arrival,end_time,latency,queuing_delay,TTFT,TPOT,ITL\n\
               0,0,meta-llama/Llama-3.1-8B,2358,531,46926808,14602802369,14555875561,82945408,102441621,27270630,\"[1]\"\n";
    let meta = r#"{"model": "meta-llama/Llama-3.1-8B", "started_at": "2026-04-25T18:47:18.273385Z"}"#;
    for (sidecar, name) in [("vllm_meta.json", "flattened"), ("../vllm/meta.json", "as the bench lays it out")] {
        let options = ParseOptions::default();
        let sidecars = OneSidecar(sidecar, meta);
        let ctx = ParseContext {
            source_file: "outputs/sim.csv",
            options: &options,
            modified: None,
            sidecars: Some(&sidecars),
        };
        let mut sink = CollectSink::default();
        let report = LlmServingSim.parse(&mut sim.as_bytes(), &ctx, &mut sink).unwrap();
        let row = &sink.requests[0];
        assert_eq!(row.source, "llmservingsim-sim", "{name}");
        // 2026-04-25T18:47:18.273385Z is 1,777,142,838.273385 s after the epoch; the arrival is 46,926,808 ns later.
        assert_eq!(row.arrival_time, Some(1_777_142_838_273_385_000 + 46_926_808), "{name}");
        assert_eq!(row.last_token_time, Some(1_777_142_838_273_385_000 + 14_602_802_369), "{name}");
        assert_eq!(report.clock_domain, ClockDomain::Utc, "{name}");
        assert_eq!(
            report.details["clock_alignment"],
            json!({ "from": sidecar, "started_at": "2026-04-25T18:47:18.273385Z" }),
            "{name}"
        );
    }
    // Without it, the simulator's own clock from --start.
    let (sink, report) = parse(sim, "outputs/sim.csv");
    assert_eq!(sink.requests[0].arrival_time, Some(46_926_808));
    assert_eq!(report.clock_domain, ClockDomain::Relative);
    assert!(!report.details.contains_key("clock_alignment"));
}

#[test]
fn measured_simulated_and_planned_rows_are_told_apart_by_source() {
    use infertrace_schema::SourceKind;
    assert_eq!(SourceKind::of(LlmServingSim::MEASURED), SourceKind::Measured);
    assert_eq!(SourceKind::of(LlmServingSim::SIMULATED), SourceKind::Simulated);
    assert_eq!(SourceKind::of(LlmServingSim::WORKLOAD), SourceKind::Synthetic);
    let requests = r#"{"request_id": "bench-0", "input_toks": 10, "output_toks": 2, "arrival_time": 1777142838.338653, "queued_ts": 1.0, "scheduled_ts": 1.5, "first_token_ts": 2.0, "last_token_ts": 3.0}"#;
    assert_eq!(parse(requests, "vllm/requests.jsonl").0.requests[0].source, "llmservingsim-vllm");
    let workload = r#"{"input_toks": 2, "output_toks": 1, "arrival_time_ns": 5}"#;
    assert_eq!(parse(workload, "workloads/w.jsonl").0.requests[0].source, "llmservingsim-workload");
    let series = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n1.0,10,20,1,0,5.0\n";
    let sources: Vec<String> =
        parse(series, "vllm/timeseries.csv").0.samples.iter().map(|s| s.source.to_string()).collect();
    assert_eq!(sources, ["llmservingsim-vllm"; 5]);
}
