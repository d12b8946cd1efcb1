//! Service-level objectives: `ttft=2s,tpot=100ms,e2e=30s`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// A duration column of `requests` that metrics summarise and SLOs bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Latency {
    /// `ttft_s`.
    Ttft,
    /// `tpot_s`.
    Tpot,
    /// `e2e_s`.
    E2e,
    /// `queue_s`.
    Queue,
    /// `prefill_s`.
    Prefill,
    /// `decode_s`.
    Decode,
    /// `kv_transfer_s`.
    KvTransfer,
}

impl Latency {
    /// Every duration, in output order.
    pub const ALL: &'static [Latency] = &[
        Latency::Ttft,
        Latency::Tpot,
        Latency::E2e,
        Latency::Queue,
        Latency::Prefill,
        Latency::Decode,
        Latency::KvTransfer,
    ];

    /// The SLO key: `ttft`, `kv_transfer`, ….
    pub const fn name(self) -> &'static str {
        match self {
            Latency::Ttft => "ttft",
            Latency::Tpot => "tpot",
            Latency::E2e => "e2e",
            Latency::Queue => "queue",
            Latency::Prefill => "prefill",
            Latency::Decode => "decode",
            Latency::KvTransfer => "kv_transfer",
        }
    }

    /// The `requests` column: `ttft_s`, ….
    pub const fn column(self) -> &'static str {
        use infertrace_schema::request;
        match self {
            Latency::Ttft => request::TTFT_S,
            Latency::Tpot => request::TPOT_S,
            Latency::E2e => request::E2E_S,
            Latency::Queue => request::QUEUE_S,
            Latency::Prefill => request::PREFILL_S,
            Latency::Decode => request::DECODE_S,
            Latency::KvTransfer => request::KV_TRANSFER_S,
        }
    }

    /// The duration named `text`, by its SLO key or its column.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|l| l.name() == text || l.column() == text)
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Upper bounds, in seconds, on request durations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slo {
    /// Bound per duration.
    pub bounds: BTreeMap<Latency, f64>,
}

/// Why an SLO specification was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SloError {
    /// An entry is not `name=duration`.
    #[error("expected name=duration in {0:?}, such as ttft=2s")]
    Syntax(String),
    /// The name is not a duration column.
    #[error("unknown SLO {0:?}; expected one of ttft, tpot, e2e, queue, prefill, decode, kv_transfer")]
    Name(String),
    /// The duration does not parse.
    #[error("invalid duration {0:?}; expected a non-negative number with us, ms, s or m (such as 100ms)")]
    Duration(String),
}

impl Slo {
    /// Parses `ttft=2s,tpot=100ms,e2e=30s`: comma-separated `name=duration`, the duration a non-negative number
    /// with `us`, `ms`, `s` or `m` (seconds when bare).
    pub fn parse(text: &str) -> Result<Self, SloError> {
        let mut bounds = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry.split_once('=').ok_or_else(|| SloError::Syntax(entry.to_owned()))?;
            let latency = Latency::parse(name.trim()).ok_or_else(|| SloError::Name(name.trim().to_owned()))?;
            bounds.insert(latency, parse_duration(value.trim())?);
        }
        Ok(Self { bounds })
    }

    /// Whether no bound is set.
    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }
}

/// Parses one duration in seconds: a non-negative number with `us`, `ms`, `s` or `m` (seconds when bare).
pub fn parse_duration(text: &str) -> Result<f64, SloError> {
    let error = || SloError::Duration(text.to_owned());
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" => 60.0,
        _ => return Err(error()),
    };
    let value: f64 = number.trim().parse().map_err(|_| error())?;
    if !value.is_finite() || value < 0.0 {
        return Err(error());
    }
    Ok(value * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slos_parse_names_and_units() {
        let slo = Slo::parse("ttft=2s,tpot=100ms, e2e=0.5m,queue_s=250us").unwrap();
        let bounds: Vec<_> = slo.bounds.into_iter().collect();
        assert_eq!(
            bounds,
            [(Latency::Ttft, 2.0), (Latency::Tpot, 0.1), (Latency::E2e, 30.0), (Latency::Queue, 0.00025)]
        );
        assert_eq!(Slo::parse("ttft=3").unwrap().bounds[&Latency::Ttft], 3.0);
        assert!(matches!(Slo::parse("ttft"), Err(SloError::Syntax(_))));
        assert!(matches!(Slo::parse("latency=2s"), Err(SloError::Name(_))));
        assert!(matches!(Slo::parse("ttft=2h"), Err(SloError::Duration(_))));
        assert!(matches!(Slo::parse("ttft=-1s"), Err(SloError::Duration(_))));
        assert!(Slo::parse("").unwrap().is_empty());
    }
}
