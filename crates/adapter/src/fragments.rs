//! Structured fragments inside free-text log lines: Python reprs and `key=value` / `key: value` lists.
//!
//! Engine logs print Python objects (`SamplingParams(n=1, temperature=0.7, stop=['\n'])`, `{'cached_tokens': 12}`)
//! and comma-separated statistics (`#new-seq: 1, #new-token: 8, token usage: 0.00`). These parsers borrow from the
//! line, allocate only for escaped strings and containers, and never panic: nesting deeper than [`MAX_DEPTH`] is
//! a parse error, not a stack overflow.

use std::borrow::Cow;

use nom::branch::alt;
use nom::bytes::complete::{take_while, take_while1};
use nom::character::complete::{char, multispace0};
use nom::combinator::{opt, recognize};
use nom::error::{Error, ErrorKind};
use nom::sequence::{pair, preceded};
use nom::{Err, IResult, Parser};

/// Deepest nesting of containers and calls a Python repr may have.
pub const MAX_DEPTH: usize = 32;

/// A Python value as `repr()` prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue<'a> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// A float, or an integer too large for `i64`.
    Float(f64),
    /// A string, unescaped.
    Str(Cow<'a, str>),
    /// `[…]`.
    List(Vec<PyValue<'a>>),
    /// `(…)`.
    Tuple(Vec<PyValue<'a>>),
    /// `{k: v, …}`, in written order.
    Dict(Vec<(PyValue<'a>, PyValue<'a>)>),
    /// `Name(arg, key=value, …)`, as dataclass and namedtuple reprs print.
    Call {
        /// The (possibly dotted) callee name.
        name: &'a str,
        /// Arguments in written order; keyword arguments carry their name.
        args: Vec<(Option<&'a str>, PyValue<'a>)>,
    },
    /// A bare (possibly dotted) name such as `inf`, `nan` or `RequestOutputKind.CUMULATIVE`.
    Name(&'a str),
}

impl<'a> PyValue<'a> {
    /// The value as an integer, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyValue::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PyValue::Int(n) => Some(*n as f64),
            PyValue::Float(x) => Some(*x),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of key `key` in a dict with string (or bare-name) keys, or keyword argument `key` of a call.
    pub fn get(&self, key: &str) -> Option<&PyValue<'a>> {
        match self {
            // Keys are strings in Python reprs; some loggers print them bare (`{temperature: 0.1}`).
            PyValue::Dict(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key) || matches!(k, PyValue::Name(n) if *n == key))
                .map(|(_, v)| v),
            PyValue::Call { args, .. } => args.iter().find(|(k, _)| *k == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Parses one Python repr at the start of `input`, returning the rest.
pub fn py_value(input: &str) -> IResult<&str, PyValue<'_>> {
    value_at(input, 0)
}

/// Parses `input` as exactly one Python repr (surrounding whitespace allowed).
pub fn parse_py(input: &str) -> Option<PyValue<'_>> {
    match (preceded(multispace0, py_value), multispace0).parse(input) {
        Ok(("", (v, _))) => Some(v),
        _ => None,
    }
}

fn fail(input: &str) -> Err<Error<&str>> {
    Err::Error(Error::new(input, ErrorKind::Verify))
}

fn value_at(input: &str, depth: usize) -> IResult<&str, PyValue<'_>> {
    if depth > MAX_DEPTH {
        return Err(Err::Failure(Error::new(input, ErrorKind::TooLarge)));
    }
    let (input, _) = multispace0(input)?;
    match input.as_bytes().first() {
        Some(b'\'' | b'"') => py_string(input).map(|(rest, s)| (rest, PyValue::Str(s))),
        Some(b'[') => sequence(input, '[', ']', depth).map(|(rest, items)| (rest, PyValue::List(items))),
        Some(b'(') => sequence(input, '(', ')', depth).map(|(rest, items)| (rest, PyValue::Tuple(items))),
        Some(b'{') => dict(input, depth),
        Some(b'-' | b'+' | b'0'..=b'9' | b'.') => number(input),
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => name_or_call(input, depth),
        _ => Err(fail(input)),
    }
}

fn number(input: &str) -> IResult<&str, PyValue<'_>> {
    let digits = |i| take_while1(|c: char| c.is_ascii_digit() || c == '_').parse(i);
    let (rest, text) = recognize((
        opt(alt((char('-'), char('+')))),
        alt((recognize(pair(digits, opt(pair(char('.'), opt(digits))))), recognize(pair(char('.'), digits)))),
        opt((alt((char('e'), char('E'))), opt(alt((char('-'), char('+')))), digits)),
    ))
    .parse(input)?;
    let clean: Cow<'_, str> = if text.contains('_') { text.replace('_', "").into() } else { text.into() };
    if !clean.contains(['.', 'e', 'E'])
        && let Ok(n) = clean.parse::<i64>()
    {
        return Ok((rest, PyValue::Int(n)));
    }
    clean.parse::<f64>().map(|x| (rest, PyValue::Float(x))).map_err(|_| fail(input))
}

fn identifier(input: &str) -> IResult<&str, &str> {
    recognize(pair(
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
    ))
    .parse(input)
}

fn name_or_call(input: &str, depth: usize) -> IResult<&str, PyValue<'_>> {
    let (rest, name) = identifier(input)?;
    if !rest.starts_with('(') {
        let v = match name {
            "None" => PyValue::None,
            "True" => PyValue::Bool(true),
            "False" => PyValue::Bool(false),
            _ => PyValue::Name(name),
        };
        return Ok((rest, v));
    }
    let mut rest = &rest[1..];
    let mut args = Vec::new();
    loop {
        let (r, _) = multispace0(rest)?;
        if let Some(r) = r.strip_prefix(')') {
            return Ok((r, PyValue::Call { name, args }));
        }
        let keyword: IResult<&str, &str> =
            (identifier, multispace0, char('='), multispace0).map(|(k, _, _, _)| k).parse(r);
        // `a == b` is not a keyword argument; only a single `=` is.
        let (r, key) = match keyword {
            Ok((after, k)) if !after.starts_with('=') => (after, Some(k)),
            _ => (r, None),
        };
        let (r, v) = value_at(r, depth + 1)?;
        args.push((key, v));
        (rest, ()) = after_item(r, ')')?;
    }
}

