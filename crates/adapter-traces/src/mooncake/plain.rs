//! The common Mooncake row read by hand, without serde.
//!
//! Almost every line of a Mooncake trace (and of Dynamo's and AIPerf's Mooncake-style traces) is one flat object of
//! a few keys: `{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, …]}`, with
//! `request_id`, `session_id` and `delay` in the replay tools' files. serde_json's derived [`Record`] reader spent
//! about 4,500 instructions on a 115-byte line of that kind (a third of the whole run once the input's SHA-256 is
//! set aside), most of it matching each key against the 35 names and aliases `Record` knows and going through
//! `Option`'s and the untagged `Id`'s machinery for every value.
//!
//! [`read`] reads exactly that shape: an object whose keys are among [`Field`]'s names (aliases included), each at
//! most once, written without escapes; non-negative numbers without leading zeros or exponents (at most 15 digits,
//! a fraction allowed, where the field is a float, so that one exact division gives the value; an integer at most
//! `u64::MAX` where the field is one); ids as strings
//! without escapes or control characters, or as such integers; `hash_ids` as an array of such integers; JSON white
//! space between tokens and nothing after the object. On every other line (another key, a `null`, a fraction, an
//! escape, a syntax error…) it answers `None` and the line goes to serde_json as before, so a line is either read
//! here into the [`Record`] serde_json would have produced, or read by serde_json: a property test checks the
//! first against the second on lines of and near this shape.

use std::borrow::Cow;

use super::record::{Id, Record};

/// The keys [`read`] knows, aliases mapped to their field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Timestamp,
    InputLength,
    OutputLength,
    HashIds,
    RequestId,
    SessionId,
    Delay,
}

impl Field {
    fn of(key: &[u8]) -> Option<Self> {
        Some(match key {
            b"timestamp" | b"created_time" => Self::Timestamp,
            b"input_length" | b"input_tokens" => Self::InputLength,
            b"output_length" | b"output_tokens" => Self::OutputLength,
            b"hash_ids" => Self::HashIds,
            b"request_id" => Self::RequestId,
            b"session_id" => Self::SessionId,
            b"delay" | b"delay_ms" => Self::Delay,
            _ => return None,
        })
    }
}

/// Digits a float field may have, before and after its decimal point: the digits as an integer are then below 2^53
/// and exact in an `f64`, and their power of ten too.
const FLOAT_DIGITS: usize = 15;

/// The powers of ten a float's fraction may need, each exact in an `f64`.
const POW10: [f64; FLOAT_DIGITS + 1] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
/// Digits an integer field may have: those of `u64::MAX` (a larger value is left to serde_json, which reads it as a
/// float and reports it).
const INTEGER_DIGITS: usize = 20;

/// The line's record when it has the common shape (module documentation), `None` when serde_json must read it.
pub(super) fn read(line: &str) -> Option<Record<'_>> {
    let mut at = Cursor { bytes: line.as_bytes(), at: 0 };
    let mut record = Record::default();
    let mut seen = 0u8;
    at.space();
    at.eat(b'{')?;
    at.space();
    if !at.eat_if(b'}') {
        loop {
            let field = Field::of(at.quoted()?)?;
            let bit = 1 << field as u8;
            if seen & bit != 0 {
                return None; // serde_json reports a duplicate field, its alias included.
            }
            seen |= bit;
            at.space();
            at.eat(b':')?;
            at.space();
            match field {
                Field::Timestamp => record.timestamp = Some(at.float()?),
                Field::Delay => record.delay = Some(at.float()?),
                Field::InputLength => record.input_length = Some(at.integer(INTEGER_DIGITS)?),
                Field::OutputLength => record.output_length = Some(at.integer(INTEGER_DIGITS)?),
                Field::HashIds => record.hash_ids = Some(at.integers()?),
                Field::RequestId => record.request_id = Some(at.id(line)?),
                Field::SessionId => record.session_id = Some(at.id(line)?),
            }
            at.space();
            if at.eat_if(b'}') {
                break;
            }
            at.eat(b',')?;
            at.space();
        }
    }
    at.space();
    at.done().then_some(record)
}

