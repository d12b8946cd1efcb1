//! Accelerators and models the roofline needs, from a TOML catalog.
//!
//! The built-in catalog (`crates/model/catalog/*.toml`, each entry with its sources) is compiled in; a user catalog
//! (`--catalog FILE`, same format, `[[accelerator]]` and `[[model]]` tables) adds entries or replaces built-in ones
//! with the same id. Ids match case-insensitively.

use serde::{Deserialize, Serialize};

/// One accelerator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    /// Short key (`H100`).
    pub id: String,
    /// Full name.
    pub name: String,
    /// Peak dense BF16 tensor throughput, TFLOP/s.
    pub bf16_dense_tflops: f64,
    /// Device memory, GB.
    pub hbm_gb: f64,
    /// Memory bandwidth, GB/s.
    pub memory_bandwidth_gbs: f64,
    /// Board power, W.
    pub power_watts: f64,
    /// Default price, $ per device-hour.
    pub price_per_hour: f64,
    /// Where the specifications come from.
    #[serde(default)]
    pub spec_sources: Vec<String>,
    /// Where the price comes from.
    #[serde(default)]
    pub price_source: String,
    /// Caveats.
    #[serde(default)]
    pub notes: String,
}

/// How a model's attention caches keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// Grouped-query attention (MHA and MQA included): `kv_heads × head_dim` keys and as many values per layer.
    Gqa,
    /// Multi-head latent attention (DeepSeek): one latent of `kv_lora_rank + qk_rope_head_dim` values per layer.
    Mla,
}

/// One model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Short key (`Llama-3.1-8B`).
    pub id: String,
    /// Hugging Face repository.
    #[serde(default)]
    pub hf_repo: String,
    /// Transformer layers.
    pub layers: u32,
    /// Hidden size.
    pub hidden_size: u32,
    /// Query heads.
    pub attention_heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// Total parameters.
    pub parameters: f64,
    /// Parameters used per token (the activated experts of a mixture of experts).
    pub active_parameters: f64,
    /// Attention kind.
    pub attention: Attention,
    /// MLA: rank of the compressed KV latent.
    #[serde(default)]
    pub kv_lora_rank: Option<u32>,
    /// MLA: dimension of the decoupled rotary key.
    #[serde(default)]
    pub qk_rope_head_dim: Option<u32>,
    /// Where the architecture comes from.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Caveats.
    #[serde(default)]
    pub notes: String,
}

impl Model {
    /// KV-cache bytes of one token with `dtype_bytes` per value:
    /// GQA `2 × layers × kv_heads × head_dim × dtype_bytes`; MLA `layers × (kv_lora_rank + qk_rope_head_dim) ×
    /// dtype_bytes`.
    pub fn kv_bytes_per_token(&self, dtype_bytes: f64) -> f64 {
        let per_layer = match self.attention {
            Attention::Gqa => 2.0 * f64::from(self.kv_heads) * f64::from(self.head_dim),
            Attention::Mla => f64::from(self.kv_lora_rank.unwrap_or(0) + self.qk_rope_head_dim.unwrap_or(0)),
        };
        f64::from(self.layers) * per_layer * dtype_bytes
    }

    /// FLOPs to prefill `n` tokens with nothing cached: `2 × active_parameters × n` for the weights plus
    /// `2 × layers × attention_heads × head_dim × n²` for causal attention (scores and weighted values, each
    /// `2 × n²/2 × heads × head_dim` per layer).
    pub fn prefill_flops(&self, n: f64) -> f64 {
        2.0 * self.active_parameters * n + self.attention_flops_per_token_squared() * n * n
    }

    /// The coefficient of `n²` in [`Model::prefill_flops`].
    pub fn attention_flops_per_token_squared(&self) -> f64 {
        2.0 * f64::from(self.layers) * f64::from(self.attention_heads) * f64::from(self.head_dim)
    }

    /// Bytes of the weights read per decode step: the active parameters × `dtype_bytes`.
    pub fn active_weight_bytes(&self, dtype_bytes: f64) -> f64 {
        self.active_parameters * dtype_bytes
    }
}

/// Accelerators and models.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Accelerators, in catalog order.
    #[serde(default, rename = "accelerator")]
    pub accelerators: Vec<Accelerator>,
    /// Models, in catalog order.
    #[serde(default, rename = "model")]
    pub models: Vec<Model>,
}

/// A catalog file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// Not valid TOML of the catalog's shape.
    #[error("line {line}: {message}")]
    Toml {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A number that must be positive is not.
    #[error("{id}: {field} must be a finite number > 0")]
    Invalid {
        /// Entry.
        id: String,
        /// Field.
        field: &'static str,
    },
}

const BUILTIN_ACCELERATORS: &str = include_str!("../catalog/accelerators.toml");
const BUILTIN_MODELS: &str = include_str!("../catalog/models.toml");

impl Catalog {
    /// The compiled-in catalog.
    pub fn builtin() -> Self {
        let mut catalog = Self::from_toml(BUILTIN_ACCELERATORS).expect("the built-in accelerators parse");
        catalog.extend(Self::from_toml(BUILTIN_MODELS).expect("the built-in models parse"));
        catalog
    }

    /// Parses and checks a catalog file.
    pub fn from_toml(text: &str) -> Result<Self, CatalogError> {
        let catalog: Catalog = toml::from_str(text).map_err(|e| {
            let (line, message) = crate::toml_error(text, &e);
            CatalogError::Toml { line, message }
        })?;
        let positive = |id: &str, field, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(CatalogError::Invalid { id: id.to_owned(), field })
            }
        };
        for a in &catalog.accelerators {
            positive(&a.id, "bf16_dense_tflops", a.bf16_dense_tflops)?;
            positive(&a.id, "hbm_gb", a.hbm_gb)?;
            positive(&a.id, "memory_bandwidth_gbs", a.memory_bandwidth_gbs)?;
            positive(&a.id, "power_watts", a.power_watts)?;
        }
        for m in &catalog.models {
            positive(&m.id, "layers", f64::from(m.layers))?;
            positive(&m.id, "head_dim", f64::from(m.head_dim))?;
            positive(&m.id, "active_parameters", m.active_parameters)?;
            if m.attention == Attention::Mla && m.kv_lora_rank.is_none() {
                return Err(CatalogError::Invalid { id: m.id.clone(), field: "kv_lora_rank" });
            }
        }
        Ok(catalog)
    }

    /// Adds `other`'s entries, replacing those with the same id.
    pub fn extend(&mut self, other: Catalog) {
        for a in other.accelerators {
            match self.accelerators.iter_mut().find(|x| x.id.eq_ignore_ascii_case(&a.id)) {
                Some(slot) => *slot = a,
                None => self.accelerators.push(a),
            }
        }
        for m in other.models {
            match self.models.iter_mut().find(|x| x.id.eq_ignore_ascii_case(&m.id)) {
                Some(slot) => *slot = m,
                None => self.models.push(m),
            }
        }
    }

    /// The accelerator `id`.
    pub fn accelerator(&self, id: &str) -> Option<&Accelerator> {
        self.accelerators.iter().find(|a| a.id.eq_ignore_ascii_case(id))
    }

    /// The model `id`.
    pub fn model(&self, id: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.id.eq_ignore_ascii_case(id))
    }
}
