//! Where adapters push what they parse.

use infertrace_schema::{CacheEvent, DatasetError, EngineSample, RequestRow};

use crate::{Diagnostic, Drift};

/// Receives rows and diagnostics from an adapter, in input order.
///
/// Row methods return `Err` only when writing fails; the adapter then stops and passes the error up.
pub trait Sink {
    /// One request row.
    fn request(&mut self, row: RequestRow) -> Result<(), DatasetError>;
    /// One engine sample.
    fn sample(&mut self, row: EngineSample) -> Result<(), DatasetError>;
    /// Samples of one instant and place, in order: `row` once per `(metric, value)` of `values`, with those two
    /// columns replaced (so `row`'s own metric and value are the first pair's, or anything, and the sink may
    /// change them). Metric names are a parser's static names, so a sink can find what it keeps for each by
    /// address.
    ///
    /// A log line holds several. A sink that writes rows as they come reads `row` in place instead of receiving a
    /// row, with its four shared strings, per sample; the default passes each on to [`sample`](Self::sample).
    fn samples(&mut self, row: &mut EngineSample, values: &[(&'static str, f64)]) -> Result<(), DatasetError> {
        for &(metric, value) in values {
            self.sample(EngineSample { metric: metric.into(), value, ..row.clone() })?;
        }
        Ok(())
    }
    /// One cache event.
    fn cache_event(&mut self, row: CacheEvent) -> Result<(), DatasetError>;
    /// One diagnostic.
    fn diagnostic(&mut self, diagnostic: Diagnostic);
    /// The input's drift report ([`Drift`]), once, at the end of a parse; adapters that find nothing to report
    /// do not call it.
    fn drift(&mut self, _drift: Drift) {}
}

/// A sink that keeps everything in memory, for tests and small inputs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CollectSink {
    /// Request rows, in order.
    pub requests: Vec<RequestRow>,
    /// Engine samples, in order.
    pub samples: Vec<EngineSample>,
    /// Cache events, in order.
    pub cache_events: Vec<CacheEvent>,
    /// Diagnostics, in order.
    pub diagnostics: Vec<Diagnostic>,
    /// The drift report, if the adapter made one.
    pub drift: Option<Drift>,
}

impl Sink for CollectSink {
    fn request(&mut self, row: RequestRow) -> Result<(), DatasetError> {
        self.requests.push(row);
        Ok(())
    }
    fn sample(&mut self, row: EngineSample) -> Result<(), DatasetError> {
        self.samples.push(row);
        Ok(())
    }
    fn cache_event(&mut self, row: CacheEvent) -> Result<(), DatasetError> {
        self.cache_events.push(row);
        Ok(())
    }
    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
    fn drift(&mut self, drift: Drift) {
        self.drift = Some(drift);
    }
}
