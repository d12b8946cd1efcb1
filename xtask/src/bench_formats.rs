//! `cargo xtask bench --formats`: `infertrace normalize` on a large generated input of every line-oriented format
//! with a generator, on one thread and on all of them, so that a slow or sequential adapter shows.
//!
//! Each input is about `--log-mb` MiB (default 256), written once into `target/bench/formats/` (at another size,
//! `target/bench/formats-<N>mib/`) by the adapter's own generator (seeded) and reused while its size target is
//! unchanged. The whole-document formats (WEKA conversations, GenAI-Perf and vLLM bench JSON) are left out: a file of
//! theirs is read whole by design.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::bench::{IoAdapter, dir_bytes, generate, measure, median, mib, print_table};

use infertrace_adapter_dynamo::generate as dynamo;
use infertrace_adapter_mapped::generate as mapped;
use infertrace_adapter_sglang::generate as sglang;
use infertrace_adapter_traces::{bailian, burstgpt, generate as traces, llmservingsim, ragpulse, tracelab};
use infertrace_adapter_vllm::generate as vllm;

/// Writes `n` units of one format.
type Writer = fn(&mut dyn Write, u64) -> io::Result<()>;

/// One format: its adapter id, the file name it is written to (stems distinct: the size marker is `<stem>.target`),
/// the `--format` and mapping file it needs, if any, and its generator.
struct Format {
    id: &'static str,
    file: &'static str,
    map: Option<(&'static str, &'static str)>,
    write: Writer,
}

fn formats() -> Vec<Format> {
    fn f(id: &'static str, file: &'static str, write: Writer) -> Format {
        Format { id, file, map: None, write }
    }
    vec![
        f("azure-llm", "azure.csv", |o, n| traces::write_azure(&mut IoAdapter(o), n, 7).map(drop)),
        f("burstgpt", "burstgpt.csv", |o, n| {
            burstgpt::generate::write_burstgpt(&mut IoAdapter(o), n, true, 7).map(drop)
        }),
        f("bailian-trace", "bailian.jsonl", |o, n| {
            bailian::generate::write_bailian(&mut IoAdapter(o), n, 5, 7).map(drop)
        }),
        f("ragpulse", "ragpulse.jsonl", |o, n| ragpulse::generate::write_trace(&mut IoAdapter(o), n, 5, 7).map(drop)),
        f("tracelab", "tracelab.jsonl", |o, n| tracelab::generate::write_rounds(&mut IoAdapter(o), n, 10, 7).map(drop)),
        f("llmservingsim", "llmservingsim-workload.jsonl", |o, n| {
            llmservingsim::generate::write_workload(&mut IoAdapter(o), n, 7).map(drop)
        }),
        f("mooncake (agentic v2)", "agentic-v2.jsonl", |o, n| {
            traces::write_agentic_v2(&mut IoAdapter(o), n.div_ceil(20), 20, 7).map(drop)
        }),
        f("vllm-otlp", "vllm-otlp.jsonl", |o, n| vllm::write_otlp(&mut IoAdapter(o), n, 4, 7).map(drop)),
        f("vllm-kv-events", "vllm-kv-events.jsonl", |o, n| {
            vllm::write_kv_events(&mut IoAdapter(o), n, vllm::KvEncoding::JsonLines, 7).map(drop)
        }),
        f("vllm-metrics", "vllm-metrics.prom", |o, n| vllm::write_metrics(&mut IoAdapter(o), n, 2, 7).map(drop)),
        f("sglang-request-metrics", "sglang-request-metrics.jsonl", |o, n| {
            sglang::write_request_metrics(&mut IoAdapter(o), n, 7).map(drop)
        }),
        f("sglang-metrics", "sglang-metrics.prom", |o, n| sglang::write_metrics(&mut IoAdapter(o), n, 2, 7).map(drop)),
        f("sglang-kv-events", "sglang-kv-events.jsonl", |o, n| {
            sglang::write_kv_events(&mut IoAdapter(o), n, 7).map(drop)
        }),
        f("sglang-bench", "sglang-bench.jsonl", |o, n| {
            sglang::write_bench(&mut IoAdapter(o), n.div_ceil(100), 100, 7).map(drop)
        }),
        f("dynamo-request-trace", "dynamo-request-trace.jsonl", |o, n| {
            dynamo::request_trace::write_request_trace(&mut IoAdapter(o), n, 7).map(drop)
        }),
        f("dynamo-log (text)", "dynamo.log", |o, n| {
            let options = dynamo::log::LogOptions { requests: n, mode: dynamo::log::LogMode::Readable, seed: 7 };
            dynamo::log::write_log(&mut IoAdapter(o), options).map(drop)
        }),
        f("dynamo-log (JSONL)", "dynamo-log.jsonl", |o, n| {
            let options = dynamo::log::LogOptions { requests: n, mode: dynamo::log::LogMode::Jsonl, seed: 7 };
            dynamo::log::write_log(&mut IoAdapter(o), options).map(drop)
        }),
        f("dynamo-kv-events", "dynamo-kv-events.jsonl", |o, n| {
            dynamo::kv_events::write_kv_events(&mut IoAdapter(o), n, 7).map(drop)
        }),
        f("dynamo-metrics", "dynamo-metrics.prom", |o, n| {
            dynamo::metrics::write_metrics(&mut IoAdapter(o), n, 4, 7).map(drop)
        }),
        f("aiperf", "aiperf.jsonl", |o, n| {
            let (generation, layout) = (dynamo::aiperf::Generation::V0_13, dynamo::aiperf::Layout::Lines);
            dynamo::aiperf::write_records(&mut IoAdapter(o), generation, layout, n, 7).map(drop)
        }),
        Format {
            id: "csv (mapped)",
            file: "mapped-csv.csv",
            map: Some(("csv", "mapped-csv.toml")),
            write: |o, n| mapped::write_csv(&mut IoAdapter(o), n, 7).map(drop),
        },
        Format {
            id: "jsonl (mapped)",
            file: "mapped-jsonl.jsonl",
            map: Some(("jsonl", "mapped-jsonl.toml")),
            write: |o, n| mapped::write_jsonl(&mut IoAdapter(o), n, 7).map(drop),
        },
    ]
}

