//! Line splitting with line numbers, for line-oriented formats.

use std::io::{self, BufRead};

use crate::{Diagnostic, DiagnosticKind, Sink};

/// Longest line a [`LineReader`] buffers by default: 64 MiB. Longer lines are skipped, not read whole.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// What [`LineReader::next_bytes`] returns in place of a line longer than its limit.
///
/// It is not valid UTF-8, so a caller that does not know it still gets a diagnostic; [`utf8_line`] recognises this
/// very slice (by address, not by content) and reports [`DiagnosticKind::LineTooLong`] instead. Handing the event
/// back through the line keeps `next_bytes`' signature and every adapter's read loop unchanged.
pub(crate) static OVERLONG: &[u8] = b"\xff<line too long>";

/// Reads an input line by line into one reused buffer, numbering lines from 1.
///
/// Line endings (`\n` or `\r\n`) are stripped. A final line without a newline is still a line. A line longer than
/// the limit ([`MAX_LINE_BYTES`] unless [`with_limit`](Self::with_limit) says otherwise) is not buffered whole: the
/// reader keeps its first bytes up to the limit, skips the rest up to the next newline, and returns a marker that
/// [`utf8_line`] turns into a [`DiagnosticKind::LineTooLong`] diagnostic, so the lines after it are still read.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    line: u64,
    limit: usize,
    too_long: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Wraps `inner`, with the default line length limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    /// Wraps `inner`; lines longer than `limit` bytes (line ending excluded) are skipped with a diagnostic.
    pub fn with_limit(inner: R, limit: usize) -> Self {
        Self { inner, buf: Vec::with_capacity(4096), line: 0, limit, too_long: 0 }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// Lines skipped so far because they were longer than the limit.
    pub fn lines_too_long(&self) -> u64 {
        self.too_long
    }

    /// The next line as bytes with its number, or `None` at the end of the input.
    ///
    /// A line longer than the limit comes back as a marker that [`utf8_line`] reports as too long.
    pub fn next_bytes(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let kept = self.append_line(&mut buf);
        self.buf = buf;
        let Some(kept) = kept? else { return Ok(None) };
        Ok(Some((self.line, if kept { self.buf.as_slice() } else { OVERLONG })))
    }

    /// Appends the next line, its ending stripped, to `out`, as [`next_bytes`](Self::next_bytes) would return it,
    /// without first copying it into the reader's own buffer. `None` at the end of the input; `Some(false)` for a
    /// line longer than the limit, of which nothing is appended.
    pub(crate) fn append_line(&mut self, out: &mut Vec<u8>) -> io::Result<Option<bool>> {
        let start = out.len();
        let (read, overlong) = read_line(&mut self.inner, self.limit, out, start)?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        if overlong {
            self.too_long += 1;
            return Ok(Some(false));
        }
        strip_ending(out, start);
        Ok(Some(true))
    }
}

/// Drops a line ending (`\n`, `\r\n`, or a final `\r`) from the line that starts at `start` in `buf`.
fn strip_ending(buf: &mut Vec<u8>, start: usize) {
    if buf.len() > start && buf.ends_with(b"\n") {
        buf.pop();
    }
    if buf.len() > start && buf.ends_with(b"\r") {
        buf.pop();
    }
}

/// Reads up to and including the next newline of `inner`, appending it to `buf` after `start`, but never more than
/// `limit + 2` bytes of it (room for `\r\n`); past that, consumes up to the newline without keeping anything (`buf`
/// is cut back to `start`). Returns the bytes consumed and whether the line was too long.
fn read_line<R: BufRead>(inner: &mut R, limit: usize, buf: &mut Vec<u8>, start: usize) -> io::Result<(usize, bool)> {
    let mut read = 0;
    let mut overlong = false;
    loop {
        let available = match inner.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (end, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        if !overlong {
            let room = (limit + 2).saturating_sub(buf.len() - start);
            if end <= room {
                buf.extend_from_slice(&available[..end]);
            } else {
                overlong = true;
                buf.truncate(start);
            }
        }
        inner.consume(end);
        read += end;
        if done {
            break;
        }
    }
    // A line exactly at the limit may have been kept with up to two bytes that are not its ending. The body is
    // measured as it is stripped: a final line without a newline still loses a trailing `\r`.
    if !overlong {
        let body = &buf[start..];
        let body = body.strip_suffix(b"\n").unwrap_or(body);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.len() > limit {
            overlong = true;
            buf.truncate(start);
        }
    }
    Ok((read, overlong))
}

/// `bytes` as text when they are UTF-8.
///
/// Every line of every input is validated here, some of them twice (where a line is read on the pool and folded on
/// another thread): `simdutf8` validates a line of ASCII, the usual case, several times faster than
/// `std::str::from_utf8` (for a vLLM log of 200 KB prompt lines that was 5% of its CPU time), and accepts exactly
/// the same bytes.
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(bytes).ok()
}