/// A position in the line.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips JSON white space (space, tab, line feed, carriage return), as serde_json does.
    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat_if(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.eat_if(byte).then_some(())
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// A string's bytes, when it has no escape and no control character (which serde_json rejects).
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        let text = self.quoted()?;
        (!text.iter().any(|&b| b == b'\\' || b < 0x20)).then_some(text)
    }

    /// The bytes up to the next quote, at a quote: a string's, when it has no escape (a key [`Field::of`] knows
    /// has none, so that a key with one is declined there).
    fn quoted(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        let len = self.bytes[start..].iter().position(|&b| b == b'"')?;
        self.at = start + len + 1;
        Some(&self.bytes[start..start + len])
    }

    /// An unsigned integer of at most `max_digits` digits, no leading zero and at most `u64::MAX`. A fraction or an
    /// exponent after it (a number serde_json would read as a float) is left unread, and no caller accepts a `.`,
    /// `e` or `E` after a value.
    fn integer(&mut self, max_digits: usize) -> Option<u64> {
        let rest = &self.bytes[self.at..];
        let digits = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 || digits > max_digits || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        let mut value = 0u64;
        for &digit in &rest[..digits] {
            value = value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
        }
        self.at += digits;
        Some(value)
    }

    /// A non-negative number with an optional fraction and no exponent, [`FLOAT_DIGITS`] digits at most.
    ///
    /// The digits read as one integer, divided by the power of ten of the fraction's length: both operands are
    /// exact, so the one rounding of the division gives the correctly rounded value, and it is also the operation
    /// serde_json (without its `float_roundtrip` feature, as here) performs for such a number (`f64_from_parts`).
    fn float(&mut self) -> Option<f64> {
        let start = self.at;
        let integer = self.integer(FLOAT_DIGITS)?;
        if !self.eat_if(b'.') {
            return Some(integer as f64);
        }
        let digits = self.at - start - 1;
        let fraction = self.at;
        let mut significand = integer;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            significand = significand * 10 + u64::from(digit - b'0');
            self.at += 1;
            if digits + (self.at - fraction) > FLOAT_DIGITS {
                return None;
            }
        }
        let places = self.at - fraction;
        // serde_json requires a digit after the point.
        (places > 0).then(|| significand as f64 / POW10[places])
    }

    /// An array of integers, each at most `u64::MAX`.
    fn integers(&mut self) -> Option<Vec<u64>> {
        self.eat(b'[')?;
        self.space();
        // As many as the list has commas, plus one: one allocation (serde_json grows the vector by doubling).
        let rest = &self.bytes[self.at..];
        let end = memchr::memchr(b']', rest).unwrap_or(rest.len());
        let mut values = Vec::with_capacity(memchr::memchr_iter(b',', &rest[..end]).count() + 1);
        if self.eat_if(b']') {
            return Some(values);
        }
        loop {
            values.push(self.integer(INTEGER_DIGITS)?);
            self.space();
            if self.eat_if(b']') {
                return Some(values);
            }
            self.eat(b',')?;
            self.space();
        }
    }

    /// An id: a plain string, borrowed from the line as serde_json borrows it, or an integer.
    fn id(&mut self, line: &'a str) -> Option<Id<'a>> {
        if self.peek() == Some(b'"') {
            let start = self.at + 1;
            let len = self.plain_string()?.len();
            // The string lies between two quotes, which are ASCII, so these are character boundaries.
            Some(Id::Text(Cow::Borrowed(&line[start..start + len])))
        } else {
            Some(Id::Number(self.integer(INTEGER_DIGITS)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn serde(line: &str) -> Option<String> {
        serde_json::from_str::<Record<'_>>(line).ok().map(|record| format!("{record:?}"))
    }

    fn hand(line: &str) -> Option<String> {
        read(line).map(|record| format!("{record:?}"))
    }

    #[test]
    fn the_papers_row_and_the_replay_tools_rows_are_read_by_hand() {
        let r = read(r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2354]}"#)
            .expect("the FAST'25 row");
        assert_eq!((r.timestamp, r.input_length, r.output_length), (Some(27482.0), Some(6955), Some(52)));
        assert_eq!(r.hash_ids, Some(vec![46, 47, 2354]));
        assert!(r.request_id.is_none() && r.session_id.is_none() && r.delay.is_none());

        let r = read(concat!(
            r#"{"request_id":"r0-0","session_id":7,"created_time":0,"input_tokens":1,"output_tokens":0,"#,
            "\t\"delay_ms\" :\r\n 999999999999999 ,\"hash_ids\":[ ]} "
        ))
        .expect("aliases, an integer id, white space, an empty list");
        assert!(matches!(&r.request_id, Some(Id::Text(Cow::Borrowed("r0-0")))));
        assert!(matches!(r.session_id, Some(Id::Number(7))));
        assert_eq!((r.timestamp, r.delay), (Some(0.0), Some(999_999_999_999_999.0)));
        assert_eq!((r.input_length, r.output_length, r.hash_ids), (Some(1), Some(0), Some(vec![])));

        let r = read(r#"{"input_length":18446744073709551615,"request_id":"é ü"}"#).expect("u64::MAX, a non-ASCII id");
        assert_eq!(r.input_length, Some(u64::MAX));
        assert!(matches!(&r.request_id, Some(Id::Text(Cow::Borrowed("é ü")))));
        assert!(read("{}").is_some() && read(" { } ").is_some());

        // Fractions, as the replay tools write delays (the values written by hand as Rust literals).
        for (text, value) in [
            ("2141.5", 2141.5),
            ("0.1", 0.1),
            ("0.000001", 0.000_001),
            ("123456789.012345", 123_456_789.012_345),
            ("7.250", 7.25),
            ("0.0", 0.0),
        ] {
            let line = format!(r#"{{"delay":{text},"created_time":{text}}}"#);
            let r = read(&line).expect(text);
            assert_eq!((r.delay, r.timestamp), (Some(value), Some(value)), "{text}");
        }
    }

    #[test]
    fn every_other_shape_is_left_to_serde_json() {
        for line in [
            r#"{"timestamp":1.5e3}"#, // an exponent
            r#"{"timestamp":1e3}"#,
            r#"{"timestamp":1.}"#, // no digit after the point
            r#"{"timestamp":.5}"#,
            r#"{"timestamp":00.5}"#,
            r#"{"timestamp":1234567890.123456}"#,       // 16 digits
            r#"{"input_length":1.5}"#,                  // a fraction where an integer belongs
            r#"{"timestamp":1000000000000000}"#,        // 16 digits for a float
            r#"{"input_length":18446744073709551616}"#, // u64::MAX + 1
            r#"{"input_length":-1}"#,
            r#"{"input_length":01}"#,
            r#"{"input_length":null}"#,
            r#"{"timestamp":1,"created_time":2}"#, // an alias and its field: serde_json's duplicate
            r#"{"timestamp":1,"timestamp":1}"#,
            r#"{"group_id":1}"#,         // a key Record ignores
            r#"{"priority":1}"#,         // a key Record keeps elsewhere
            r#"{"time\u0073tamp":1}"#,   // an escaped key
            r#"{"request_id":"a\"b"}"#,  // an escaped id
            "{\"request_id\":\"a\tb\"}", // a control character
            r#"{"hash_ids":[1,]}"#,
            r#"{"hash_ids":[1 2]}"#,
            r#"{"hash_ids":[[1]]}"#,
            r#"{"timestamp":1,}"#,
            r#"{"timestamp":1} x"#,
            "{\"timestamp\":1}\u{b}", // a vertical tab is no JSON white space
            r#"{"timestamp":1"#,
            r#"[1]"#,
            "",
        ] {
            assert!(read(line).is_none(), "{line}");
        }
    }

    /// JSON text near the common shape: its keys and others, values of every kind (mostly of the key's type),
    /// white space and stray bytes.
    fn line() -> impl Strategy<Value = String> {
        let number = prop_oneof![
            4 => (0u64..100_000).prop_map(|n| n.to_string()),
            2 => any::<u64>().prop_map(|n| n.to_string()),
            2 => "(0|[1-9][0-9]{0,9})\\.[0-9]{1,9}",
            1 => "-?0*[0-9]{1,22}(\\.[0-9]{1,3})?([eE][-+]?[0-9]{1,3})?",
        ];
        let numbers =
            proptest::collection::vec(number.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(",")));
        let string = prop_oneof![4 => "\"[a-z0-9 é\\-]{0,8}\"", 1 => "\"[a-z\\\\\"\t]{0,4}\""];
        let id = prop_oneof![string.clone(), number.clone()];
        let odd = prop::sample::select(vec!["null", "true", "[]", "[ 1 , 2 ]", "[1,]", "{}", "\"\"", "[[1]]"])
            .prop_map(str::to_owned);
        let any_value = prop_oneof![number.clone(), numbers.clone(), string, odd];
        let typed = |keys: Vec<&'static str>, value: BoxedStrategy<String>| {
            (prop::sample::select(keys).prop_map(str::to_owned), prop_oneof![4 => value, 1 => any_value.clone()])
        };
        let member = prop_oneof![
            3 => typed(vec!["timestamp", "created_time", "delay", "delay_ms"], number.clone().boxed()),
            3 => typed(vec!["input_length", "input_tokens", "output_length", "output_tokens"], number.boxed()),
            2 => typed(vec!["hash_ids"], numbers.boxed()),
            2 => typed(vec!["request_id", "session_id"], id.boxed()),
            1 => typed(vec!["group_id", "priority", "wait_for", "schema", "time\\u0073tamp", "x", ""], any_value.clone().boxed()),
        ];
        let space = prop_oneof![
            40 => prop::sample::select(vec!["", "", "", " ", "\t", "\r\n"]),
            1 => Just("\u{b}"),
        ];
        let member = (space.clone(), member, space.clone(), space.clone());
        let members = proptest::collection::vec(member, 0..6);
        let tail = prop::sample::select(vec!["", "", "", "", "", "", " ", ",", "}", "x"]);
        (space, members, tail).prop_map(|(lead, members, tail)| {
            let body: Vec<String> =
                members.into_iter().map(|(a, (key, value), b, c)| format!("{a}\"{key}\"{b}:{c}{value}")).collect();
            format!("{lead}{{{}}}{tail}", body.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 8192, ..ProptestConfig::default() })]

        /// Wherever the hand reader answers, serde_json reads the line too, into the same record.
        #[test]
        fn the_hand_reader_agrees_with_serde_json(line in line()) {
            if let Some(by_hand) = hand(&line) {
                prop_assert_eq!(Some(by_hand), serde(&line), "{}", line);
            }
        }

        /// Lines of the common shape, written the way serde_json or Python's `json.dumps` write them, are all read
        /// by hand (so the property above is not met by declining everything).
        #[test]
        fn rows_as_tools_write_them_are_read_by_hand(
            timestamp in 0u64..1_000_000_000_000_000,
            lengths in (any::<u64>(), 0u64..100_000),
            hash_ids in proptest::collection::vec(any::<u64>(), 0..40),
            ids in proptest::option::of(("[a-z0-9\\-]{1,12}", 0u64..1_000_000)),
            delay in proptest::option::of((0u64..100_000_000, 0u32..4)),
            python in any::<bool>(),
        ) {
            let (colon, comma) = if python { (": ", ", ") } else { (":", ",") };
            let list: Vec<String> = hash_ids.iter().map(u64::to_string).collect();
            let mut line = format!(
                "{{\"timestamp\"{colon}{timestamp}{comma}\"input_length\"{colon}{}{comma}\"output_length\"{colon}{}",
                lengths.0, lengths.1,
            );
            if let Some((request, session)) = &ids {
                line += &format!("{comma}\"request_id\"{colon}\"{request}\"{comma}\"session_id\"{colon}{session}");
            }
            if let Some((digits, places)) = delay {
                // `digits` with a point `places` digits from its end, as Python prints a float of that value.
                let mut text = format!("{digits:0width$}", width = places as usize + 1);
                text.insert(text.len() - places as usize, '.');
                let text = text.trim_end_matches('.');
                line += &format!("{comma}\"delay\"{colon}{text}");
            }
            line += &format!("{comma}\"hash_ids\"{colon}[{}]}}", list.join(comma));
            let by_hand = read(&line).expect("the common shape");
            prop_assert_eq!(by_hand.hash_ids.as_ref(), Some(&hash_ids));
            prop_assert_eq!(Some(format!("{by_hand:?}")), serde(&line));
        }
    }
}
