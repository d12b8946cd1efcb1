//! The envelope of one vLLM log line: foreign prefixes, the process prefix, the logging header, and the message.
//!
//! `vllm/logger.py` `_FORMAT`, by release (all with `_DATE_FORMAT = "%m-%d %H:%M:%S"`, local time, no year):
//!
//! ```text
//! 0.2.7 – 0.6.3        "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
//! 0.6.6 – 0.7.3        "{VLLM_LOGGING_PREFIX}%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
//! 0.8.0 – 0.10.1.1     "{VLLM_LOGGING_PREFIX}%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
//! 0.10.2 – 0.30.0      "{VLLM_LOGGING_PREFIX}%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
//! 0.31.0 – 0.33.0      "{VLLM_LOGGING_PREFIX}(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
//! ```
//!
//! From 0.4.2 to 0.30 worker, engine-core and API-server processes also prefix every line they write with
//! `({name} pid={pid}) ` (ANSI-coloured in some releases), which covers uvicorn's access lines too. 0.32+ can write
//! JSON records instead (`asctime` with year and milliseconds). Around all of these, deployments add their own
//! prefixes: docker `--timestamps` (RFC 3339, UTC), docker-compose `service-1  | `, journald `Mon DD HH:MM:SS host
//! unit[pid]: `, or a `[YYYY-MM-DD HH:MM:SS] ` wrapper.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// A timestamp found in a prefix wrapped around the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrefixTime<'a> {
    /// docker `--timestamps`: an RFC 3339 instant, the most precise time on the line.
    Rfc3339(&'a str),
    /// `[YYYY-MM-DD HH:MM:SS]` in some other zone: only its year is used.
    Wrapper { year: i32 },
    /// A full local time (`YYYY-MM-DD HH:MM:SS[.fff]`, no zone) before a record that has no header of its own (a
    /// platform re-emitting vLLM's messages): the record's time, read with `--utc-offset`.
    Local(&'a str),
}

/// The envelopes a record can be found in, as bits of [`Record::wrappers`]; [`WRAPPER_NAMES`] names them.
pub(crate) mod wrapper {
    /// `(name pid=N) ` of a vLLM process.
    pub(crate) const PROCESS: u16 = 1;
    /// docker `--timestamps`.
    pub(crate) const DOCKER: u16 = 1 << 1;
    /// journald / syslog.
    pub(crate) const JOURNALD: u16 = 1 << 2;
    /// docker-compose `service  | `.
    pub(crate) const COMPOSE: u16 = 1 << 3;
    /// `[YYYY-MM-DD HH:MM:SS] `.
    pub(crate) const DATE: u16 = 1 << 4;
    /// Any other text before the header: a custom formatter, `VLLM_LOGGING_PREFIX`, a Ray actor's prefix.
    pub(crate) const CUSTOM: u16 = 1 << 5;
    /// A message with no vLLM header, after another program's full timestamp (KServe's `kserve.trace`).
    pub(crate) const RE_EMITTED: u16 = 1 << 6;
    /// ANSI colour codes.
    pub(crate) const COLOUR: u16 = 1 << 7;
    /// Colour codes whose escape byte was lost (`[0;36m`).
    pub(crate) const LOST_ESCAPES: u16 = 1 << 8;
    /// Docker Desktop's `YYYY-MM-DD HH:MM:SS.mmm | `.
    pub(crate) const DESKTOP: u16 = 1 << 9;
}

/// The name of each bit of [`wrapper`], for the manifest's `envelopes`.
pub(crate) const WRAPPER_NAMES: [&str; 10] = [
    "process-prefix",
    "docker-timestamps",
    "journald",
    "compose",
    "date-wrapper",
    "custom-prefix",
    "re-emitted",
    "colour-codes",
    "lost-escapes",
    "docker-desktop",
];

/// One vLLM logging record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    /// `DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`.
    pub(crate) level: &'a str,
    /// Month and day of `asctime`.
    pub(crate) month: u32,
    pub(crate) day: u32,
    /// `HH:MM:SS` of `asctime`.
    pub(crate) hms: (u32, u32, u32),
    /// `filename` (or, at DEBUG from 0.10.2, a path relative to the package) and line of the logging call.
    pub(crate) file: &'a str,
    pub(crate) lineno: u32,
    /// Whether the header wrote `[file:line]` (0.8.0+) rather than `file:line]`.
    pub(crate) bracketed: bool,
    /// The process name of the `(name pid=N)` prefix, if any.
    pub(crate) process: Option<&'a str>,
    /// A timestamp from a wrapping prefix, if any.
    pub(crate) prefix_time: Option<PrefixTime<'a>>,
    /// The envelopes found around the record, as [`wrapper`] bits (colour codes are added by the caller, which
    /// strips them before).
    pub(crate) wrappers: u16,
    /// The message.
    pub(crate) message: &'a str,
}

