//! The model's parameters: a TOML file, flags (`--set name=value`) and sweeps (`--vary`) address them by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Every parameter of the model. Missing sections and fields take the defaults documented on each field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// What the traffic looks like.
    pub workload: Workload,
    /// Prefill of the typical prefix.
    pub prefill: Prefill,
    /// Cache tiers by name (`hbm`, `dram`, `external`, …).
    pub tiers: BTreeMap<String, Tier>,
    /// Generation.
    pub decode: Decode,
    /// Prefill/decode disaggregation.
    pub disaggregation: Disaggregation,
    /// KV compression.
    pub compression: Compression,
    /// Prices and power.
    pub price: Price,
    /// Model and accelerator from the catalog, for the roofline.
    pub hardware: Option<Hardware>,
}

/// What the traffic looks like.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Visible output tokens per answer (`V`); default 400.
    pub visible_tokens: f64,
    /// Hidden reasoning tokens per visible token (`R`); default 0.
    pub reasoning_multiplier: f64,
    /// Fraction of a continued request's prompt that is a reusable prefix (`u`); bounds Σ hit rates.
    pub prefix_reuse: Option<f64>,
    /// Tokens of the typical prefix (`P`).
    pub prefix_tokens: Option<f64>,
    /// Prompt tokens of a request (the prefix and what is new); default: `prefix_tokens`.
    pub input_tokens: Option<f64>,
    /// Fraction of answers that succeed (`s`); default 1.
    pub success_rate: f64,
    /// Concurrent sessions, for the daily figures.
    pub sessions: f64,
    /// Requests per session per hour.
    pub turns_per_hour: f64,
    /// Fraction of requests that open a session, with nothing to reuse; default 0.
    pub new_session_fraction: f64,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            visible_tokens: 400.0,
            reasoning_multiplier: 0.0,
            prefix_reuse: None,
            prefix_tokens: None,
            input_tokens: None,
            success_rate: 1.0,
            sessions: 0.0,
            turns_per_hour: 0.0,
            new_session_fraction: 0.0,
        }
    }
}

/// Prefill of the typical prefix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Prefill {
    /// Seconds to recompute the typical prefix (`T_p`); else from the roofline.
    pub prefix_s: Option<f64>,
}

/// One cache tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tier {
    /// Fraction of continued requests whose prefix is served from this tier (`h_i`).
    pub hit_rate: f64,
    /// Seconds to retrieve the typical prefix (`L_i`); else `base_latency_s` + bytes / bandwidth.
    pub latency_s: Option<f64>,
    /// Fixed latency of a retrieval, s.
    pub base_latency_s: f64,
    /// Sustained read bandwidth, GB/s.
    pub bandwidth_gbs: Option<f64>,
    /// Reads are billed as storage I/O (`price.io_per_gb`).
    pub external: bool,
}

/// Generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Decode {
    /// Instance-seconds per generated token (`t_d`); else from the roofline.
    pub s_per_token: Option<f64>,
}

/// Prefill/decode disaggregation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Disaggregation {
    /// KV transfer and serialization per crossing request, s (`δ`); else input bytes / `link_gbs` +
    /// `serialization_s`.
    pub delta_s: Option<f64>,
    /// Fraction of requests crossing the boundary (`d`); 0 is collocated.
    pub crossing_fraction: f64,
    /// Link bandwidth between the pools, GB/s.
    pub link_gbs: Option<f64>,
    /// Fixed serialization cost per transfer, s.
    pub serialization_s: f64,
    /// Fraction of instance time specialized pools save on the same work (`g`); default 0.
    pub specialization_gain: f64,
    /// Extra hit rate the larger shared cache of a disaggregated deployment gives `shared_tier` (`Δh`).
    pub hit_rate_gain: f64,
    /// The tier that gains `hit_rate_gain`; default: the first external tier.
    pub shared_tier: Option<String>,
}

