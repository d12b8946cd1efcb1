//! Cost and energy of the traffic in a dataset, from a cost profile (`--cost profile.toml`).
//!
//! A profile describes what serving costs (see `examples/cost/` for commented examples):
//!
//! ```toml
//! [accelerator]            # the serving fleet, charged for the whole trace span
//! name = "H100"            # informational
//! count = 8                # accelerators
//! price_per_hour = 2.49    # $ per accelerator-hour
//! watts = 700              # optional: power per accelerator, W
//! pue = 1.3                # optional: facility overhead on that power (default 1)
//!
//! [storage]                # optional: an external KV-cache tier
//! capacity_gb = 2048
//! price_per_gb_month = 0.08
//! io_price_per_gb = 0.01   # optional: $ per GB read from the disk and remote tiers
//! kv_bytes_per_token = 131072  # needed for I/O: KV bytes of one token (layers × 2 × KV heads × head dim × bytes)
//!
//! [tokens]                 # optional: per-token prices ($ per million tokens)
//! input_per_million = 0.50
//! cached_input_per_million = 0.05  # default: the input price
//! output_per_million = 1.50
//!
//! [energy]                 # optional: what electricity costs
//! price_per_kwh = 0.12     # $ per kWh drawn
//! ```
//!
//! # Definitions
//!
//! With `H` the trace span in hours (the overall span, from the metrics' throughput) and a month of 730 h:
//!
//! - accelerators $ = `count × price_per_hour × H`;
//! - energy kWh = the **measured** energy of the dataset's power or energy samples ([`crate::energy`]) × `pue`
//!   where there are such samples, else the **nameplate** `count × watts × pue × H / 1000`; `energy_from` says
//!   which; energy $ = kWh × `price_per_kwh`, with an `[accelerator]` only (an API user pays no electricity);
//! - storage $ = `capacity_gb × price_per_gb_month × H / 730`;
//! - I/O $ = Σ(`cached_tokens_disk` + `cached_tokens_remote`) × `kv_bytes_per_token` / 10⁹ × `io_price_per_gb`;
//! - token $ = Σ over rows of (`input_tokens` − `cached_tokens`) × input price + `cached_tokens` × cached price +
//!   `output_tokens` × output price (a missing count adds nothing);
//! - total $ = accelerators + storage + I/O + energy with an `[accelerator]`; without one, token $ + storage + I/O
//!   (an API user's bill). With both, token $ is reported apart as `api_equivalent_dollars`, what the same traffic would
//!   cost at those prices.
//! - **successful answers**: rows meeting every SLO when `--slo` is given, else rows with status `ok`; when no
//!   row's outcome is known (most public traces) every row counts, and `outcome_known` is false.
//! - cost per successful answer = total $ / successful answers;
//! - raw tokens = Σ(`input_tokens` + `output_tokens`) over all rows; effective tokens = the same over the
//!   successful rows; effective answer tokens = Σ(`output_tokens` − `reasoning_tokens`) over the successful rows
//!   (the visible part of what was paid for); each per dollar and per kWh;
//! - `effective_fraction` = effective tokens / raw tokens: goodput as a fraction of raw throughput.
//!
//! The fleet serves every group at once, so with `--by` each group is charged the fleet's accelerator, storage and
//! energy (measured or nameplate) over the overall span in proportion to its share of raw tokens (of rows when no
//! token is counted): the groups' costs add up to the total. I/O and token $ are the group's own.

use serde::{Deserialize, Serialize};

/// Hours per month for monthly storage prices (8,760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// What serving costs; read from TOML.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    /// The serving fleet.
    pub accelerator: Option<AcceleratorCost>,
    /// An external KV-cache tier.
    pub storage: Option<StorageCost>,
    /// Per-token prices.
    pub tokens: Option<TokenPrices>,
    /// The price of electricity.
    pub energy: Option<EnergyPrice>,
}

/// The price of electricity.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyPrice {
    /// $ per kWh.
    pub price_per_kwh: f64,
}

/// Where an energy figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The dataset's own power or energy samples.
    Measured,
    /// The profile's `accelerator.watts` over the span.
    Nameplate,
}

/// The serving fleet.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceleratorCost {
    /// Informational name (`H100`).
    pub name: Option<String>,
    /// Accelerators in the fleet.
    pub count: u32,
    /// $ per accelerator-hour.
    pub price_per_hour: f64,
    /// Power per accelerator, W.
    pub watts: Option<f64>,
    /// Facility overhead on that power (power usage effectiveness), default 1.
    pub pue: Option<f64>,
}

/// An external KV-cache tier.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageCost {
    /// Capacity provisioned, GB.
    pub capacity_gb: f64,
    /// $ per GB-month.
    pub price_per_gb_month: f64,
    /// $ per GB read from the disk and remote tiers.
    pub io_price_per_gb: Option<f64>,
    /// KV-cache bytes of one token, to turn cached tokens into bytes read.
    pub kv_bytes_per_token: Option<f64>,
}

/// Per-token prices, $ per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenPrices {
    /// Uncached prompt tokens.
    pub input_per_million: f64,
    /// Prompt tokens served from cache; default: `input_per_million`.
    pub cached_input_per_million: Option<f64>,
    /// Generated tokens (hidden reasoning included).
    pub output_per_million: f64,
}

