//! LLMServingSim end to end: generated inputs of each generation parse with no diagnostics and the counts the
//! generator reports; the slices under `testdata/traces/llmservingsim/` parse cleanly; the whole published run
//! files (committed compressed under `testdata/traces-full/llmservingsim/`) reproduce their aggregates and the
//! published mean TTFTs; and no input makes the adapter panic or drop a line silently.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use infertrace_adapter::testing::mutate;
use infertrace_adapter::{Adapter, CollectSink, Confidence, Input, ParseContext, ParseOptions, ParseReport};
use infertrace_adapter_traces::LlmServingSim;
use infertrace_adapter_traces::llmservingsim::generate::{
    write_bench_requests, write_meta, write_sim_output, write_timeseries, write_workload,
};
use infertrace_schema::{ClockDomain, Status, metrics};
use proptest::prelude::*;

fn parse(bytes: &[u8], source_file: &str) -> (CollectSink, ParseReport) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file, options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let report = LlmServingSim.parse(&mut &bytes[..], &ctx, &mut sink).unwrap();
    (sink, report)
}

fn sum_tokens(sink: &CollectSink) -> (u64, u64) {
    let input = sink.requests.iter().filter_map(|r| r.input_tokens).map(u64::from).sum();
    let output = sink.requests.iter().filter_map(|r| r.output_tokens).map(u64::from).sum();
    (input, output)
}

fn mean_ttft(sink: &CollectSink) -> f64 {
    let ttfts: Vec<f64> = sink.requests.iter().filter_map(|r| r.ttft_s).collect();
    assert_eq!(ttfts.len(), sink.requests.len(), "every row has a TTFT");
    ttfts.iter().sum::<f64>() / ttfts.len() as f64
}

#[test]
fn generated_bench_requests() {
    let mut bytes = Vec::new();
    let generated = write_bench_requests(&mut bytes, 500, 5).unwrap();
    assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "requests.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!((report.format_version.as_deref(), report.clock_domain), (Some("bench-requests"), ClockDomain::Utc));
    assert_eq!((report.lines, sink.requests.len() as u64), (generated.lines, generated.requests));
    assert_eq!(sum_tokens(&sink), (generated.input_tokens, generated.output_tokens));
    assert!((mean_ttft(&sink) - generated.ttft_sum_s / generated.requests as f64).abs() < 1e-6);
    assert!(sink.requests.iter().all(|r| r.status == Status::Ok && r.arrival_time.is_some()));
    // The first request is queued 1 ms after its frontend arrival and anchors the clock; the others 1-20 ms.
    let delays = &report.details["clock_alignment"]["frontend_to_queue_s"];
    assert_eq!(delays["min"], 0.0);
    assert!(delays["max"].as_f64().unwrap() < 0.02);
}

#[test]
fn generated_timeseries_of_both_forms() {
    for detailed in [false, true] {
        let mut bytes = Vec::new();
        let generated = write_timeseries(&mut bytes, 300, detailed, 9).unwrap();
        assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
        let (sink, report) = parse(&bytes, "timeseries.csv");
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.format_version.as_deref(), Some("bench-timeseries"));
        assert_eq!((report.lines, sink.samples.len() as u64), (generated.lines, generated.samples));
        assert!(sink.samples.iter().all(|s| metrics::is_known(&s.metric)));
        assert_eq!(report.details["kv_cache_pct_withheld"], 0);
        assert_eq!(report.details.contains_key("unmapped_columns"), detailed);
    }
}