/// KV compression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Compression {
    /// Compression ratio (`κ` ≥ 1); default 1 (none).
    pub kappa: f64,
    /// Decompression cost per retrieved token, s (`c_dec`).
    pub decompress_s_per_token: f64,
    /// The tier whose capacity compression raises; default `hbm`.
    pub tier: String,
    /// KV capacity of that tier at κ = 1, tokens.
    pub capacity_tokens: Option<f64>,
    /// Hit rate of that tier against its capacity in tokens (from `infertrace mrc` or a dataset), as
    /// `[capacity, hit_rate]` points in increasing capacity; linear between points, flat beyond.
    pub hit_curve: Vec<[f64; 2]>,
    /// Largest κ considered for the best κ; default 8.
    pub kappa_max: f64,
}

impl Default for Compression {
    fn default() -> Self {
        Self {
            kappa: 1.0,
            decompress_s_per_token: 0.0,
            tier: "hbm".to_owned(),
            capacity_tokens: None,
            hit_curve: Vec::new(),
            kappa_max: 8.0,
        }
    }
}

/// Prices and power.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Price {
    /// $ per accelerator-hour; default: the catalog accelerator's.
    pub accelerator_per_hour: Option<f64>,
    /// W per accelerator; default: the catalog accelerator's.
    pub watts: Option<f64>,
    /// $ per GB read from external tiers.
    pub io_per_gb: f64,
}

/// Model and accelerator from the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hardware {
    /// Catalog model id.
    pub model: String,
    /// Catalog accelerator id.
    pub accelerator: String,
    /// Accelerators per instance (tensor parallelism); default 1.
    pub tp: f64,
    /// Achieved fraction of peak FLOP/s in prefill; default 0.5.
    pub mfu: f64,
    /// Achieved fraction of memory bandwidth in decode; default 0.7.
    pub mbu: f64,
    /// Bytes per weight and KV value; default 2 (bf16).
    pub dtype_bytes: f64,
    /// Decode batch size; default 32.
    pub batch: f64,
}

impl Default for Hardware {
    fn default() -> Self {
        Self {
            model: String::new(),
            accelerator: String::new(),
            tp: 1.0,
            mfu: 0.5,
            mbu: 0.7,
            dtype_bytes: 2.0,
            batch: 32.0,
        }
    }
}

