//! Synthetic GenAI-Perf inputs: perf_analyzer's `profile_export.json` and GenAI-Perf's summary CSV.

use std::io::{self, Write};

use super::{Generated, Rng};

/// Writes a `profile_export.json` as perf_analyzer 2024-05+ does (one line, no trailing newline, OpenAI service
/// kind) with `experiments` concurrency levels of `requests` streamed requests each. Every tenth request (index 9,
/// 19, …) has no responses. Prompts and completions are the text `synthetic prompt` / `synthetic completion`.
pub fn write_profile_export(out: &mut impl Write, experiments: u64, requests: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated { lines: 1, ..Generated::default() };
    let mut t: u64 = 1_767_225_600_000_000_000;
    let mut list = Vec::new();
    for e in 0..experiments {
        let start = t;
        let mut rows = Vec::new();
        for i in 0..requests {
            t += 1_000_000 + rng.below(50_000_000);
            let chunks = if i % 10 == 9 { 0 } else { 1 + rng.below(20) };
            let mut at = t + 10_000_000 + rng.below(200_000_000);
            let mut stamps = Vec::new();
            let mut outputs = Vec::new();
            for c in 0..chunks {
                stamps.push(at);
                at += 1_000_000 + rng.below(40_000_000);
                let chunk =
                    serde_json::json!({"choices": [{"delta": {"content": format!("synthetic completion {c}")}}]});
                outputs.push(serde_json::json!({"response": format!("data: {chunk}\n\n")}));
            }
            let payload =
                serde_json::json!({"messages": [{"role": "user", "content": "synthetic prompt"}], "stream": true});
            rows.push(serde_json::json!({
                "timestamp": t, "request_inputs": {"payload": payload.to_string()},
                "response_timestamps": stamps, "response_outputs": outputs,
            }));
            done.requests += 1;
            done.failed += u64::from(chunks == 0);
        }
        list.push(serde_json::json!({
            "experiment": {"mode": "concurrency", "value": 1 << e}, "requests": rows, "window_boundaries": [start, t],
        }));
    }
    let document = serde_json::json!({
        "experiments": list, "version": "2.45.0", "service_kind": "openai", "endpoint": "v1/chat/completions",
    });
    serde_json::to_writer(out, &document)?;
    Ok(done)
}

/// Writes a GenAI-Perf 0.0.14+ summary CSV (CRLF, thousands quoted like `"1,234.50"`).
pub fn write_summary_csv(out: &mut impl Write, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let mut line = |out: &mut dyn Write, text: &str| -> io::Result<()> {
        done.lines += 1;
        write!(out, "{text}\r\n")
    };
    line(out, "Metric,avg,min,max,p99,p95,p90,p75,p50,p25,p10,p5,p1")?;
    for label in
        ["Time To First Token (ms)", "Request Latency (ms)", "Inter Token Latency (ms)", "Output Sequence Length"]
    {
        let values: Vec<String> = (0..12)
            .map(|_| {
                let v = rng.below(2_000_000) as f64 / 100.0;
                let text = format!("{v:.2}");
                // Python's `{:,.2f}`: a thousands separator, which the csv writer quotes.
                let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
                if int.len() > 3 {
                    format!("\"{},{}.{frac}\"", &int[..int.len() - 3], &int[int.len() - 3..])
                } else {
                    text
                }
            })
            .collect();
        line(out, &format!("{label},{}", values.join(",")))?;
    }
    line(out, "")?;
    line(out, "Metric,Value")?;
    line(out, &format!("Request Throughput (per sec),{:.2}", rng.below(10_000) as f64 / 100.0))?;
    line(out, "Request Count (count),100.00")?;
    Ok(done)
}