/// After an item of a container: a comma (consumed), or its closing bracket (left for the caller to see).
fn after_item(input: &str, close: char) -> IResult<&str, ()> {
    let (rest, _) = multispace0(input)?;
    match rest.strip_prefix(',') {
        Some(rest) => Ok((rest, ())),
        None if rest.starts_with(close) => Ok((rest, ())),
        None => Err(fail(rest)),
    }
}

fn sequence(input: &str, open: char, close: char, depth: usize) -> IResult<&str, Vec<PyValue<'_>>> {
    let mut rest = &input[open.len_utf8()..];
    let mut items = Vec::new();
    loop {
        let (r, _) = multispace0(rest)?;
        if let Some(r) = r.strip_prefix(close) {
            return Ok((r, items));
        }
        let (r, v) = value_at(r, depth + 1)?;
        items.push(v);
        (rest, ()) = after_item(r, close)?;
    }
}

fn dict(input: &str, depth: usize) -> IResult<&str, PyValue<'_>> {
    let mut rest = &input[1..];
    let mut entries = Vec::new();
    loop {
        let (r, _) = multispace0(rest)?;
        if let Some(r) = r.strip_prefix('}') {
            return Ok((r, PyValue::Dict(entries)));
        }
        let (r, k) = value_at(r, depth + 1)?;
        let (r, _) = (multispace0, char(':')).parse(r)?;
        let (r, v) = value_at(r, depth + 1)?;
        entries.push((k, v));
        (rest, ()) = after_item(r, '}')?;
    }
}

/// A quoted Python string literal (`'…'` or `"…"`), unescaped; borrowed when it has no escapes.
fn py_string(input: &str) -> IResult<&str, Cow<'_, str>> {
    let quote = match input.chars().next() {
        Some(q @ ('\'' | '"')) => q,
        _ => return Err(fail(input)),
    };
    let body = &input[1..];
    let mut owned: Option<String> = None;
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == quote {
            let text = match owned {
                Some(s) => Cow::Owned(s),
                None => Cow::Borrowed(&body[..i]),
            };
            return Ok((&body[i + 1..], text));
        }
        if c != '\\' {
            if let Some(s) = owned.as_mut() {
                s.push(c);
            }
            continue;
        }
        let s = owned.get_or_insert_with(|| body[..i].to_owned());
        let Some((_, escaped)) = chars.next() else { break };
        let hex = |chars: &mut std::str::CharIndices<'_>, n: usize| -> Option<char> {
            let digits: String = chars.by_ref().take(n).map(|(_, c)| c).collect();
            u32::from_str_radix(&digits, 16).ok().and_then(char::from_u32)
        };
        let unescaped = match escaped {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            '0' => Some('\0'),
            '\\' | '\'' | '"' => Some(escaped),
            'x' => hex(&mut chars, 2),
            'u' => hex(&mut chars, 4),
            'U' => hex(&mut chars, 8),
            other => {
                // Python keeps unknown escapes literally.
                s.push('\\');
                Some(other)
            }
        };
        match unescaped {
            Some(c) => s.push(c),
            None => return Err(fail(input)),
        }
    }
    Err(Err::Error(Error::new(input, ErrorKind::Eof)))
}

/// Splits `text` into `(key, value)` pairs separated by commas at the top level (not inside brackets or quotes),
/// each pair split at the first `separator` (`=` or `:`), both sides trimmed. Items without the separator are
/// returned with an empty key, so nothing is silently dropped.
pub fn pairs(text: &str, separator: char) -> Vec<(&str, &str)> {
    split_top_level(text)
        .into_iter()
        .filter(|item| !item.trim().is_empty())
        .map(|item| match item.split_once(separator) {
            Some((k, v)) => (k.trim(), v.trim()),
            None => ("", item.trim()),
        })
        .collect()
}

