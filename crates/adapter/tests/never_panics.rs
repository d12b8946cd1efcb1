//! Property tests: the shared parsers never panic, whatever the input.

use infertrace_adapter::fragments::{pairs, parse_py};
use infertrace_adapter::time::parse_datetime;
use infertrace_adapter::{CollectSink, LineReader, UtcOffset, utf8_line};
use proptest::prelude::*;

proptest! {
    #[test]
    fn python_reprs(text in "\\PC{0,200}") {
        let _ = parse_py(&text);
        let _ = pairs(&text, '=');
        let _ = pairs(&text, ':');
    }

    #[test]
    fn python_repr_like_text(text in r#"[\[\]\(\)\{\}'",:=0-9a-zA-Z_. \\-]{0,120}"#) {
        let _ = parse_py(&text);
    }

    #[test]
    fn timestamps(text in "[0-9 :.T+Z-]{0,40}", offset in -86_399i32..86_400) {
        let offset = UtcOffset::from_seconds(offset).unwrap_or(UtcOffset::UTC);
        let _ = parse_datetime(&text, offset);
    }

    #[test]
    fn line_reader_counts_every_line(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut reader = LineReader::new(&bytes[..]);
        let mut sink = CollectSink::default();
        let mut text_lines = 0;
        while let Some((n, bytes)) = reader.next_bytes().unwrap() {
            if utf8_line(n, bytes, &mut sink).is_some() {
                text_lines += 1;
            }
        }
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        let expected = newlines + u64::from(!bytes.is_empty() && bytes.last() != Some(&b'\n'));
        prop_assert_eq!(reader.lines_read(), expected);
        prop_assert_eq!(text_lines + sink.diagnostics.len() as u64, expected);
    }
}
