//! Synthetic scrapes in the shapes of the exporters' real output (`testdata/dcgm-exporter/`,
//! `testdata/node-exporter/`): their families, label sets and number formats, with values that change from one
//! scrape to the next (counters grow, gauges move), for tests that serve them as a live endpoint would.

use std::io::{self, Write};

use infertrace_adapter::time::format_rfc3339;

/// What a generator wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Canonical samples the scrapes hold.
    pub samples: u64,
    /// Lines written, time lines included.
    pub lines: u64,
}

/// A value in `0..n` that moves with the scrape, GPU and seed.
fn wobble(seed: u64, scrape: u64, part: u64, n: u64) -> u64 {
    let mut x = seed ^ scrape.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ part.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (x ^ (x >> 29)) % n.max(1)
}

/// Writes scrapes `first..first + scrapes` of dcgm-exporter on one host with `gpus` GPUs, each after an RFC 3339 line
/// ten seconds after the last: power, the energy counter (grown by power × 10 s), utilization, frame buffer used and
/// free, DRAM activity, PCIe and NVLink bytes per second, each with its `# HELP` and `# TYPE` lines and the labels
/// of dcgm-exporter 4.x, plus a temperature field that is not mapped. Ten canonical samples per GPU.
pub fn write_dcgm(out: &mut impl Write, first: u64, scrapes: u64, gpus: u64, seed: u64) -> io::Result<Written> {
    let mut done = Written::default();
    let labels = |g: u64| {
        format!(
            "gpu=\"{g}\",UUID=\"GPU-{seed:08x}-{g:04}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{g}\",\
             modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-{seed}\",DCGM_FI_DRIVER_VERSION=\"580.105.08\"",
            0x18 + g * 0x11
        )
    };
    for scrape in first..first + scrapes {
        let t = 1_767_225_600 + scrape as i64 * 10;
        let mut lines = vec![format_rfc3339(t * 1_000_000_000)];
        let mut family = |name: &str, kind: &str, help: &str, value: &dyn Fn(u64) -> String| {
            lines.push(format!("# HELP {name} {help}"));
            lines.push(format!("# TYPE {name} {kind}"));
            for g in 0..gpus {
                lines.push(format!("{name}{{{}}} {}", labels(g), value(g)));
            }
        };
        let power = |g: u64| 70.0 + wobble(seed, scrape, g, 630_000) as f64 / 1000.0;
        family("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", &|g| format!("{:.6}", power(g)));
        // Energy in mJ: the power of every scrape so far, held for ten seconds each.
        family(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            &|g| {
                let joules: f64 =
                    (0..=scrape).map(|s| (70.0 + wobble(seed, s, g, 630_000) as f64 / 1000.0) * 10.0).sum();
                format!("{}", (joules * 1000.0) as u64)
            },
        );
        family("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", &|g| {
            wobble(seed, scrape, g + 10, 101).to_string()
        });
        family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", &|g| {
            (81_559 - wobble(seed, scrape, g + 20, 80_000)).to_string()
        });
        family("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", &|g| {
            wobble(seed, scrape, g + 20, 80_000).to_string()
        });
        family("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", &|g| {
            (30 + wobble(seed, scrape, g + 30, 50)).to_string()
        });
        family(
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            &|g| format!("{:.6}", wobble(seed, scrape, g + 40, 1_000_000) as f64 / 1e6),
        );
        family(
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "gauge",
            "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
            &|g| wobble(seed, scrape, g + 50, 30_000_000_000).to_string(),
        );
        family(
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "gauge",
            "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
            &|g| wobble(seed, scrape, g + 60, 30_000_000_000).to_string(),
        );
        // Not in the exporter's default counter files: added by users who watch NVLink (NVIDIA/DCGM#149).
        family(
            "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "gauge",
            "The number of bytes of active NvLink tx (transmit) data including both header and payload.",
            &|g| wobble(seed, scrape, g + 70, 100_000_000_000).to_string(),
        );
        family(
            "DCGM_FI_PROF_NVLINK_RX_BYTES",
            "gauge",
            "The number of bytes of active NvLink rx (read) data including both header and payload.",
            &|g| wobble(seed, scrape, g + 80, 100_000_000_000).to_string(),
        );
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        done.lines += lines.len() as u64;
        done.samples += 10 * gpus;
    }
    Ok(done)
}