/// What one line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Envelope<'a> {
    /// A vLLM logging record.
    Record(Record<'a>),
    /// A uvicorn access line (`INFO:     127.0.0.1:1234 - "POST /v1/completions HTTP/1.1" 200 OK`).
    Access { process: Option<&'a str>, method: &'a str, path: &'a str, status: u16 },
    /// uvicorn's own messages under a vLLM process prefix (`(APIServer pid=1) INFO:     Started server process`):
    /// records of the API server that carry nothing for the trace.
    Server,
    /// Anything else: tracebacks, uvicorn's own messages, progress bars, other libraries' records.
    Foreign,
}

/// Control sequences that colour terminal output.
static ANSI: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\x1b\[[0-9;]*m").expect("valid regex"));

static PREFIXES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?x)
        ^
        (?:(?P<docker>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))\ )?   # docker --timestamps
        (?P<journald>[A-Z][a-z]{2}\ [\ \d]\d\ \d\d:\d\d:\d\d\ \S+\ [^\s:\[]+(?:\[\d+\])?:\ )?  # journald / syslog
        (?:(?P<desktop>\d{4})-\d\d-\d\d\ \d\d:\d\d:\d\d(?:\.\d+)?\ \|\ )?                      # Docker Desktop
        (?P<compose>[\w.-]+\s+\|\ )?                                                         # docker-compose service
        (?:\[(?P<wrap>\d{4})-\d\d-\d\d\ \d\d:\d\d:\d\d\]\ )?                                 # [YYYY-MM-DD HH:MM:SS]
        "#,
    )
    .expect("valid regex")
});

static PROCESS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\((?P<name>[A-Za-z_][\w ]*?(?: rank=\d+)?) pid=\d+\) ").expect("valid regex"));

/// The logging header; searched, not anchored, so that a `VLLM_LOGGING_PREFIX` before it is skipped.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        (?:\((?P<name>[A-Za-z_][\w\ ]*?(?:\ rank=\d+)?)\ pid=\d+\)\ )?
        (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\ (?P<month>\d\d)-(?P<day>\d\d)\ (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\ 
        (?:\[(?P<file1>[^\]\s]+):(?P<line1>\d+)\]|(?P<file2>[^\]\s]+):(?P<line2>\d+)\])\ ?
        ",
    )
    .expect("valid regex")
});

/// The words [`HEADER`] and [`ACCESS`] need, one of which a line must hold to be either.
static LEVEL_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("DEBUG|INFO|WARNING|ERROR|CRITICAL").expect("valid regex"));

static ACCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^INFO:\s+\S+ - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})\b"#)
        .expect("valid regex")
});

/// Colour codes whose escape byte was lost in a copy from a terminal: `[0;36m`, `[0m`.
static LOST_ESCAPES: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[[0-9]{1,3}(?:;[0-9]{1,3})*m").expect("valid regex"));

/// `line` without ANSI colour codes, borrowed when it has none.
pub(crate) fn strip_ansi(line: &str) -> Cow<'_, str> {
    strip_colour(line).0
}

/// [`strip_ansi`], and which [`wrapper`] bits (colour codes, lost escapes) it stripped.
pub(crate) fn strip_colour(line: &str) -> (Cow<'_, str>, u16) {
    // `memchr`, not `str::contains`: a request line is 100 KB, and the standard library's search is not vectorized.
    if memchr::memchr(0x1b, line.as_bytes()).is_some() {
        return (ANSI.replace_all(line, ""), wrapper::COLOUR);
    }
    // Lost escapes are looked for where colour goes, before the message: a `[` and a digit in the first bytes.
    let head = &line.as_bytes()[..line.len().min(64)];
    if memchr::memchr_iter(b'[', head).any(|at| head.get(at + 1).is_some_and(u8::is_ascii_digit))
        && LOST_ESCAPES.is_match(&line[..line.floor_char_boundary(64)])
    {
        return (LOST_ESCAPES.replace_all(line, ""), wrapper::LOST_ESCAPES);
    }
    (Cow::Borrowed(line), 0)
}

/// Splits `line` (colour codes already stripped) into its envelope.
pub(crate) fn parse(line: &str) -> Envelope<'_> {
    match common_record(line) {
        Some(record) => Envelope::Record(record),
        None => parse_general(line),
    }
}