/// Generates every format's input and prints one row per format.
pub(crate) fn bench_formats(binary: &Path, dir: &Path, bytes: u64, runs: usize) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::write(dir.join("mapped-csv.toml"), mapped::CSV_MAPPING)?;
    fs::write(dir.join("mapped-jsonl.toml"), mapped::JSONL_MAPPING)?;
    let mut table = Vec::new();
    for format in formats() {
        let path = dir.join(format.file);
        eprintln!("generating {} …", path.display());
        generate(&path, bytes, format.write)?;
        let input = fs::metadata(&path)?.len();
        let out = dir.join("out");
        let mut args: Vec<OsString> = vec!["normalize".into(), path.clone().into()];
        if let Some((id, mapping)) = format.map {
            args.extend(["--format".into(), id.into(), "--map".into(), dir.join(mapping).into()]);
        }
        args.extend(["-o".into(), out.clone().into(), "--force".into()]);
        let (mut one, mut all, mut peak) = (Vec::new(), Vec::new(), None);
        for run in 0..runs {
            eprintln!("{} run {}/{runs} …", format.id, run + 1);
            one.push(measure(Command::new(binary).args(&args).args(["--threads", "1"]))?.0);
            let (time, rss) = measure(Command::new(binary).args(&args))?;
            all.push(time);
            peak = rss.max(peak);
        }
        let manifest: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("manifest.json"))?)?;
        let rows =
            ["requests", "samples", "cache_events"].iter().filter_map(|t| manifest["rows"][t].as_u64()).sum::<u64>();
        let (one, all) = (median(one).as_secs_f64(), median(all).as_secs_f64());
        table.push(vec![
            format.id.to_owned(),
            format!("{:.0}", input as f64 / 1e6),
            rows.to_string(),
            format!("{one:.2}"),
            format!("{all:.2}"),
            format!("{:.2}", one / all),
            format!("{:.0}", input as f64 / 1e6 / all),
            format!("{:.0}", rows as f64 / all),
            mib(peak),
            format!("{:.2}%", dir_bytes(&out) as f64 * 100.0 / input as f64),
        ]);
    }
    let headers =
        ["format", "MB", "rows", "1 thread s", "all s", "speed-up", "MB/s", "rows/s", "peak RSS MiB", "output/input"];
    print_table(&headers, table);
    println!("medians of {runs} runs; MB = 10^6 bytes; all = every core; inputs in {}", dir.display());
    Ok(())
}
