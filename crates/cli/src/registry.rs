//! The closed list of adapters the CLI knows, and `--format` values.
//!
//! Two values name no adapter of the list: `csv` and `jsonl` read any per-request log through a mapping file
//! (`--map`), so their adapter is built at run time ([`mapped_adapter`]) and is never auto-detected.

use std::path::Path;

use anyhow::Context as _;
use clap::ValueEnum;
use infertrace_adapter::{Adapter, Confidence, Head};
use infertrace_adapter_dynamo::{Aiperf, DynamoKvEvents, DynamoLog, DynamoMetrics, DynamoRequestTrace, GenaiPerf};
use infertrace_adapter_genai::{LitellmSpend, OpenaiUsage, OtelGenai};
use infertrace_adapter_mapped::{InputKind, MappedAdapter, Mapping};
use infertrace_adapter_sglang::{SglangBench, SglangKvEvents, SglangLog, SglangMetrics, SglangRequestMetrics};
use infertrace_adapter_telemetry::{DcgmExporter, NodeExporter};
use infertrace_adapter_traces::{
    AzureLlm, BailianTrace, BurstGpt, LlmServingSim, Mooncake, MooncakeDelta, RagPulse, TraceLab, WekaTrace,
};
use infertrace_adapter_vllm::{VllmBench, VllmKvEvents, VllmLog, VllmMetrics, VllmOtlp};

/// Every adapter, in the order `infertrace formats` lists them.
pub static ADAPTERS: &[&dyn Adapter] = &[
    &Mooncake,
    &MooncakeDelta,
    &AzureLlm,
    &WekaTrace,
    &BailianTrace,
    &BurstGpt,
    &LlmServingSim,
    &RagPulse,
    &TraceLab,
    &VllmLog,
    &VllmBench,
    &VllmMetrics,
    &VllmOtlp,
    &VllmKvEvents,
    &SglangLog,
    &SglangRequestMetrics,
    &SglangMetrics,
    &SglangKvEvents,
    &SglangBench,
    &DynamoRequestTrace,
    &DynamoLog,
    &DynamoKvEvents,
    &DynamoMetrics,
    &Aiperf,
    &GenaiPerf,
    &DcgmExporter,
    &NodeExporter,
    &OtelGenai,
    &LitellmSpend,
    &OpenaiUsage,
];

/// Formats written by benchmark clients, applications and gateways: what they record is what a user saw (network
/// and client time included) and what the application knows (its sessions, turns, tool calls, reasoning tokens),
/// so `infertrace merge` prefers those columns of theirs over a server's.
pub const CLIENT_FORMATS: &[&str] =
    &["vllm-bench", "sglang-bench", "aiperf", "genai-perf", "otel-genai", "litellm-spend", "openai-usage"];

/// Values of `--format`: `auto` or one adapter id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Pick the adapter per file from its first bytes.
    Auto,
    /// Mooncake/Kimi JSONL trace.
    Mooncake,
    /// Dynamo mooncake-delta trace (never detected: choose it).
    #[value(name = "mooncake-delta")]
    MooncakeDelta,
    /// Azure LLM inference CSV trace.
    #[value(name = "azure-llm")]
    AzureLlm,
    /// WEKA kv-cache-tester Claude Code trace.
    #[value(name = "weka-trace")]
    WekaTrace,
    /// Qwen Bailian usage trace.
    #[value(name = "bailian-trace")]
    BailianTrace,
    /// BurstGPT CSV trace.
    Burstgpt,
    /// LLMServingSim benchmark artifacts and workloads.
    Llmservingsim,
    /// RAGPulse trace and its length maps.
    Ragpulse,
    /// TraceLab round traces and replay CSVs.
    Tracelab,
    /// vLLM server/engine text log.
    #[value(name = "vllm-log")]
    VllmLog,
    /// vLLM benchmark result JSON or console summary.
    #[value(name = "vllm-bench")]
    VllmBench,
    /// vLLM Prometheus /metrics scrapes.
    #[value(name = "vllm-metrics")]
    VllmMetrics,
    /// vLLM OpenTelemetry spans as OTLP/JSON.
    #[value(name = "vllm-otlp")]
    VllmOtlp,
    /// vLLM KV-cache events.
    #[value(name = "vllm-kv-events")]
    VllmKvEvents,
    /// SGLang scheduler log.
    #[value(name = "sglang-log")]
    SglangLog,
    /// SGLang --export-metrics-to-file request records.
    #[value(name = "sglang-request-metrics")]
    SglangRequestMetrics,
    /// SGLang Prometheus /metrics scrapes.
    #[value(name = "sglang-metrics")]
    SglangMetrics,
    /// SGLang KV-cache events.
    #[value(name = "sglang-kv-events")]
    SglangKvEvents,
    /// SGLang bench_serving result JSONL.
    #[value(name = "sglang-bench")]
    SglangBench,
    /// Dynamo request trace (dynamo.request.trace.v1).
    #[value(name = "dynamo-request-trace")]
    DynamoRequestTrace,
    /// Dynamo log, text or JSONL.
    #[value(name = "dynamo-log")]
    DynamoLog,
    /// Dynamo router KV events.
    #[value(name = "dynamo-kv-events")]
    DynamoKvEvents,
    /// Dynamo Prometheus /metrics scrapes.
    #[value(name = "dynamo-metrics")]
    DynamoMetrics,
    /// AIPerf profile export.
    Aiperf,
    /// GenAI-Perf profile export.
    #[value(name = "genai-perf")]
    GenaiPerf,
    /// NVIDIA dcgm-exporter /metrics scrapes (GPU power, energy, memory, PCIe/NVLink).
    #[value(name = "dcgm-exporter")]
    DcgmExporter,
    /// Prometheus node_exporter /metrics scrapes (disk, network, CPU, memory).
    #[value(name = "node-exporter")]
    NodeExporter,
    /// OpenTelemetry GenAI spans (OTLP/JSON or protobuf): LLM calls, agents, tools.
    #[value(name = "otel-genai")]
    OtelGenai,
    /// LiteLLM proxy spend logs and standard logging payloads.
    #[value(name = "litellm-spend")]
    LitellmSpend,
    /// OpenAI-compatible responses with a usage object, one per line.
    #[value(name = "openai-usage")]
    OpenaiUsage,
    /// Any per-request CSV with a header, read through --map (never detected).
    Csv,
    /// Any per-request JSONL, read through --map (never detected).
    Jsonl,
}

