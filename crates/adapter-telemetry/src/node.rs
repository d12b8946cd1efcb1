//! `node-exporter`: Prometheus node_exporter's `/metrics` (default port 9100), one scrape or many per file.
//!
//! node_exporter reads the host's kernel counters and writes them as Prometheus families named `node_…`, counters
//! cumulative since boot. The ones a serving host's capacity turns on map onto canonical metrics:
//!
//! | node_exporter family | canonical metric | instance |
//! |---|---|---|
//! | `node_disk_read_bytes_total`, `node_disk_written_bytes_total` | `disk_read_bytes_total`, `disk_written_bytes_total` | the `device` |
//! | `node_network_receive_bytes_total`, `node_network_transmit_bytes_total` | `network_receive_bytes_total`, `network_transmit_bytes_total` | the `device` |
//! | `node_cpu_seconds_total` (`mode` `idle`, `iowait`) | `cpu_idle_seconds_total`, summed over CPUs and modes | the host |
//! | `node_cpu_seconds_total` (every other `mode`) | `cpu_busy_seconds_total`, summed over CPUs and modes | the host |
//! | `node_memory_MemTotal_bytes`, `node_memory_MemAvailable_bytes` | `host_memory_total_bytes`, `host_memory_available_bytes` | the host |
//! | `node_rapl_package_joules_total` | `cpu_energy_joules_total`, summed over the packages (`index`) | the host |
//!
//! The RAPL counters are there only where the exporter may read them (root on kernels since 2020); the `core`
//! and `uncore` domains are parts of a package and are not added to it.
//!
//! node_exporter does not name its host in its own output; a scrape saved through Prometheus (a federation dump)
//! carries an `instance` label, which is kept as the host, before the device where there is one (`10.0.0.5:9100
//! nvme0n1`). Every other family is listed in the manifest's `details.unmapped_series`.

use std::io::BufRead;

use infertrace_adapter::prometheus::{SampleLine, Target, names_series, read_scrapes};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::metrics;

/// The Prometheus node_exporter `/metrics` adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeExporter;

impl NodeExporter {
    /// Format id.
    pub const ID: &'static str = "node-exporter";
}

/// Families kept per device.
const PER_DEVICE: &[(&str, &str)] = &[
    ("node_disk_read_bytes_total", metrics::DISK_READ_BYTES_TOTAL),
    ("node_disk_written_bytes_total", metrics::DISK_WRITTEN_BYTES_TOTAL),
    ("node_network_receive_bytes_total", metrics::NETWORK_RECEIVE_BYTES_TOTAL),
    ("node_network_transmit_bytes_total", metrics::NETWORK_TRANSMIT_BYTES_TOTAL),
];

/// Families kept per host.
const PER_HOST: &[(&str, &str)] = &[
    ("node_memory_MemTotal_bytes", metrics::HOST_MEMORY_TOTAL_BYTES),
    ("node_memory_MemAvailable_bytes", metrics::HOST_MEMORY_AVAILABLE_BYTES),
];

/// CPU modes that are not work.
const IDLE_MODES: &[&str] = &["idle", "iowait"];

fn target(sample: &SampleLine<'_>) -> Option<Target> {
    let host = sample.label("instance").filter(|h| !h.is_empty());
    if sample.name == "node_rapl_package_joules_total" {
        return Some(Target::new(metrics::CPU_ENERGY_JOULES_TOTAL, 0, host.map(str::to_owned)).summed());
    }
    if sample.name == "node_cpu_seconds_total" {
        let mode = sample.label("mode")?;
        let metric =
            if IDLE_MODES.contains(&mode) { metrics::CPU_IDLE_SECONDS_TOTAL } else { metrics::CPU_BUSY_SECONDS_TOTAL };
        return Some(Target::new(metric, 0, host.map(str::to_owned)).summed());
    }
    if let Some((_, metric)) = PER_HOST.iter().find(|(name, _)| *name == sample.name) {
        return Some(Target::new(metric, 0, host.map(str::to_owned)));
    }
    let (_, metric) = PER_DEVICE.iter().find(|(name, _)| *name == sample.name)?;
    let device = sample.label("device")?;
    let instance = match host {
        Some(host) => format!("{host} {device}"),
        None => device.to_owned(),
    };
    Some(Target::new(metric, 0, Some(instance)))
}

impl Adapter for NodeExporter {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "Prometheus node_exporter /metrics scrapes: disk and network bytes, CPU time and memory per host"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        names_series(head, "node_").then_some(Confidence::High)
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        read_scrapes(input, ctx, sink, Self::ID, &target)
    }
}

#[cfg(test)]
mod tests {
    use infertrace_adapter::time::parse_rfc3339;
    use infertrace_adapter::{CollectSink, ParseOptions};

    use super::*;

    #[test]
    fn cpu_time_is_summed_per_host_and_devices_kept_apart() {
        let text = "\
# 2026-11-02T10:00:05Z
# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 100.5
node_cpu_seconds_total{cpu=\"0\",mode=\"iowait\"} 2.25
node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 40
node_cpu_seconds_total{cpu=\"1\",mode=\"idle\"} 90
node_cpu_seconds_total{cpu=\"1\",mode=\"system\"} 7.5
node_cpu_seconds_total{cpu=\"1\",mode=\"user\"} 51
# TYPE node_disk_read_bytes_total counter
node_disk_read_bytes_total{device=\"nvme0n1\"} 5.12e+09
node_disk_read_bytes_total{device=\"sda\"} 4096
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes 2.5e+10
# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device=\"eth0\",instance=\"10.0.0.5:9100\"} 7e6
# TYPE node_load1 gauge
node_load1 0.5
";
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "node.prom", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = NodeExporter.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        assert_eq!(sink.diagnostics, []);
        let t0 = parse_rfc3339("2026-11-02T10:00:05Z").unwrap();
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.instance.as_deref(), &*s.metric, s.value)).collect();
        assert_eq!(
            got,
            [
                // Busy: 40 (cpu 0 user) + 7.5 + 51 (cpu 1); idle: 100.5 + 2.25 (cpu 0) + 90 (cpu 1).
                (t0, None, "cpu_busy_seconds_total", 98.5),
                (t0, None, "cpu_idle_seconds_total", 192.75),
                (t0, Some("nvme0n1"), "disk_read_bytes_total", 5.12e9),
                (t0, Some("sda"), "disk_read_bytes_total", 4096.0),
                (t0, None, "host_memory_available_bytes", 2.5e10),
                (t0, Some("10.0.0.5:9100 eth0"), "network_receive_bytes_total", 7e6),
            ]
        );
        assert_eq!(report.details["unmapped_series"], serde_json::json!(["node_load1"]));
        assert_eq!(NodeExporter.detect(text.as_bytes()), Some(Confidence::High));
    }

    #[test]
    fn every_mapped_metric_is_canonical() {
        assert!(PER_DEVICE.iter().chain(PER_HOST).all(|(_, m)| metrics::is_known(m)));
        assert!(
            [metrics::CPU_BUSY_SECONDS_TOTAL, metrics::CPU_IDLE_SECONDS_TOTAL].iter().all(|m| metrics::is_known(m))
        );
    }
}