/// The record of a line of the shape nearly every vLLM line has, read without the regex engine: `(name pid=N) `
/// (the name possibly ending in ` rank=N`) or nothing, then `LEVEL mm-dd HH:MM:SS [file:line] `, all of it ASCII.
/// `None` for any other line, which [`parse_general`] reads; a record returned here is the one it would return
/// (a property test checks). The patterns' rules kept here: no foreign prefix can start with `(` or with a level
/// word and a digit; the process name is everything before ` pid=`, a ` rank=N` included (the name's own part
/// holds no `=`, so the first `=` ends it); the file is the bracket's text up to its last `:`.
fn common_record(line: &str) -> Option<Record<'_>> {
    const LEVELS: [&str; 5] = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
    let bytes = line.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        let text = bytes.get(range)?;
        (!text.is_empty() && text.iter().all(u8::is_ascii_digit)).then_some(text)
    };
    let mut at = 0;
    let mut process = None;
    if bytes.first() == Some(&b'(') {
        if !bytes.get(1).is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_') {
            return None;
        }
        let equals = 1 + bytes[1..].iter().position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b' '))?;
        if bytes[equals] != b'=' {
            return None;
        }
        let pid_digits = if bytes[..equals].ends_with(b" pid") {
            process = Some(&line[1..equals - 4]);
            equals + 1
        } else if bytes[..equals].ends_with(b" rank") {
            let rank =
                digits(equals + 1..equals + 1 + bytes[equals + 1..].iter().take_while(|b| b.is_ascii_digit()).count())?;
            let after_rank = equals + 1 + rank.len();
            if bytes.get(after_rank..after_rank + 5) != Some(b" pid=") {
                return None;
            }
            process = Some(&line[1..after_rank]);
            after_rank + 5
        } else {
            return None;
        };
        let pid =
            digits(pid_digits..pid_digits + bytes[pid_digits..].iter().take_while(|b| b.is_ascii_digit()).count())?;
        at = pid_digits + pid.len();
        if bytes.get(at..at + 2) != Some(b") ") {
            return None;
        }
        at += 2;
    }
    let level = *LEVELS.iter().find(|level| line[at..].starts_with(*level))?;
    at += level.len();
    let &[b' ', m1, m2, b'-', d1, d2, b' ', h1, h2, b':', n1, n2, b':', s1, s2, b' ', b'['] = bytes.get(at..at + 17)?
    else {
        return None;
    };
    let two = |a: u8, b: u8| {
        (a.is_ascii_digit() && b.is_ascii_digit()).then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
    };
    let (month, day, h, m, s) = (two(m1, m2)?, two(d1, d2)?, two(h1, h2)?, two(n1, n2)?, two(s1, s2)?);
    let open = at + 17;
    // The bracket ends at the first `]`; anything but printable ASCII before it (whitespace, the vertical tab,
    // bytes of characters that may be Unicode whitespace) is left to the patterns.
    let close = open + bytes[open..].iter().position(|&b| b == b']' || !b.is_ascii_graphic())?;
    if bytes[close] != b']' {
        return None;
    }
    let colon = open + memchr::memrchr(b':', &bytes[open..close])?;
    let lineno = digits(colon + 1..close)?;
    if colon == open {
        return None;
    }
    let mut end = close + 1;
    if bytes.get(end) == Some(&b' ') {
        end += 1;
    }
    // The digits are ASCII, so `from_utf8` cannot fail; a line number past `u32::MAX` reads as 0, as with the patterns.
    let lineno = std::str::from_utf8(lineno).ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    Some(Record {
        level,
        month,
        day,
        hms: (h, m, s),
        file: &line[open..colon],
        lineno,
        bracketed: true,
        process,
        prefix_time: None,
        wrappers: if process.is_some() { wrapper::PROCESS } else { 0 },
        message: &line[end..],
    })
}

/// [`parse`] by the patterns: every prefix, header generation and access line.
///
/// Both a header and an access line hold a level word (an access line `INFO:`), so a line with none is foreign,
/// found by one literal search instead of four regex searches with their captures (detection asks about the lines
/// of any file, few of them vLLM's; a vLLM log's foreign lines are tracebacks and other programs' output).
fn parse_general(line: &str) -> Envelope<'_> {
    if !LEVEL_WORD.is_match(line) {
        return re_emitted(line).map_or(Envelope::Foreign, Envelope::Record);
    }
    by_patterns(line)
}

/// A vLLM message another program logged again under its own header, which starts with a full timestamp
/// (`2025-05-14 17:45:10.901 1647689 kserve.trace Received request …`): the message is found by how vLLM's own
/// messages start, and its time is the header's.
static RE_EMITTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?P<ts>(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[\ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,]\d{1,9})?(?P<zone>Z|[+-]\d\d:?\d\d)?)
        [\ \t][^\n]{0,160}?[\ \t\]:|-]\ ?
        (?P<message>(?:Received\ request\ |Added\ request\ |Finished\ request\ |Aborted\ request|(?:Engine\ \d+:\ |\d+\ Engines\ Aggregated:\ )?Avg\ prompt\ throughput:).*)$",
    )
    .expect("valid regex")
});

/// [`RE_EMITTED`]'s record, if `line` is one.
fn re_emitted(line: &str) -> Option<Record<'_>> {
    // Most lines that reach here are tracebacks and other programs' output: a literal search rules them out.
    let bytes = line.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_digit)
        || (memchr::memmem::find(bytes, b" request").is_none() && memchr::memmem::find(bytes, b"throughput:").is_none())
    {
        return None;
    }
    let c = RE_EMITTED.captures(line)?;
    let n = |name: &str| c.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    let ts = c.name("ts")?.as_str();
    let prefix_time = if c.name("zone").is_some() { PrefixTime::Rfc3339(ts) } else { PrefixTime::Local(ts) };
    Some(Record {
        level: "INFO",
        month: n("mo")?,
        day: n("d")?,
        hms: (n("h")?, n("mi")?, n("s")?),
        file: "",
        lineno: 0,
        bracketed: false,
        process: None,
        prefix_time: Some(prefix_time),
        wrappers: wrapper::RE_EMITTED,
        message: c.name("message")?.as_str(),
    })
}