/// A profile that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CostError {
    /// Neither a fleet nor token prices.
    #[error("the cost profile needs an [accelerator] or a [tokens] section")]
    Empty,
    /// A number is negative, not finite, or (for a count or price) zero where it cannot be.
    #[error("{0} must be a finite number ≥ 0")]
    Invalid(&'static str),
    /// I/O is priced but tokens cannot be turned into bytes.
    #[error("storage.io_price_per_gb needs storage.kv_bytes_per_token")]
    IoWithoutBytes,
}

impl CostProfile {
    /// Checks that the profile can be used.
    pub fn validate(&self) -> Result<(), CostError> {
        if self.accelerator.is_none() && self.tokens.is_none() {
            return Err(CostError::Empty);
        }
        let check = |value: Option<f64>, name| match value {
            Some(v) if !v.is_finite() || v < 0.0 => Err(CostError::Invalid(name)),
            _ => Ok(()),
        };
        if let Some(a) = &self.accelerator {
            check(Some(a.price_per_hour), "accelerator.price_per_hour")?;
            check(a.watts, "accelerator.watts")?;
            check(a.pue, "accelerator.pue")?;
        }
        if let Some(s) = &self.storage {
            check(Some(s.capacity_gb), "storage.capacity_gb")?;
            check(Some(s.price_per_gb_month), "storage.price_per_gb_month")?;
            check(s.io_price_per_gb, "storage.io_price_per_gb")?;
            check(s.kv_bytes_per_token, "storage.kv_bytes_per_token")?;
            if s.io_price_per_gb.is_some() && s.kv_bytes_per_token.is_none() {
                return Err(CostError::IoWithoutBytes);
            }
        }
        if let Some(e) = &self.energy {
            check(Some(e.price_per_kwh), "energy.price_per_kwh")?;
        }
        if let Some(t) = &self.tokens {
            check(Some(t.input_per_million), "tokens.input_per_million")?;
            check(t.cached_input_per_million, "tokens.cached_input_per_million")?;
            check(Some(t.output_per_million), "tokens.output_per_million")?;
        }
        Ok(())
    }
}

/// Cost, energy and efficiency of one set of rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Hours the fleet is charged for: the overall trace span; null without a span.
    pub hours: Option<f64>,
    /// Fraction of the fleet's cost charged to these rows (1 overall; a group's share of raw tokens).
    pub share: Option<f64>,
    /// Accelerators, $; null without an `[accelerator]` or a span.
    pub accelerator_dollars: Option<f64>,
    /// Storage capacity, $; null without `[storage]` or a span.
    pub storage_dollars: Option<f64>,
    /// Reads from the disk and remote tiers, $; null unless I/O is priced.
    pub io_dollars: Option<f64>,
    /// The traffic at the per-token prices, $, when they are the cost (no `[accelerator]`).
    pub token_dollars: Option<f64>,
    /// The traffic at the per-token prices when an `[accelerator]` is the cost: what an API would have charged.
    pub api_equivalent_dollars: Option<f64>,
    /// Everything charged, $.
    pub total_dollars: Option<f64>,
    /// Energy, kWh: measured where the dataset has power or energy samples, else from the profile's watts over the
    /// span; null without either.
    pub energy_kwh: Option<f64>,
    /// Where `energy_kwh` came from.
    pub energy_from: Option<EnergySource>,
    /// Energy, $: `energy_kwh × energy.price_per_kwh`; null without a price or without an `[accelerator]`.
    pub energy_dollars: Option<f64>,
    /// Whether any row's outcome is known; when not, every row counts as successful.
    pub outcome_known: bool,
    /// Rows meeting every SLO (with `--slo`), else rows with status `ok`.
    pub successful_answers: u64,
    /// `total_dollars / successful_answers`.
    pub per_successful_answer: Option<f64>,
    /// Σ(input + output tokens) over all rows.
    pub raw_tokens: u64,
    /// Σ(input + output tokens) over the successful rows.
    pub effective_tokens: u64,
    /// Σ(output − reasoning tokens) over the successful rows.
    pub effective_answer_tokens: u64,
    /// `raw_tokens / total_dollars`.
    pub raw_tokens_per_dollar: Option<f64>,
    /// `effective_tokens / total_dollars`.
    pub effective_tokens_per_dollar: Option<f64>,
    /// `effective_answer_tokens / total_dollars`.
    pub effective_answer_tokens_per_dollar: Option<f64>,
    /// `raw_tokens / energy_kwh`.
    pub raw_tokens_per_kwh: Option<f64>,
    /// `effective_tokens / energy_kwh`.
    pub effective_tokens_per_kwh: Option<f64>,
    /// `effective_tokens / raw_tokens`: goodput as a fraction of raw throughput.
    pub effective_fraction: Option<f64>,
}

/// What the fleet is: hours charged and the totals a group's share is taken of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fleet {
    pub(crate) hours: Option<f64>,
    /// The energy measured from samples, kWh.
    pub(crate) measured_kwh: Option<f64>,
    pub(crate) raw_tokens: u64,
    pub(crate) rows: u64,
}