#[test]
fn generated_sim_output_and_workload_and_meta() {
    let mut bytes = Vec::new();
    let generated = write_sim_output(&mut bytes, 400, 2).unwrap();
    assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "sim.csv");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("sim-output"));
    assert_eq!((report.lines, sink.requests.len() as u64), (generated.lines, generated.requests));
    assert_eq!(sum_tokens(&sink), (generated.input_tokens, generated.output_tokens));
    assert!((mean_ttft(&sink) - generated.ttft_sum_s / generated.requests as f64).abs() < 1e-9);

    let mut bytes = Vec::new();
    let generated = write_workload(&mut bytes, 200, 4).unwrap();
    assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "workload.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("workload"));
    assert_eq!((report.lines, sink.requests.len() as u64), (generated.lines, generated.requests));
    assert_eq!(sum_tokens(&sink), (generated.input_tokens, generated.output_tokens));
    let blocks: usize = sink.requests.iter().filter_map(|r| r.prefix_hashes.as_ref()).map(Vec::len).sum();
    assert_eq!(blocks as u64, generated.prefix_blocks);
    // The shared 32-token system prompt gives every prompt of 32 tokens or more the same first two hashes.
    let firsts: BTreeSet<&[u64]> = sink
        .requests
        .iter()
        .filter_map(|r| r.prefix_hashes.as_deref())
        .filter(|h| h.len() >= 2)
        .map(|h| &h[..2])
        .collect();
    assert_eq!(firsts.len(), 1);

    let mut bytes = Vec::new();
    let generated = write_meta(&mut bytes, 42).unwrap();
    assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "meta.json");
    assert_eq!(sink, CollectSink::default());
    assert_eq!(report.lines, generated.lines);
    assert_eq!(report.details["num_requests"], 42);
    assert_eq!(report.details["dataset_path"], "synthetic.jsonl", "the directory is not kept");
    assert_eq!(report.details["kv_cache"]["num_gpu_blocks"], 2588);
    assert!(!report.details.contains_key("resolved_config"));
}

fn testdata(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(relative)
}

/// Reads a file, decompressing `.zst`, as the CLI does.
fn read(path: &Path) -> Vec<u8> {
    let mut input = Input::open(path, None).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(input.reader(), &mut bytes).unwrap();
    bytes
}

#[test]
fn every_slice_parses_cleanly_with_its_generation() {
    let slices = [
        ("bench-requests/RTXPRO6000_vllm_requests_head.jsonl", "bench-requests", 5, 0),
        ("bench-requests/RTX4090_vllm_requests_head.jsonl", "bench-requests", 5, 0),
        ("bench-timeseries/RTXPRO6000_vllm_timeseries_head.csv", "bench-timeseries", 0, 6 * 4),
        ("bench-timeseries/RTX4090_vllm_timeseries_head.csv", "bench-timeseries", 0, 6 * 5),
        ("bench-meta/RTXPRO6000_vllm_meta.json", "bench-meta", 0, 0),
        ("bench-meta/RTX4090_vllm_meta.json", "bench-meta", 0, 0),
        ("sim-output/RTXPRO6000_outputs_sim_head.csv", "sim-output", 3, 0),
        ("workload/sharegpt_llama31_8b_lines_101_110_275.jsonl", "workload", 3, 0),
    ];
    for (relative, version, requests, samples) in slices {
        let bytes = read(&testdata("traces/llmservingsim").join(relative));
        assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High), "{relative}");
        let (sink, report) = parse(&bytes, relative);
        assert_eq!(sink.diagnostics, [], "{relative}");
        assert_eq!(report.format_version.as_deref(), Some(version), "{relative}");
        assert_eq!((sink.requests.len(), sink.samples.len()), (requests, samples), "{relative}");
    }
}

#[test]
fn the_4090_meta_keeps_the_kv_cache_facts() {
    let (_, report) = parse(&read(&testdata("traces/llmservingsim/bench-meta/RTX4090_vllm_meta.json")), "meta.json");
    assert_eq!(report.details["kv_cache"]["num_gpu_blocks"], 2588);
    assert_eq!(report.details["kv_cache"]["num_kv_tokens"], 41408);
    assert_eq!(report.details["hardware"]["device_name"], "NVIDIA GeForce RTX 4090");
    assert_eq!(report.details["engine_kwargs"]["max_num_seqs"], 256);
    assert!(!report.details.contains_key("resolved_config"));
}

/// One published run directory: the files of `bench/examples/<hw>/Llama-3.1-8B/` at LLMServingSim commit
/// 5daddb21a545658d5150b535712d0494584b5278, zstd-compressed.
fn run(hw: &str, file: &str) -> (CollectSink, ParseReport) {
    let relative = format!("llmservingsim_vllm_bench_{hw}_llama31_8b/{file}.zst");
    let bytes = read(&testdata("traces-full/llmservingsim").join(&relative));
    let detected = LlmServingSim.detect(&bytes);
    if file == "config.json" {
        assert_eq!(detected, None, "the cluster config is left unrecognised");
    } else {
        assert_eq!(detected, Some(Confidence::High), "{relative}");
    }
    parse(&bytes, &relative)
}