/// [`parse_general`] without its first test.
fn by_patterns(line: &str) -> Envelope<'_> {
    let prefixes = PREFIXES.captures(line).expect("every group is optional");
    let prefix_time = match (prefixes.name("docker"), prefixes.name("wrap").or(prefixes.name("desktop"))) {
        (Some(ts), _) => Some(PrefixTime::Rfc3339(ts.as_str())),
        (None, Some(year)) => year.as_str().parse().ok().map(|year| PrefixTime::Wrapper { year }),
        (None, None) => None,
    };
    let mut wrappers = 0;
    for (group, bit) in [
        ("docker", wrapper::DOCKER),
        ("journald", wrapper::JOURNALD),
        ("desktop", wrapper::DESKTOP),
        ("compose", wrapper::COMPOSE),
        ("wrap", wrapper::DATE),
    ] {
        if prefixes.name(group).is_some() {
            wrappers |= bit;
        }
    }
    let rest = &line[prefixes.get(0).map_or(0, |m| m.end())..];

    if let Some(header) = HEADER.captures(rest) {
        let whole = header.get(0).expect("group 0 always matches");
        let number = |name: &str| header.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
        let (file, lineno, bracketed) = match (header.name("file1"), header.name("file2")) {
            (Some(f), _) => (f.as_str(), number("line1"), true),
            (None, Some(f)) => (f.as_str(), number("line2"), false),
            (None, None) => unreachable!("the header regex requires one of the two file groups"),
        };
        // A process prefix written by the stream prefixer (0.4.2-0.30) sits before a VLLM_LOGGING_PREFIX.
        let stream_prefix = PROCESS.captures(rest);
        let process = header
            .name("name")
            .map(|m| m.as_str())
            .or_else(|| stream_prefix.as_ref().and_then(|c| c.name("name")).map(|m| m.as_str()));
        if process.is_some() {
            wrappers |= wrapper::PROCESS;
        }
        // Text before the header that no known prefix explains (the stream prefixer's own excepted).
        let own = stream_prefix.as_ref().and_then(|c| c.get(0)).map_or(0, |m| m.end());
        let before = header.name("name").map_or(whole.start(), |m| m.start() - 1);
        if before > own && before > 0 {
            wrappers |= wrapper::CUSTOM;
        }
        return Envelope::Record(Record {
            level: header.name("level").expect("level is required").as_str(),
            month: number("month").unwrap_or(0),
            day: number("day").unwrap_or(0),
            hms: (number("h").unwrap_or(0), number("m").unwrap_or(0), number("s").unwrap_or(0)),
            file,
            lineno: lineno.unwrap_or(0),
            bracketed,
            process,
            prefix_time,
            wrappers,
            message: &rest[whole.end()..],
        });
    }
    if let Some(record) = re_emitted(line) {
        return Envelope::Record(record);
    }

    let (process, rest) = match PROCESS.captures(rest) {
        Some(c) => (c.name("name").map(|m| m.as_str()), &rest[c.get(0).expect("matched").end()..]),
        None => (None, rest),
    };
    if let Some(access) = ACCESS.captures(rest) {
        let status = access["status"].parse().unwrap_or(0);
        return Envelope::Access {
            process,
            method: access.name("method").expect("required").as_str(),
            path: access.name("path").expect("required").as_str(),
            status,
        };
    }
    let uvicorn = ["INFO:  ", "WARNING:  ", "ERROR:  ", "DEBUG:  ", "CRITICAL:  "];
    if process.is_some() && uvicorn.iter().any(|level| rest.starts_with(level)) {
        return Envelope::Server;
    }
    Envelope::Foreign
}

/// Whether `line` (colour stripped) starts, after foreign prefixes, with the `(name pid=N)` prefix of a process
/// vLLM names: `APIServer`, `ApiServer_1`, `EngineCore`, `EngineCore_DP0`, `VllmWorker rank=0`, `VllmWorkerProcess`,
/// `Worker_TP1`, … Such lines are vLLM output even when they are not records (tracebacks of a vLLM process).
pub(crate) fn has_vllm_process_prefix(line: &str) -> bool {
    // [`PROCESS`] needs ` pid=`, which most lines of most files lack.
    memchr::memmem::find(line.as_bytes(), b" pid=").is_some() && process_prefix_by_pattern(line)
}

