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

/// A Python list of non-negative integers (`[204, 19675, 12306]`, as `repr()` prints token ids) at the start of
/// `input`, appended to `out`; returns the rest after `]`.
///
/// The fast path for the longest values engine logs print: a byte loop with no intermediate [`PyValue`]s, about
/// 20× faster than [`py_value`]. Returns `None` (leaving `out` as it was) for anything else: a negative or
/// non-integer item, an id above `u64::MAX`, a nested value, a missing bracket; callers then use [`py_value`],
/// which says what is wrong.
pub fn int_list<'a>(input: &'a str, out: &mut Vec<u64>) -> Option<&'a str> {
    let bytes = input.as_bytes();
    let start = out.len();
    let undo = |out: &mut Vec<u64>| {
        out.truncate(start);
        None
    };
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let mut i = 1;
    let skip_space = |i: &mut usize| {
        while bytes.get(*i).is_some_and(u8::is_ascii_whitespace) {
            *i += 1;
        }
    };
    skip_space(&mut i);
    if bytes.get(i) == Some(&b']') {
        return Some(&input[i + 1..]);
    }
    loop {
        // Runs of ids written the usual way (`123, 45, 6789, `) are read 64 bytes at a time.
        if let Some(read) = canonical_run(bytes, i, out) {
            i += read;
            continue;
        }
        // After the usual `, ` (below), any further whitespace.
        skip_space(&mut i);
        // Most ids have at most 8 digits: read them 8 bytes at a time (SWAR), the rest byte by byte.
        if let Some((value, len)) = bytes.get(i..i + 8).and_then(swar_digits) {
            out.push(value);
            i += len;
            // The usual separator, `, `, without the general whitespace loop.
            if bytes.get(i..i + 2) == Some(b", ") {
                i += 2;
                continue;
            }
            skip_space(&mut i);
            match bytes.get(i) {
                Some(b',') => {
                    i += 1;
                    skip_space(&mut i);
                    continue;
                }
                Some(b']') => return Some(&input[i + 1..]),
                _ => return undo(out),
            }
        }
        let digits_start = i;
        let mut value: u64 = 0;
        while let Some(&b) = bytes.get(i) {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            let Some(next) = value.checked_mul(10).and_then(|v| v.checked_add(u64::from(digit))) else {
                return undo(out);
            };
            value = next;
            i += 1;
        }
        if i == digits_start {
            return undo(out);
        }
        out.push(value);
        skip_space(&mut i);
        match bytes.get(i) {
            Some(b',') => {
                i += 1;
                skip_space(&mut i);
            }
            // Splitting at `i` is safe: `]` is ASCII.
            Some(b']') => return Some(&input[i + 1..]),
            _ => return undo(out),
        }
    }
}

/// Bytes a block of [`canonical_run`] classifies.
const RUN_BLOCK: usize = 64;
/// Bytes it asks for. An id it takes starts at byte 60 at most (it ends there at the latest, with `, ` and a digit
/// after it), so its digits, read as one 8-byte word, end by byte 68; asking for 72 lets the compiler see that the
/// word of any bit position (at most 63) is in the window, and drop the bounds check from every id's read (68
/// cost 13% more instructions in `int_list`, measured with cachegrind).
const RUN_WINDOW: usize = RUN_BLOCK + 8;