/// `text` split at commas outside brackets and quotes.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut quote, mut escaped, mut start) = (0usize, None::<char>, false, 0);
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    items.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            },
        }
    }
    items.push(&text[start..]);
    items
}

/// Parses `key=value` pairs whose values are Python reprs (the arguments of a dataclass repr without its name).
/// Returns `None` if any value is not a repr.
pub fn keyword_values(text: &str) -> Option<Vec<(&str, PyValue<'_>)>> {
    pairs(text, '=').into_iter().map(|(k, v)| Some((k, parse_py(v)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> PyValue<'_> {
        PyValue::Str(text.into())
    }

    #[test]
    fn parses_the_reprs_engines_log() {
        // vLLM 0.4-0.6 `Received request … params: SamplingParams(…)` (abridged from its __repr__).
        let repr = "SamplingParams(n=1, presence_penalty=0.0, temperature=0.7, top_p=1.0, top_k=-1, \
                    stop=['\\n', \"it's\"], stop_token_ids=[], max_tokens=256, logprobs=None, skip_special_tokens=True)";
        let v = parse_py(repr).unwrap();
        assert_eq!(v.get("n"), Some(&PyValue::Int(1)));
        assert_eq!(v.get("temperature").and_then(PyValue::as_f64), Some(0.7));
        assert_eq!(v.get("top_k"), Some(&PyValue::Int(-1)));
        assert_eq!(v.get("stop"), Some(&PyValue::List(vec![s("\n"), s("it's")])));
        assert_eq!(v.get("stop_token_ids"), Some(&PyValue::List(vec![])));
        assert_eq!(v.get("logprobs"), Some(&PyValue::None));
        assert_eq!(v.get("skip_special_tokens"), Some(&PyValue::Bool(true)));
        let PyValue::Call { name, args } = &v else { panic!("{v:?}") };
        assert_eq!(*name, "SamplingParams");
        assert_eq!(args.len(), 10);

        let meta =
            parse_py("{'prompt_tokens': 12, 'cached_tokens': 0, 'e2e_latency': 1.5e-3, 'id': 'a\\x41'}").unwrap();
        assert_eq!(meta.get("prompt_tokens").and_then(PyValue::as_i64), Some(12));
        assert_eq!(meta.get("e2e_latency").and_then(PyValue::as_f64), Some(0.0015));
        assert_eq!(meta.get("id").and_then(PyValue::as_str), Some("aA"));

        assert_eq!(parse_py("(1, 'a',)"), Some(PyValue::Tuple(vec![PyValue::Int(1), s("a")])));
        assert_eq!(parse_py("<RequestOutputKind.CUMULATIVE: 0>"), None);
        assert_eq!(parse_py("RequestOutputKind.CUMULATIVE"), Some(PyValue::Name("RequestOutputKind.CUMULATIVE")));
        assert_eq!(parse_py("inf"), Some(PyValue::Name("inf")));
        assert_eq!(parse_py("99999999999999999999"), Some(PyValue::Float(1e20)));
        assert_eq!(parse_py("1_000"), Some(PyValue::Int(1000)));
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let (_, plain) = py_string("'abc' rest").unwrap();
        assert!(matches!(plain, Cow::Borrowed("abc")));
        let (rest, escaped) = py_string(r"'a\'b\u00e9\q' rest").unwrap();
        assert_eq!(escaped, "a'bé\\q");
        assert_eq!(rest, " rest");
    }

    #[test]
    fn malformed_and_hostile_input_is_rejected_not_panicked_on() {
        for bad in ["", "[1, 2", "{'a' 1}", "'unterminated", "Foo(a=1", "[1 2]", "'\\x4'", "--1", "@"] {
            assert_eq!(parse_py(bad), None, "{bad:?}");
        }
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert_eq!(parse_py(&deep), None);
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse_py(&ok).is_some());
    }

    #[test]
    fn pairs_split_at_top_level_commas() {
        // SGLang 0.4 `Prefill batch.` statistics.
        let sglang = "#new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0";
        assert_eq!(
            pairs(sglang, ':'),
            [
                ("#new-seq", "1"),
                ("#new-token", "8"),
                ("#cached-token", "0"),
                ("token usage", "0.00"),
                ("#running-req", "0"),
                ("#queue-req", "0"),
            ]
        );
        assert_eq!(
            pairs("a=[1, 2], b='x, y', c=f(1, 2), lone", '='),
            [("a", "[1, 2]"), ("b", "'x, y'"), ("c", "f(1, 2)"), ("", "lone"),]
        );
        let kv = keyword_values("n=1, stop=['a'], seed=None").unwrap();
        assert_eq!(kv, [("n", PyValue::Int(1)), ("stop", PyValue::List(vec![s("a")])), ("seed", PyValue::None)]);
        assert_eq!(keyword_values("n=1, m=@"), None);
    }
}