/// Writes scrapes `first..first + scrapes` of node_exporter on a host with `cpus` CPUs, two disks and two network
/// interfaces, each after an RFC 3339 line ten seconds after the last, in the shape of its end-to-end fixture:
/// CPU seconds per CPU and mode, disk and network byte counters, memory, RAPL package energy, and the load average
/// (not mapped). Thirteen canonical samples per scrape: CPU busy and idle, read and written bytes of two disks,
/// available and total memory, received and sent bytes of two interfaces, and the CPU packages' energy.
pub fn write_node(out: &mut impl Write, first: u64, scrapes: u64, cpus: u64, seed: u64) -> io::Result<Written> {
    const MODES: [&str; 8] = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"];
    let mut done = Written::default();
    for scrape in first..first + scrapes {
        let t = 1_767_225_600 + scrape as i64 * 10;
        let mut lines = vec![format_rfc3339(t * 1_000_000_000)];
        lines.push("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.".into());
        lines.push("# TYPE node_cpu_seconds_total counter".into());
        for cpu in 0..cpus {
            for (m, mode) in MODES.iter().enumerate() {
                let seconds = (scrape + 1) as f64 * (1.0 + (cpu * 8 + m as u64) as f64 / 100.0);
                lines.push(format!("node_cpu_seconds_total{{cpu=\"{cpu}\",mode=\"{mode}\"}} {seconds:.2}"));
            }
        }
        for (family, help) in [
            ("node_disk_read_bytes_total", "The total number of bytes read successfully."),
            ("node_disk_written_bytes_total", "The total number of bytes written successfully."),
        ] {
            lines.push(format!("# HELP {family} {help}"));
            lines.push(format!("# TYPE {family} counter"));
            for (d, device) in ["nvme0n1", "sda"].iter().enumerate() {
                let bytes = (scrape + 1) * (4096 + wobble(seed, scrape, d as u64, 1 << 20)) * 512;
                lines.push(format!("{family}{{device=\"{device}\"}} {}", bytes as f64));
            }
        }
        lines.push("# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.".into());
        lines.push("# TYPE node_memory_MemAvailable_bytes gauge".into());
        lines.push(format!("node_memory_MemAvailable_bytes {:e}", (1u64 << 34) + wobble(seed, scrape, 7, 1 << 30)));
        lines.push("# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.".into());
        lines.push("# TYPE node_memory_MemTotal_bytes gauge".into());
        lines.push(format!("node_memory_MemTotal_bytes {:e}", (1u64 << 36) as f64));
        lines.push("# HELP node_load1 1m load average.".into());
        lines.push("# TYPE node_load1 gauge".into());
        lines.push(format!("node_load1 {:.2}", wobble(seed, scrape, 8, 800) as f64 / 100.0));
        for (family, help) in [
            ("node_network_receive_bytes_total", "Network device statistic receive_bytes."),
            ("node_network_transmit_bytes_total", "Network device statistic transmit_bytes."),
        ] {
            lines.push(format!("# HELP {family} {help}"));
            lines.push(format!("# TYPE {family} counter"));
            for (d, device) in ["eth0", "lo"].iter().enumerate() {
                let bytes = (scrape + 1) * (1000 + wobble(seed, scrape, 10 + d as u64, 1 << 24));
                lines.push(format!("{family}{{device=\"{device}\"}} {}", bytes as f64));
            }
        }
        lines.push("# HELP node_rapl_package_joules_total Current RAPL package value in joules".into());
        lines.push("# TYPE node_rapl_package_joules_total counter".into());
        for index in 0..2 {
            let joules = (scrape + 1) as f64 * 1234.5 + index as f64;
            lines.push(format!(
                "node_rapl_package_joules_total{{index=\"{index}\",path=\"/sys/class/powercap/intel-rapl:{index}\"}} {joules}"
            ));
        }
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        done.lines += lines.len() as u64;
        // CPU busy and idle, 2 disks × 2, memory × 2, 2 interfaces × 2, CPU energy.
        done.samples += 2 + 4 + 2 + 4 + 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
    use infertrace_schema::metrics;

    use super::*;
    use crate::{DcgmExporter, NodeExporter};

    fn parse(adapter: &dyn Adapter, text: &[u8]) -> CollectSink {
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "gen.prom", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        adapter.parse(&mut &text[..], &ctx, &mut sink).unwrap();
        sink
    }

    #[test]
    fn generated_scrapes_read_back_as_counted() {
        let mut dcgm = Vec::new();
        let written = write_dcgm(&mut dcgm, 0, 3, 2, 7).unwrap();
        assert_eq!(DcgmExporter.detect(&dcgm), Some(infertrace_adapter::Confidence::High));
        let sink = parse(&DcgmExporter, &dcgm);
        assert_eq!((sink.samples.len() as u64, sink.diagnostics.len()), (written.samples, 0));
        assert_eq!(written.samples, 3 * 2 * 10);
        // The energy counter grows by the power held for ten seconds.
        let energy: Vec<f64> = sink
            .samples
            .iter()
            .filter(|s| &*s.metric == metrics::GPU_ENERGY_JOULES_TOTAL && s.instance.as_deref() == Some("node-7 GPU0"))
            .map(|s| s.value)
            .collect();
        let power: Vec<f64> = sink
            .samples
            .iter()
            .filter(|s| &*s.metric == metrics::GPU_POWER_W && s.instance.as_deref() == Some("node-7 GPU0"))
            .map(|s| s.value)
            .collect();
        assert_eq!(energy.len(), 3);
        assert!((energy[1] - energy[0] - power[1] * 10.0).abs() < 0.01, "{energy:?} {power:?}");

        let mut node = Vec::new();
        let written = write_node(&mut node, 5, 2, 4, 7).unwrap();
        assert_eq!(NodeExporter.detect(&node), Some(infertrace_adapter::Confidence::High));
        let sink = parse(&NodeExporter, &node);
        assert_eq!((sink.samples.len() as u64, sink.diagnostics.len()), (written.samples, 0));
        // Scrape 5 of 4 CPUs: busy = 6 × Σ over the six busy modes of (1 + (8 cpu + m) / 100).
        let busy: f64 =
            (0..4u64).flat_map(|cpu| (2..8u64).map(move |m| 6.0 * (1.0 + (cpu * 8 + m) as f64 / 100.0))).sum();
        let got = sink.samples.iter().find(|s| &*s.metric == metrics::CPU_BUSY_SECONDS_TOTAL).unwrap().value;
        assert!((got - busy).abs() < 1e-6, "{got} vs {busy}");
    }
}
