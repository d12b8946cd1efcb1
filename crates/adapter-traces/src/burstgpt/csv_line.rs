//! Splitting one CSV line into fields, for the trace CSVs whose records never span lines.
//!
//! Line by line rather than with the csv crate: the csv crate's record positions skip blank lines, which would put
//! diagnostics on the wrong line numbers, and a record that spans lines is itself a sign of a damaged file here.

/// Why a line could not be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnterminatedQuote;

/// Splits `line` at commas outside double quotes into `out`, returning how many fields it holds, each trimmed of
/// surrounding spaces. A quoted field is returned without its outer quotes; a doubled quote inside it stays doubled
/// (the adapters never use the text of a quoted field, only numbers and names). At most `out.len()` fields are kept;
/// the rest of the line is not split.
pub(crate) fn split<'a>(line: &'a str, out: &mut [&'a str]) -> Result<usize, UnterminatedQuote> {
    split_with(line, out, infertrace_adapter::fragments::trim)
}

/// [`split`], trimming fields with `trim`. A plain loop over the bytes: a field is a few bytes, shorter than it
/// takes `memchr2` to set up (measured: more instructions with it than without).
fn split_with<'a>(
    line: &'a str,
    out: &mut [&'a str],
    trim: impl Fn(&'a str) -> &'a str,
) -> Result<usize, UnterminatedQuote> {
    let max = out.len();
    let mut count = 0;
    let bytes = line.as_bytes();
    let mut start = 0;
    let mut in_quotes = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => in_quotes = !in_quotes,
            b',' if !in_quotes => {
                if count + 1 >= max {
                    break;
                }
                out[count] = unquote(trim(&line[start..i]));
                count += 1;
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if in_quotes {
        return Err(UnterminatedQuote);
    }
    if max == 0 {
        return Ok(0);
    }
    out[count] = unquote(trim(&line[start..i]));
    Ok(count + 1)
}

/// A trimmed field without one pair of enclosing quotes.
fn unquote(trimmed: &str) -> &str {
    trimmed.strip_prefix('"').and_then(|f| f.strip_suffix('"')).unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn splits_plain_and_quoted_fields() {
        let cases: &[(&str, &[&str])] = &[
            ("a,b,c", &["a", "b", "c"]),
            ("5,ChatGPT,472,18,490,Conversation log", &["5", "ChatGPT", "472", "18", "490", "Conversation log"]),
            (r#"0,1,"[1, 2, 3]""#, &["0", "1", "[1, 2, 3]"]),
            (r#"" x ",,"#, &[" x ", "", ""]),
            ("", &[""]),
            (r#""say ""hi""",2"#, &[r#"say ""hi"""#, "2"]),
        ];
        for (line, expected) in cases {
            let mut out = [""; 64];
            let n = split(line, &mut out).unwrap();
            assert_eq!(&out[..n], *expected, "{line:?}");
        }
    }

    #[test]
    fn an_open_quote_is_an_error_and_the_cap_holds() {
        let mut out = [""; 2];
        assert_eq!(split(r#"1,"[2, 3"#, &mut out), Err(UnterminatedQuote));
        assert_eq!(split("a,b,c,d", &mut out), Ok(2));
        assert_eq!(out, ["a", "b"]);
        assert_eq!(split("a,b", &mut []), Ok(0));
        // Past the cap the line is not read: an open quote there is no error.
        assert_eq!(split(",\"", &mut []), Ok(0));
        assert_eq!(split("a,\"b", &mut out[..1]), Ok(1));
        assert_eq!(out[0], "a");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// Whatever the line and the room for fields, the same fields (or the same error) as with `str::trim`,
        /// Unicode white space at the ends of fields included.
        #[test]
        fn split_agrees_with_the_splitter_using_str_trim(
            parts in proptest::collection::vec(
                prop_oneof![
                    4 => "[a-z0-9 .]{0,6}",
                    2 => proptest::sample::select(vec![",", ",", "\"", "\"\"", ", ", " ,"]).prop_map(str::to_owned),
                    1 => "[ \t\u{b}\u{c}\u{85}\u{a0}\u{2003}é\\[\\]]{1,3}",
                ],
                0..16,
            ),
            room in 0usize..10,
        ) {
            let line = parts.concat();
            let (mut fast, mut reference) = ([""; 10], [""; 10]);
            let got = split(&line, &mut fast[..room]).map(|n| fast[..n].to_vec());
            let want = split_with(&line, &mut reference[..room], str::trim).map(|n| reference[..n].to_vec());
            prop_assert_eq!(got, want, "{:?} with room for {}", line, room);
        }
    }
}