/// A parameter name that does not exist or a value it cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// No such parameter.
    #[error("unknown parameter {0:?}; see docs/model.md for the names (R, u, h.<tier>, L.<tier>, kappa, delta, …)")]
    Unknown(String),
    /// The value is out of range.
    #[error("{name} = {value} is out of range ({range})")]
    Range {
        /// Parameter.
        name: String,
        /// Value given.
        value: f64,
        /// What is allowed.
        range: &'static str,
    },
    /// Not valid TOML of the parameters' shape.
    #[error("line {line}: {message}")]
    Toml {
        /// 1-based line.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

impl Params {
    /// Parses a parameter file.
    pub fn from_toml(text: &str) -> Result<Self, ParamError> {
        let params: Params = toml::from_str(text).map_err(|e| {
            let (line, message) = crate::toml_error(text, &e);
            ParamError::Toml { line, message }
        })?;
        params.validate()?;
        Ok(params)
    }

    /// Sets the parameter `name` (a TOML path such as `workload.reasoning_multiplier`, or an alias: `V`, `R`, `u`,
    /// `P`, `s`, `T_p`, `t_d`, `h.<tier>`, `L.<tier>`, `delta`, `d`, `kappa`, `c_dec`, `p_gpu`, `p_io`).
    /// A tier named in `h.<tier>`/`L.<tier>`/`tiers.<tier>.…` that does not exist is created.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), ParamError> {
        let unknown = || ParamError::Unknown(name.to_owned());
        let canonical = canonical_name(name);
        let path: Vec<&str> = canonical.split('.').collect();
        match path.as_slice() {
            ["workload", field] => {
                let w = &mut self.workload;
                match *field {
                    "visible_tokens" => w.visible_tokens = value,
                    "reasoning_multiplier" => w.reasoning_multiplier = value,
                    "prefix_reuse" => w.prefix_reuse = Some(value),
                    "prefix_tokens" => w.prefix_tokens = Some(value),
                    "input_tokens" => w.input_tokens = Some(value),
                    "success_rate" => w.success_rate = value,
                    "sessions" => w.sessions = value,
                    "turns_per_hour" => w.turns_per_hour = value,
                    "new_session_fraction" => w.new_session_fraction = value,
                    _ => return Err(unknown()),
                }
            }
            ["prefill", "prefix_s"] => self.prefill.prefix_s = Some(value),
            ["decode", "s_per_token"] => self.decode.s_per_token = Some(value),
            ["tiers", tier, field] => {
                let t = self.tiers.entry((*tier).to_owned()).or_default();
                match *field {
                    "hit_rate" => t.hit_rate = value,
                    "latency_s" => t.latency_s = Some(value),
                    "base_latency_s" => t.base_latency_s = value,
                    "bandwidth_gbs" => t.bandwidth_gbs = Some(value),
                    _ => return Err(unknown()),
                }
            }
            ["disaggregation", field] => {
                let d = &mut self.disaggregation;
                match *field {
                    "delta_s" => d.delta_s = Some(value),
                    "crossing_fraction" => d.crossing_fraction = value,
                    "link_gbs" => d.link_gbs = Some(value),
                    "serialization_s" => d.serialization_s = value,
                    "specialization_gain" => d.specialization_gain = value,
                    "hit_rate_gain" => d.hit_rate_gain = value,
                    _ => return Err(unknown()),
                }
            }
            ["compression", field] => {
                let c = &mut self.compression;
                match *field {
                    "kappa" => c.kappa = value,
                    "decompress_s_per_token" => c.decompress_s_per_token = value,
                    "capacity_tokens" => c.capacity_tokens = Some(value),
                    "kappa_max" => c.kappa_max = value,
                    _ => return Err(unknown()),
                }
            }
            ["price", field] => {
                let p = &mut self.price;
                match *field {
                    "accelerator_per_hour" => p.accelerator_per_hour = Some(value),
                    "watts" => p.watts = Some(value),
                    "io_per_gb" => p.io_per_gb = value,
                    _ => return Err(unknown()),
                }
            }
            ["hardware", field] => {
                let h = self.hardware.get_or_insert_with(Hardware::default);
                match *field {
                    "tp" => h.tp = value,
                    "mfu" => h.mfu = value,
                    "mbu" => h.mbu = value,
                    "dtype_bytes" => h.dtype_bytes = value,
                    "batch" => h.batch = value,
                    _ => return Err(unknown()),
                }
            }
            _ => return Err(unknown()),
        }
        self.validate()
    }

    /// Checks every range: fractions in 0..=1, κ ≥ 1, positive sizes and rates, non-negative times and prices.
    pub fn validate(&self) -> Result<(), ParamError> {
        let check = |name: &str, value: Option<f64>, ok: fn(f64) -> bool, range| match value {
            Some(v) if !v.is_finite() || !ok(v) => Err(ParamError::Range { name: name.to_owned(), value: v, range }),
            _ => Ok(()),
        };
        let fraction = |v: f64| (0.0..=1.0).contains(&v);
        let non_negative = |v: f64| v >= 0.0;
        let positive = |v: f64| v > 0.0;
        let w = &self.workload;
        check("workload.visible_tokens", Some(w.visible_tokens), non_negative, "≥ 0")?;
        check("workload.reasoning_multiplier", Some(w.reasoning_multiplier), non_negative, "≥ 0")?;
        check("workload.prefix_reuse", w.prefix_reuse, fraction, "0 to 1")?;
        check("workload.prefix_tokens", w.prefix_tokens, non_negative, "≥ 0")?;
        check("workload.input_tokens", w.input_tokens, non_negative, "≥ 0")?;
        check("workload.success_rate", Some(w.success_rate), |v| v > 0.0 && v <= 1.0, "above 0, at most 1")?;
        check("workload.sessions", Some(w.sessions), non_negative, "≥ 0")?;
        check("workload.turns_per_hour", Some(w.turns_per_hour), non_negative, "≥ 0")?;
        check("workload.new_session_fraction", Some(w.new_session_fraction), fraction, "0 to 1")?;
        check("prefill.prefix_s", self.prefill.prefix_s, non_negative, "≥ 0")?;
        check("decode.s_per_token", self.decode.s_per_token, non_negative, "≥ 0")?;
        for (name, t) in &self.tiers {
            check(&format!("tiers.{name}.hit_rate"), Some(t.hit_rate), fraction, "0 to 1")?;
            check(&format!("tiers.{name}.latency_s"), t.latency_s, non_negative, "≥ 0")?;
            check(&format!("tiers.{name}.base_latency_s"), Some(t.base_latency_s), non_negative, "≥ 0")?;
            check(&format!("tiers.{name}.bandwidth_gbs"), t.bandwidth_gbs, positive, "> 0")?;
        }
        let total: f64 = self.tiers.values().map(|t| t.hit_rate).sum();
        check("the sum of tier hit rates", Some(total), fraction, "0 to 1")?;
        let d = &self.disaggregation;
        check("disaggregation.delta_s", d.delta_s, non_negative, "≥ 0")?;
        check("disaggregation.crossing_fraction", Some(d.crossing_fraction), fraction, "0 to 1")?;
        check("disaggregation.link_gbs", d.link_gbs, positive, "> 0")?;
        check("disaggregation.serialization_s", Some(d.serialization_s), non_negative, "≥ 0")?;
        check(
            "disaggregation.specialization_gain",
            Some(d.specialization_gain),
            |v| (0.0..1.0).contains(&v),
            "0 to below 1",
        )?;
        check("disaggregation.hit_rate_gain", Some(d.hit_rate_gain), fraction, "0 to 1")?;
        let c = &self.compression;
        check("compression.kappa", Some(c.kappa), |v| v >= 1.0, "≥ 1")?;
        check("compression.kappa_max", Some(c.kappa_max), |v| v >= 1.0, "≥ 1")?;
        check("compression.decompress_s_per_token", Some(c.decompress_s_per_token), non_negative, "≥ 0")?;
        check("compression.capacity_tokens", c.capacity_tokens, positive, "> 0")?;
        for point in &c.hit_curve {
            check("compression.hit_curve capacity", Some(point[0]), non_negative, "≥ 0")?;
            check("compression.hit_curve hit rate", Some(point[1]), fraction, "0 to 1")?;
        }
        check("price.accelerator_per_hour", self.price.accelerator_per_hour, non_negative, "≥ 0")?;
        check("price.watts", self.price.watts, non_negative, "≥ 0")?;
        check("price.io_per_gb", Some(self.price.io_per_gb), non_negative, "≥ 0")?;
        if let Some(h) = &self.hardware {
            check("hardware.tp", Some(h.tp), |v| v >= 1.0, "≥ 1")?;
            check("hardware.mfu", Some(h.mfu), |v| v > 0.0 && v <= 1.0, "above 0, at most 1")?;
            check("hardware.mbu", Some(h.mbu), |v| v > 0.0 && v <= 1.0, "above 0, at most 1")?;
            check("hardware.dtype_bytes", Some(h.dtype_bytes), positive, "> 0")?;
            check("hardware.batch", Some(h.batch), |v| v >= 1.0, "≥ 1")?;
        }
        Ok(())
    }
}

/// The TOML path of a parameter name or alias.
pub fn canonical_name(name: &str) -> String {
    let alias = match name {
        "V" => "workload.visible_tokens",
        "R" => "workload.reasoning_multiplier",
        "u" => "workload.prefix_reuse",
        "P" => "workload.prefix_tokens",
        "s" => "workload.success_rate",
        "T_p" => "prefill.prefix_s",
        "t_d" => "decode.s_per_token",
        "delta" | "δ" => "disaggregation.delta_s",
        "d" => "disaggregation.crossing_fraction",
        "kappa" | "κ" => "compression.kappa",
        "c_dec" => "compression.decompress_s_per_token",
        "p_gpu" => "price.accelerator_per_hour",
        "p_io" => "price.io_per_gb",
        _ => "",
    };
    if !alias.is_empty() {
        return alias.to_owned();
    }
    if let Some(tier) = name.strip_prefix("h.") {
        return format!("tiers.{tier}.hit_rate");
    }
    if let Some(tier) = name.strip_prefix("L.") {
        return format!("tiers.{tier}.latency_s");
    }
    name.to_owned()
}
