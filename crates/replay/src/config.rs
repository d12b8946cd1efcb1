//! The serving configuration a trace is replayed against (`--config cluster.toml`).

use serde::{Deserialize, Serialize};

/// Everything the replay needs to know about the cluster. Sections and fields not given take the documented
/// defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Model and accelerator (catalog ids) and their parallelism.
    pub hardware: Hardware,
    /// Efficiency factors of the roofline (what `infertrace calibrate` fits).
    #[serde(default)]
    pub efficiency: Efficiency,
    /// KV memory.
    #[serde(default)]
    pub memory: Memory,
    /// Scheduler limits.
    #[serde(default)]
    pub scheduler: Scheduler,
    /// Instances and routing.
    #[serde(default)]
    pub cluster: Cluster,
    /// KV compression ratio κ (1 = none): divides KV bytes in memory, reads and transfers.
    #[serde(default = "one")]
    pub kappa: f64,
    /// Prefix-cache tiers of each instance; no prefix reuse without.
    #[serde(default)]
    pub cache: Option<CacheConfig>,
}

/// When a prefix found in a tier below the accelerator's memory is loaded instead of recomputed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retrieve {
    /// When loading it is faster than recomputing it (the breakeven of `docs/model.md`, per tier).
    #[default]
    Faster,
    /// Always.
    Always,
    /// Never: only the accelerator's own memory is reused.
    Never,
}

/// Prefix-cache tiers of each instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Replacement policy (`lru`, `fifo`, `lfu`); default lru.
    #[serde(default = "lru")]
    pub policy: infertrace_cache::Policy,
    /// `exclusive` or `inclusive`; default exclusive.
    #[serde(default = "exclusive")]
    pub placement: infertrace_cache::Placement,
    /// The retrieve-vs-recompute policy; default `faster`.
    #[serde(default)]
    pub retrieve: Retrieve,
    /// Tiers, fastest first; `gpu` first when present.
    pub tiers: Vec<TierConfig>,
}

fn lru() -> infertrace_cache::Policy {
    infertrace_cache::Policy::Lru
}

fn exclusive() -> infertrace_cache::Placement {
    infertrace_cache::Placement::Exclusive
}

/// One tier of an instance's prefix cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    /// `gpu`, `cpu`, `disk` or `remote`.
    pub tier: infertrace_schema::CacheTier,
    /// Tokens of KV it holds; for `gpu`, default the instance's KV memory.
    pub capacity_tokens: Option<f64>,
    /// Read bandwidth, GB/s (not for `gpu`, whose hits cost nothing to load).
    pub bandwidth_gbs: Option<f64>,
    /// Fixed latency of a load, s.
    #[serde(default)]
    pub latency_s: f64,
}

fn one() -> f64 {
    1.0
}

/// Model and accelerator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// Catalog model id.
    pub model: String,
    /// Catalog accelerator id.
    pub accelerator: String,
    /// Accelerators per instance (tensor parallelism); default 1.
    #[serde(default = "one")]
    pub tp: f64,
    /// Bytes per weight and KV value; default 2 (bf16).
    #[serde(default = "two")]
    pub dtype_bytes: f64,
}

fn two() -> f64 {
    2.0
}

/// Efficiency factors: the fraction of peak compute and bandwidth an iteration achieves, and a fixed cost per
/// iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Efficiency {
    /// Fraction of peak dense FLOP/s (model FLOPs utilization); default 0.5.
    pub mfu: f64,
    /// Fraction of memory bandwidth; default 0.7.
    pub mbu: f64,
    /// Fixed seconds per iteration (scheduling, sampling, kernel launches); default 0.
    pub step_overhead_s: f64,
}

impl Default for Efficiency {
    fn default() -> Self {
        Self { mfu: 0.5, mbu: 0.7, step_overhead_s: 0.0 }
    }
}

/// KV memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Memory {
    /// Fraction of device memory the engine may use (vLLM's `gpu_memory_utilization`); default 0.9.
    pub gpu_memory_utilization: f64,
    /// KV capacity of one instance in tokens, when known (vLLM logs it); else derived from memory.
    pub kv_tokens: Option<f64>,
    /// Tokens per KV block; default 16.
    pub block_size: u32,
}

impl Default for Memory {
    fn default() -> Self {
        Self { gpu_memory_utilization: 0.9, kv_tokens: None, block_size: 16 }
    }
}

/// Scheduler limits (vLLM's names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scheduler {
    /// Most sequences in a batch; default 256.
    pub max_num_seqs: u32,
    /// Most tokens an iteration schedules; default 8192.
    pub max_num_batched_tokens: u32,
    /// Split prompts across iterations; default true. Without it a prompt is scheduled whole, alone if it is longer
    /// than the token budget.
    pub chunked_prefill: bool,
}

impl Default for Scheduler {
    fn default() -> Self {
        Self { max_num_seqs: 256, max_num_batched_tokens: 8192, chunked_prefill: true }
    }
}