/// Reads the ids at `bytes[at..]` that are each followed by `, ` and another id within the next 64 bytes, when
/// `bytes[at]` is a digit: appends them to `out` and returns how many bytes they and their separators take (the
/// next id starts there). `None` when there is no such id (the byte loop of [`int_list`] then reads one), or when
/// fewer than 72 bytes are left.
///
/// The ids are found from three bit masks of the block (digits, commas, spaces) rather than one after the other,
/// so reading an id does not wait for the length of the one before it. A run ends before the first id that is not
/// followed by exactly `, ` and a digit, and before an id of more than 8 digits: what [`int_list`]'s byte loop
/// would read from the same bytes, item by item, is what this reads.
fn canonical_run(bytes: &[u8], at: usize, out: &mut Vec<u64>) -> Option<usize> {
    let window: &[u8; RUN_WINDOW] = bytes.get(at..at + RUN_WINDOW)?.try_into().expect("72 bytes");
    let block: &[u8; RUN_BLOCK] = window[..RUN_BLOCK].try_into().expect("64 bytes");
    let (digits, commas, spaces) = class_masks(block);
    if digits & 1 == 0 {
        return None;
    }
    let starts = digits & !(digits << 1);
    let ends = digits & !(digits >> 1);
    // An id ending at bit e is followed by `, ` and a digit; shifts bring in zeros, so e <= 60.
    let separated = ends & (commas >> 1) & (spaces >> 2) & (digits >> 3);
    // Bits that start nine digits in a row: ids that long are left to the byte loop, which checks for overflow.
    let two = digits & (digits >> 1);
    let four = two & (two >> 2);
    let nine = four & (four >> 4) & (digits >> 8);
    // The run ends before the first id that is not separated, or that long. The block's last id is never
    // separated, so there always is one.
    let first_other = (ends & !separated).trailing_zeros().min(nine.trailing_zeros());
    let mut taken_ends = separated & ((1u64 << first_other) - 1);
    if taken_ends == 0 {
        return None;
    }
    let last_end = 63 - taken_ends.leading_zeros();
    let mut taken_starts = starts & ((2u64 << last_end) - 1);
    // As many values as ends, each of 1 to 8 digits: `extend` reserves once, and no value waits for another.
    out.extend((0..taken_ends.count_ones()).map(|_| {
        let start = taken_starts.trailing_zeros() as usize;
        let len = taken_ends.trailing_zeros() as usize + 1 - start;
        taken_starts &= taken_starts - 1;
        taken_ends &= taken_ends - 1;
        let word = u64::from_le_bytes(window[start..start + 8].try_into().expect("8 bytes"));
        combine_digits(word.wrapping_sub(0x30 * ONES) << (8 * (8 - len)))
    }));
    Some(last_end as usize + 3)
}

/// Bit k of each mask is set when `block[k]` is an ASCII digit, a comma, a space. SSE2 (every x86-64 CPU has it)
/// classifies 16 bytes an instruction; the compiler does not find that itself for the byte loop below.
#[cfg(target_feature = "sse2")]
fn class_masks(block: &[u8; RUN_BLOCK]) -> (u64, u64, u64) {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i, move_mask_i8_m128i, set_splat_i8_m128i, sub_i8_m128i,
    };
    let mask = |v| u64::from(move_mask_i8_m128i(v) as u16);
    let (mut digits, mut commas, mut spaces) = (0u64, 0u64, 0u64);
    for (k, part) in block.chunks_exact(16).enumerate() {
        let bytes = load_unaligned_m128i(part.try_into().expect("16 bytes"));
        // A digit is a byte whose distance above `0`, taken modulo 256, is at most 9.
        let above_zero = sub_i8_m128i(bytes, set_splat_i8_m128i(b'0' as i8));
        let digit = cmp_eq_mask_i8_m128i(min_u8_m128i(above_zero, set_splat_i8_m128i(9)), above_zero);
        digits |= mask(digit) << (16 * k);
        commas |= mask(cmp_eq_mask_i8_m128i(bytes, set_splat_i8_m128i(b',' as i8))) << (16 * k);
        spaces |= mask(cmp_eq_mask_i8_m128i(bytes, set_splat_i8_m128i(b' ' as i8))) << (16 * k);
    }
    (digits, commas, spaces)
}

/// Bit k of each mask is set when `block[k]` is an ASCII digit, a comma, a space.
#[cfg_attr(target_feature = "sse2", cfg(test))]
fn class_masks_bytewise(block: &[u8; RUN_BLOCK]) -> (u64, u64, u64) {
    let (mut digits, mut commas, mut spaces) = (0u64, 0u64, 0u64);
    for (k, &b) in block.iter().enumerate() {
        digits |= u64::from(b.is_ascii_digit()) << k;
        commas |= u64::from(b == b',') << k;
        spaces |= u64::from(b == b' ') << k;
    }
    (digits, commas, spaces)
}

#[cfg(not(target_feature = "sse2"))]
use class_masks_bytewise as class_masks;

const ONES: u64 = 0x0101_0101_0101_0101;