impl FormatArg {
    /// The adapter of the static list this value names, or `None` for `auto` and for the mapped formats
    /// (`csv`, `jsonl`: see [`mapped`](Self::mapped)).
    pub fn adapter(self) -> Option<&'static dyn Adapter> {
        let name = self.to_possible_value().expect("no variant is skipped").get_name().to_owned();
        ADAPTERS.iter().copied().find(|a| a.id() == name)
    }

    /// The input kind of a mapped format (`csv`, `jsonl`), which needs `--map`.
    pub fn mapped(self) -> Option<InputKind> {
        match self {
            FormatArg::Csv => Some(InputKind::Csv),
            FormatArg::Jsonl => Some(InputKind::Jsonl),
            _ => None,
        }
    }
}

/// The adapter for `--format csv|jsonl --map <path>`: the mapping file read and checked, errors on one line
/// naming the file.
pub fn mapped_adapter(kind: InputKind, path: &Path) -> anyhow::Result<MappedAdapter> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read mapping {}", path.display()))?;
    let mapping = Mapping::from_toml(&text).with_context(|| format!("mapping {}", path.display()))?;
    Ok(MappedAdapter::new(kind, mapping))
}

/// The adapter with this id.
pub fn by_id(id: &str) -> Option<&'static dyn Adapter> {
    ADAPTERS.iter().copied().find(|a| a.id() == id)
}

/// Ids of all adapters, comma-separated, for messages.
pub fn ids() -> String {
    ADAPTERS.iter().map(|a| a.id()).collect::<Vec<_>>().join(", ")
}

/// Every `--format` choice but `auto`, for messages that tell the user what to pass.
pub fn choices() -> String {
    format!("{}, or csv/jsonl with --map <mapping.toml>", ids())
}

/// Why no single adapter was chosen for an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DetectError {
    /// No adapter claims the input.
    Unknown,
    /// Several adapters claim it with the same confidence.
    Ambiguous(Vec<&'static str>),
}

/// The adapter that claims `head` with the highest confidence. Every adapter is asked about one [`Head`], decoded
/// once.
pub fn detect(head: &[u8]) -> Result<&'static dyn Adapter, DetectError> {
    let head = Head::new(head);
    let claims: Vec<(Confidence, &'static dyn Adapter)> =
        ADAPTERS.iter().filter_map(|&a| a.detect_head(&head).map(|c| (c, a))).collect();
    let Some(best) = claims.iter().map(|(c, _)| *c).max() else { return Err(DetectError::Unknown) };
    let top: Vec<_> = claims.iter().filter(|(c, _)| *c == best).map(|(_, a)| *a).collect();
    match top.as_slice() {
        [one] => Ok(*one),
        many => Err(DetectError::Ambiguous(many.iter().map(|a| a.id()).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_formats_are_registered_adapters() {
        for id in CLIENT_FORMATS {
            assert!(ADAPTERS.iter().any(|a| a.id() == *id), "{id} is not an adapter id");
        }
    }

    #[test]
    fn every_adapter_has_a_format_value_and_back() {
        let listed = |v: &&FormatArg| **v != FormatArg::Auto && v.mapped().is_none();
        let values: Vec<String> = FormatArg::value_variants()
            .iter()
            .filter(listed)
            .map(|v| v.to_possible_value().unwrap().get_name().to_owned())
            .collect();
        let ids: Vec<&str> = ADAPTERS.iter().map(|a| a.id()).collect();
        assert_eq!(values, ids);
        for value in FormatArg::value_variants().iter().filter(listed) {
            assert!(value.adapter().is_some(), "{value:?}");
        }
        assert!(FormatArg::Auto.adapter().is_none());
        // The mapped formats are values too, named as their adapters' ids, and never in the detected list.
        for kind in InputKind::ALL {
            let value = FormatArg::from_str(kind.id(), false).unwrap();
            assert_eq!(value.mapped(), Some(*kind));
            assert!(value.adapter().is_none() && by_id(kind.id()).is_none());
        }
    }

    #[test]
    fn detection_picks_one_adapter_or_says_why_not() {
        assert_eq!(detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n").map(|a| a.id()), Ok("azure-llm"));
        assert_eq!(
            detect(br#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}"#).map(|a| a.id()),
            Ok("mooncake")
        );
        assert_eq!(detect(b"\x00\x01binary").map(|a| a.id()), Err(DetectError::Unknown));
    }
}
