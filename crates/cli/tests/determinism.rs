//! Byte-identical output: the same inputs and options give the same bytes in every file of the dataset.

#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;

use indicatif::ProgressBar;
use infertrace::{NormalizeOptions, normalize};
use infertrace_schema::PartitionKey;

fn run(output: &Path, salt: Option<&str>) -> Vec<(String, Vec<u8>)> {
    let options = NormalizeOptions {
        inputs: common::valid_inputs(),
        output: output.to_owned(),
        hash_salt: salt.map(str::to_owned),
        ..Default::default()
    };
    normalize(&options, &ProgressBar::hidden()).unwrap();
    common::dataset_files(output)
}

#[test]
fn two_runs_over_every_valid_input_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for salt in [None, Some("s")] {
        let first = run(&dir.path().join(format!("first-{salt:?}")), salt);
        let second = run(&dir.path().join(format!("second-{salt:?}")), salt);
        let names: Vec<_> = first.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cache_events.parquet", "manifest.json", "requests.parquet", "samples.parquet"]);
        for ((name, a), (_, b)) in first.iter().zip(&second) {
            assert!(a == b, "{name} differs between two runs (salt {salt:?})");
        }
    }
}

/// Reading, parsing and encoding run on their own threads that pass data on in order, so how many cores they get
/// cannot change a byte: the binary pinned to one CPU (`taskset`) writes what it writes with every CPU.
#[test]
fn one_cpu_or_all_write_the_same_bytes() {
    if std::process::Command::new("taskset").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI machines have taskset (util-linux)");
        eprintln!("skipped: taskset not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<String> = common::valid_inputs().iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let run = |name: &str, pinned: bool| {
        let out = dir.path().join(name);
        let mut command = if pinned {
            let mut c = std::process::Command::new("taskset");
            c.args(["-c", "0", env!("CARGO_BIN_EXE_infertrace")]);
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_infertrace"))
        };
        let status = command.arg("normalize").args(&inputs).arg("-o").arg(&out).output().unwrap().status;
        assert!(status.success(), "normalize ({name}) failed");
        common::dataset_files(&out)
    };
    let (all, one) = (run("all-cpus", false), run("one-cpu", true));
    assert_eq!(all.len(), 4);
    for ((name, a), (_, b)) in all.iter().zip(&one) {
        assert!(a == b, "{name} differs between one CPU and all");
    }
}