// Whole-file aggregates, computed independently with Python from the corpus files, e.g.
//   python3 -c "import json; r=[json.loads(l) for l in open('vllm_requests.jsonl')];
//     print(len(r), sum(x['input_toks'] for x in r), sum(x['output_toks'] for x in r),
//           sum(x['first_token_ts']-x['queued_ts'] for x in r)/len(r),
//           sum((x['last_token_ts']-x['first_token_ts'])/(x['output_toks']-1) for x in r)/len(r))"
//   python3 -c "import csv; r=list(csv.DictReader(open('outputs_sim.csv')));
//     print(len(r), sum(int(x['input']) for x in r), sum(int(x['output']) for x in r),
//           sum(int(x['TTFT']) for x in r)/len(r)/1e9)"
//   python3 -c "import csv; r=list(csv.DictReader(open('vllm_timeseries.csv')));
//     w=sum(1 for x in r if float(x['kv_cache_pct'])==0 and float(x['running'])>0); print(len(r), 5*len(r)-w, w)"
const REQUESTS: usize = 300;
const INPUT_TOKENS: u64 = 257_239;
const OUTPUT_TOKENS: u64 = 195_753;

#[test]
fn whole_bench_runs_reproduce_the_published_ttft() {
    // (hardware, mean TTFT = first token - queued, mean TPOT, published TTFT rounded as in validation.md)
    for (hw, ttft, tpot, published) in
        [("RTXPRO6000", 7.097_156_740, 0.032_458_025, 7.10), ("RTX4090", 65.456_574_260, 0.032_446_637, 65.5)]
    {
        let (sink, report) = run(hw, "vllm_requests.jsonl");
        assert_eq!(sink.diagnostics, [], "{hw}");
        assert_eq!(sink.requests.len(), REQUESTS);
        assert_eq!(sum_tokens(&sink), (INPUT_TOKENS, OUTPUT_TOKENS));
        assert!(sink.requests.iter().all(|r| r.status == Status::Ok));
        let mean = mean_ttft(&sink);
        assert!((mean - ttft).abs() < 1e-6, "{hw}: {mean}");
        let rounded =
            (mean * if published < 10.0 { 100.0 } else { 10.0 }).round() / if published < 10.0 { 100.0 } else { 10.0 };
        assert_eq!(rounded, published, "{hw}");
        let tpots: Vec<f64> = sink.requests.iter().filter_map(|r| r.tpot_s).collect();
        let mean_tpot = tpots.iter().sum::<f64>() / tpots.len() as f64;
        assert!((mean_tpot - tpot).abs() < 1e-6, "{hw}: {mean_tpot}");
        // The instants agree with the durations: the first token comes ttft_s after the (aligned) queue entry.
        for r in &sink.requests {
            let span = (r.first_token_time.unwrap() - r.arrival_time.unwrap()) as f64 / 1e9;
            assert!((span - r.ttft_s.unwrap()).abs() < 1e-6);
        }
        assert_eq!(report.details["requests_without_timing"], 0);
        assert_eq!(report.details["clock_alignment"]["anchor_request_id"], "bench-0");
    }
}

