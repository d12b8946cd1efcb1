//! `aiperf`: not implemented yet (stub; claims nothing and writes nothing).

use std::io::BufRead;

use infertrace_adapter::{Adapter, Confidence, LineReader, ParseContext, ParseError, ParseReport, Sink};
use infertrace_schema::ClockDomain;

/// The `aiperf` adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Aiperf;

impl Aiperf {
    /// Format id.
    pub const ID: &'static str = "aiperf";
}

impl Adapter for Aiperf {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "not implemented yet"
    }

    fn detect(&self, _head: &[u8]) -> Option<Confidence> {
        None
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        _ctx: &ParseContext<'_>,
        _sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        while lines.next_bytes()?.is_some() {}
        Ok(ParseReport {
            format_version: None,
            clock_domain: ClockDomain::Utc,
            year: None,
            lines: lines.lines_read(),
            details: Default::default(),
        })
    }
}
