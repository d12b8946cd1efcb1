//! Synthetic AIPerf exports: `profile_export.jsonl` records of every schema generation, one per line or
//! pretty-printed, and the summary JSON and CSV.

use std::io::{self, Write};

use super::{Generated, Rng};

/// A schema generation of `profile_export.jsonl` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Before 0.1.1: `timestamp_ns`, `credit_phase`, tags `ttft`/`ttst`, per-record `max_response_timestamp`.
    Pre0_1_1,
    /// 0.1.1-0.2: `request_start_ns`, `request_end_ns`, `benchmark_phase`, `was_cancelled`.
    V0_1_1,
    /// 0.13+: `credit_issued_ns`, `phase_index`, agentic keys, usage metrics; units vary (`us`, `sec`).
    V0_13,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 3] = [Generation::Pre0_1_1, Generation::V0_1_1, Generation::V0_13];
}

/// How records are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One record per line, as AIPerf writes them.
    Lines,
    /// One record over many lines, as AIPerf's documentation shows them.
    Pretty,
}

/// Writes `requests` records of `generation`. The first two are warmup; of every seven, the fourth fails with a
/// server error and the sixth is cancelled (both count as `failed`). Sessions have three turns. Error messages say
/// `synthetic error message`, which must never reach an output.
pub fn write_records(
    out: &mut impl Write,
    generation: Generation,
    layout: Layout,
    requests: u64,
    seed: u64,
) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let base: u64 = 1_780_000_000_000_000_000;
    for i in 0..requests {
        let start = base + i * 250_000_000 + rng.below(1_000_000);
        let (failed, cancelled) = (i % 7 == 3, i % 7 == 5);
        let warmup = i < 2;
        let isl = 100 + rng.below(4000);
        let osl = 2 + rng.below(500);
        let ttft_ms = 10.0 + rng.below(100_000) as f64 / 100.0;
        let itl_ms = 5.0 + rng.below(2000) as f64 / 1000.0;
        let latency_ms = ttft_ms + itl_ms * (osl - 1) as f64;
        let end = start + (latency_ms * 1e6) as u64 + 500_000;
        let (session, turn) = (i / 3, i % 3);

        let mut md = format!(r#""x_request_id":"req-{seed}-{i}","x_correlation_id":"sess-{seed}-{session}","#);
        md += &format!(r#""conversation_id":"conv-{session}","turn_index":{turn}"#);
        let phase = if warmup { "warmup" } else { "profiling" };
        if generation == Generation::Pre0_1_1 {
            md += &format!(r#","timestamp_ns":{start},"worker_id":"worker_1","record_processor_id":"rp_1","#);
            md += &format!(r#""credit_phase":"{phase}""#);
        } else {
            let cancelled_at = if cancelled { end.to_string() } else { "null".to_owned() };
            md += &format!(r#","session_num":{session},"request_start_ns":{start},"request_end_ns":{end},"#);
            md += &format!(r#""worker_id":"worker_1","record_processor_id":"rp_1","benchmark_phase":"{phase}","#);
            md += &format!(r#""was_cancelled":{cancelled},"cancellation_time_ns":{cancelled_at}"#);
        }
        if generation == Generation::V0_13 {
            let depth = u64::from(i % 5 == 4);
            let parent =
                if depth == 1 { format!(r#""sess-{seed}-{}""#, session.saturating_sub(1)) } else { "null".to_owned() };
            let (issued, phase_index) = (start - 100_000, u64::from(!warmup));
            md +=
                &format!(r#","credit_issued_ns":{issued},"phase_index":{phase_index},"context_overflow_skip":false,"#);
            md += &format!(r#""agent_depth":{depth},"parent_correlation_id":{parent}"#);
        }

        let mut metrics: Vec<String> = Vec::new();
        let metric = |tag: &str, value: &str, unit: &str| format!(r#""{tag}":{{"value":{value},"unit":"{unit}"}}"#);
        let error = if failed || cancelled {
            done.failed += 1;
            let tag = if generation == Generation::Pre0_1_1 { "error_request_count" } else { "error_isl" };
            let (value, unit) = if tag == "error_isl" { (isl, "tokens") } else { (1, "requests") };
            metrics.push(metric(tag, &value.to_string(), unit));
            if cancelled {
                r#"{"code":499,"type":"RequestCancellationError","message":"synthetic error message"}"#
            } else {
                r#"{"code":500,"type":"aiohttp.ClientResponseError","message":"synthetic error message"}"#
            }
        } else {
            let ttft_tag = if generation == Generation::Pre0_1_1 { "ttft" } else { "time_to_first_token" };
            metrics.push(metric("input_sequence_length", &isl.to_string(), "tokens"));
            match generation {
                // 0.13 writes the first-token time in microseconds and the latency in seconds here, to exercise
                // conversion by unit (AIPerf itself writes milliseconds).
                Generation::V0_13 => {
                    metrics.push(metric(ttft_tag, &format!("{}", ttft_ms * 1000.0), "us"));
                    metrics.push(metric("request_latency", &format!("{}", latency_ms / 1000.0), "sec"));
                    metrics.push(metric("usage_prompt_tokens", &isl.to_string(), "tokens"));
                    metrics.push(metric("usage_prompt_cache_read_tokens", &(isl / 2).to_string(), "tokens"));
                }
                _ => {
                    metrics.push(metric(ttft_tag, &format!("{ttft_ms}"), "ms"));
                    metrics.push(metric("request_latency", &format!("{latency_ms}"), "ms"));
                }
            }
            if generation == Generation::Pre0_1_1 {
                metrics.push(metric("request_count", "1", "requests"));
                metrics.push(metric("min_request_timestamp", &start.to_string(), "ns"));
                metrics.push(metric("max_response_timestamp", &end.to_string(), "ns"));
            }
            let chunks: Vec<String> = (0..osl.min(40)).map(|_| format!("{itl_ms}")).collect();
            metrics.push(metric("inter_chunk_latency", &format!("[{}]", chunks.join(",")), "ms"));
            metrics.push(metric("output_sequence_length", &osl.to_string(), "tokens"));
            metrics.push(metric("reasoning_token_count", &(osl / 4).to_string(), "tokens"));
            metrics.push(metric("inter_token_latency", &format!("{itl_ms}"), "ms"));
            metrics.push(metric(
                "output_token_throughput_per_user",
                &format!("{}", 1000.0 / itl_ms),
                "tokens/sec/user",
            ));
            "null"
        };
        match layout {
            Layout::Lines => {
                writeln!(out, r#"{{"metadata":{{{md}}},"metrics":{{{}}},"error":{error}}}"#, metrics.join(","))?;
                done.lines += 1;
            }
            Layout::Pretty => {
                writeln!(out, "{{\n  \"metadata\": {{{md}}},\n  \"metrics\": {{")?;
                writeln!(out, "    {}", metrics.join(",\n    "))?;
                writeln!(out, "  }},\n  \"error\": {error}\n}}")?;
                done.lines += 6 + metrics.len() as u64;
            }
        }
        done.requests += 1;
    }
    Ok(done)
}

/// Writes a 0.2+ summary JSON (schema 1.4) with `metrics` per-request metrics, pretty-printed as AIPerf does.
pub fn write_summary_json(out: &mut impl Write, metrics: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut text = String::from("{\n  \"schema_version\": \"1.4\",\n  \"aiperf_version\": \"0.13.0\",\n");
    text.push_str("  \"benchmark_id\": \"synthetic\",\n");
    text.push_str("  \"request_throughput\": {\n    \"unit\": \"requests/sec\",\n    \"avg\": 2.5\n  },\n");
    for m in 0..metrics {
        let avg = 1.0 + rng.below(10_000) as f64 / 10.0;
        let (max, p99, sum) = (avg * 2.0, avg * 1.9, avg * 100.0);
        text += &format!("  \"metric_{m}\": {{\n    \"unit\": \"ms\",\n    \"avg\": {avg},\n    \"min\": 0.5,\n");
        text += &format!("    \"max\": {max},\n    \"p50\": {avg},\n    \"p99\": {p99},\n    \"std\": 1.0,\n");
        text += &format!("    \"count\": 100,\n    \"sum\": {sum}\n  }},\n");
    }
    text.push_str("  \"input_config\": {\n    \"endpoint\": {\n      \"model_names\": [\"m\"]\n    }\n  },\n");
    text.push_str("  \"run_info\": {\n    \"cli_command\": \"aiperf profile synthetic error message\"\n  },\n");
    text.push_str(
        "  \"error_summary\": [\n    {\n      \"error_details\": {\"code\": 500, \"type\": \"ServerError\", ",
    );
    text.push_str("\"message\": \"synthetic error message\"},\n      \"count\": 2\n    }\n  ],\n");
    text.push_str("  \"was_cancelled\": false\n}\n");
    out.write_all(text.as_bytes())?;
    Ok(Generated { lines: text.bytes().filter(|&b| b == b'\n').count() as u64, ..Generated::default() })
}

/// Writes a summary CSV with `metrics` statistics rows: the 0.13 header, or the early one (`p1` fourth).
pub fn write_summary_csv(out: &mut impl Write, metrics: u64, early: bool, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let columns: &[&str] = if early {
        &["avg", "min", "max", "p1", "p5", "p25", "p50", "p75", "p90", "p95", "p99", "std"]
    } else {
        &["avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std"]
    };
    let mut lines = 0;
    write!(out, "Metric,{}\r\n", columns.join(","))?;
    lines += 1;
    for m in 0..metrics {
        let cells: Vec<String> = columns.iter().map(|_| format!("{:.2}", rng.below(100_000) as f64 / 100.0)).collect();
        write!(out, "Metric {m} (ms),{}\r\n", cells.join(","))?;
        lines += 1;
    }
    write!(
        out,
        "\r\nMetric,Value\r\nRequest Count,{}.00\r\nRequest Throughput (requests/sec),2.50\r\n",
        rng.below(1000)
    )?;
    lines += 4;
    Ok(Generated { lines, ..Generated::default() })
}