#[test]
fn whole_timeseries_sim_meta_and_workload_files() {
    for (hw, ticks, samples, withheld, sim_ttft) in
        [("RTXPRO6000", 67, 269, 66, 6.815_739_068), ("RTX4090", 184, 920, 0, 65.820_214_957)]
    {
        let (sink, report) = run(hw, "vllm_timeseries.csv");
        assert_eq!(sink.diagnostics, []);
        assert_eq!(report.lines, ticks + 1);
        assert_eq!(sink.samples.len(), samples, "{hw}");
        assert_eq!(report.details["kv_cache_pct_withheld"], withheld, "{hw}");

        let (sink, report) = run(hw, "outputs_sim.csv");
        assert_eq!(sink.diagnostics, [], "{hw}");
        assert_eq!(report.format_version.as_deref(), Some("sim-output"));
        assert_eq!(sink.requests.len(), REQUESTS);
        assert_eq!(sum_tokens(&sink), (INPUT_TOKENS, OUTPUT_TOKENS));
        assert!((mean_ttft(&sink) - sim_ttft).abs() < 1e-6, "{hw}");

        let (sink, report) = run(hw, "vllm_meta.json");
        assert_eq!(sink, CollectSink::default());
        assert_eq!(report.details["num_requests"], 300);
        assert_eq!(report.details["vllm_version"], "0.19.0");
        // The workload the run replayed (sha256 of the workload file).
        assert_eq!(report.details["dataset_hash"], "05e48b32da530d4a3dd77f3d47c6fe694ac8308d611aa088e38bb10fba2b3b3a");

        let _ = run(hw, "config.json");
    }

    // python3 -c "import json; r=[json.loads(l) for l in open('llmservingsim_sharegpt_llama31_8b_300_sps10.jsonl')];
    //   print(len(r), sum(x['input_toks'] for x in r), sum(x['output_toks'] for x in r),
    //         sum(len(x['input_tok_ids'])//16 for x in r), r[-1]['arrival_time_ns'])"
    let bytes = read(&testdata("traces-full/llmservingsim/llmservingsim_sharegpt_llama31_8b_300_sps10.jsonl.zst"));
    assert_eq!(LlmServingSim.detect(&bytes), Some(Confidence::High));
    let (sink, report) = parse(&bytes, "llmservingsim_sharegpt_llama31_8b_300_sps10.jsonl");
    assert_eq!(sink.diagnostics, []);
    assert_eq!(report.format_version.as_deref(), Some("workload"));
    assert_eq!(sink.requests.len(), REQUESTS);
    assert_eq!(sum_tokens(&sink), (INPUT_TOKENS, OUTPUT_TOKENS));
    let blocks: usize = sink.requests.iter().filter_map(|r| r.prefix_hashes.as_ref()).map(Vec::len).sum();
    assert_eq!(blocks, 15_942);
    assert_eq!(sink.requests.last().and_then(|r| r.arrival_time), Some(29_183_763_203));
}

/// Every non-blank line ends up as a row, a sample, a diagnostic, or (the first line of a CSV) a header.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (sink, report) = parse(bytes, "fuzz.txt");
    if report.format_version.as_deref() == Some("bench-meta") {
        return Ok(()); // One document: lines are not records.
    }
    let accounted: BTreeSet<u64> = sink
        .requests
        .iter()
        .filter_map(|r| r.source_line)
        .chain(sink.samples.iter().filter_map(|s| s.source_line))
        .chain(sink.diagnostics.iter().map(|d| d.line))
        .collect();
    let mut first = true;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i as u64 + 1;
        if number > report.lines {
            break;
        }
        if line.iter().all(|b| b.is_ascii_whitespace()) || line == b"\xef\xbb\xbf" {
            continue;
        }
        if std::mem::take(&mut first) && !accounted.contains(&number) {
            let text = String::from_utf8_lossy(line);
            prop_assert!(!text.trim_start_matches('\u{feff}').trim_start().starts_with('{'), "line 1 dropped");
            continue; // A CSV header.
        }
        prop_assert!(accounted.contains(&number), "line {} dropped: {:?}", number, String::from_utf8_lossy(line));
    }
    Ok(())
}

/// A small input of every generation, by index.
fn generation(index: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    match index % 6 {
        0 => write_bench_requests(&mut bytes, 3, 1).map(drop),
        1 => write_timeseries(&mut bytes, 3, false, 1).map(drop),
        2 => write_timeseries(&mut bytes, 3, true, 1).map(drop),
        3 => write_sim_output(&mut bytes, 3, 1).map(drop),
        4 => write_workload(&mut bytes, 2, 1).map(drop),
        _ => write_meta(&mut bytes, 3).map(drop),
    }
    .unwrap();
    bytes
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes)?;
        let _ = LlmServingSim.detect(&bytes);
    }

    #[test]
    fn mutated_generations_never_panic(
        index in 0u8..6,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
    ) {
        let bytes = mutate(generation(index), &edits);
        check(&bytes)?;
        let _ = LlmServingSim.detect(&bytes);
    }
}
