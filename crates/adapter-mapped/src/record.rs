//! One input record through the mapping into one request row, shared by the CSV and JSONL readers.

use std::borrow::Cow;

use infertrace_adapter::{Diagnostic, DiagnosticKind, ParseContext, Sink};
use infertrace_schema::{ClockDomain, DatasetError, RequestRow, Status};

use crate::mapping::{ClocksSeen, Mapping, Source};

/// What a record holds for one mapped source column.
#[derive(Debug)]
pub(crate) enum Cell<'a> {
    /// The JSON key is not there (a CSV column missing from the header is reported once and reads as `Null`).
    Absent,
    /// An empty CSV field or a JSON `null`: no value, no diagnostic.
    Null,
    /// The value's text (JSON numbers and booleans in their JSON spelling).
    Text(Cow<'a, str>),
    /// A JSON array or object where a value was expected.
    NotScalar,
    /// A CSV field that is not UTF-8.
    NotUtf8,
}

/// Turns records into rows for one input.
#[derive(Debug)]
pub(crate) struct Rows<'a> {
    mapping: &'a Mapping,
    source: &'static str,
    ctx: &'a ParseContext<'a>,
    stem: &'a str,
    seen: ClocksSeen,
    pending: Vec<Diagnostic>,
}

impl<'a> Rows<'a> {
    pub(crate) fn new(mapping: &'a Mapping, source: &'static str, ctx: &'a ParseContext<'a>) -> Self {
        Self { mapping, source, ctx, stem: ctx.source_stem(), seen: ClocksSeen::default(), pending: Vec::new() }
    }

    /// Builds the row of the record at `line`, reading mapped column `i` through `cell(i)`, and pushes it (with a
    /// diagnostic per unusable value) or, when no mapped column has a usable value, one diagnostic instead.
    pub(crate) fn record<'r>(
        &mut self,
        line: u64,
        mut cell: impl FnMut(usize) -> Cell<'r>,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let mut row = RequestRow {
            source: self.source.to_owned(),
            status: Status::Unknown,
            source_file: Some(self.ctx.source_file.to_owned()),
            source_line: Some(line),
            ..RequestRow::default()
        };
        self.pending.clear();
        let (mut read, mut usable) = (0, 0);
        for (i, column) in self.mapping.columns().iter().enumerate() {
            let name = match &column.source {
                Source::Constant(value) => {
                    column.target.assign(&mut row, value.clone());
                    continue;
                }
                Source::From(name) => name,
            };
            read += 1;
            let target = column.target.name();
            let problem = match cell(i) {
                Cell::Null => continue,
                Cell::Absent if column.optional => continue,
                Cell::Absent => (DiagnosticKind::MissingField, format!("`{name}` (for {target}) is missing")),
                Cell::NotScalar => {
                    (DiagnosticKind::InvalidValue, format!("`{name}` (for {target}) is an array or object"))
                }
                Cell::NotUtf8 => (DiagnosticKind::InvalidUtf8, format!("`{name}` (for {target}) is not UTF-8")),
                Cell::Text(text) => {
                    let text = text.trim();
                    if text.is_empty() {
                        continue;
                    }
                    match column.convert.apply(text, self.ctx.options, &mut self.seen) {
                        Ok(value) => {
                            usable += 1;
                            column.target.assign(&mut row, value);
                            continue;
                        }
                        Err(expected) => {
                            (DiagnosticKind::InvalidValue, format!("`{name}` (for {target}) is not {expected}"))
                        }
                    }
                }
            };
            self.pending.push(Diagnostic::new(line, problem.0, problem.1));
        }
        if read > 0 && usable == 0 {
            // Nothing of the record was usable: one diagnostic says so, rather than one per column.
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::UnrecognizedLine,
                "no mapped column has a usable value",
            ));
            return Ok(());
        }
        for diagnostic in self.pending.drain(..) {
            sink.diagnostic(diagnostic);
        }
        if row.request_id.is_empty() {
            row.request_id = format!("{}:{line}", self.stem);
        }
        sink.request(row)
    }

    /// The clock domain of the times read (relative over assumed offset over UTC), or, when none was read, the
    /// one the mapping's clocks imply.
    pub(crate) fn clock_domain(&self) -> ClockDomain {
        let seen = if self.seen == ClocksSeen::default() { self.mapping.declared_clocks() } else { self.seen };
        if seen.relative {
            ClockDomain::Relative
        } else if seen.assumed {
            ClockDomain::AssumedOffset
        } else {
            ClockDomain::Utc
        }
    }
}