/// [`has_vllm_process_prefix`] without its first test.
fn process_prefix_by_pattern(line: &str) -> bool {
    const NAMES: [&str; 4] = ["APIServer", "ApiServer", "EngineCore", "VllmWorker"];
    let start = PREFIXES.find(line).map_or(0, |m| m.end());
    PROCESS.captures(&line[start..]).and_then(|c| c.name("name")).is_some_and(|name| {
        let name = name.as_str();
        NAMES.iter().any(|n| name.starts_with(n)) || name == "Worker" || name.starts_with("Worker_")
    })
}

/// Where a second record starts inside `message`, for records pasted together without a newline: the first place
/// (after the start) where a record header `LEVEL mm-dd hh:mm:ss [file:line] ` begins, as `GLUED_PATTERN` finds it.
///
/// Not a regex search over the whole message: a `Received request` message is 100 KB of token ids, and the search's
/// prefilter ran over all of it (3% of the CPU time of a vLLM log). Every header has a `:` nine bytes after its
/// level word, after ` mm-dd hh`, so only the `:`s (found with `memchr`) that have that shape before them, and one of
/// the five level words before that, are tried, with the pattern anchored there. The first that matches is the
/// unanchored search's match: the start a `:` gives grows with the `:` (two `:`s less than four bytes apart cannot
/// both have two digits and a space before them), and no header can begin before a `:` it does not reach (its own
/// text holds no `:` before the time's).
pub(crate) fn glued_record(message: &str) -> Option<usize> {
    static GLUED: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!("^{GLUED_PATTERN}")).expect("valid regex"));
    let bytes = message.as_bytes();
    for colon in memchr::memchr_iter(b':', bytes) {
        let Some(start) = header_start(bytes, colon) else { continue };
        // `start` is at an ASCII letter, so a character boundary.
        if GLUED.is_match(&message[start..]) {
            return (start > 0).then_some(start);
        }
    }
    None
}

/// A record header inside a message. Digits are ASCII (`[0-9]`, not Unicode's `\d`): the header is `strftime`'s.
const GLUED_PATTERN: &str = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} (?:\[[^\]\s]+:[0-9]+\]|[^\]\s]+:[0-9]+\]) ";

