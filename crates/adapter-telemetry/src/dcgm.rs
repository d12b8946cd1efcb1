//! `dcgm-exporter`: NVIDIA dcgm-exporter's Prometheus `/metrics` (default port 9400), one scrape or many per file.
//!
//! dcgm-exporter writes every DCGM field it watches as a gauge or counter named `DCGM_FI_<field>`, one series per
//! GPU, labelled `gpu` (the index), `UUID`, `device` (`nvidia0`), `modelName`, `Hostname`, and, on Kubernetes,
//! `container`, `namespace` and `pod` of the workload using the GPU. It writes no sample timestamps, so a file of
//! scrapes needs a time line before each (as `date -Is; curl …` loops write) or the file's modification time, as
//! for every scrape format.
//!
//! The fields and their units are those of DCGM's field list (`dcgm_fields.h`) and the exporter's counter files
//! (`etc/default-counters.csv`, `etc/dcp-metrics-included.csv`); each is turned into the canonical unit:
//!
//! | DCGM field | unit | canonical metric |
//! |---|---|---|
//! | `DCGM_FI_DEV_POWER_USAGE` | W | `gpu_power_w` |
//! | `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` | mJ since the driver's load (counter) | `gpu_energy_joules_total` (÷ 1,000) |
//! | `DCGM_FI_DEV_GPU_UTIL` | % | `gpu_utilization` (÷ 100) |
//! | `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` | MiB | `gpu_memory_used_bytes`, `gpu_memory_free_bytes` (× 2²⁰) |
//! | `DCGM_FI_PROF_DRAM_ACTIVE` | ratio 0..1 | `gpu_dram_active` |
//! | `DCGM_FI_PROF_PCIE_TX_BYTES`, `_RX_BYTES` | bytes/s | `pcie_tx_bytes_per_s`, `pcie_rx_bytes_per_s` |
//! | `DCGM_FI_PROF_NVLINK_TX_BYTES`, `_RX_BYTES` | bytes/s | `nvlink_tx_bytes_per_s`, `nvlink_rx_bytes_per_s` |
//!
//! The instance of a series is the GPU: `<Hostname> GPU<gpu>` (the `UUID` where there is no index), then
//! `MIG<GPU_I_ID>` for a MIG slice, then `pod <namespace>/<pod>` where the exporter names the workload, so that a
//! GPU's series can be put beside the engine that ran on it. Power and energy belong to the physical GPU: for a MIG
//! slice they are kept as `<Hostname> GPU<gpu>`, once per scrape, so the slices' copies are not counted twice. A
//! GPU given to another pod during a capture becomes another instance. Other fields (clocks, temperatures, XID errors, …) are listed in the manifest's
//! `details.unmapped_series`.

use std::io::BufRead;

use infertrace_adapter::prometheus::{SampleLine, Target, names_series, read_scrapes};
use infertrace_adapter::{Adapter, Confidence, Head, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::metrics;

/// The NVIDIA dcgm-exporter `/metrics` adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct DcgmExporter;

impl DcgmExporter {
    /// Format id.
    pub const ID: &'static str = "dcgm-exporter";
}

/// MiB, the unit of DCGM's frame-buffer fields.
const MIB: f64 = 1_048_576.0;

/// DCGM field → canonical metric and the factor from the field's unit to the metric's.
const MAPPINGS: &[(&str, &str, f64)] = &[
    ("DCGM_FI_DEV_POWER_USAGE", metrics::GPU_POWER_W, 1.0),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", metrics::GPU_ENERGY_JOULES_TOTAL, 1e-3),
    ("DCGM_FI_DEV_GPU_UTIL", metrics::GPU_UTILIZATION, 0.01),
    ("DCGM_FI_DEV_FB_USED", metrics::GPU_MEMORY_USED_BYTES, MIB),
    ("DCGM_FI_DEV_FB_FREE", metrics::GPU_MEMORY_FREE_BYTES, MIB),
    ("DCGM_FI_PROF_DRAM_ACTIVE", metrics::GPU_DRAM_ACTIVE, 1.0),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", metrics::PCIE_TX_BYTES_PER_S, 1.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", metrics::PCIE_RX_BYTES_PER_S, 1.0),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", metrics::NVLINK_TX_BYTES_PER_S, 1.0),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", metrics::NVLINK_RX_BYTES_PER_S, 1.0),
];