/// The number whose decimal digits (values 0 to 9) are the bytes of `digits` from the highest to the lowest.
fn combine_digits(digits: u64) -> u64 {
    // Combine pairs, quads, octets.
    let mut v = (digits & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(2561) >> 8;
    v = (v & 0x00ff_00ff_00ff_00ff).wrapping_mul(6_553_601) >> 16;
    (v & 0x0000_ffff_0000_ffff).wrapping_mul(42_949_672_960_001) >> 32
}

/// The decimal number at the start of `chunk` (8 bytes) and its length in digits, when it has 1 to 7 digits and
/// so ends inside the chunk; `None` otherwise (no digit, or 8 digits that may go on).
fn swar_digits(chunk: &[u8]) -> Option<(u64, usize)> {
    let word = u64::from_le_bytes(chunk.try_into().ok()?);
    let digits = word.wrapping_sub(0x30 * ONES);
    // A byte's high bit is set when it is not a digit: below '0' it wraps past 0x7f, above '9' adding 0x76 does.
    // Borrows and carries only move upwards, so every byte before the first non-digit is exact.
    let non_digit = (digits | digits.wrapping_add(0x76 * ONES)) & (0x80 * ONES);
    let len = (non_digit.trailing_zeros() / 8) as usize;
    if len == 0 || len == 8 {
        return None;
    }
    // Shift the digits to the top so the unused low bytes read as leading zeros.
    Some((combine_digits(digits << (8 * (8 - len))), len))
}

/// Skips a quoted Python string literal (`'…'` or `"…"`) at the start of `input` without unescaping it, returning
/// the rest after the closing quote, or `None` when `input` does not start with a complete literal.
///
/// For values that are read past but never used (a prompt): no allocation, and `memchr` over the body.
pub fn skip_py_string(input: &str) -> Option<&str> {
    let bytes = input.as_bytes();
    let quote = *bytes.first().filter(|&&q| q == b'\'' || q == b'"')?;
    let mut i = 1;
    loop {
        i += memchr::memchr2(quote, b'\\', bytes.get(i..)?)?;
        if bytes[i] == quote {
            // The quote and the backslash are ASCII, so `i + 1` is a character boundary.
            return Some(&input[i + 1..]);
        }
        // A backslash escapes the next byte; a multi-byte character after it cannot contain a quote or backslash.
        i += 2;
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
    let mut out = Vec::new();
    for_each_pair(text, separator, |key, value| out.push((key, value)));
    out
}

/// [`pairs`] handed to `each` one by one, in order, without collecting them.
pub fn for_each_pair<'a>(text: &'a str, separator: char, mut each: impl FnMut(&'a str, &'a str)) {
    split_top_level(text, |item| {
        let trimmed = trim(item);
        if trimmed.is_empty() {
            return;
        }
        match split_once(item, separator) {
            Some((key, value)) => each(trim(key), trim(value)),
            None => each("", trimmed),
        }
    });
}

/// `text.split_once(separator)`, an ASCII separator found by a plain loop: an item is a few bytes, shorter than
/// it takes to set up `memchr`.
fn split_once(text: &str, separator: char) -> Option<(&str, &str)> {
    if !separator.is_ascii() {
        return text.split_once(separator);
    }
    // An ASCII byte is never part of a multi-byte character, so the cut is at character boundaries.
    let at = text.bytes().position(|b| char::from(b) == separator)?;
    Some((&text[..at], &text[at + 1..]))
}

/// `str::trim`, without decoding characters when both ends are plain ASCII (every `key: value` of a log line).
pub fn trim(text: &str) -> &str {
    let ascii = text.trim_ascii();
    // `trim_ascii` removes only whitespace `trim` removes; what it leaves needs no more trimming when it is empty
    // or starts and ends with ASCII that is not whitespace (`trim` also removes the vertical tab, and non-ASCII
    // spaces).
    let plain = |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii() && !char::from(b).is_whitespace());
    if ascii.is_empty() || (plain(ascii.as_bytes().first()) && plain(ascii.as_bytes().last())) {
        ascii
    } else {
        text.trim()
    }
}

/// What a byte is to [`split_top_level`].
const PLAIN: u8 = 0;
const COMMA: u8 = 1;
const QUOTE: u8 = 2;
const OPEN: u8 = 3;
const CLOSE: u8 = 4;

/// [`split_top_level`]'s class of every byte.
static BYTE_CLASS: [u8; 256] = {
    let mut class = [PLAIN; 256];
    class[b',' as usize] = COMMA;
    class[b'\'' as usize] = QUOTE;
    class[b'"' as usize] = QUOTE;
    class[b'(' as usize] = OPEN;
    class[b'[' as usize] = OPEN;
    class[b'{' as usize] = OPEN;
    class[b')' as usize] = CLOSE;
    class[b']' as usize] = CLOSE;
    class[b'}' as usize] = CLOSE;
    class
};

