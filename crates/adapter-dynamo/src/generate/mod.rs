//! Synthetic inputs of any size for every Dynamo-ecosystem format, for tests and benchmarks. Deterministic for a
//! seed.

pub mod aiperf;
pub mod genai_perf;
pub mod kv_events;
pub mod log;
pub mod metrics;
pub mod request_trace;

/// A xorshift generator: deterministic, dependency-free.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What a generated input holds, for tests to compare with what the adapter read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generated {
    /// Lines (or records) written.
    pub lines: u64,
    /// Request rows the input holds.
    pub requests: u64,
    /// Canonical samples the input holds.
    pub samples: u64,
    /// Cache-event rows the input holds.
    pub cache_events: u64,
    /// Requests that failed.
    pub failed: u64,
}
