//! Machine telemetry: real dcgm-exporter and node_exporter output read with the values a person reads off it, and
//! measured energy in `metrics --json` computed by hand from a hand-made scrape series.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Float64Type;
use infertrace_schema::{EngineSample, read_table};

/// Every `(instance, metric, value)` of a dataset's samples, in stored order.
fn samples(dir: &Path) -> Vec<(String, String, f64)> {
    let batch = read_table::<EngineSample>(dir).unwrap();
    let text = |name: &str| {
        let column = arrow::compute::cast(batch.column_by_name(name).unwrap(), &arrow::datatypes::DataType::Utf8);
        column.unwrap()
    };
    let (instances, metrics) = (text("instance"), text("metric"));
    let values = batch.column_by_name("value").unwrap().as_primitive::<Float64Type>().clone();
    (0..batch.num_rows())
        .map(|i| {
            let instance = instances.as_string::<i32>();
            let instance = if instance.is_null(i) { String::new() } else { instance.value(i).to_owned() };
            (instance, metrics.as_string::<i32>().value(i).to_owned(), values.value(i))
        })
        .collect()
}

fn value(samples: &[(String, String, f64)], instance: &str, metric: &str) -> f64 {
    let found: Vec<f64> = samples.iter().filter(|s| s.0 == instance && s.1 == metric).map(|s| s.2).collect();
    assert_eq!(found.len(), 1, "{instance} {metric}: {samples:?}");
    found[0]
}

fn normalized(input: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(input.file_stem().unwrap());
    common::run(&[input.to_path_buf()], &out);
    out
}

#[test]
fn real_dcgm_exporter_output_reads_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = common::testdata().join("dcgm-exporter");

    // The L40S scrape: 35.686000 W, 5551899580 mJ, 45459 MiB free, 0 MiB used, DRAM 0.000131, PCIe 175084 and
    // 19831 bytes/s.
    let got = samples(&normalized(&data.join("4.x-l40s/upcloud-accelerator-metrics.prom"), dir.path()));
    let gpu = "gpu1-wl8sg GPU0";
    assert_eq!(got.len(), 8, "{got:?}");
    assert_eq!(value(&got, gpu, "gpu_power_w"), 35.686);
    assert_eq!(value(&got, gpu, "gpu_energy_joules_total"), 5_551_899.58);
    assert_eq!(value(&got, gpu, "gpu_utilization"), 0.0);
    assert_eq!(value(&got, gpu, "gpu_memory_free_bytes"), 45_459.0 * 1_048_576.0);
    assert_eq!(value(&got, gpu, "gpu_memory_used_bytes"), 0.0);
    assert_eq!(value(&got, gpu, "gpu_dram_active"), 0.000131);
    assert_eq!(value(&got, gpu, "pcie_tx_bytes_per_s"), 175_084.0);
    assert_eq!(value(&got, gpu, "pcie_rx_bytes_per_s"), 19_831.0);

    // The A100 with MIG slices: the whole GPU's DRAM activity 0.690789, slice 13's 0.800339; 409.692000 W,
    // 319159391 mJ, 4845 MiB used.
    let got = samples(&normalized(&data.join("2.x-a100-mig/cloud-native-docs.prom"), dir.path()));
    let gpu = "ub20-a100-k8s GPU0";
    assert_eq!(value(&got, gpu, "gpu_power_w"), 409.692);
    assert_eq!(value(&got, gpu, "gpu_energy_joules_total"), 319_159.391);
    assert_eq!(value(&got, gpu, "gpu_memory_used_bytes"), 4_845.0 * 1_048_576.0);
    assert_eq!(value(&got, gpu, "gpu_dram_active"), 0.690789);
    assert_eq!(value(&got, "ub20-a100-k8s GPU0 MIG13", "gpu_dram_active"), 0.800339);
    assert_eq!(value(&got, gpu, "pcie_rx_bytes_per_s"), 97_863_601.0);

    // The 8×H100 node: GPU 0 runs a Dynamo vLLM decode worker (113.611000 W), GPU 1 nothing (68.347000 W).
    let got = samples(&normalized(&data.join("4.x-h100-pods/aicr-accelerator-metrics.prom"), dir.path()));
    let pod = "gpu-node-1 GPU0 pod dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5";
    assert_eq!(value(&got, pod, "gpu_power_w"), 113.611);
    assert_eq!(value(&got, "gpu-node-1 GPU1", "gpu_power_w"), 68.347);
    assert_eq!(got.iter().filter(|s| s.1 == "gpu_power_w").count(), 8);
}

