//! Line splitting with line numbers, for line-oriented formats.

use std::io::{self, BufRead};

use crate::{Diagnostic, DiagnosticKind, Sink};

/// Reads an input line by line into one reused buffer, numbering lines from 1.
///
/// Line endings (`\n` or `\r\n`) are stripped. A final line without a newline is still a line.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    line: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        Self { inner, buf: Vec::with_capacity(4096), line: 0 }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// The next line as bytes with its number, or `None` at the end of the input.
    pub fn next_bytes(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        if self.inner.read_until(b'\n', &mut self.buf)? == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut line = self.buf.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        Ok(Some((self.line, line)))
    }
}

/// `bytes` as text, or `None` after reporting a [`DiagnosticKind::InvalidUtf8`] diagnostic for line `line`.
///
/// A free function rather than a `LineReader` method so that the text borrows only the line, not the reader:
/// adapters call it on what [`LineReader::next_bytes`] returns and validate each line exactly once.
pub fn utf8_line<'a>(line: u64, bytes: &'a [u8], sink: &mut dyn Sink) -> Option<&'a str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) => {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::InvalidUtf8,
                format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CollectSink;

    #[test]
    fn numbers_lines_and_strips_endings() {
        let mut reader = LineReader::new(&b"a\r\nb\n\nlast"[..]);
        let mut seen = Vec::new();
        while let Some((n, line)) = reader.next_bytes().unwrap() {
            seen.push((n, line.to_vec()));
        }
        assert_eq!(seen, vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"".to_vec()), (4, b"last".to_vec())]);
        assert_eq!(reader.lines_read(), 4);
    }

    #[test]
    fn invalid_utf8_is_a_diagnostic_and_the_next_line_follows() {
        let mut reader = LineReader::new(&b"ok\n\xff\xfebad\nfine\n"[..]);
        let mut sink = CollectSink::default();
        let mut texts = Vec::new();
        while let Some((n, bytes)) = reader.next_bytes().unwrap() {
            if let Some(text) = utf8_line(n, bytes, &mut sink) {
                texts.push((n, text.to_owned()));
            }
        }
        assert_eq!(texts, [(1, "ok".to_owned()), (3, "fine".to_owned())]);
        assert_eq!(sink.diagnostics, vec![Diagnostic::new(2, DiagnosticKind::InvalidUtf8, "invalid UTF-8 at byte 0")]);
    }
}
