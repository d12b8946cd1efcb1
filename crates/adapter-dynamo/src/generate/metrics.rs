//! Synthetic Dynamo Prometheus scrapes.

use std::io::{self, Write};

use super::{Generated, Rng};

/// Writes `scrapes` scrapes ten seconds apart, each after an RFC 3339 line: a frontend serving one model, `workers`
/// workers (ids above 2^53, two data-parallel ranks each) with their component and KV-stats series, and a KVBM block.
/// `samples` counts the canonical samples they hold.
pub fn write_metrics(out: &mut impl Write, scrapes: u64, workers: u64, seed: u64) -> io::Result<Generated> {
    let mut rng = Rng::new(seed);
    let mut done = Generated::default();
    let mut ttft_count = 0u64;
    let mut output_tokens = 0u64;
    for scrape in 0..scrapes {
        let t = 1_767_225_600 + scrape as i64 * 10;
        let mut lines: Vec<String> = vec![infertrace_adapter::time::format_rfc3339(t * 1_000_000_000)];
        let m = "model=\"qwen/qwen3-0.6b\"";
        lines.push("# HELP dynamo_frontend_inflight_requests Number of inflight requests".into());
        lines.push("# TYPE dynamo_frontend_inflight_requests gauge".into());
        lines.push(format!("dynamo_frontend_inflight_requests{{{m}}} {}", rng.below(64)));
        lines.push("# TYPE dynamo_frontend_queued_requests gauge".into());
        lines.push(format!("dynamo_frontend_queued_requests{{{m}}} {}", rng.below(8)));
        ttft_count += rng.below(100);
        lines.push("# TYPE dynamo_frontend_time_to_first_token_seconds histogram".into());
        lines.push(format!("dynamo_frontend_time_to_first_token_seconds_bucket{{{m},le=\"+Inf\"}} {ttft_count}"));
        lines.push(format!("dynamo_frontend_time_to_first_token_seconds_sum{{{m}}} {}", ttft_count as f64 * 0.25));
        lines.push(format!("dynamo_frontend_time_to_first_token_seconds_count{{{m}}} {ttft_count}"));
        output_tokens += rng.below(10_000);
        lines.push("# TYPE dynamo_frontend_output_tokens_total counter".into());
        lines.push(format!("dynamo_frontend_output_tokens_total{{{m}}} {output_tokens}"));
        lines.push("# TYPE dynamo_frontend_requests_total counter".into());
        lines.push(format!(
            concat!(
                "dynamo_frontend_requests_total{{endpoint=\"chat_completions\",error_type=\"\",{m},",
                "request_type=\"stream\",status=\"success\"}} {ttft_count}"
            ),
            m = m,
            ttft_count = ttft_count
        ));
        done.samples += 5;
        lines.push("# TYPE dynamo_frontend_worker_active_prefill_tokens gauge".into());
        for w in 0..workers {
            for dp in 0..2 {
                let id = 7_587_888_160_958_627_596u64.wrapping_add(w);
                lines.push(format!(
                    concat!(
                        "dynamo_frontend_worker_active_prefill_tokens",
                        "{{dp_rank=\"{}\",worker_id=\"{}\",worker_type=\"prefill\"}} {}"
                    ),
                    dp,
                    id,
                    rng.below(4096)
                ));
                done.samples += 1;
            }
        }
        lines.push("# TYPE dynamo_component_kvstats_gpu_cache_usage_percent gauge".into());
        for w in 0..workers {
            lines.push(format!(
                concat!(
                    "dynamo_component_kvstats_gpu_cache_usage_percent",
                    "{{dynamo_component=\"backend{}\",dynamo_namespace=\"dynamo\"}} {}"
                ),
                w,
                rng.below(1000) as f64 / 1000.0
            ));
            done.samples += 1;
        }
        lines.push("# TYPE kvbm_host_cache_hit_rate gauge".into());
        lines.push(format!("kvbm_host_cache_hit_rate {}", rng.below(100) as f64 / 100.0));
        lines.push("# TYPE kvbm_offload_blocks_d2h counter".into());
        lines.push(format!("kvbm_offload_blocks_d2h {}", rng.below(100_000)));
        done.samples += 1;
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        done.lines += lines.len() as u64;
    }
    Ok(done)
}