/// Small files are parsed ahead in parallel and written in turn, and lines are prepared in parallel in chunks and
/// folded in order, so `--threads` changes when work happens and never what is written. Generated logs of a few MB
/// make many chunks (2 threads cut 256 KiB chunks, 128 threads 16 KiB; 1 thread reads line by line), so requests
/// open in one chunk and end in another.
#[test]
fn every_thread_count_writes_the_same_bytes() {
    use std::io::Write as _;

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, f: &dyn Fn(&mut std::fs::File) -> std::io::Result<()>| {
        let path = dir.path().join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        f(&mut file).unwrap();
        file.flush().unwrap();
        path
    };
    let vllm = write("vllm-0.14.log", &|out| {
        use infertrace_adapter_vllm::generate::{Generation, LogOptions, write_log};
        write_log(out, Generation::V0_14, LogOptions { requests: 40, prompt_tokens: (500, 8_000), seed: 3 }).map(drop)
    });
    let sglang = write("sglang-0.5.10.log", &|out| {
        use infertrace_adapter_sglang::generate::{Generation, write_log};
        write_log(out, Generation::V0_5_10, 10_000, 3).map(drop)
    });
    let mooncake = write("mooncake.jsonl", &|out| {
        infertrace_adapter_traces::generate::write_mooncake(out, 600, 10, false, 3).map(drop)
    });
    let azure = write("azure.csv", &|out| infertrace_adapter_traces::generate::write_azure(out, 20_000, 3).map(drop));
    let burstgpt = write("burstgpt.csv", &|out| {
        infertrace_adapter_traces::burstgpt::generate::write_burstgpt(out, 12_000, true, 3).map(drop)
    });
    // A readable Dynamo log whose records are torn across lines (the pieces are joined by the fold, whichever
    // chunks they fall in), with other programs' lines and blank lines among them; and a JSONL one.
    let dynamo_changes = std::cell::Cell::new((0, 0));
    let dynamo = write("dynamo.log", &|out| {
        use infertrace_adapter_dynamo::generate::log::{LogMode, LogOptions, write_log};
        let mut log = Vec::new();
        write_log(&mut log, LogOptions { requests: 3_000, mode: LogMode::Readable, seed: 3 })?;
        let (mut torn, mut foreign) = (0, 0);
        for (i, line) in String::from_utf8(log).unwrap().lines().enumerate() {
            match i % 101 {
                7 if line.len() > 40 && line.is_ascii() => {
                    torn += 1;
                    writeln!(out, "{}\n{}", &line[..line.len() / 2], &line[line.len() / 2..])?;
                }
                8 => {
                    foreign += 1;
                    writeln!(out, "INFO 04-01 17:26:35 metrics.py:455] Avg prompt throughput: 1.0 tokens/s\n{line}")?;
                }
                9 => writeln!(out, "\n{line}")?,
                _ => writeln!(out, "{line}")?,
            }
        }
        dynamo_changes.set((torn, foreign));
        Ok(())
    });
    let dynamo_jsonl = write("dynamo.jsonl", &|out| {
        use infertrace_adapter_dynamo::generate::log::{LogMode, LogOptions, write_log};
        write_log(out, LogOptions { requests: 1_500, mode: LogMode::Jsonl, seed: 3 }).map(drop)
    });
    let kv_events = write("vllm-kv-events.jsonl", &|out| {
        use infertrace_adapter_vllm::generate::{KvEncoding, write_kv_events};
        write_kv_events(out, 4_000, KvEncoding::JsonLines, 3).map(drop)
    });
    // vLLM Prometheus scrapes, every seventh without its time line (the repeated `# TYPE` family starts it), with a
    // series no metric is named for, a NaN sample, a line that is not exposition and a blank line after every
    // tenth line: each scrape is put together in order from lines read on any thread.
    let not_samples = std::cell::Cell::new(0);
    let metrics = write("vllm-metrics.prom", &|out| {
        let mut scrapes = Vec::new();
        infertrace_adapter_vllm::generate::write_metrics(&mut scrapes, 700, 2, 3)?;
        let mut scrape = 0;
        for (i, line) in String::from_utf8(scrapes).unwrap().lines().enumerate() {
            if line.starts_with("2026-") {
                scrape += 1;
                if scrape % 7 == 0 {
                    continue;
                }
            }
            writeln!(out, "{line}")?;
            if i % 10 == 3 {
                writeln!(out, "process_open_fds 12.0\nvllm:num_requests_waiting{{engine=\"0\"}} NaN\n")?;
            }
            if i % 50 == 4 {
                not_samples.set(not_samples.get() + 1);
                writeln!(out, "curl: (7) Failed to connect to localhost port 8000")?;
            }
        }
        Ok(())
    });
    // Dynamo router KV events; after every hundredth line, a router event whose removed list fails half-way, a
    // worker's batch whose second event fails (the rows before each fault kept) and a line that is not JSON.
    let expected_events = std::cell::Cell::new(0);
    let dynamo_kv = write("dynamo-kv-events.jsonl", &|out| {
        let mut events = Vec::new();
        let made = infertrace_adapter_dynamo::generate::kv_events::write_kv_events(&mut events, 6_000, 3)?;
        for (i, line) in String::from_utf8(events).unwrap().lines().enumerate() {
            writeln!(out, "{line}")?;
            if i % 100 == 99 {
                writeln!(
                    out,
                    "{{\"timestamp\": 5, \"event\": {{\"worker_id\": 3, \"event\": {{\"event_id\": 1, \"data\": {{\"removed\": {{\"block_hashes\": [7, -1]}}}}}}}}}}\nnot json"
                )?;
                writeln!(
                    out,
                    "{{\"events\": [{{\"event_id\": 2, \"data\": {{\"removed\": {{\"block_hashes\": [8]}}}}}}, {{\"event_id\": 3, \"data\": \"bogus\"}}], \"shutdown\": false}}"
                )?;
            }
        }
        expected_events.set(made.cache_events + 2 * 60);
        Ok(())
    });
    // The SGLang log again, gzip'd: decompressed on a thread of its own, in blocks of 1 MiB.
    let sglang_gz = write("sglang-0.5.10.log.gz", &|out| {
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
        std::io::copy(&mut std::fs::File::open(&sglang)?, &mut gz)?;
        gz.finish().map(drop)
    });
    for path in [&vllm, &sglang, &mooncake, &azure, &burstgpt, &dynamo, &dynamo_jsonl, &kv_events, &metrics, &dynamo_kv]
    {
        let bytes = std::fs::metadata(path).unwrap().len();
        assert!(bytes > 600_000, "{} is only {bytes} bytes: too few chunks to test", path.display());
    }
    assert!(std::fs::metadata(&sglang).unwrap().len() > 2 << 20, "the gzip'd log should span several blocks");
    let mut inputs = common::valid_inputs();
    inputs.extend([
        vllm,
        sglang,
        mooncake,
        azure,
        burstgpt,
        dynamo,
        dynamo_jsonl,
        kv_events,
        metrics,
        dynamo_kv,
        sglang_gz,
    ]);
    let run_partitioned = |threads: usize, partition_by: Option<PartitionKey>| {
        let output = dir.path().join(format!("threads-{threads}-{partition_by:?}"));
        let options = NormalizeOptions {
            inputs: inputs.clone(),
            output: output.clone(),
            threads,
            partition_by,
            ..Default::default()
        };
        let report = normalize(&options, &ProgressBar::hidden()).unwrap();
        (report.manifest, common::dataset_files(&output))
    };
    let run = |threads: usize| run_partitioned(threads, None);
    let (manifest, one) = run(1);
    // The generated inputs are the last eleven; each made rows.
    let generated = &manifest.inputs[manifest.inputs.len() - 11..];
    assert_eq!(
        generated.iter().map(|i| (i.format.as_str(), i.compression.as_str())).collect::<Vec<_>>(),
        [
            ("vllm-log", "none"),
            ("sglang-log", "none"),
            ("mooncake", "none"),
            ("azure-llm", "none"),
            ("burstgpt", "none"),
            ("dynamo-log", "none"),
            ("dynamo-log", "none"),
            ("vllm-kv-events", "none"),
            ("vllm-metrics", "none"),
            ("dynamo-kv-events", "none"),
            ("sglang-log", "gzip"),
        ]
    );
    assert_eq!(generated[10].records, generated[1].records);
    assert_eq!(generated[10].diagnostics, generated[1].diagnostics);
    // Every generated row, and the first of each failing batch; one diagnostic for each bad line.
    assert_eq!(generated[9].records.cache_events, expected_events.get());
    let kinds = &generated[9].diagnostics.by_kind;
    assert_eq!((kinds["malformed-json"].count, kinds["malformed-record"].count), (60, 120));
    // Five samples per engine and scrape; the unmapped series listed; every foreign line reported, and nothing else.
    assert_eq!(generated[8].records.samples, 700 * 2 * 5);
    assert_eq!(generated[8].details["unmapped_series"], serde_json::json!(["process_open_fds"]));
    assert_eq!(generated[8].diagnostics.by_kind["not-a-record"].count, not_samples.get());
    assert_eq!(generated[8].diagnostics.total, not_samples.get());
    assert!(generated[7].records.cache_events > 10_000, "{:?}", generated[7].records);
    assert_eq!(generated[0].records.requests, 40);
    assert_eq!((generated[3].records.requests, generated[4].records.requests), (20_000, 12_000));
    assert_eq!((generated[5].records.requests, generated[6].records.requests), (3_000, 1_500), "{generated:?}");
    // Every line torn here is joined again (the generator tears some records itself) and every line of another
    // program is reported.
    let (torn, foreign) = dynamo_changes.get();
    assert!(torn > 90 && foreign > 90, "{torn} {foreign}");
    let continued = generated[5].details.get("continuation_lines").and_then(serde_json::Value::as_u64).unwrap();
    let not_records = generated[5].diagnostics.by_kind.get("not-a-record").map_or(0, |k| k.count);
    assert!(continued >= torn && not_records >= foreign, "{continued} {not_records}");
    // More samples than a file read ahead may hold (16 MiB at 256 bytes a row): with several threads the SGLang log
    // is read ahead, found too large and streamed.
    assert!(generated[1].records.samples > 65_536 && generated[2].records.requests == 6_000, "{generated:?}");
    for threads in [2, 5, 128] {
        let (_, other) = run(threads);
        assert_eq!(other.len(), one.len());
        for ((name, a), (_, b)) in one.iter().zip(&other) {
            assert!(a == b, "{name} differs between 1 thread and {threads}");
        }
    }
    // Partitioned by instance (KV-event workers, scrape engines and SGLang ranks interleave in these inputs), the
    // parts are the same bytes too.
    let (_, one) = run_partitioned(1, Some(PartitionKey::Instance));
    let (_, five) = run_partitioned(5, Some(PartitionKey::Instance));
    assert!(one.len() > 3, "{} files", one.len());
    assert_eq!(
        one.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        five.iter().map(|(name, _)| name).collect::<Vec<_>>()
    );
    for ((name, a), (_, b)) in one.iter().zip(&five) {
        assert!(a == b, "{name} differs between 1 thread and 5");
    }
}

/// A fleet's files are of similar sizes: once a file read ahead makes more rows than it may hold (and is parsed
/// again, streamed), files as large are streamed from the start. Six SGLang logs of 2.5 MB, each more than the
/// 65,536 rows a file read ahead may hold with two threads: the first window of three is read ahead and parsed
/// again, the other three are not read ahead.
#[test]
fn once_a_file_overflows_read_ahead_files_as_large_are_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<_> = (0..6)
        .map(|seed| {
            let path = dir.path().join(format!("sglang-{seed}.log"));
            let mut file = std::fs::File::create(&path).unwrap();
            use infertrace_adapter_sglang::generate::{Generation, write_log};
            write_log(&mut file, Generation::V0_5_10, 10_000, seed).unwrap();
            path
        })
        .collect();
    let options = NormalizeOptions { inputs, output: dir.path().join("out"), threads: 2, ..Default::default() };
    let report = normalize(&options, &ProgressBar::hidden()).unwrap();
    for input in &report.manifest.inputs {
        assert!(input.records.samples > 70_000, "{}: {:?}", input.path, input.records);
    }
    assert_eq!(report.parsed_twice, 3);
}