/// Where a header would begin whose time's first `:` is `bytes[colon]`: the start of the level word before
/// ` mm-dd hh`, when those bytes are there.
fn header_start(bytes: &[u8], colon: usize) -> Option<usize> {
    const LEVELS: [&[u8]; 5] = [b"DEBUG", b"INFO", b"WARNING", b"ERROR", b"CRITICAL"];
    let date = colon.checked_sub(9)?;
    let &[b' ', m1, m2, b'-', d1, d2, b' ', h1, h2] = bytes.get(date..colon)? else { return None };
    if ![m1, m2, d1, d2, h1, h2].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let before = &bytes[..date];
    // No level word ends with another, so at most one fits.
    LEVELS.iter().find(|level| before.ends_with(level)).map(|level| date - level.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(line: &str) -> Record<'_> {
        match parse(line) {
            Envelope::Record(r) => r,
            other => panic!("not a record: {other:?}"),
        }
    }

    #[test]
    fn every_header_generation() {
        // (line, level, month-day, file, lineno, process, message), one per _FORMAT generation and prefix.
        type Case<'a> = (&'a str, &'a str, (u32, u32), &'a str, u32, Option<&'a str>, &'a str);
        let cases: &[Case<'_>] = &[
            (
                "INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request x.",
                "INFO",
                (1, 17),
                "async_llm_engine.py",
                134,
                None,
                "Aborted request x.",
            ),
            (
                "INFO 04-10 03:44:38 [loggers.py:87] Engine 000: Avg",
                "INFO",
                (4, 10),
                "loggers.py",
                87,
                None,
                "Engine 000: Avg",
            ),
            (
                "(APIServer pid=1) INFO 05-07 04:56:17 [loggers.py:271] Engine 000: x",
                "INFO",
                (5, 7),
                "loggers.py",
                271,
                Some("APIServer"),
                "Engine 000: x",
            ),
            (
                "(VllmWorker rank=1 pid=5283) WARNING 08-11 09:41:13 [a.py:5] m",
                "WARNING",
                (8, 11),
                "a.py",
                5,
                Some("VllmWorker rank=1"),
                "m",
            ),
            (
                "(Worker_TP1 pid=1908386) DEBUG 05-04 05:25:03 [v1/worker/gpu_model_runner.py:3888] Running",
                "DEBUG",
                (5, 4),
                "v1/worker/gpu_model_runner.py",
                3888,
                Some("Worker_TP1"),
                "Running",
            ),
            (
                "(EngineCore_DP0 pid=697344) ERROR 01-08 17:16:15 [core.py:1] boom",
                "ERROR",
                (1, 8),
                "core.py",
                1,
                Some("EngineCore_DP0"),
                "boom",
            ),
            // VLLM_LOGGING_PREFIX before the 0.31+ record-level process prefix.
            (
                "[node-3] (EngineCore pid=7) INFO 12-31 23:59:59 [loggers.py:335] x",
                "INFO",
                (12, 31),
                "loggers.py",
                335,
                Some("EngineCore"),
                "x",
            ),
            // VLLM_LOGGING_PREFIX after a 0.4.2-0.30 stream-level prefix.
            (
                "(VllmWorkerProcess pid=9) [vllm] INFO 06-01 00:00:00 worker.py:1] y",
                "INFO",
                (6, 1),
                "worker.py",
                1,
                Some("VllmWorkerProcess"),
                "y",
            ),
            (
                "qwen15-fastchat-qwen2-72b-1  | INFO 02-22 16:52:30 metrics.py:161] Avg",
                "INFO",
                (2, 22),
                "metrics.py",
                161,
                None,
                "Avg",
            ),
            (
                "Aug 19 18:34:30 vllm vllm[8707]: (APIServer pid=8707) INFO 08-19 18:34:30 [api_server.py:1] up",
                "INFO",
                (8, 19),
                "api_server.py",
                1,
                Some("APIServer"),
                "up",
            ),
        ];
        for &(line, level, (month, day), file, lineno, process, message) in cases {
            let r = record(line);
            assert_eq!(
                (r.level, r.month, r.day, r.file, r.lineno, r.process, r.message),
                (level, month, day, file, lineno, process, message),
                "{line}"
            );
        }
    }

    #[test]
    fn common_lines_are_read_without_the_patterns() {
        // The shapes of every current release, each read by `common_record` as the patterns read it.
        for line in [
            "(APIServer pid=7) DEBUG 03-14 09:00:02 [logger.py:49] Request x details: prompt: 'a'",
            "(VllmWorker rank=3 pid=12) WARNING 12-31 23:59:59 [v1/worker/gpu_worker.py:101] low",
            "(EngineCore_DP0 pid=697344) INFO 07-28 06:41:19 [core.py:7]",
            "INFO 04-10 03:44:38 [loggers.py:87]Engine 000: glued to the header",
            "ERROR 01-01 00:00:00 [a:b:12] the file is up to the last colon",
            "CRITICAL 01-01 00:00:00 [x.py:99999999999] a line number past u32",
            "(a  pid=1) INFO 01-01 00:00:00 [x.py:1]  two spaces before the message",
        ] {
            let fast = common_record(line).unwrap_or_else(|| panic!("not read: {line}"));
            assert_eq!(Envelope::Record(fast), parse_general(line), "{line}");
        }
        let r = common_record("(VllmWorker rank=3 pid=12) WARNING 12-31 23:59:59 [v1/worker/gpu_worker.py:101] low")
            .unwrap();
        assert_eq!(
            (r.process, r.level, r.month, r.day, r.hms, r.file, r.lineno, r.message),
            (Some("VllmWorker rank=3"), "WARNING", 12, 31, (23, 59, 59), "v1/worker/gpu_worker.py", 101, "low")
        );
        let r = common_record("ERROR 01-01 00:00:00 [a:b:12] x").unwrap();
        assert_eq!((r.file, r.lineno, r.process), ("a:b", 12, None));
        assert_eq!(common_record("CRITICAL 01-01 00:00:00 [x.py:99999999999] y").unwrap().lineno, 0);
        // Everything else is left to the patterns: other generations, prefixes, Unicode, odd brackets.
        for line in [
            "INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request x.",
            "2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] x",
            "(APIServer pid=1) INFO:     10.0.0.1:1 - \"GET /metrics HTTP/1.1\" 200 OK",
            "(x rank=1) INFO 01-01 00:00:00 [x.py:1] no pid",
            "(x pid=\u{663}) INFO 01-01 00:00:00 [x.py:1] an Arabic-Indic digit",
            "(\u{e9}t\u{e9} pid=1) INFO 01-01 00:00:00 [x.py:1] a Unicode name",
            "INFO 01-01 00:00:00 [x y.py:1] a space in the bracket",
            "INFO 01-01 00:00:00 [x\u{b}y.py:1] a vertical tab",
            "INFO 01-01 00:00:00 [x.py:] no line number",
            "INFO 01-01 00:00:00 [:1] no file",
            "INFO 1-01 00:00:00 [x.py:1] one digit",
            "WARN 01-01 00:00:00 [x.py:1] not a level",
        ] {
            assert_eq!(common_record(line), None, "{line}");
        }
    }

    #[test]
    fn prefix_times() {
        let r = record("2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] x");
        assert_eq!(r.prefix_time, Some(PrefixTime::Rfc3339("2026-05-12T08:01:39.331095044Z")));
        assert_eq!(r.process, Some("APIServer"));
        let r = record("[2024-07-08 15:17:34] INFO 07-08 07:17:34 metrics.py:334] Avg");
        assert_eq!(r.prefix_time, Some(PrefixTime::Wrapper { year: 2024 }));
        assert_eq!(r.hms, (7, 17, 34));
    }

    #[test]
    fn access_lines_and_foreign_lines() {
        assert_eq!(
            parse(r#"(APIServer pid=851) INFO:     10.109.20.86:59146 - "GET /metrics HTTP/1.1" 200 OK"#),
            Envelope::Access { process: Some("APIServer"), method: "GET", path: "/metrics", status: 200 }
        );
        assert_eq!(
            parse(r#"INFO:     127.0.0.1:46374 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error"#),
            Envelope::Access { process: None, method: "POST", path: "/v1/completions", status: 500 }
        );
        for foreign in [
            "# https://github.com/vllm-project/vllm/issues/2484",
            "Traceback (most recent call last):",
            "(EngineCore_DP0 pid=697344)     self.run()",
            "(APIServer pid=3322894) Traceback (most recent call last):",
            "INFO:     Started server process [1]",
            "[2025-08-11 09:41:13,200] LMCache INFO: Storing KV cache",
            "",
        ] {
            assert_eq!(parse(foreign), Envelope::Foreign, "{foreign}");
        }
    }

    #[test]
    fn uvicorn_messages_of_a_vllm_process_are_its_records() {
        for line in [
            "(APIServer pid=3322894) INFO:     Started server process [3322894]",
            "(APIServer pid=3322894) INFO:     Waiting for application startup.",
            "(APIServer pid=1) WARNING:  Invalid HTTP request received.",
        ] {
            assert_eq!(parse(line), Envelope::Server, "{line}");
        }
        assert_eq!(parse("INFO:     Started server process [1]"), Envelope::Foreign, "no process prefix: anyone's");
    }

    #[test]
    fn colour_codes_are_stripped() {
        let coloured = "\x1b[1;36m(VllmWorkerProcess pid=9)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m06-01 00:00:00\x1b[0m \x1b[90m[worker.py:1]\x1b[0m y";
        let clean = strip_ansi(coloured);
        let r = record(&clean);
        assert_eq!((r.process, r.level, r.file, r.message), (Some("VllmWorkerProcess"), "INFO", "worker.py", "y"));
    }

    #[test]
    fn vllm_process_prefixes_are_recognised() {
        assert!(has_vllm_process_prefix("Aug 19 18:34:30 vllm vllm[8707]: (APIServer pid=8707)     return cls("));
        assert!(has_vllm_process_prefix("(EngineCore_DP0 pid=697344) Traceback (most recent call last):"));
        assert!(has_vllm_process_prefix("(Worker_TP1 pid=9) x"));
        assert!(!has_vllm_process_prefix("(MyApp pid=9) x"));
        assert!(!has_vllm_process_prefix("Traceback (most recent call last):"));
    }

    proptest::proptest! {
        /// The literal tests that turn most lines away (a level word for [`parse_general`], ` pid=` for
        /// [`has_vllm_process_prefix`]) never change an answer: lines made of the pieces the patterns look for, in
        /// any order, with and without those words, are read as the patterns alone read them.
        #[test]
        fn the_literal_tests_change_no_answer(
            pieces in proptest::collection::vec(
                proptest::sample::select(&[
                    "INFO 06-01 12:00:00 [api.py:12] ", "DEBUG 06-01 12:00:00 [api.py:12] ",
                    "WARNING 06-01 12:00:00 api.py:12] ", "ERROR 06-01 12:00:00 [api.py:12] ",
                    "CRITICAL 06-01 12:00:00 [api.py:12] ", "INFO:     127.0.0.1:1 - \"GET /v1/x HTTP/1.1\" 200 OK",
                    "INFO", "WARNING", "06-01 ", "12:00:00 ", "[api.py:12] ", "(APIServer pid=7) ",
                    "(Worker_TP1 pid=9) ", "(MyApp pid=9) ", " pid=", "(", "2025-08-11T09:41:13Z ",
                    "[2025-08-11 09:41:13] ", "svc-1  | ", "x", " ", "{\"a\": [1, 2]}", "é",
                ][..]),
                0..6,
            )
        ) {
            let line = pieces.concat();
            proptest::prop_assert_eq!(parse_general(&line), by_patterns(&line), "{:?}", line);
            proptest::prop_assert_eq!(has_vllm_process_prefix(&line), process_prefix_by_pattern(&line), "{:?}", line);
        }

        /// Lines of the common shape, with random names, numbers and files, are read by hand, as the patterns
        /// read them (the test below checks odd lines, most of which the hand reader leaves to the patterns).
        #[test]
        fn common_lines_are_read_by_hand_as_the_patterns_read_them(
            name in "[A-Za-z_][A-Za-z0-9_ ]{0,20}",
            rank in proptest::option::of(0u32..1000),
            pid in 0u64..10_000_000,
            level in proptest::sample::select(&["INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL"][..]),
            with_process in proptest::bool::ANY,
            (month, day, h, m, s) in (0u32..100, 0u32..100, 0u32..100, 0u32..100, 0u32..100),
            file in r"[!-\\\^-~]{1,30}",
            lineno in 0u64..10_000_000_000,
            message in r"\PC{0,40}",
        ) {
            let process = match (with_process, rank) {
                (false, _) => String::new(),
                (true, None) => format!("({name} pid={pid}) "),
                (true, Some(rank)) => format!("({name} rank={rank} pid={pid}) "),
            };
            let line = format!("{process}{level} {month:02}-{day:02} {h:02}:{m:02}:{s:02} [{file}:{lineno}] {message}");
            let record = common_record(&line);
            proptest::prop_assert!(record.is_some(), "not read by hand: {:?}", line);
            proptest::prop_assert_eq!(Envelope::Record(record.unwrap()), parse_general(&line), "{:?}", line);
        }

        #[test]
        fn common_records_are_the_patterns_records(
            process in proptest::sample::select(&[
                "", "", "(APIServer pid=7) ", "(VllmWorker rank=0 pid=1) ", "(x  pid=1) ", "(a pid pid=2) ",
                "(x rank pid=3) ", "(W rank=1) ", "( pid=1) ", "(1x pid=1) ", "(x pid=1)", "(x pid=\u{663}) ",
                "(\u{e9} pid=1) ", "(x rank=0\u{663} pid=1) ", "(x pid=1) (y pid=2) ", "(x pid:5) ", "(x rank:0 pid=1) ",
                "(x pid=1)_",
            ][..]),
            level in proptest::sample::select(&["INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", "WARN", "info", ""][..]),
            time in proptest::sample::select(&[
                " 01-02 03:04:05 ", " 12-31 23:59:59 ", " 1-02 03:04:05 ", " 01-02 03:04:05", " 01-02 03-04-05 ",
                " 0\u{663}-02 03:04:05 ",
            ][..]),
            bracket in proptest::sample::select(&[
                "[x.py:12]", "[v1/a/b.py:1]", "[a:b:3]", "[:3]", "[x.py:]", "[x.py:1a]", "[x y:1]", "[x\u{b}y:1]",
                "[x\u{a0}y:1]", "[\u{e9}:1]", "[x.py:12", "x.py:12]", "[[x:1]", "[x.py:\u{663}]", "[x]:1]",
                "[x.py:4294967296]",
            ][..]),
            tail in proptest::sample::select(&[" msg", "msg", "  msg", "", " ", "] x", " INFO 01-02 03:04:05 [y.py:2] z"][..]),
            splice in proptest::option::of((0usize..80, proptest::sample::select(&[
                "(", ")", "=", " ", "]", "[", ":", "1", "\u{663}", "\t", "INFO ", "2026-05-12T08:01:39Z ",
            ][..]))),
        ) {
            let mut line = format!("{process}{level}{time}{bracket}{tail}");
            if let Some((at, text)) = splice {
                let at = (0..=at.min(line.len())).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
                line.insert_str(at, text);
            }
            if let Some(record) = common_record(&line) {
                proptest::prop_assert_eq!(Envelope::Record(record), parse_general(&line), "{:?}", line);
            }
        }


        /// The `:`-driven search finds what a regex search for the pattern over the whole message finds.
        #[test]
        fn glued_records_are_found_as_a_whole_message_search_finds_them(
            parts in proptest::collection::vec(proptest::sample::select(&[
                "INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", "WARN", " ", "  ", "-", ":", "[", "]", "0", "1", "9",
                "12", "03-14", " 09:00:02 ", "[loggers.py:118] ", "core.py:5] ", "x", "é", "\t", "٣",
                "INFO 07-28 06:41:19 [loggers.py:118] ", "ERROR 01-02 03:04:05 a.py:1] ",
            ][..]), 0..24),
        ) {
            let whole = Regex::new(GLUED_PATTERN).unwrap();
            let message = parts.concat();
            let expected = whole.find(&message).map(|m| m.start()).filter(|&start| start > 0);
            proptest::prop_assert_eq!(glued_record(&message), expected, "{:?}", message);
        }
    }

    #[test]
    fn glued_records_are_found() {
        let message =
            "Engine 000: Avg ... Prefix cache hit rate: 0.0%INFO 07-28 06:41:19 [loggers.py:118] Engine 000: Avg";
        assert_eq!(glued_record(message), Some(message.find("INFO").unwrap()));
        assert_eq!(glued_record("Added request x."), None);
        // A `:` of the right shape whose header does not go on is passed over for the next.
        let message = "at INFO 01-02 03:04 then ERROR 01-02 03:04:05 [a.py:1] x";
        assert_eq!(glued_record(message), Some(message.find("ERROR").unwrap()));
        // A header at the very start is the message's own, and then nothing after it counts (as before).
        assert_eq!(glued_record("INFO 01-02 03:04:05 [a.py:1] INFO 01-02 03:04:06 [a.py:1] x"), None);
        // A level word must be right before the date.
        assert_eq!(glued_record("x INFOS 01-02 03:04:05 [a.py:1] y"), None);
        assert_eq!(glued_record("xINFO 01-02 03:04:05 a.py:1] y"), Some(1));
    }
}