/// Fields of the whole device: under MIG the exporter may write them once per GPU instance, and they belong to the
/// physical GPU.
const DEVICE_LEVEL: &[&str] = &["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"];

/// The first of `names` that `sample` has a non-empty label for.
fn label<'a>(sample: &'a SampleLine<'_>, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|name| sample.label(name).filter(|v| !v.is_empty()))
}

/// The GPU a series belongs to: host, index (or UUID), MIG instance, and the pod using it; a device-level field of
/// a MIG slice belongs to the physical GPU (`host GPU<n>`), so the slices' copies of it are one series.
fn instance(sample: &SampleLine<'_>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    // Label names of every release: `Hostname` became `hostname` after 4.5.3-4.8.2; `--use-old-namespace`
    // writes `uuid`, `pod_name` and `pod_namespace`.
    if let Some(host) = label(sample, &["Hostname", "hostname"]) {
        parts.push(host.to_owned());
    }
    match (label(sample, &["gpu"]), label(sample, &["UUID", "uuid"])) {
        (Some(index), _) => parts.push(format!("GPU{index}")),
        (None, Some(uuid)) => parts.push(uuid.to_owned()),
        (None, None) => {}
    }
    let mig = label(sample, &["GPU_I_ID"]);
    if mig.is_some() && DEVICE_LEVEL.contains(&sample.name) {
        return (!parts.is_empty()).then(|| parts.join(" "));
    }
    if let Some(mig) = mig {
        parts.push(format!("MIG{mig}"));
    }
    if let Some(pod) = label(sample, &["pod", "pod_name"]) {
        match label(sample, &["namespace", "pod_namespace"]) {
            Some(namespace) => parts.push(format!("pod {namespace}/{pod}")),
            None => parts.push(format!("pod {pod}")),
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn target(sample: &SampleLine<'_>) -> Option<Target> {
    let (_, metric, scale) = MAPPINGS.iter().find(|(name, _, _)| *name == sample.name)?;
    Some(Target::new(metric, 0, instance(sample)).scaled(*scale))
}

impl Adapter for DcgmExporter {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "NVIDIA dcgm-exporter /metrics scrapes: GPU power, energy, utilization, memory, HBM activity, PCIe and NVLink"
    }

    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence> {
        names_series(head, "DCGM_FI_").then_some(Confidence::High)
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
    fn fields_become_canonical_units_per_gpu() {
        let text = "\
2026-11-02T10:00:00Z
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-aa\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\",container=\"vllm\",namespace=\"serving\",pod=\"vllm-0\"} 412.5
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-bb\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\"} 71.25
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\",UUID=\"GPU-bb\",Hostname=\"node-a\"} 123456789
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-bb\",Hostname=\"node-a\"} 37
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{UUID=\"GPU-cc\"} 1024
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu=\"1\",UUID=\"GPU-bb\",Hostname=\"node-a\"} 1980
";
        let options = ParseOptions::default();
        let ctx = ParseContext { source_file: "dcgm.prom", options: &options, modified: None, sidecars: None };
        let mut sink = CollectSink::default();
        let report = DcgmExporter.parse(&mut text.as_bytes(), &ctx, &mut sink).unwrap();
        assert_eq!(sink.diagnostics, []);
        let t0 = parse_rfc3339("2026-11-02T10:00:00Z").unwrap();
        let got: Vec<_> = sink.samples.iter().map(|s| (s.time, s.instance.as_deref(), &*s.metric, s.value)).collect();
        assert_eq!(
            got,
            [
                (t0, Some("node-a GPU1"), "gpu_energy_joules_total", 123_456.789),
                (t0, Some("GPU-cc"), "gpu_memory_used_bytes", 1024.0 * 1_048_576.0),
                (t0, Some("node-a GPU0 pod serving/vllm-0"), "gpu_power_w", 412.5),
                (t0, Some("node-a GPU1"), "gpu_power_w", 71.25),
                (t0, Some("node-a GPU1"), "gpu_utilization", 0.37),
            ]
        );
        assert_eq!(report.details["unmapped_series"], serde_json::json!(["DCGM_FI_DEV_SM_CLOCK"]));
        assert_eq!(DcgmExporter.detect(text.as_bytes()), Some(Confidence::High));
    }

    #[test]
    fn every_mapped_metric_is_canonical() {
        assert!(MAPPINGS.iter().all(|(_, m, _)| metrics::is_known(m)));
    }
}