/// `bytes` as text, or `None` after reporting a [`DiagnosticKind::InvalidUtf8`] diagnostic for line `line`
/// (or [`DiagnosticKind::LineTooLong`] when `bytes` is [`LineReader`]'s marker of a line too long to read).
///
/// A free function rather than a `LineReader` method so that the text borrows only the line, not the reader:
/// adapters call it on what [`LineReader::next_bytes`] returns and validate each line exactly once.
pub fn utf8_line<'a>(line: u64, bytes: &'a [u8], sink: &mut dyn Sink) -> Option<&'a str> {
    if std::ptr::eq(bytes, OVERLONG) {
        sink.diagnostic(Diagnostic::new(
            line,
            DiagnosticKind::LineTooLong,
            "line longer than the line length limit; skipped up to its newline",
        ));
        return None;
    }
    if let Some(text) = utf8(bytes) {
        return Some(text);
    }
    // The fast validator does not say where the text goes wrong; the standard one does.
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

    #[test]
    fn a_line_over_the_limit_is_skipped_with_a_diagnostic_and_the_next_lines_follow() {
        let long = vec![b'x'; 100];
        let mut text = b"first\n".to_vec();
        text.extend_from_slice(&long);
        text.extend_from_slice(b"\r\nexactly-10\r\n");
        text.extend_from_slice(&long);
        // 10 bytes: at the limit, kept; 11 bytes: over it, skipped.
        text.extend_from_slice(b"\n0123456789\n0123456789a\nlast");
        // A tiny buffer makes the skip cross many `fill_buf` calls.
        let mut reader = LineReader::with_limit(io::BufReader::with_capacity(7, &text[..]), 10);
        let mut sink = CollectSink::default();
        let mut texts = Vec::new();
        while let Some((n, bytes)) = reader.next_bytes().unwrap() {
            if let Some(text) = utf8_line(n, bytes, &mut sink) {
                texts.push((n, text.to_owned()));
            }
        }
        assert_eq!(
            texts,
            [
                (1, "first".to_owned()),
                (3, "exactly-10".to_owned()),
                (5, "0123456789".to_owned()),
                (7, "last".to_owned())
            ]
        );
        let kinds: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind)).collect();
        assert_eq!(
            kinds,
            [(2, DiagnosticKind::LineTooLong), (4, DiagnosticKind::LineTooLong), (6, DiagnosticKind::LineTooLong)]
        );
        assert_eq!((reader.lines_read(), reader.lines_too_long()), (7, 3));
    }

    #[test]
    fn a_last_line_at_the_limit_with_a_carriage_return_is_kept() {
        // Found by the property below: "abc\r" with no newline is "abc", three bytes, so it fits a limit of 3.
        let mut reader = LineReader::with_limit(io::BufReader::with_capacity(1, &b"abc\r"[..]), 3);
        assert_eq!(reader.next_bytes().unwrap(), Some((1, &b"abc"[..])));
        assert_eq!(reader.next_bytes().unwrap(), None);
        assert_eq!(reader.lines_too_long(), 0);
    }

    #[test]
    fn the_marker_is_recognised_by_address_not_content() {
        let mut sink = CollectSink::default();
        let copy = OVERLONG.to_vec();
        assert_eq!(utf8_line(1, &copy, &mut sink), None);
        assert_eq!(
            sink.diagnostics[0].kind,
            DiagnosticKind::InvalidUtf8,
            "a real line with these bytes is not too long"
        );
    }

    proptest::proptest! {
        /// The fast validator accepts exactly what the standard one accepts: random bytes (mostly invalid), text
        /// with any characters (valid), and text with one byte changed (cut or corrupted sequences), long enough to
        /// take its SIMD path.
        #[test]
        fn utf8_accepts_what_std_accepts(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            text in "\\PC{0,200}",
            at in proptest::prelude::any::<usize>(),
            byte in proptest::prelude::any::<u8>(),
        ) {
            proptest::prop_assert_eq!(utf8(&bytes), std::str::from_utf8(&bytes).ok());
            proptest::prop_assert_eq!(utf8(text.as_bytes()), Some(text.as_str()));
            let mut changed = text.clone().into_bytes();
            changed.extend_from_slice(&[b'a'; 64]);
            let i = at % changed.len();
            changed[i] = byte;
            proptest::prop_assert_eq!(utf8(&changed), std::str::from_utf8(&changed).ok());
        }

        /// Whatever the bytes, buffer size and limit: one line per newline-separated segment, each either the
        /// segment (ending stripped) when it fits the limit, or the too-long marker.
        #[test]
        fn lines_are_the_segments_or_too_long(
            bytes in proptest::collection::vec(proptest::prop_oneof![proptest::prelude::any::<u8>(), proptest::prelude::Just(b'\n')], 0..400),
            capacity in 1usize..20,
            limit in 0usize..40,
        ) {
            let mut expected: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            if bytes.is_empty() || bytes.ends_with(b"\n") {
                expected.pop();
            }
            let mut reader = LineReader::with_limit(io::BufReader::with_capacity(capacity, &bytes[..]), limit);
            let mut n = 0;
            while let Some((number, line)) = reader.next_bytes().unwrap() {
                let segment = expected[n];
                let segment = segment.strip_suffix(b"\r").unwrap_or(segment);
                n += 1;
                proptest::prop_assert_eq!(number, n as u64);
                if segment.len() > limit {
                    proptest::prop_assert!(std::ptr::eq(line, OVERLONG));
                } else {
                    proptest::prop_assert_eq!(line, segment);
                }
            }
            proptest::prop_assert_eq!(n, expected.len());
            // `append_line` appends the same lines to what the buffer already holds, and nothing for one too long.
            let mut reader = LineReader::with_limit(io::BufReader::with_capacity(capacity, &bytes[..]), limit);
            let mut out = b"held".to_vec();
            let mut n = 0;
            while let Some(kept) = reader.append_line(&mut out).unwrap() {
                let segment = expected[n];
                let segment = segment.strip_suffix(b"\r").unwrap_or(segment);
                n += 1;
                proptest::prop_assert_eq!(kept, segment.len() <= limit);
                proptest::prop_assert_eq!(&out[4..], if kept { segment } else { &b""[..] });
                out.truncate(4);
            }
            proptest::prop_assert_eq!((n, reader.lines_read()), (expected.len(), expected.len() as u64));
            proptest::prop_assert_eq!(&out[..], b"held");
        }
    }
}