#[test]
fn real_node_exporter_output_reads_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::testdata().join("node-exporter/e2e-fixture/e2e-output.prom");
    let got = samples(&normalized(&input, dir.path()));
    assert_eq!(value(&got, "sda", "disk_read_bytes_total"), 513_713_216_512.0);
    assert_eq!(value(&got, "sda", "disk_written_bytes_total"), 258_916_880_384.0);
    assert_eq!(value(&got, "eth0", "network_receive_bytes_total"), 68_210_035_552.0);
    assert_eq!(value(&got, "eth0", "network_transmit_bytes_total"), 9_315_587_528.0);
    assert_eq!(value(&got, "", "host_memory_total_bytes"), 3_831_959_552.0);
    assert_eq!(value(&got, "", "cpu_energy_joules_total"), 240_422.366267);
    // Eight CPUs: every mode but idle and iowait adds to 4183.22 s, those two to 89825.49 s (summed by hand).
    assert!((value(&got, "", "cpu_busy_seconds_total") - 4183.22).abs() < 1e-9);
    assert!((value(&got, "", "cpu_idle_seconds_total") - 89825.49).abs() < 1e-9);
}

/// Four scrapes ten seconds apart: GPU 0 with an energy counter (and power, which the counter overrides), GPU 1
/// with power only.
const SCRAPES: &str = "\
# 2026-11-02T10:00:00Z
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 300.000000
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 100.000000
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 1000000
# 2026-11-02T10:00:10Z
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 300.000000
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 200.000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 4000000
# 2026-11-02T10:00:20Z
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 300.000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 7500000
# 2026-11-02T10:00:30Z
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 100.000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 500000
";

