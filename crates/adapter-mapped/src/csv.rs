//! Mapped CSV: a header line naming the columns, then one request per record.
//!
//! Read with the `csv` crate (quoted fields, doubled quotes, line breaks inside quotes), as bytes so that a field
//! that is not UTF-8 spoils only itself. A record's line is the line its first field starts on, counted here from
//! the bytes read: the csv crate's own line numbers drift on CRLF files and blank lines.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read};

use csv::{ByteRecord, ReaderBuilder};
use infertrace_adapter::{Diagnostic, DiagnosticKind, ParseError, Sink};

use crate::mapping::{Mapping, Source};
use crate::record::{Cell, Rows};

/// Where each mapped column is in a record: `None` for constants and for columns missing from the header.
type Positions = Vec<Option<usize>>;

pub(crate) fn parse(
    mapping: &Mapping,
    rows: &mut Rows<'_>,
    input: &mut dyn BufRead,
    sink: &mut dyn Sink,
) -> Result<u64, ParseError> {
    let mut counter = LineCounter::new(input);
    {
        let mut reader = ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(mapping.delimiter())
            .from_reader(&mut counter);
        let mut record = ByteRecord::new();
        let mut header: Option<(Positions, usize)> = None;
        loop {
            match reader.read_byte_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    let line = error.position().map_or(0, |p| reader.get_mut().line_at(p.byte()));
                    match error.into_kind() {
                        csv::ErrorKind::Io(error) => return Err(error.into()),
                        _ => {
                            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedCsv, "unreadable record"));
                            continue;
                        }
                    }
                }
            }
            let line = record.position().map_or(0, |p| reader.get_mut().line_at(p.byte()));
            let Some((positions, width)) = &header else {
                header = Some((read_header(mapping, &record, line, sink), record.len()));
                continue;
            };
            if record.len() != *width {
                let message = format!("{} fields, expected {} as in the header", record.len(), width);
                sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedCsv, message));
                continue;
            }
            let cell = |i: usize| match positions[i].and_then(|at| record.get(at)) {
                None => Cell::Null,
                Some(bytes) => match std::str::from_utf8(bytes) {
                    Ok(text) => Cell::Text(text.into()),
                    Err(_) => Cell::NotUtf8,
                },
            };
            rows.record(line, cell, sink)?;
        }
    }
    Ok(counter.lines())
}

/// Finds each mapped column in the header; one diagnostic per column that is not there (unless optional).
fn read_header(mapping: &Mapping, header: &ByteRecord, line: u64, sink: &mut dyn Sink) -> Positions {
    let names: Vec<&str> = header
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let name = std::str::from_utf8(bytes).unwrap_or("").trim();
            if i == 0 { name.strip_prefix('\u{feff}').unwrap_or(name) } else { name }
        })
        .collect();
    mapping
        .columns()
        .iter()
        .map(|column| {
            let Source::From(name) = &column.source else { return None };
            let found = names.iter().position(|n| n == name);
            if found.is_none() && !column.optional {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::MissingField,
                    format!(
                        "the header has no column `{name}` (mapped to {}); it is null in every row",
                        column.target.name()
                    ),
                ));
            }
            found
        })
        .collect()
}

/// Counts lines as the bytes go by: for `ParseReport::lines`, and to number records by the byte offset the csv
/// reader gives for each.
struct LineCounter<'a> {
    inner: &'a mut dyn BufRead,
    /// Bytes read so far.
    offset: u64,
    /// Runs of line-break bytes (`\r`, `\n`) read but not yet passed by a record, in order. The csv reader reads a
    /// buffer ahead, so this holds the line breaks of about one buffer plus those inside the current record; a
    /// run of blank lines is one entry.
    breaks: VecDeque<Breaks>,
    /// `\n` bytes before the first run of `breaks`.
    newlines_passed: u64,
    /// `\n` bytes read.
    newlines: u64,
    last: Option<u8>,
}

/// Consecutive line-break bytes at `start..end`, `newlines` of them `\n`.
#[derive(Debug, Clone, Copy)]
struct Breaks {
    start: u64,
    end: u64,
    newlines: u64,
}

impl<'a> LineCounter<'a> {
    fn new(inner: &'a mut dyn BufRead) -> Self {
        Self { inner, offset: 0, breaks: VecDeque::new(), newlines_passed: 0, newlines: 0, last: None }
    }

    /// The line of the first byte at or after `byte` that is not a line break: the csv reader places a record at
    /// the end of the previous one, before the `\n` of a CRLF and before skipped blank lines. Offsets must not
    /// decrease from one call to the next.
    fn line_at(&mut self, byte: u64) -> u64 {
        let mut start = byte;
        while let Some(&run) = self.breaks.front() {
            if run.start > start {
                break;
            }
            // A record placed inside a run of breaks begins after it.
            start = start.max(run.end);
            self.newlines_passed += run.newlines;
            self.breaks.pop_front();
        }
        self.newlines_passed + 1
    }

    /// Lines read: a final line without a newline counts.
    fn lines(&self) -> u64 {
        self.newlines + u64::from(self.last.is_some_and(|b| b != b'\n'))
    }
}

impl Read for LineCounter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (i, &b) in buf[..n].iter().enumerate() {
            if b != b'\n' && b != b'\r' {
                continue;
            }
            let at = self.offset + i as u64;
            let newline = u64::from(b == b'\n');
            self.newlines += newline;
            match self.breaks.back_mut() {
                Some(run) if run.end == at => {
                    run.end += 1;
                    run.newlines += newline;
                }
                _ => self.breaks.push_back(Breaks { start: at, end: at + 1, newlines: newline }),
            }
        }
        self.offset += n as u64;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line each record of `text` starts on, as the parser numbers them.
    fn record_lines(text: &[u8]) -> Vec<u64> {
        let mut input = text;
        let mut counter = LineCounter::new(&mut input);
        let mut reader = ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&mut counter);
        let mut record = ByteRecord::new();
        let mut lines = Vec::new();
        while reader.read_byte_record(&mut record).unwrap() {
            let byte = record.position().unwrap().byte();
            lines.push(reader.get_mut().line_at(byte));
        }
        lines
    }

    #[test]
    fn records_are_numbered_by_the_line_they_start_on() {
        let cases: &[(&[u8], &[u64])] = &[
            (b"a,b\n1,2\n3,4\n", &[1, 2, 3]),
            (b"a,b\r\n1,2\r\n3,4\r\n", &[1, 2, 3]),
            (b"\n\na,b\n\n1,2\n\n\n3,4", &[3, 5, 8]),
            (b"a,b\r\n\r\n\r\n1,2\r\n", &[1, 4]),
            (b"a,b\n\"x\ny\",2\n3,4\n", &[1, 2, 4]),
            (b"a,b\n\"\n\n\",2\n\n3,4\n", &[1, 2, 6]),
            (b"a,b\r1,2\r3,4", &[1, 1, 1]),
        ];
        for (text, expected) in cases {
            assert_eq!(record_lines(text), *expected, "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn blank_lines_take_one_entry() {
        let text = [&b"a,b\n"[..], &[b'\n'; 100_000], b"1,2\n"].concat();
        let mut input = &text[..];
        let mut counter = LineCounter::new(&mut input);
        let mut sink = Vec::new();
        io::copy(&mut counter, &mut sink).unwrap();
        assert_eq!(counter.breaks.len(), 2, "the header's newline and the blank lines are one run; then the last");
        assert_eq!(counter.lines(), 100_002);
    }
}