/// The sums over a set of rows that its cost is computed from (a missing count adds nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Traffic {
    /// Rows.
    pub(crate) rows: u64,
    /// Whether any row's status is not `unknown`.
    pub(crate) outcome_known: bool,
    /// Σ(input + output tokens).
    pub(crate) raw_tokens: u64,
    /// Rows counting as successful answers (every row when no outcome is known).
    pub(crate) successful_answers: u64,
    /// Σ(input + output tokens) over those rows.
    pub(crate) effective_tokens: u64,
    /// Σ(output − reasoning tokens) over those rows.
    pub(crate) effective_answer_tokens: u64,
    /// Σ(`cached_tokens_disk` + `cached_tokens_remote`).
    pub(crate) external_tokens: u64,
    /// Σ(input − cached tokens), cached tokens capped at the input.
    pub(crate) uncached_input_tokens: u64,
    /// Σ cached tokens, capped at the input.
    pub(crate) cached_input_tokens: u64,
    /// Σ output tokens.
    pub(crate) output_tokens: u64,
}

/// The cost of the rows summed in `traffic`.
pub(crate) fn cost(profile: &CostProfile, fleet: Fleet, traffic: &Traffic) -> Cost {
    let mut cost = Cost {
        outcome_known: traffic.outcome_known,
        raw_tokens: traffic.raw_tokens,
        successful_answers: traffic.successful_answers,
        effective_tokens: traffic.effective_tokens,
        effective_answer_tokens: traffic.effective_answer_tokens,
        ..Cost::default()
    };
    let share = if fleet.raw_tokens > 0 {
        Some(cost.raw_tokens as f64 / fleet.raw_tokens as f64)
    } else if fleet.rows > 0 {
        Some(traffic.rows as f64 / fleet.rows as f64)
    } else {
        None
    };
    cost.hours = fleet.hours;
    cost.share = share;
    let charged = fleet.hours.zip(share).map(|(h, s)| h * s);
    let pue = profile.accelerator.as_ref().and_then(|a| a.pue).unwrap_or(1.0);
    if let (Some(kwh), Some(share)) = (fleet.measured_kwh, share) {
        cost.energy_kwh = Some(kwh * pue * share);
        cost.energy_from = Some(EnergySource::Measured);
    }
    if let Some(a) = &profile.accelerator {
        cost.accelerator_dollars = charged.map(|h| f64::from(a.count) * a.price_per_hour * h);
        if cost.energy_kwh.is_none() {
            cost.energy_kwh = a.watts.and_then(|w| charged.map(|h| f64::from(a.count) * w * pue * h / 1000.0));
            cost.energy_from = cost.energy_kwh.map(|_| EnergySource::Nameplate);
        }
        cost.energy_dollars = profile.energy.as_ref().and_then(|e| cost.energy_kwh.map(|k| k * e.price_per_kwh));
    }
    if let Some(s) = &profile.storage {
        cost.storage_dollars = charged.map(|h| s.capacity_gb * s.price_per_gb_month * h / HOURS_PER_MONTH);
        if let (Some(price), Some(bytes)) = (s.io_price_per_gb, s.kv_bytes_per_token) {
            cost.io_dollars = Some(traffic.external_tokens as f64 * bytes / 1e9 * price);
        }
    }
    let token_dollars = profile.tokens.as_ref().map(|t| {
        let cached_price = t.cached_input_per_million.unwrap_or(t.input_per_million);
        (traffic.uncached_input_tokens as f64 * t.input_per_million
            + traffic.cached_input_tokens as f64 * cached_price
            + traffic.output_tokens as f64 * t.output_per_million)
            / 1e6
    });
    let extras = cost.storage_dollars.unwrap_or(0.0) + cost.io_dollars.unwrap_or(0.0);
    if profile.accelerator.is_some() {
        cost.api_equivalent_dollars = token_dollars;
        cost.total_dollars = cost.accelerator_dollars.map(|a| a + extras + cost.energy_dollars.unwrap_or(0.0));
    } else {
        cost.token_dollars = token_dollars;
        cost.total_dollars = token_dollars.map(|t| t + extras);
    }
    let per = |n: u64, d: Option<f64>| d.filter(|d| *d > 0.0).map(|d| n as f64 / d);
    cost.per_successful_answer =
        cost.total_dollars.filter(|_| cost.successful_answers > 0).map(|d| d / cost.successful_answers as f64);
    cost.raw_tokens_per_dollar = per(cost.raw_tokens, cost.total_dollars);
    cost.effective_tokens_per_dollar = per(cost.effective_tokens, cost.total_dollars);
    cost.effective_answer_tokens_per_dollar = per(cost.effective_answer_tokens, cost.total_dollars);
    cost.raw_tokens_per_kwh = per(cost.raw_tokens, cost.energy_kwh);
    cost.effective_tokens_per_kwh = per(cost.effective_tokens, cost.energy_kwh);
    cost.effective_fraction = (cost.raw_tokens > 0).then(|| cost.effective_tokens as f64 / cost.raw_tokens as f64);
    cost
}