#[test]
fn measured_energy_in_metrics_json_is_the_hand_computed_energy() {
    let dir = tempfile::tempdir().unwrap();
    let scrapes = dir.path().join("dcgm.prom");
    std::fs::write(&scrapes, SCRAPES).unwrap();
    let profile = dir.path().join("cost.toml");
    std::fs::write(
        &profile,
        "[accelerator]\ncount = 2\nprice_per_hour = 2.0\nwatts = 700\npue = 1.5\n[energy]\nprice_per_kwh = 0.3\n",
    )
    .unwrap();
    // 14 requests of 75,194 input and 4,474 output tokens (the Mooncake excerpt).
    let requests = common::testdata().join("mooncake/fast25/conversation_trace_excerpt.jsonl");
    let out = dir.path().join("ds");
    common::run(&[scrapes, requests], &out);
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["metrics", "--json", "--cost"])
        .arg(&profile)
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let energy = &json["energy"];
    // GPU 0, counter in mJ: 1,000,000 → 4,000,000 (+3,000 J) → 7,500,000 (+3,500 J) → 500,000 (a reset: +500 J)
    // = 7,000 J. GPU 1, power by the trapezoid rule: (100 + 200) / 2 × 10 + (200 + 300) / 2 × 10 +
    // (300 + 100) / 2 × 10 = 1,500 + 2,500 + 2,000 = 6,000 J.
    let instances = energy["instances"].as_array().unwrap();
    let got: Vec<_> = instances
        .iter()
        .map(|i| {
            (
                i["instance"].as_str().unwrap(),
                i["from"].as_str().unwrap(),
                i["joules"].as_f64().unwrap(),
                i["resets"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("n1 GPU0", "counter", 7_000.0, 1), ("n1 GPU1", "power", 6_000.0, 0)]);
    assert_eq!(instances[1]["mean_power_w"], 200.0);
    let close = |value: &serde_json::Value, expected: f64| {
        let value = value.as_f64().unwrap();
        assert!((value - expected).abs() <= 1e-9 * expected, "{value} ≠ {expected}");
    };
    // 13,000 J = 0.0036111… kWh; 79,668 tokens and 4,474 output tokens per that.
    close(&energy["kwh"], 13_000.0 / 3.6e6);
    close(&energy["tokens_per_kwh"], 79_668.0 * 3.6e6 / 13_000.0);
    close(&energy["output_tokens_per_kwh"], 4_474.0 * 3.6e6 / 13_000.0);
    // The cost uses the measured energy (× PUE 1.5), not 2 × 700 W over the span, and prices it at $0.30.
    let cost = &json["overall"]["cost"];
    assert_eq!(cost["energy_from"], "measured");
    close(&cost["energy_kwh"], 13_000.0 / 3.6e6 * 1.5);
    close(&cost["energy_dollars"], 13_000.0 / 3.6e6 * 1.5 * 0.3);

    // The example profile of an owned fleet: PUE 1.3, $0.12 a kWh.
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["metrics", "--json", "--cost", "../../examples/cost/owned-fleet.toml"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    close(&json["overall"]["cost"]["energy_dollars"], 13_000.0 / 3.6e6 * 1.3 * 0.12);
    // `model --from` takes the watts per accelerator as drawn: 13,000 J over 2 × 30 s of sampled time.
    let output =
        Command::new(env!("CARGO_BIN_EXE_infertrace")).args(["model", "--json", "--from"]).arg(&out).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    close(&json["measured"]["params"]["price.watts"]["value"], 13_000.0 / 60.0);
}

#[test]
fn the_report_draws_what_was_sampled_and_the_measured_energy() {
    let dir = tempfile::tempdir().unwrap();
    let scrapes = dir.path().join("dcgm.prom");
    // Power and energy of the hand-made series, and GPU 0's frame buffer in use in two of its scrapes.
    let with_memory = SCRAPES
        .replace(
            "# 2026-11-02T10:00:10Z\n",
            "# 2026-11-02T10:00:10Z\nDCGM_FI_DEV_FB_USED{gpu=\"0\",Hostname=\"n1\"} 1024\n",
        )
        .replace(
            "# 2026-11-02T10:00:20Z\n",
            "# 2026-11-02T10:00:20Z\nDCGM_FI_DEV_FB_USED{gpu=\"0\",Hostname=\"n1\"} 2048\n",
        );
    std::fs::write(&scrapes, with_memory).unwrap();
    let out = dir.path().join("ds");
    common::run(&[scrapes], &out);
    let html = dir.path().join("r.html");
    let output =
        Command::new(env!("CARGO_BIN_EXE_infertrace")).arg("report").arg(&out).arg("-o").arg(&html).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let html = std::fs::read_to_string(&html).unwrap();
    // The charts of every report, then power and device memory: PCIe and NVLink were not sampled, so not drawn.
    assert_eq!(html.matches("<svg").count(), infertrace_report::CHARTS + 2);
    assert!(html.contains("<title>Accelerator power over time</title>"));
    assert!(html.contains("<title>Device memory (HBM) in use over time</title>"));
    assert!(!html.contains("PCIe sent over time"));
    // 7,000 J and 6,000 J: 0.00194 and 0.00167 kWh, and their mean power over 30 s.
    assert!(html.contains("<h2>Measured energy</h2>"), "{html}");
    assert!(html.contains("<th>n1 GPU0</th><td>dcgm-exporter</td><td>gpu_energy_joules_total increase</td><td>0.00194 kWh</td><td>30.0 s</td><td>233 W</td>"), "{html}");
    assert!(html.contains("<th>n1 GPU1</th><td>dcgm-exporter</td><td>gpu_power_w integrated</td><td>0.00167 kWh</td><td>30.0 s</td><td>200 W</td>"), "{html}");
}