/// How requests are routed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Instances in turn.
    #[default]
    RoundRobin,
    /// The instance with the fewest tokens still to process (prompt tokens to prefill, tokens to generate).
    LeastLoaded,
    /// As a KV-aware router: the instance with the least work once the request joins it, counting only the prompt
    /// tokens its prefix cache does not already hold (`load + prompt − cached prefix`); least loaded without a
    /// cache.
    PrefixAware,
}

/// Instances and routing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// Collocated instances (prefill and decode together); default 1. Ignored when both pools are given.
    pub instances: u32,
    /// Prefill instances of a disaggregated deployment.
    pub prefill_instances: Option<u32>,
    /// Decode instances of a disaggregated deployment.
    pub decode_instances: Option<u32>,
    /// Link between the pools, GB/s; default 50.
    pub link_gbs: f64,
    /// Fixed latency of one KV transfer, s.
    pub link_latency_s: f64,
    /// Routing policy (for each pool).
    pub routing: Routing,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            instances: 1,
            prefill_instances: None,
            decode_instances: None,
            link_gbs: 50.0,
            link_latency_s: 0.0,
            routing: Routing::RoundRobin,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not valid TOML of the configuration's shape.
    #[error("line {line}: {message}")]
    Toml {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A value out of range.
    #[error("{0}")]
    Range(String),
}

impl Config {
    /// Parses and checks a configuration.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, message) = infertrace_model::toml_error(text, &e);
            ConfigError::Toml { line, message }
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |what: &str| Err(ConfigError::Range(what.to_owned()));
        // between: lo < v ≤ hi; at_least: v ≥ lo; NaN passes neither.
        let between = |v: f64, lo: f64, hi: f64| v.is_finite() && v > lo && v <= hi;
        let at_least = |v: f64, lo: f64| v.is_finite() && v >= lo;
        let e = &self.efficiency;
        if !between(e.mfu, 0.0, 1.0) || !between(e.mbu, 0.0, 1.0) {
            return fail("efficiency.mfu and efficiency.mbu must be above 0 and at most 1");
        }
        if !at_least(e.step_overhead_s, 0.0) {
            return fail("efficiency.step_overhead_s must be a finite number ≥ 0");
        }
        if !at_least(self.hardware.tp, 1.0) || !between(self.hardware.dtype_bytes, 0.0, f64::MAX) {
            return fail("hardware.tp must be ≥ 1 and hardware.dtype_bytes > 0");
        }
        if !at_least(self.kappa, 1.0) {
            return fail("kappa must be ≥ 1");
        }
        let m = &self.memory;
        if !between(m.gpu_memory_utilization, 0.0, 1.0) || m.block_size == 0 {
            return fail("memory.gpu_memory_utilization must be above 0 and at most 1, memory.block_size above 0");
        }
        if m.kv_tokens.is_some_and(|k| !at_least(k, 1.0)) {
            return fail("memory.kv_tokens must be ≥ 1");
        }
        let s = &self.scheduler;
        if s.max_num_seqs == 0 || s.max_num_batched_tokens == 0 {
            return fail("scheduler.max_num_seqs and scheduler.max_num_batched_tokens must be above 0");
        }
        let c = &self.cluster;
        let disaggregated = c.prefill_instances.is_some() || c.decode_instances.is_some();
        if disaggregated && (c.prefill_instances.unwrap_or(0) == 0 || c.decode_instances.unwrap_or(0) == 0) {
            return fail("a disaggregated cluster needs cluster.prefill_instances and cluster.decode_instances ≥ 1");
        }
        if !disaggregated && c.instances == 0 {
            return fail("cluster.instances must be ≥ 1");
        }
        if !between(c.link_gbs, 0.0, f64::MAX) || !at_least(c.link_latency_s, 0.0) {
            return fail("cluster.link_gbs must be > 0 and cluster.link_latency_s ≥ 0");
        }
        if let Some(cache) = &self.cache {
            use infertrace_schema::CacheTier;
            for (i, t) in cache.tiers.iter().enumerate() {
                if t.capacity_tokens.is_some_and(|c| !at_least(c, 0.0)) || !at_least(t.latency_s, 0.0) {
                    return fail("cache tiers need capacity_tokens ≥ 0 and latency_s ≥ 0");
                }
                if t.tier == CacheTier::Gpu && i > 0 {
                    return fail("the gpu cache tier must come first");
                }
                if t.tier != CacheTier::Gpu
                    && !(t.capacity_tokens.is_some() && t.bandwidth_gbs.is_some_and(|b| between(b, 0.0, f64::MAX)))
                {
                    return fail("cache tiers other than gpu need capacity_tokens and bandwidth_gbs > 0");
                }
            }
            if cache.tiers.iter().enumerate().any(|(i, t)| cache.tiers[..i].iter().any(|u| u.tier == t.tier)) {
                return fail("each cache tier may appear once");
            }
        }
        Ok(())
    }

    /// Whether prefill and decode run in separate pools.
    pub fn disaggregated(&self) -> bool {
        self.cluster.prefill_instances.is_some() && self.cluster.decode_instances.is_some()
    }
}