/// `text` split at commas outside brackets and quotes, each part handed to `each` in order (the last one after the
/// last comma too, so there is always at least one). Bytes rather than characters: every delimiter is ASCII, and
/// no byte of a multi-byte character is; bytes that are no delimiter are skipped by a table lookup each.
fn split_top_level<'a>(text: &'a str, mut each: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let (mut depth, mut start, mut i) = (0usize, 0, 0);
    while i < bytes.len() {
        match BYTE_CLASS[usize::from(bytes[i])] {
            PLAIN => {}
            COMMA if depth == 0 => {
                each(&text[start..i]);
                start = i + 1;
            }
            COMMA => {}
            OPEN => depth += 1,
            CLOSE => depth = depth.saturating_sub(1),
            _ => {
                // A quoted string: to its closing quote, a backslash escaping the byte after it.
                let quote = bytes[i];
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
        }
        i += 1;
    }
    each(&text[start..]);
}

/// Parses `key=value` pairs whose values are Python reprs (the arguments of a dataclass repr without its name).
/// Returns `None` if any value is not a repr.
pub fn keyword_values(text: &str) -> Option<Vec<(&str, PyValue<'_>)>> {
    pairs(text, '=').into_iter().map(|(k, v)| Some((k, parse_py(v)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lists_parse_like_py_value_or_decline() {
        let mut out = vec![7];
        assert_eq!(int_list("[204, 19675, 12306], lora_request: None.", &mut out), Some(", lora_request: None."));
        assert_eq!(out, [7, 204, 19675, 12306]);
        out.clear();
        assert_eq!(int_list("[ ]x", &mut out), Some("x"));
        assert_eq!(int_list("[18446744073709551615]", &mut out), Some(""));
        assert_eq!(out, [u64::MAX]);
        out.clear();
        // Whitespace of any kind between items.
        assert_eq!(int_list("[1,\n 2 ]", &mut out), Some(""));
        assert_eq!(out, [1, 2]);
        // Everything else declines and leaves `out` untouched.
        for bad in [
            "[18446744073709551616]",
            "[1, 2,]",
            "[1, -2]",
            "[1, 2.5]",
            "[1, 'a']",
            "[1, [2]]",
            "[1, 2",
            "[1 2]",
            "(1,)",
            "",
        ] {
            out.clear();
            out.push(9);
            assert_eq!(int_list(bad, &mut out), None, "{bad}");
            assert_eq!(out, [9], "{bad}");
        }
    }

    #[test]
    fn swar_digits_match_a_plain_parse() {
        for (chunk, expected) in [
            (b"1, 2, 3]", Some((1, 1))),
            (b"1234567]", Some((1_234_567, 7))),
            (b"0000042,", Some((42, 7))),
            (b"9/000000", Some((9, 1))),
            (b"98:76543", Some((98, 2))),
            (b"12345678", None),
            (b"]1234567", None),
            (b"\xff1234567", None),
        ] {
            assert_eq!(swar_digits(chunk), expected, "{}", String::from_utf8_lossy(chunk));
        }
    }

    /// What [`int_list`] reads, by splitting at the first `]` and at commas: the ids and the rest after `]`.
    fn int_list_reference(input: &str) -> Option<(Vec<u64>, &str)> {
        let (body, rest) = input.strip_prefix('[')?.split_once(']')?;
        let space = |c: char| c.is_ascii_whitespace();
        if body.trim_matches(space).is_empty() {
            return Some((Vec::new(), rest));
        }
        let ids = body.split(',').map(|item| {
            let item = item.trim_matches(space);
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            item.parse::<u64>().ok()
        });
        Some((ids.collect::<Option<_>>()?, rest))
    }

    #[test]
    fn int_lists_past_a_block_read_like_the_reference() {
        // Long enough for `canonical_run`, with each way a run ends: a separator that is not `, `, an id of more
        // than 8 digits (and one of exactly 8), the list's end, a byte that is no digit, fewer than 72 bytes left.
        let run = |ids: std::ops::Range<u64>| ids.map(|id| (id * 7919).to_string()).collect::<Vec<_>>().join(", ");
        let cases = [
            format!("[{}] tail", run(1..40)),
            format!("[{}, 123456789, 12345678, {}] tail", run(1..12), run(5..30)),
            format!("[{},  7,\t8 ,9, {}]", run(1..15), run(1..15)),
            format!("[{}, 12x4, {}]", run(1..15), run(1..15)),
            format!("[{}, 1, x2, {}]", run(1..15), run(1..15)),
            format!("[{}, 18446744073709551615, 18446744073709551616, {}]", run(1..15), run(1..15)),
            format!("[{}, 1, 2, 3]", run(1..9)),
            format!("[{}, \u{e9}, 3]", run(1..20)),
            format!("[{},]", run(1..30)),
            format!("[{}", run(1..30)),
        ];
        for text in &cases {
            let mut out = vec![5];
            let got = int_list(text, &mut out);
            match int_list_reference(text) {
                Some((ids, rest)) => {
                    assert_eq!(got, Some(rest), "{text}");
                    assert_eq!(out[1..], ids, "{text}");
                }
                None => assert_eq!((got, &out[..]), (None, &[5][..]), "{text}"),
            }
        }
        // The first two are read whole; the fourth, fifth and sixth are not lists of `u64`s.
        assert_eq!(int_list_reference(&cases[0]).map(|(ids, _)| ids.len()), Some(39));
        assert_eq!(int_list_reference(&cases[1]).map(|(ids, _)| ids.len()), Some(38));
        assert!(int_list_reference(&cases[3]).is_none());
        assert!(int_list_reference(&cases[4]).is_none());
        assert!(int_list_reference(&cases[5]).is_none());
    }

    #[test]
    fn class_masks_mark_digits_commas_and_spaces() {
        let mut block = [b'x'; RUN_BLOCK];
        block[..12].copy_from_slice(b"12, 345, 6, ");
        block[40..44].copy_from_slice(b"/:0\xff");
        block[63] = b'9';
        let (digits, commas, spaces) = class_masks(&block);
        assert_eq!(digits, 0b11 | 0b111 << 4 | 1 << 9 | 1 << 42 | 1 << 63);
        assert_eq!(commas, 1 << 2 | 1 << 7 | 1 << 10);
        assert_eq!(spaces, 1 << 3 | 1 << 8 | 1 << 11);
    }

    /// The splitter [`pairs`] replaced, a character state machine kept as the reference.
    fn pairs_reference(text: &str, separator: char) -> Vec<(&str, &str)> {
        let mut items = Vec::new();
        let (mut depth, mut quote, mut escaped, mut start) = (0usize, None::<u8>, false, 0);
        for (i, &c) in text.as_bytes().iter().enumerate() {
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == b'\\' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    b'\'' | b'"' => quote = Some(c),
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                    b',' if depth == 0 => {
                        items.push(&text[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                },
            }
        }
        items.push(&text[start..]);
        items
            .into_iter()
            .filter(|item| !item.trim().is_empty())
            .map(|item| match item.split_once(separator) {
                Some((k, v)) => (k.trim(), v.trim()),
                None => ("", item.trim()),
            })
            .collect()
    }

    #[test]
    fn split_once_is_str_split_once() {
        for (text, separator) in
            [("a: b: c", ':'), ("no separator", ':'), (":", ':'), ("é=ü=", '='), ("aéb", 'é'), ("", '=')]
        {
            assert_eq!(split_once(text, separator), text.split_once(separator), "{text:?}");
        }
    }

    #[test]
    fn pairs_agree_with_the_reference_on_edge_cases() {
        let cases = [
            "",
            ",",
            " , ,",
            "a: 1, b: 2,",
            "gen throughput (token/s): 1.5, #queue-req: 0",
            "a='x\\', y', b=2",
            "a='unterminated, b=2",
            "a=\"q\\\"\", b=[1, (2, 3)], c={'k': 'v, w'}",
            "a=1)), b=2",
            "\u{b}a: 1\u{b}, \u{2003}b\u{2003}: \u{85}2\u{85}, c:\u{a0}",
            "k: v\\",
        ];
        for case in cases {
            for separator in [':', '='] {
                assert_eq!(pairs(case, separator), pairs_reference(case, separator), "{case:?}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn pairs_agree_with_the_reference(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[a-z #()\\[\\]{},:=.'\"\\\\-]{0,12}").unwrap(),
                    proptest::string::string_regex("[\\PC\\s\\u{b}\\u{85}\\u{a0}\\u{2003}]{0,6}").unwrap(),
                ],
                0..12,
            ),
            separator in proptest::prop_oneof![proptest::strategy::Just(':'), proptest::strategy::Just('=')],
        ) {
            let text = parts.concat();
            proptest::prop_assert_eq!(pairs(&text, separator), pairs_reference(&text, separator));
        }

        #[test]
        fn trim_agrees_with_str_trim(
            start in "[ \\t\\r\\n\\u{b}\\u{c}\\u{85}\\u{a0}\\u{2003}]{0,3}",
            text in "[\\PC\\s\\u{b}\\u{85}\\u{a0}\\u{2003}a ]{0,16}",
            end in "[ \\t\\r\\n\\u{b}\\u{c}\\u{85}\\u{a0}\\u{2003}]{0,3}",
        ) {
            // Whitespace of every kind at the ends, where `trim` works.
            let text = format!("{start}{text}{end}");
            proptest::prop_assert_eq!(trim(&text), text.trim());
        }
        #[test]
        fn int_list_agrees_with_the_reference(
            ids in proptest::collection::vec((proptest::num::u64::ANY, 0u32..64), 0..120),
            seps in proptest::collection::vec(proptest::sample::select(vec![", ", ", ", ", ", ",", " , ", ",\n "]), 120),
            damage in proptest::option::of((proptest::num::usize::ANY, proptest::sample::select(
                vec!['x', ']', '-', ',', ' ', '9', '[', '\t', '\u{e9}', '\u{b}']))),
        ) {
            let mut text = String::from("[");
            for (k, (id, shift)) in ids.iter().enumerate() {
                if k > 0 {
                    text.push_str(seps[k]);
                }
                text.push_str(&(id >> shift).to_string());
            }
            text.push_str("] tail");
            if let Some((at, c)) = damage {
                let at = at % text.len();
                text.replace_range(at..at + 1, c.encode_utf8(&mut [0; 4]));
            }
            let mut out = vec![5];
            let got = int_list(&text, &mut out);
            match int_list_reference(&text) {
                Some((ids, rest)) => {
                    proptest::prop_assert_eq!(got, Some(rest));
                    proptest::prop_assert_eq!(&out[1..], &ids[..]);
                }
                None => proptest::prop_assert_eq!((got, &out[..]), (None, &[5][..])),
            }
        }

        // Elsewhere `class_masks` is `class_masks_bytewise`.
        #[cfg(target_feature = "sse2")]
        #[test]
        fn class_masks_agree_bytewise(block in proptest::collection::vec(proptest::sample::select(
            b"0123456789, /:x\x00\x80\xb9\xff".to_vec()), RUN_BLOCK)) {
            let block: [u8; RUN_BLOCK] = block.try_into().expect("64 bytes");
            proptest::prop_assert_eq!(class_masks(&block), class_masks_bytewise(&block));
        }

        #[test]
        fn int_list_agrees_with_py_value(ids in proptest::collection::vec(proptest::num::u64::ANY, 0..40),
                                         shift in 0u32..64, sep in "(, |,|,\\n  )") {
            let ids: Vec<u64> = ids.into_iter().map(|id| id >> shift).collect();
            let text = format!("[{}] tail", ids.iter().map(u64::to_string).collect::<Vec<_>>().join(&sep));
            let mut out = Vec::new();
            proptest::prop_assert_eq!(int_list(&text, &mut out), Some(" tail"));
            proptest::prop_assert_eq!(&out, &ids);
            if let Ok((_, PyValue::List(items))) = py_value(&text) {
                let parsed: Vec<u64> = items.iter().filter_map(|v| v.as_i64().map(|n| n as u64)).collect();
                if ids.iter().all(|&id| id <= i64::MAX as u64) {
                    proptest::prop_assert_eq!(parsed, ids);
                }
            }
        }
    }

    #[test]
    fn python_strings_are_skipped_with_their_escapes() {
        assert_eq!(skip_py_string("'a\\'b' rest"), Some(" rest"));
        assert_eq!(skip_py_string(r#""it's \"x\"", next"#), Some(", next"));
        assert_eq!(skip_py_string("'ends in backslash \\\\', x"), Some(", x"));
        assert_eq!(skip_py_string("'caf\u{e9} \\\u{e9}'!"), Some("!"));
        for bad in ["'open", "'escape at end\\", "no quote", ""] {
            assert_eq!(skip_py_string(bad), None, "{bad}");
        }
    }

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
