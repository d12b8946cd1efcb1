//! One Dynamo log record turned into a typed, borrowing [`Line`], with pure functions.
//!
//! A record is either a readable line (tracing-subscriber's compact layout, §1.2.1 of the reference)
//!
//! ```text
//! <time> <LEVEL> [<span>:]... <target>: <message>[ <event k=v>...][ <span k=v>...]
//! 2026-02-27T14:47:21.385061Z  INFO dynamo_llm::kv_router::scheduler: Selected worker: worker_id=7042394012839217798 …
//! 2025-04-24T07:42:44.118Z  INFO prefill_worker.prefill_queue_handler: Dequeued prefill request: 2a3f7b10-…
//! ```
//!
//! (`<time>` with microseconds and `Z` since ~0.4, milliseconds in the ≤0.3 Python SDK, `+hh:mm` with
//! `DYN_LOG_USE_LOCAL_TZ`), or a JSON object (`DYN_LOGGING_JSONL`, §1.3) whose `message` is the same text and whose
//! fields are flattened next to `time`, `level`, `target`. Either way the record is read through [`Fields`], which
//! gives the first occurrence of a key (readable lines repeat `request_id` and `model`: event field, then span field).
//!
//! Router wording, one template per generation (named after the release that first wrote it, approximately: the
//! reference has no exact boundaries):
//!
//! ```text
//! ≤0.3  Formula for <id>: <logit> = 2.0 * <score> - <usage> - <waiting>
//!       Selected worker: <id>, logit: <x>
//! ~0.3  Formula for <id>: <logit> = <w> * <new blocks> + <w> * <usage> + <w> * <waiting>
//! ~0.4  Formula for <id>: <logit> = <w> * <p> + <d>  (cached_blocks: <n>)
//!       Selected worker: <id>, normalized logit: <x>
//! ~0.5  Formula for <id> with <n> cached blocks: <logit> = <w> * prefill_blocks + decode_blocks = <w> * <p> + <d>
//!       Selected worker: <id>, logit: <x>, cached blocks: <n>[, total blocks: <N>]
//! ~0.7  Formula for worker_id=<id> dp_rank=<r> with <n> cached blocks: …
//!       Selected worker: worker_id=<id> dp_rank=<r>, logit: <x>, cached blocks: <n>, tree size: <t>
//!         [, total blocks: <N>]
//! ~1.x  <name> for worker_id=<id> dp_rank=<r> with <n.nn> effective cached blocks: …
//! 1.6   Selected worker router_mode="kv" request_id=… worker_id=… worker_type=prefill|decode dp_rank=<r> logit=<x>
//!         [effective_cached_blocks=<n.n>] host_pinned_blocks=<h> disk_blocks=<d>[ total_kv_blocks=Some(<N>)]
//!       Selected pinned worker: worker_type=<t>, worker_id=<id> dp_rank=<r>, logit: <x>,
//!         effective cached blocks: <n.nn>
//! DEBUG [ROUTING] Best: worker_<id> dp_rank=<r> with <hit>/<blocks> blocks overlap
//! ```
//!
//! `total blocks` / `total_kv_blocks` is the chosen worker's KV capacity, not the request's prompt blocks.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::json::{JsonRecord, JsonValue};

/// The start of a readable record (the reassembly rule of §1.2.1, with Python's `WARNING`/`CRITICAL` added for the
/// engine lines Dynamo's vLLM formatter writes in the same layout).
static HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^(?P<time>\d{4}-\d\d-\d\dT\S+?(?:Z|[+-]\d\d:\d\d))
        \s+(?P<level>TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b\s*
        ",
    )
    .expect("valid regex")
});

/// A `python logging` wrapper some harnesses put before every line (`<ts> - sflow.task.<name> - <LEVEL> - <rank>: `).
static WRAPPER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - sflow\.task\.\S+ - \w+ - \d+: ").expect("valid regex")
});

/// Lines of other programs that share a Dynamo process's stderr: they start their own (non-Dynamo) record and are
/// never a torn piece of a Dynamo record.
static FOREIGN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?x)
        ^(?:
            \#                                                         # comments
          | \s\s | \t                                                  # traceback frames, indented output
          | Traceback\ \(most\ recent\ call\ last\)
          | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\ \d\d-\d\d\ \d\d:\d\d:\d\d     # vLLM's own format
          | \([A-Za-z_][\w\ ]*?(?:\ rank=\d+)?\ pid=\d+\)                        # vLLM process prefixes
          | \[\d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d                                    # SGLang
          | \[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\]                                   # TensorRT-LLM
          | INFO:\ \s*\S+\ -\ "                                                  # uvicorn access
        )
        "#,
    )
    .expect("valid regex")
});

/// `key=value` and `key="value"` fields of a readable record.
static FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|\s)(?P<k>[A-Za-z_][\w.]*)=(?:"(?P<q>(?:[^"\\]|\\.)*)"|(?P<v>\S*))"#).expect("valid regex")
});

/// The text forms of the `Selected worker:` line (≤0.3 to ~1.x).
static SELECTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^Selected\ worker:\ (?P<form07>worker_id=)?(?P<id>\d+)
        (?:\ dp_rank=(?:Some\()?(?P<dp>\d+)\)?|\ dp_rank=None)?
        ,\ (?P<normalized>normalized\ )?logit:\ \S+?
        (?:,\ (?P<effective>effective\ )?cached\ blocks:\ (?P<cached>\d+(?:\.\d+)?))?
        (?:,\ tree\ size:\ (?P<tree>\d+))?
        (?:,\ total\ blocks:\ (?P<total>\d+))?
        (?:,|\s|$)
        ",
    )
    .expect("valid regex")
});

/// `Selected pinned worker:` (1.x, session affinity).
static PINNED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^(?:\w+\ )?[Ss]elected\ pinned\ worker:\ (?:worker_type=(?P<wt>\w+),\ )?worker_id=(?P<id>\d+)
        (?:\ dp_rank=(?:Some\()?(?P<dp>\d+)\)?|\ dp_rank=None)?
        ,\ logit:\ \S+?,\ effective\ cached\ blocks:\ (?P<cached>\d+(?:\.\d+)?)
        ",
    )
    .expect("valid regex")
});

/// Every generation of the per-candidate `Formula for` line.
static FORMULA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^(?:\w+\ )?[Ff]ormula\ for\ (?:worker_id=)?(?P<id>\d+)
        (?:\ dp_rank=(?:Some\()?(?P<dp>\d+)\)?|\ dp_rank=None)?
        (?:\ with\ (?P<cached>\d+(?:\.\d+)?)\ (?:effective\ )?(?:cached|device)\ blocks)?
        [:,]
        ",
    )
    .expect("valid regex")
});

/// `(cached_blocks: <n>)` at the end of the ~0.4 formula line.
static FORMULA_CACHED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(cached_blocks: (?P<cached>\d+)\)").expect("valid regex"));

/// `[ROUTING] Best:` (DEBUG, `kv_router.select_worker` span).
static BEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^\[ROUTING\]\ Best:\ worker_(?P<id>\d+)
        (?:\ dp_rank=(?:Some\()?(?P<dp>\d+)\)?|\ dp_rank=None)?
        \ with\ (?P<hit>\d+)/(?P<blocks>\d+)\ blocks\ overlap
        ",
    )
    .expect("valid regex")
});

/// Legacy Python SDK (≤0.3) request lines.
static LEGACY_REMOTE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Prefilling remotely for request (?P<id>\S+) with length (?P<n>\d+)").expect("valid regex")
});
static LEGACY_DEQUEUED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Dequeued prefill request: (?P<id>\S+)").expect("valid regex"));

/// `line` without the ANSI control sequences (colours and other CSI sequences) tracing's ANSI layer writes,
/// borrowed when it has none: every match of `\x1b\[[0-9;?]*[A-Za-z]`, found by hand (the regex's `replace_all` was
/// a tenth of reading a coloured log; a property test compares the two).
pub(crate) fn strip_ansi(line: &str) -> Cow<'_, str> {
    let bytes = line.as_bytes();
    let Some(first) = memchr::memchr(0x1b, bytes) else { return Cow::Borrowed(line) };
    let mut out = String::new();
    // `line[kept..]` is not copied yet; `at` is an escape character.
    let mut kept = 0;
    let mut at = first;
    loop {
        // `\x1b\[[0-9;?]*[A-Za-z]`: the two classes are disjoint, so a sequence starting here ends at the first
        // byte outside the first class, or there is none.
        let mut end = at + 2;
        if bytes.get(at + 1) == Some(&b'[') {
            while bytes.get(end).is_some_and(|&b| b.is_ascii_digit() || b == b';' || b == b'?') {
                end += 1;
            }
        }
        let next = if bytes.get(at + 1) == Some(&b'[') && bytes.get(end).is_some_and(u8::is_ascii_alphabetic) {
            if out.is_empty() {
                out.reserve(line.len());
            }
            out.push_str(&line[kept..at]);
            kept = end + 1;
            end + 1
        } else {
            at + 1
        };
        match memchr::memchr(0x1b, &bytes[next..]) {
            Some(i) => at = next + i,
            None => break,
        }
    }
    if kept == 0 {
        return Cow::Borrowed(line);
    }
    out.push_str(&line[kept..]);
    Cow::Owned(out)
}

/// `line` without a harness's logging wrapper.
pub(crate) fn strip_wrapper(line: &str) -> &str {
    match WRAPPER.find(line) {
        Some(m) => &line[m.end()..],
        None => line,
    }
}

/// The envelopes a record can be found in, as bits; [`ENVELOPE_NAMES`] names them.
pub(crate) mod envelope {
    /// A harness's `<ts> - sflow.task.<name> - <LEVEL> - <n>: `.
    pub(crate) const SFLOW: u16 = 1;
    /// docker `--timestamps` (RFC 3339) before the record's own time.
    pub(crate) const DOCKER: u16 = 1 << 1;
    /// docker-compose `service-1  | `.
    pub(crate) const COMPOSE: u16 = 1 << 2;
    /// `kubectl logs --prefix`: `[pod/<pod>/<container>] `.
    pub(crate) const KUBECTL: u16 = 1 << 3;
    /// journald / syslog `Mon DD HH:MM:SS host unit[pid]: `.
    pub(crate) const JOURNALD: u16 = 1 << 4;
    /// Any other text before a record head found on the line.
    pub(crate) const CUSTOM: u16 = 1 << 5;
    /// ANSI colour codes.
    pub(crate) const COLOUR: u16 = 1 << 6;
}

/// The name of each bit of [`envelope`], for the manifest's `envelopes`.
pub(crate) const ENVELOPE_NAMES: [&str; 7] =
    ["sflow-wrapper", "docker-timestamps", "compose", "kubectl", "journald", "custom-prefix", "colour-codes"];

/// Container and orchestrator prefixes, each removed where it starts a line that does not start a record.
static CONTAINER_PREFIXES: LazyLock<[(Regex, u16); 4]> = LazyLock::new(|| {
    let re = |pattern: &str| Regex::new(pattern).expect("valid regex");
    [
        (re(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d) "), envelope::DOCKER),
        (re(r"^[\w.-]+\s+\| "), envelope::COMPOSE),
        (re(r"^\[pod/[^\]\s/]+/[^\]\s]+\] "), envelope::KUBECTL),
        (re(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "), envelope::JOURNALD),
    ]
});

/// Whether `line` may start with [`CONTAINER_PREFIXES`]`[at]`, by the bytes each must have.
fn could_be_prefix(at: usize, line: &[u8]) -> bool {
    match at {
        // `YYYY-MM-DDT`
        0 => line.first().is_some_and(u8::is_ascii_digit) && line.get(10) == Some(&b'T'),
        // `service  | `
        1 => memchr::memmem::find(&line[..line.len().min(128)], b" | ").is_some(),
        2 => line.starts_with(b"[pod/"),
        // `Mon DD `
        _ => line.first().is_some_and(u8::is_ascii_uppercase) && line.get(3) == Some(&b' '),
    }
}

/// A readable record's head anywhere on a line: time, level and a `tracing` target (Rust path or Python module)
/// followed by `: `, the markers of Dynamo's own layout.
static FOUND_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\d{4}-\d\d-\d\dT\S+?(?:Z|[+-]\d\d:\d\d)\s+(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?:[\w-]+(?::[\w-]+)*:\s+)*[A-Za-z_]\w*(?:(?:::|\.)\w+)*: ",
    )
    .expect("valid regex")
});

/// How far into a line [`FOUND_HEAD`] is looked for.
const FOUND_WITHIN: usize = 256;

/// `line` with the envelope around its record removed, and the [`envelope`] bits found: a harness's wrapper, then
/// container prefixes (docker timestamps, compose, kubectl, journald, in any nesting) and, on a line that still
/// neither starts a record nor is another program's, any text before a record head (or a JSON record) found in its
/// first 256 bytes. A line that starts
/// a record is returned as it is (colour codes kept); one whose envelope was removed comes back without colour
/// codes.
pub(crate) fn unwrap(line: &str) -> Unwrapped<'_> {
    let unwrapped = strip_wrapper(line);
    let mut bits = if unwrapped.len() < line.len() { envelope::SFLOW } else { 0 };
    let clean = strip_ansi(unwrapped);
    if matches!(clean, Cow::Owned(_)) {
        bits |= envelope::COLOUR;
    }
    if starts_record(&clean) {
        return Unwrapped { text: Cow::Borrowed(unwrapped), clean, envelope: bits, kind: Kind::Record };
    }
    if is_foreign(&clean) {
        return Unwrapped { text: Cow::Borrowed(unwrapped), clean, envelope: bits, kind: Kind::Foreign };
    }
    let mut rest: &str = &clean;
    let mut changed = false;
    'prefixes: for _ in 0..4 {
        for (at, (prefix, bit)) in CONTAINER_PREFIXES.iter().enumerate() {
            // Most lines that reach here are pieces of torn records: a byte test rules each prefix out before its
            // regex (and the regex's cache) is used.
            if !could_be_prefix(at, rest.as_bytes()) {
                continue;
            }
            if let Some(m) = prefix.find(rest) {
                rest = &rest[m.end()..];
                (bits, changed) = (bits | bit, true);
                if starts_record(rest) || is_foreign(rest) {
                    break 'prefixes;
                }
                continue 'prefixes;
            }
        }
        break;
    }
    if !starts_record(rest) && !is_foreign(rest) {
        let head = &rest[..rest.floor_char_boundary(FOUND_WITHIN)];
        // A readable head (which holds a level word), or a JSON record (`{"` with a level and a message).
        const LEVELS: [&[u8]; 5] = [b"INFO", b"WARN", b"ERROR", b"DEBUG", b"TRACE"];
        let has_level = LEVELS.iter().any(|level| memchr::memmem::find(head.as_bytes(), level).is_some());
        let start = has_level.then(|| FOUND_HEAD.find(head).map(|m| m.start())).flatten().or_else(|| {
            let at = memchr::memmem::find(head.as_bytes(), b"{\"")?;
            let json = &rest[at..];
            (json.contains("\"level\":") && json.contains("\"message\":")).then_some(at)
        });
        if let Some(start) = start.filter(|&at| at > 0) {
            rest = &rest[start..];
            (bits, changed) = (bits | envelope::CUSTOM, true);
        }
    }
    let kind = if starts_record(rest) {
        Kind::Record
    } else if is_foreign(rest) {
        Kind::Foreign
    } else {
        Kind::Piece
    };
    if changed {
        let rest = rest.to_owned();
        Unwrapped { text: Cow::Owned(rest.clone()), clean: Cow::Owned(rest), envelope: bits, kind }
    } else {
        Unwrapped { text: Cow::Borrowed(unwrapped), clean, envelope: bits, kind }
    }
}

/// What an unwrapped line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// It starts a record ([`starts_record`]).
    Record,
    /// It starts another program's output ([`is_foreign`]).
    Foreign,
    /// Neither: a piece of a torn record.
    Piece,
}

/// A line with its envelope removed ([`unwrap`]).
pub(crate) struct Unwrapped<'a> {
    /// The line from its record on, colour codes kept when no envelope was removed.
    pub(crate) text: Cow<'a, str>,
    /// The same without colour codes.
    pub(crate) clean: Cow<'a, str>,
    /// The [`envelope`] bits found.
    pub(crate) envelope: u16,
    /// What the line is.
    pub(crate) kind: Kind,
}

/// Whether an ANSI-stripped physical line starts a new Dynamo record (readable or JSON).
pub(crate) fn starts_record(clean: &str) -> bool {
    clean.trim_start().starts_with('{') || head(clean).is_some()
}

/// A readable record's head as [`HEAD`] matches it: the time, the level, and where the rest of the record starts.
fn head(clean: &str) -> Option<(&str, &str, usize)> {
    match head_by_hand(clean.as_bytes()) {
        Some(head) => head.map(|(time, level, end)| (&clean[..time], &clean[level], end)),
        None => {
            let head = HEAD.captures(clean)?;
            Some((head.name("time")?.as_str(), head.name("level")?.as_str(), head.get(0)?.end()))
        }
    }
}

/// [`HEAD`] read by hand: `Some` with the time's end, the level's range and the head's end, or `Some(None)` when it
/// does not match; `None` when a byte it would have to read is not ASCII (the regex's `\d`, `\s` and `\b` are
/// Unicode classes), so the regex decides.
///
/// The time's lazy `\S+?` ends where the zone is followed by white space; since the zone's characters and `\S` are
/// all non-space, the time is exactly the run of non-space bytes the line starts with, and it matches when that run
/// ends in `Z` or `±hh:mm` with at least one byte between `T` and the zone.
fn head_by_hand(bytes: &[u8]) -> Option<Option<(usize, Range<usize>, usize)>> {
    let ascii = |at: usize| bytes.get(at).is_none_or(u8::is_ascii);
    let date = bytes.get(..11)?;
    if !date.is_ascii() {
        return None;
    }
    let digits = |range: Range<usize>| date[range].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && date[4] == b'-' && digits(5..7) && date[7] == b'-' && digits(8..10) && date[10] == b'T') {
        return Some(None);
    }
    let mut time = 11;
    while bytes.get(time).is_some_and(|&b| b.is_ascii() && !is_space(b)) {
        time += 1;
    }
    if !ascii(time) {
        return None;
    }
    let run = &bytes[11..time];
    let zone = match run.last() {
        Some(b'Z') => 1,
        _ => {
            let z = run.len().checked_sub(6).map(|at| &run[at..]);
            match z {
                Some([b'+' | b'-', h1, h2, b':', m1, m2]) if [h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()) => 6,
                _ => return Some(None),
            }
        }
    };
    if run.len() <= zone {
        return Some(None);
    }
    let mut level = time;
    while bytes.get(level).is_some_and(|&b| is_space(b)) {
        level += 1;
    }
    // The time's run ends at white space or at the end of the line, where no level follows: `\s+` needs no check.
    if !ascii(level) {
        return None;
    }
    const LEVELS: [&[u8]; 7] = [b"TRACE", b"DEBUG", b"INFO", b"WARNING", b"WARN", b"ERROR", b"CRITICAL"];
    for word in LEVELS {
        if !bytes[level..].starts_with(word) {
            continue;
        }
        let after = level + word.len();
        // `\b`: the level ends in a word character, so the next one must not be one.
        match bytes.get(after) {
            Some(&b) if !b.is_ascii() => return None,
            Some(&b) if b.is_ascii_alphanumeric() || b == b'_' => continue,
            _ => {}
        }
        let mut end = after;
        while bytes.get(end).is_some_and(|&b| is_space(b)) {
            end += 1;
        }
        if !ascii(end) {
            return None;
        }
        return Some(Some((time, level..after, end)));
    }
    Some(None)
}

/// Whether an ANSI-stripped physical line is the start of another program's output (never a torn Dynamo piece).
pub(crate) fn is_foreign(clean: &str) -> bool {
    FOREIGN.is_match(clean)
}

/// A readable record split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextRecord<'a> {
    /// The timestamp as written.
    pub(crate) time: &'a str,
    /// `TRACE` … `ERROR` (or Python's `WARNING`, `CRITICAL`).
    pub(crate) level: &'a str,
    /// The innermost span the event was logged in, if any (`http-request`, `handle_payload`, …).
    pub(crate) span: Option<&'a str>,
    /// Every span name on the line, outermost first, joined by `:` as written.
    pub(crate) spans: &'a str,
    /// The tracing target (`dynamo_llm::kv_router::scheduler`) or Python `module.function`.
    pub(crate) target: &'a str,
    /// The message and the fields after it.
    pub(crate) body: &'a str,
}

/// Splits a readable record, or `None` when it has no `target: ` after its level.
///
/// The compact layout writes `span:span: target: message`, all without spaces before each colon. A message can
/// itself start with `Word: `, so the target is the last leading token that looks like one (a Rust path with `::`,
/// or one of the few crate-root targets); without such a token (Python components), the first token is the target.
pub(crate) fn parse_text(clean: &str) -> Option<TextRecord<'_>> {
    let (time, level, end) = head(clean)?;
    let rest = &clean[end..];
    // Leading `token: ` groups.
    let mut tokens: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while let Some(colon) = next_token(rest, at) {
        tokens.push((at, colon));
        at = colon + 2;
        if tokens.len() > 16 {
            break;
        }
    }
    if tokens.is_empty() {
        // `target: message` is the minimum; a target at the very end of the line has no message.
        let token = rest.strip_suffix(':').filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))?;
        // Every part is a slice of `clean` (the empty ones too: the adapter reads them as byte ranges of it).
        let end = &rest[rest.len()..];
        return Some(TextRecord { time, level, span: None, spans: end, target: token, body: end });
    }
    let is_target = |t: &str| t.contains("::") || matches!(t, "request_span" | "span_event" | "log");
    let target_index = tokens.iter().rposition(|&(s, e)| is_target(&rest[s..e])).unwrap_or(0);
    let (start, end) = tokens[target_index];
    let spans = if target_index == 0 { "" } else { &rest[..tokens[target_index - 1].1] };
    let span = if target_index == 0 {
        None
    } else {
        let (s, e) = tokens[target_index - 1];
        Some(&rest[s..e])
    };
    Some(TextRecord { time, level, span, spans, target: &rest[start..end], body: rest[end + 2..].trim_end() })
}

/// Where the leading `token: ` group of `rest` starting at `at` ends (its colon), or `None` when the groups end there:
/// no `: ` follows, or the text before the first one is empty, holds white space or is longer than 200 bytes.
fn next_token(rest: &str, at: usize) -> Option<usize> {
    let bytes = rest.as_bytes();
    // Over ASCII, the first white space or `: ` decides, without searching the rest of the line for a `: `.
    let mut end = at;
    while let Some(&b) = bytes.get(end) {
        if !b.is_ascii() {
            // `char::is_whitespace` is Unicode's: search as the general rule says.
            let colon = at + rest[at..].find(": ")?;
            let token = &rest[at..colon];
            let usable = !token.is_empty() && !token.contains(char::is_whitespace) && token.len() <= 200;
            return usable.then_some(colon);
        }
        if is_space(b) {
            return None;
        }
        if b == b':' && bytes.get(end + 1) == Some(&b' ') {
            return (end > at && end - at <= 200).then_some(end);
        }
        end += 1;
    }
    None
}

/// The `key=value` and `key="value"` pairs of a readable record's body, in order, values unquoted, as [`FIELD`]
/// finds them: read once per record, since a record is asked for a dozen keys.
///
/// An ASCII body (nearly every one) is scanned by hand, which matches exactly what the regex matches (a property
/// test compares the two) at a fraction of its cost: the regex's captures were 40% of reading a Dynamo text log.
/// Any other body goes through the regex, whose `\s` and `\w` are Unicode classes.
pub(crate) fn text_fields(body: &str) -> Vec<(&str, &str)> {
    if !body.is_ascii() {
        return fields_by_regex(body);
    }
    let bytes = body.as_bytes();
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        // A field starts at the start of the body (`^`) or after a white-space character (`\s`, consumed).
        let key = if is_space(bytes[at]) {
            at + 1
        } else if at == 0 {
            0
        } else {
            at += 1;
            continue;
        };
        match field_at(bytes, key) {
            Some((k, v, end)) => {
                fields.push((&body[k], &body[v]));
                at = end;
            }
            None => at += 1,
        }
    }
    fields
}

/// `\s` on ASCII: space, and tab to carriage return (vertical tab and form feed included).
fn is_space(b: u8) -> bool {
    b == b' ' || (0x09..=0x0d).contains(&b)
}

/// The field whose key starts at `start`, if one does: the key's and the value's ranges and where the match ends.
/// `[A-Za-z_][\w.]*=`, then a quoted value (`"…"`, `\` escaping any character but a line feed) if one closes, else
/// `\S*`.
fn field_at(bytes: &[u8], start: usize) -> Option<(Range<usize>, Range<usize>, usize)> {
    let first = *bytes.get(start)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let mut end = start + 1;
    while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b'.') {
        end += 1;
    }
    if bytes.get(end) != Some(&b'=') {
        return None;
    }
    let value = end + 1;
    if bytes.get(value) == Some(&b'"') {
        let mut at = value + 1;
        while at < bytes.len() {
            match bytes[at] {
                b'"' => return Some((start..end, value + 1..at, at + 1)),
                b'\\' if bytes.get(at + 1).is_some_and(|&b| b != b'\n') => at += 2,
                b'\\' => break,
                _ => at += 1,
            }
        }
    }
    let mut at = value;
    while at < bytes.len() && !is_space(bytes[at]) {
        at += 1;
    }
    Some((start..end, value..at, at))
}

/// [`text_fields`] by [`FIELD`] itself.
fn fields_by_regex(body: &str) -> Vec<(&str, &str)> {
    FIELD
        .captures_iter(body)
        .filter_map(|c| Some((c.name("k")?.as_str(), c.name("q").or_else(|| c.name("v"))?.as_str())))
        .collect()
}

/// The fields of one record: the `k=v` pairs of a readable body, or the flattened keys of a JSON record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields<'a> {
    /// A readable record's fields, as [`text_fields`] reads them from its body.
    Text(&'a [(&'a str, &'a str)]),
    /// A JSON record.
    Json(&'a JsonRecord),
}

impl<'a> Fields<'a> {
    /// The first value of `key`, unquoted.
    pub(crate) fn get(&self, key: &str) -> Option<Cow<'a, str>> {
        match self {
            Fields::Text(pairs) => pairs.iter().find(|(k, _)| *k == key).map(|&(_, v)| Cow::Borrowed(v)),
            Fields::Json(record) => match record.get(key)? {
                JsonValue::Str(range) => Some(Cow::Borrowed(record.text(range))),
                JsonValue::Number(n) => Some(Cow::Owned(n.to_string())),
                JsonValue::Bool(b) => Some(Cow::Owned(b.to_string())),
                JsonValue::Other => None,
            },
        }
    }

    /// Every value of `key`, in order (readable records repeat `request_id`; JSON keys are unique).
    pub(crate) fn all(&self, key: &str) -> Vec<Cow<'a, str>> {
        match self {
            Fields::Text(pairs) => pairs.iter().filter(|(k, _)| *k == key).map(|&(_, v)| Cow::Borrowed(v)).collect(),
            Fields::Json(_) => self.get(key).into_iter().collect(),
        }
    }

    /// Whether `key` is present.
    pub(crate) fn has(&self, key: &str) -> bool {
        match self {
            Fields::Text(_) => self.get(key).is_some(),
            Fields::Json(record) => record.get(key).is_some(),
        }
    }

    /// `key` as an unsigned integer, exactly: JSON numbers through `as_u64`, text through `u64::from_str`, never
    /// through `f64` (worker ids exceed 2^53). Debug-formatted `Some(n)` and a trailing comma are accepted.
    pub(crate) fn u64(&self, key: &str) -> Option<u64> {
        if let Fields::Json(record) = self
            && let Some(JsonValue::Number(n)) = record.get(key)
        {
            return n.as_u64();
        }
        unsigned(&self.get(key)?)
    }

    /// `key` as a number (`"1203.00"`, `5`, `"5"`).
    pub(crate) fn f64(&self, key: &str) -> Option<f64> {
        if let Fields::Json(record) = self
            && let Some(JsonValue::Number(n)) = record.get(key)
        {
            return n.as_f64().filter(|v| v.is_finite());
        }
        let text = self.get(key)?;
        let text = text.trim_end_matches(',');
        let text = text.strip_prefix("Some(").and_then(|t| t.strip_suffix(')')).unwrap_or(text);
        text.parse::<f64>().ok().filter(|v| v.is_finite())
    }
}

/// An unsigned integer written as text (`123`, `123,`, `Some(123)`).
pub(crate) fn unsigned(text: &str) -> Option<u64> {
    let text = text.trim_end_matches(',');
    let text = text.strip_prefix("Some(").and_then(|t| t.strip_suffix(')')).unwrap_or(text);
    text.parse().ok()
}

/// A span's duration string (`1.09ms`, `2s`, `750µs`, `12ns`) in nanoseconds.
pub(crate) fn duration_nanos(text: &str) -> Option<i64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let nanos = (value * scale).round();
    (nanos.is_finite() && nanos >= 0.0 && nanos < i64::MAX as f64).then_some(nanos as i64)
}

/// Which router line template a decision came from (for `details.router_wording`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Wording {
    /// ≤0.3: `Selected worker: <id>, logit: <x>`.
    Logit,
    /// ~0.4: `Selected worker: <id>, normalized logit: <x>`.
    NormalizedLogit,
    /// ~0.5: `…, cached blocks: <n>[, total blocks: <N>]`.
    CachedBlocks,
    /// ~0.7: `worker_id=<id> dp_rank=<r>, …, tree size: <t>`.
    WorkerDpRank,
    /// 1.6: `Selected worker` with fields.
    Fields,
    /// 1.x: `Selected pinned worker: …`.
    Pinned,
    /// DEBUG `[ROUTING] Best: …`.
    RoutingBest,
}

impl Wording {
    /// The name counted in the manifest.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Wording::Logit => "selected-logit-0.1",
            Wording::NormalizedLogit => "selected-normalized-logit-0.4",
            Wording::CachedBlocks => "selected-cached-blocks-0.5",
            Wording::WorkerDpRank => "selected-worker-id-dp-rank-0.7",
            Wording::Fields => "selected-fields-1.6",
            Wording::Pinned => "selected-pinned-1.x",
            Wording::RoutingBest => "routing-best-debug",
        }
    }
}

/// A router's choice of worker for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// The chosen worker's instance id.
    pub(crate) worker: u64,
    /// Its data-parallel rank, when logged.
    pub(crate) dp_rank: Option<u32>,
    /// `prefill` or `decode` (1.6), when logged.
    pub(crate) worker_type: Option<WorkerType>,
    /// Device-tier blocks the worker already held (rounded when logged as effective blocks).
    pub(crate) hit_blocks: Option<u32>,
    /// Prompt blocks looked up (only `[ROUTING] Best` gives them).
    pub(crate) blocks: Option<u32>,
    /// Host-memory (G2) blocks matched (1.6).
    pub(crate) host_blocks: Option<u32>,
    /// Disk (G3) blocks matched (1.6).
    pub(crate) disk_blocks: Option<u32>,
    /// The template of the line.
    pub(crate) wording: Wording,
}

/// The kind of worker a 1.6 selection was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerType {
    /// A prefill worker (disaggregated).
    Prefill,
    /// A decode worker (or an aggregated one).
    Decode,
}

/// A span open or close event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanEvent {
    /// `SPAN_CREATED` (2025), `SPAN_FIRST_ENTRY` (later) or readable `new`.
    Opened,
    /// `SPAN_CLOSED` or readable `close`, with the span's duration (busy + idle) when logged.
    Closed { duration_ns: Option<i64> },
}

/// The spans whose events describe a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanName {
    /// The frontend's `http-request` span.
    HttpRequest,
    /// A worker's `handle_payload` span.
    HandlePayload,
    /// Any other span (router, client, …).
    Other,
}

/// What a record says, typed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line<'a> {
    /// Frontend `request received`.
    FrontendReceived,
    /// Frontend `request completed` (its `status`, `error_type`, `elapsed_ms` and span fields are read from the
    /// record's fields).
    FrontendCompleted,
    /// Frontend `request cancelled` (client disconnect).
    FrontendCancelled,
    /// Worker ingress `request received` (inside `handle_payload`).
    WorkerReceived,
    /// Worker ingress `request completed`.
    WorkerCompleted,
    /// `http response sent`: counted by status.
    HttpResponse,
    /// A span event.
    Span { event: SpanEvent, name: SpanName },
    /// A router decision.
    Selected(Selection),
    /// A candidate's score line: remembered for the selection that follows.
    Formula { worker: u64, dp_rank: Option<u32>, cached: Option<u32> },
    /// `Selected worker` of a non-KV router mode (round robin, random, …): no cache lookup.
    SelectedWithoutLookup,
    /// `route request completed|cancelled|failed`: the outcome of one dispatch attempt.
    RouteOutcome(RouteOutcome),
    /// Legacy SDK: `Prefilling remotely for request <id> with length <n>`.
    LegacyRemotePrefill { id: &'a str, tokens: Option<u32> },
    /// Legacy SDK: `Dequeued prefill request: <id>`.
    LegacyDequeued { id: &'a str },
    /// A Dynamo record that carries nothing for the trace (startup, warnings, housekeeping).
    Other,
    /// A record of a kind this adapter reads, without a field it needs.
    Malformed(&'static str),
}

/// How one dispatch attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteOutcome {
    /// `route request completed`.
    Completed,
    /// `route request cancelled`.
    Cancelled,
    /// `route request failed` with `request.outcome` `rejected` or `error` (or unknown).
    Failed,
    /// `route request failed` with `request.outcome="cancelled"`.
    FailedCancelled,
}

impl RouteOutcome {
    /// The name counted in the manifest.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RouteOutcome::Completed => "completed",
            RouteOutcome::Cancelled => "cancelled",
            RouteOutcome::Failed => "failed",
            RouteOutcome::FailedCancelled => "failed-cancelled",
        }
    }
}

/// Whether `text` is `word` or starts with `word` followed by a space.
fn is_message(text: &str, word: &str) -> bool {
    text.strip_prefix(word).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

fn number<T: std::str::FromStr>(c: &Captures<'_>, name: &str) -> Option<T> {
    c.name(name).and_then(|m| m.as_str().parse().ok())
}

/// Effective blocks (`3.50`) rounded to whole blocks.
fn blocks(value: f64) -> Option<u32> {
    let rounded = value.round();
    (rounded.is_finite() && rounded >= 0.0 && rounded <= f64::from(u32::MAX)).then_some(rounded as u32)
}

/// Classifies a record by its message. `message` is the readable body (message then fields) or the JSON `message`;
/// `target` and `span` are as logged (empty / `None` when absent).
pub(crate) fn classify<'a>(message: &'a str, target: &str, span: Option<&str>, fields: &Fields<'_>) -> Line<'a> {
    let frontend = target.contains("http::service");
    let worker = !frontend && (target.contains("ingress") || span == Some("handle_payload") || fields.has("component"));
    if is_message(message, "request received") {
        return if worker { Line::WorkerReceived } else { Line::FrontendReceived };
    }
    if is_message(message, "request completed") {
        return if worker { Line::WorkerCompleted } else { Line::FrontendCompleted };
    }
    if is_message(message, "request cancelled") {
        return Line::FrontendCancelled;
    }
    if is_message(message, "http response sent") {
        return Line::HttpResponse;
    }
    if let Some(event) = span_event(message, fields) {
        let name = match fields.get("span_name").as_deref().or(span) {
            Some("http-request") => SpanName::HttpRequest,
            Some("handle_payload") => SpanName::HandlePayload,
            Some(_) => SpanName::Other,
            None if fields.has("method") && fields.has("uri") => SpanName::HttpRequest,
            None if fields.has("component") && fields.has("instance_id") => SpanName::HandlePayload,
            None => SpanName::Other,
        };
        return Line::Span { event, name };
    }
    if message.starts_with("Selected worker: ") {
        return selected_text(message);
    }
    if is_message(message, "Selected worker") {
        return selected_fields(fields);
    }
    // Each regex below runs only where its literal is: they start with an optional word, so the regex engine has
    // no prefix to search for, and its captures cost thousands of instructions on a body that cannot match.
    if message.contains("elected pinned worker: ")
        && let Some(c) = PINNED.captures(message)
    {
        let Some(worker) = number(&c, "id") else { return Line::Malformed("pinned selection without a worker id") };
        let worker_type = c.name("wt").and_then(|m| match m.as_str() {
            "prefill" => Some(WorkerType::Prefill),
            "decode" => Some(WorkerType::Decode),
            _ => None,
        });
        return Line::Selected(Selection {
            worker,
            dp_rank: number(&c, "dp"),
            worker_type,
            hit_blocks: number::<f64>(&c, "cached").and_then(blocks),
            blocks: None,
            host_blocks: None,
            disk_blocks: None,
            wording: Wording::Pinned,
        });
    }
    if message.contains("ormula for ")
        && let Some(c) = FORMULA.captures(message)
    {
        let Some(worker) = number(&c, "id") else { return Line::Malformed("formula without a worker id") };
        let cached = number::<f64>(&c, "cached")
            .and_then(blocks)
            .or_else(|| FORMULA_CACHED.captures(message).and_then(|c| number(&c, "cached")));
        return Line::Formula { worker, dp_rank: number(&c, "dp"), cached };
    }
    if message.starts_with("[ROUTING] Best:") {
        let Some(c) = BEST.captures(message) else { return Line::Malformed("`[ROUTING] Best` of an unknown shape") };
        let Some(worker) = number(&c, "id") else { return Line::Malformed("`[ROUTING] Best` without a worker id") };
        return Line::Selected(Selection {
            worker,
            dp_rank: number(&c, "dp"),
            worker_type: None,
            hit_blocks: number(&c, "hit"),
            blocks: number(&c, "blocks"),
            host_blocks: None,
            disk_blocks: None,
            wording: Wording::RoutingBest,
        });
    }
    if let Some(rest) = message.strip_prefix("route request ") {
        let outcome = fields.get("request.outcome");
        let outcome = if is_message(rest, "completed") {
            RouteOutcome::Completed
        } else if is_message(rest, "cancelled") {
            RouteOutcome::Cancelled
        } else if is_message(rest, "failed") {
            if outcome.as_deref() == Some("cancelled") { RouteOutcome::FailedCancelled } else { RouteOutcome::Failed }
        } else {
            return Line::Other;
        };
        return Line::RouteOutcome(outcome);
    }
    if message.starts_with("Prefilling remotely for request ")
        && let Some(c) = LEGACY_REMOTE.captures(message)
    {
        return match c.name("id") {
            Some(id) => Line::LegacyRemotePrefill { id: id.as_str(), tokens: number(&c, "n") },
            None => Line::Other,
        };
    }
    if message.starts_with("Dequeued prefill request: ")
        && let Some(id) = LEGACY_DEQUEUED.captures(message).and_then(|c| c.name("id"))
    {
        return Line::LegacyDequeued { id: id.as_str() };
    }
    Line::Other
}

/// The span event a message is, if any: JSON `SPAN_*` messages, readable `new` / `close time.busy=… time.idle=…`.
fn span_event(message: &str, fields: &Fields<'_>) -> Option<SpanEvent> {
    match message {
        "SPAN_CREATED" | "SPAN_FIRST_ENTRY" | "new" => Some(SpanEvent::Opened),
        _ if message == "SPAN_CLOSED" || is_message(message, "close") => {
            let duration_ns = match fields.u64("time.duration_us") {
                Some(us) => i64::try_from(us).ok().and_then(|us| us.checked_mul(1000)),
                None => match (fields.u64("time.busy_us"), fields.u64("time.idle_us")) {
                    (Some(b), Some(i)) => i64::try_from(b.saturating_add(i)).ok().and_then(|us| us.checked_mul(1000)),
                    _ => match (fields.get("time.busy"), fields.get("time.idle")) {
                        (Some(b), Some(i)) => Some(duration_nanos(&b)?.saturating_add(duration_nanos(&i)?)),
                        _ => None,
                    },
                },
            };
            Some(SpanEvent::Closed { duration_ns })
        }
        _ => None,
    }
}

/// The text forms of `Selected worker: …`.
fn selected_text(message: &str) -> Line<'_> {
    let Some(parts) = selected_parts(message) else {
        return Line::Malformed("`Selected worker:` of an unknown shape");
    };
    let Some(worker) = parts.id.parse().ok() else { return Line::Malformed("selection without a worker id") };
    let wording = if parts.form07 {
        Wording::WorkerDpRank
    } else if parts.normalized {
        Wording::NormalizedLogit
    } else if parts.cached.is_some() {
        Wording::CachedBlocks
    } else {
        Wording::Logit
    };
    Line::Selected(Selection {
        worker,
        dp_rank: parts.dp.and_then(|dp| dp.parse().ok()),
        worker_type: None,
        hit_blocks: parts.cached.and_then(|cached| cached.parse::<f64>().ok()).and_then(blocks),
        blocks: None,
        host_blocks: None,
        disk_blocks: None,
        wording,
    })
}

/// What [`SELECTED`] captures of a `Selected worker: …` line and the adapter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SelectedParts<'a> {
    /// `worker_id=` before the id (~0.7).
    form07: bool,
    id: &'a str,
    dp: Option<&'a str>,
    /// `normalized logit:`.
    normalized: bool,
    /// `[effective ]cached blocks: <n>`.
    cached: Option<&'a str>,
}

/// [`SELECTED`]'s captures, read by hand where the line is ASCII (the regex's captures cost about 16,000
/// instructions a line, a fifth of folding a router log's records), else by the regex. A property test compares them.
fn selected_parts(message: &str) -> Option<SelectedParts<'_>> {
    match selected_by_hand(message) {
        Some(parts) => parts,
        None => selected_by_regex(message),
    }
}

fn selected_by_regex(message: &str) -> Option<SelectedParts<'_>> {
    let c = SELECTED.captures(message)?;
    Some(SelectedParts {
        form07: c.name("form07").is_some(),
        id: c.name("id")?.as_str(),
        dp: c.name("dp").map(|m| m.as_str()),
        normalized: c.name("normalized").is_some(),
        cached: c.name("cached").map(|m| m.as_str()),
    })
}

/// [`SELECTED`] read by hand: `Some(None)` when it does not match, `None` when a byte it would have to read is not
/// ASCII (`\d`, `\s` and `\S` are Unicode classes), so the regex decides.
///
/// How the regex's choices fall: every number is followed by text that cannot start with a digit, so its run is
/// always whole; the lazy logit `\S+?` ends at the first comma, white space or end after at least one byte, since
/// the optional groups after it start with `, ` and the final `(?:,|\s|$)` then always matches; of those groups only
/// `cached` is used, and it is taken when its number (with an optional `.digits`) is followed by a comma, white space
/// or the end (`tree size`, `total blocks` and the final group all start with one).
fn selected_by_hand(message: &str) -> Option<Option<SelectedParts<'_>>> {
    let b = message.as_bytes();
    // The end of the run of ASCII digits at `at`, or `None` when a byte that is not ASCII follows it.
    let digits = |at: usize| {
        let end = at + b.get(at..).map_or(0, |rest| rest.iter().take_while(|c| c.is_ascii_digit()).count());
        if b.get(end).is_some_and(|c| !c.is_ascii()) { None } else { Some(end) }
    };
    let starts = |at: usize, text: &[u8]| b.get(at..).is_some_and(|rest| rest.starts_with(text));
    const HEAD: &[u8] = b"Selected worker: ";
    if !starts(0, HEAD) {
        return Some(None);
    }
    let mut at = HEAD.len();
    let form07 = starts(at, b"worker_id=");
    if form07 {
        at += "worker_id=".len();
    }
    let id_end = digits(at)?;
    if id_end == at {
        return Some(None);
    }
    let id = at..id_end;
    at = id_end;
    let mut dp = None;
    if starts(at, b" dp_rank=") {
        let value = at + " dp_rank=".len();
        let first = if starts(value, b"Some(") { value + "Some(".len() } else { value };
        let end = digits(first)?;
        if end > first {
            dp = Some(first..end);
            at = if b.get(end) == Some(&b')') { end + 1 } else { end };
        } else if starts(value, b"None") {
            at = value + "None".len();
        }
        // Otherwise the group does not match, and `, ` cannot follow the id.
    }
    if !starts(at, b", ") {
        return Some(None);
    }
    at += 2;
    let normalized = starts(at, b"normalized logit: ");
    if normalized {
        at += "normalized ".len();
    }
    if !starts(at, b"logit: ") {
        return Some(None);
    }
    at += "logit: ".len();
    match b.get(at) {
        None => return Some(None),
        Some(c) if !c.is_ascii() => return None,
        Some(&c) if is_space(c) => return Some(None),
        Some(_) => {}
    }
    let mut end = at + 1;
    loop {
        match b.get(end) {
            None => break,
            Some(c) if !c.is_ascii() => return None,
            Some(&c) if c == b',' || is_space(c) => break,
            Some(_) => end += 1,
        }
    }
    let mut cached = None;
    if starts(end, b", ") {
        let mut at = end + 2;
        if starts(at, b"effective cached blocks: ") {
            at += "effective ".len();
        }
        if starts(at, b"cached blocks: ") {
            let first = at + "cached blocks: ".len();
            let mut end = digits(first)?;
            if end > first {
                if b.get(end) == Some(&b'.') {
                    let fraction = digits(end + 1)?;
                    if fraction > end + 1 {
                        end = fraction;
                    }
                }
                match b.get(end) {
                    Some(c) if !c.is_ascii() => return None,
                    Some(&c) if c != b',' && !is_space(c) => {}
                    _ => cached = Some(first..end),
                }
            }
        }
    }
    Some(Some(SelectedParts {
        form07,
        id: &message[id],
        dp: dp.map(|dp| &message[dp]),
        normalized,
        cached: cached.map(|cached| &message[cached]),
    }))
}

/// The 1.6 `Selected worker` with fields; other router modes choose without a cache lookup.
fn selected_fields<'a>(fields: &Fields<'_>) -> Line<'a> {
    if fields.get("router_mode").is_some_and(|mode| mode != "kv") {
        return Line::SelectedWithoutLookup;
    }
    let Some(worker) = fields.u64("worker_id") else {
        return Line::Malformed("`Selected worker` without a usable `worker_id`");
    };
    let worker_type = match fields.get("worker_type").as_deref() {
        Some("prefill") => Some(WorkerType::Prefill),
        Some("decode") => Some(WorkerType::Decode),
        _ => None,
    };
    let small = |key: &str| fields.u64(key).and_then(|v| u32::try_from(v).ok());
    Line::Selected(Selection {
        worker,
        dp_rank: small("dp_rank"),
        worker_type,
        hit_blocks: fields.f64("effective_cached_blocks").and_then(blocks),
        blocks: None,
        host_blocks: small("host_pinned_blocks"),
        disk_blocks: small("disk_blocks"),
        wording: Wording::Fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str) -> TextRecord<'_> {
        parse_text(line).unwrap()
    }

    fn line_of(record: &str) -> Line<'_> {
        let r = parse_text(record).unwrap();
        let pairs = text_fields(r.body);
        classify(r.body, r.target, r.span, &Fields::Text(&pairs))
    }

    fn sel(worker: u64, dp: Option<u32>, hit: Option<u32>, wording: Wording) -> Line<'static> {
        Line::Selected(Selection {
            worker,
            dp_rank: dp,
            worker_type: None,
            hit_blocks: hit,
            blocks: None,
            host_blocks: None,
            disk_blocks: None,
            wording,
        })
    }

    #[test]
    fn record_starts_and_foreign_lines() {
        for start in [
            "2025-04-24T07:42:44.118Z  INFO prefill_worker.async_init: PrefillWorker initialized",
            "2026-02-27T14:47:21.385061Z  INFO dynamo_llm::kv_router::scheduler: Selected worker",
            "2026-02-27T15:47:21.385061+01:00 DEBUG x::y: z",
            "2026-02-27T14:47:21.385061Z WARNING vllm.engine: w",
            "  {\"time\":\"x\"}",
        ] {
            assert!(starts_record(start), "{start}");
        }
        for piece in
            ["est_id=abc model=m", " model=m", "2026-02-27 14:47:21 INFO x", "INFO 04-01 17:26:35 metrics.py:455] x"]
        {
            assert!(!starts_record(piece), "{piece}");
        }
        for foreign in [
            "# source",
            "Traceback (most recent call last):",
            "  File \"x.py\", line 1",
            "INFO 04-01 17:26:35 metrics.py:455] Avg prompt throughput",
            "(VllmWorkerProcess pid=4637) Initialized NIXL agent: d",
            "[2026-01-01 00:00:01.000 DP0 TP0 EP0] Prefill batch",
            "[10/07/2026-08:02:16] [TRT-LLM] [I] x",
        ] {
            assert!(is_foreign(foreign), "{foreign}");
        }
        assert!(!is_foreign("est_id=abc model=m"));
        assert!(!is_foreign(" model=m"), "a piece torn before a field's space");
        assert!(!is_foreign("Loaded plugin UCX_MO"));
    }

    #[test]
    fn ansi_and_wrappers_are_removed() {
        let coloured = "\x1b[2m2026-02-27T14:47:21.385061Z\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2mx::y\x1b[0m\x1b[2m:\x1b[0m m \x1b[3mk\x1b[0m\x1b[2m=\x1b[0m1";
        assert_eq!(strip_ansi(coloured), "2026-02-27T14:47:21.385061Z  INFO x::y: m k=1");
        let wrapped =
            "2026-03-01 10:00:00,123 - sflow.task.frontend - INFO - 0: 2026-03-01T10:00:00.000001Z  INFO a::b: m";
        assert_eq!(strip_wrapper(wrapped), "2026-03-01T10:00:00.000001Z  INFO a::b: m");
    }

    #[test]
    fn spans_target_and_body() {
        let r = text(
            "2026-05-21T03:56:01.134595Z  INFO http-request: dynamo_llm::http::service::metrics: request completed request_id=a status=success",
        );
        assert_eq!(
            (r.time, r.level, r.span, r.target, r.body),
            (
                "2026-05-21T03:56:01.134595Z",
                "INFO",
                Some("http-request"),
                "dynamo_llm::http::service::metrics",
                "request completed request_id=a status=success"
            )
        );
        let r = text("2025-09-02T15:50:01.770316Z  INFO main.get_engine_cache_info: Cache config values: {'n': 1}");
        assert_eq!((r.span, r.target, r.body), (None, "main.get_engine_cache_info", "Cache config values: {'n': 1}"));
        let r = text(
            "2026-01-01T00:00:00.000000Z DEBUG kv_router.select_worker: dynamo_llm::kv_router::push_router: [ROUTING] Best: worker_1 dp_rank=0 with 17/18 blocks overlap",
        );
        assert_eq!((r.span, r.target), (Some("kv_router.select_worker"), "dynamo_llm::kv_router::push_router"));
        let r =
            text("2026-01-01T00:00:00.000000Z  INFO kv_router.route_request: request_span: route request completed");
        assert_eq!((r.spans, r.target, r.body), ("kv_router.route_request", "request_span", "route request completed"));
        // A message starting with `Word: ` stays in the body.
        let r = text("2026-01-01T00:00:00.000000Z  WARN a::b: Error: cannot x");
        assert_eq!((r.target, r.body), ("a::b", "Error: cannot x"));
        assert_eq!(parse_text("2026-01-01T00:00:00.000000Z  INFO no target here"), None);
    }

    proptest::proptest! {
        #[test]
        fn the_field_scanner_agrees_with_the_regex(body in "[a-c_.=\"\\\\ \t\n\x0b\x0c\r1é]{0,40}") {
            proptest::prop_assert_eq!(text_fields(&body), fields_by_regex(&body));
        }

        #[test]
        fn the_field_scanner_agrees_on_record_shaped_bodies(
            body in "([a-z]{1,6}( [a-z]{1,6}){0,2} )?([a-z_][a-z0-9_.]{0,8}=(\"([^\"\\\\]|\\\\.){0,8}\"|[^ ]{0,8}|\"[a-z]{0,4}) ?){0,6}"
        ) {
            proptest::prop_assert_eq!(text_fields(&body), fields_by_regex(&body));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Heads of the shapes the reader has to tell apart: zones, white space and level words, with non-ASCII
        /// digits, spaces and letters where the regex's Unicode classes see them.
        #[test]
        fn the_head_reader_agrees_with_the_regex(
            line in "([0-9]{4}|2[0-9]\u{663}[0-9])-[0-9]{2}-[0-9é]{2}[T ][0-9:.]{0,6}(Z|[+-][0-9]{2}:[0-9]{2}|[+-][0-9]{3}|é|\\+)?\
                     [ \t\x0b\u{a0}\u{85}]{0,2}(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|WARNINGS|INF)?\
                     [ _a1:\u{a0}é\u{85}]{0,2}[a-z]{0,2}"
        ) {
            agree(&line)?;
        }

        /// Heads that nearly match, so that each rule of the reader decides some of them.
        #[test]
        fn the_head_reader_agrees_on_near_heads(
            line in "[0-9]{4}-[0-9]{2}-[0-9]{2}(T|T|T| )[0-9:.]{0,3}(Z|Z|[+-][0-9]{2}:[0-9]{2}|[+-][0-9]{2}:[0-9]|é)\
                     (  | |\t|\x0b|\u{a0}|\u{85}|)(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|WARNINGS|INF)\
                     ( |_|1|a|:|\u{a0}|é|\u{85}|)[ a]{0,2}"
        ) {
            agree(&line)?;
        }

        /// `Selected worker:` lines of every wording, near misses and non-ASCII bytes where the regex's Unicode
        /// classes see them.
        #[test]
        fn the_selection_reader_agrees_with_the_regex(
            line in "Selected worker: (worker_id=)?[0-9\u{663}]{0,3}( dp_rank=(Some\\()?[0-9]{0,2}\\)?| dp_rank=None| dp_rank=Some\\(None| dp_rank=x)?\
                     (, |,|)(normalized |normalized)?(logit: )?[0-9.,a \t\u{663}\u{a0}-]{0,5}\
                     (, (effective |effective)?cached blocks: [0-9\u{663}]{0,2}(\\.[0-9]{0,2})?[,x .\u{a0}\u{663}]?)?\
                     (, tree size: [0-9]{1,2})?(, total blocks: [0-9]{1,2})?[ ,a]?"
        ) {
            let by_regex = selected_by_regex(&line);
            if let Some(by_hand) = selected_by_hand(&line) {
                proptest::prop_assert_eq!(by_hand, by_regex);
            }
            proptest::prop_assert_eq!(selected_parts(&line), by_regex);
        }

        /// Lines of the shapes the routers write, every one read by hand.
        #[test]
        fn selection_lines_are_read_by_hand(
            line in "Selected worker: (worker_id=)?[0-9]{1,19}( dp_rank=(Some\\()?[0-9]{1,2}\\)?| dp_rank=None)?\
                     , (normalized )?logit: -?[0-9]{1,3}\\.[0-9]{3}\
                     (, (effective )?cached blocks: [0-9]{1,4}(\\.[0-9]{2})?)?(, tree size: [0-9]{1,4})?\
                     (, total blocks: [0-9]{1,5})?"
        ) {
            let by_hand = selected_by_hand(&line);
            proptest::prop_assert!(matches!(by_hand, Some(Some(_))), "{line:?}");
            proptest::prop_assert_eq!(by_hand.flatten(), selected_by_regex(&line));
        }

        /// Leading `token: ` groups with white space, colons, long tokens and characters that are not ASCII.
        #[test]
        fn the_token_scanner_agrees_with_the_general_rule(rest in "([a-z_:]{0,3}(: |:|  | |\t|\u{a0}|é|x{190,205})){0,6}") {
            let general = |at: usize| {
                let colon = at + rest[at..].find(": ")?;
                let token = &rest[at..colon];
                (!token.is_empty() && !token.contains(char::is_whitespace) && token.len() <= 200).then_some(colon)
            };
            let mut at = 0;
            loop {
                let colon = next_token(&rest, at);
                proptest::prop_assert_eq!(colon, general(at), "{:?} at {}", rest, at);
                let Some(colon) = colon else { break };
                at = colon + 2;
            }
        }

        #[test]
        fn ansi_codes_are_removed_as_the_regex_removes_them(line in "[\x1b\\[0-9;?mKAz é]{0,30}") {
            proptest::prop_assert_eq!(strip_ansi(&line), ANSI.replace_all(&line, ""));
        }
    }

    /// [`head_by_hand`], where it decides, and [`head`] give what the regex gives.
    fn agree(line: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let by_regex = head_by_regex(line);
        if let Some(by_hand) = head_by_hand(line.as_bytes()) {
            let by_hand = by_hand.map(|(time, level, end)| (&line[..time], &line[level], end));
            proptest::prop_assert_eq!(by_hand, by_regex);
        }
        proptest::prop_assert_eq!(head(line), by_regex);
        Ok(())
    }

    /// What [`strip_ansi`] removes, as a regex.
    static ANSI: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").expect("valid regex"));

    fn head_by_regex(line: &str) -> Option<(&str, &str, usize)> {
        let head = HEAD.captures(line)?;
        Some((head.name("time")?.as_str(), head.name("level")?.as_str(), head.get(0)?.end()))
    }

    #[test]
    fn selections_are_read_by_hand_as_the_regex_reads_them() {
        let parts = |form07, id, dp, normalized, cached| SelectedParts { form07, id, dp, normalized, cached };
        let cases = [
            ("Selected worker: 7, logit: 1.250", Some(parts(false, "7", None, false, None))),
            (
                "Selected worker: worker_id=7 dp_rank=Some(1), logit: 14.031, cached blocks: 3",
                Some(parts(true, "7", Some("1"), false, Some("3"))),
            ),
            ("Selected worker: 7 dp_rank=2), logit: x", Some(parts(false, "7", Some("2"), false, None))),
            ("Selected worker: 7 dp_rank=None, normalized logit: 0.5", Some(parts(false, "7", None, true, None))),
            (
                "Selected worker: 7, logit: 1, effective cached blocks: 2.50, tree size: 9",
                Some(parts(false, "7", None, false, Some("2.50"))),
            ),
            // The logit ends at white space: what follows is not the `cached` group.
            ("Selected worker: 7, logit: 1 5, cached blocks: 3", Some(parts(false, "7", None, false, None))),
            ("Selected worker: 7, logit: 1\t, cached blocks: 3", Some(parts(false, "7", None, false, None))),
            // A logit's first byte can be a comma; it cannot be white space.
            ("Selected worker: 7, logit: ,, cached blocks: 3", Some(parts(false, "7", None, false, Some("3")))),
            ("Selected worker: 7, logit: \t1", None),
            // `3.` is no number, `3x` is not followed by what the groups need.
            ("Selected worker: 7, logit: 1, cached blocks: 3., x", Some(parts(false, "7", None, false, None))),
            ("Selected worker: 7, logit: 1, cached blocks: 3x", Some(parts(false, "7", None, false, None))),
            ("Selected worker: 7, logit: 1, cached blocks: 3.5 ", Some(parts(false, "7", None, false, Some("3.5")))),
            // A `dp_rank` the group cannot read leaves ` dp_rank=` where `, ` must be.
            ("Selected worker: 7 dp_rank=Some(None, logit: 1", None),
            ("Selected worker: 7 dp_rank=x, logit: 1", None),
            ("Selected worker: , logit: 1", None),
            ("Selected worker: 7, normalized 1", None),
        ];
        for (line, expected) in cases {
            assert_eq!(selected_by_hand(line), Some(expected), "{line:?}");
            assert_eq!(selected_by_regex(line), expected, "{line:?}");
        }
        // Where `\d`, `\s` or `\S` meet a byte that is not ASCII, the regex decides.
        for line in [
            "Selected worker: 7\u{663}, logit: 1",
            "Selected worker: 7, logit: \u{a0}",
            "Selected worker: 7, logit: 1\u{a0}",
        ] {
            assert_eq!(selected_by_hand(line), None, "{line:?}");
        }
    }

    #[test]
    fn heads_are_read_by_hand_as_the_regex_reads_them() {
        let decided = [
            ("2026-02-27T14:47:21.385061Z  INFO x::y: m", Some(("2026-02-27T14:47:21.385061Z", "INFO", 34))),
            ("2025-04-24T07:42:44.118Z WARNING a.b: w", Some(("2025-04-24T07:42:44.118Z", "WARNING", 33))),
            ("2026-02-27T15:47:21.385061+01:00 DEBUG\tx", Some(("2026-02-27T15:47:21.385061+01:00", "DEBUG", 39))),
            ("2026-02-27T1Z ERROR", Some(("2026-02-27T1Z", "ERROR", 19))),
            ("2026-02-27TZ INFO x", None),
            ("2026-02-27T1+01:00x INFO x", None),
            ("2026-02-27T14:47:21Z INFOS x", None),
            ("2026-02-27T14:47:21Z WARNINGS x", None),
            ("2026-02-27T14:47:21ZINFO x", None),
            ("2026-02-27T14:47:21Z", None),
            ("2026-02-27 14:47:21Z INFO x", None),
        ];
        for (line, expected) in decided {
            let by_hand = head_by_hand(line.as_bytes()).expect("decided by hand");
            assert_eq!(by_hand.map(|(time, level, end)| (&line[..time], &line[level], end)), expected, "{line:?}");
            assert_eq!(head_by_regex(line), expected, "{line:?}");
        }
        // What only the regex can decide: a non-ASCII digit, a no-break space (Unicode white space), an accented
        // letter after the level (a word character).
        for line in
            ["2026-0\u{663}-27T1Z INFO", "2026-02-27T1Z\u{a0}INFO", "2026-02-27T1Z INFOé", "2026-02-27T1Z INFO\u{a0}x"]
        {
            assert_eq!(head_by_hand(line.as_bytes()), None, "{line:?}");
        }
        assert_eq!(head("2026-02-27T1Z\u{a0}INFO x"), Some(("2026-02-27T1Z", "INFO", 20)));
        assert_eq!(head("2026-02-27T1Z INFOé"), None);
    }

    #[test]
    fn the_field_scanner_reads_the_edge_cases_the_regex_reads() {
        for body in [
            "",
            "k=v",
            " k=v",
            "xk=v",
            "a=1 b=2",
            "a=\"x\"b=2",
            "a=\"unclosed b=2",
            "a=\"esc \\\" q\" b=3",
            "a=\"back\\",
            "a=\"nl \\\n\" b=1",
            "k= v=",
            "_k.x=1\tz=2",
            "1k=2 k1=3",
            "é k=v",
        ] {
            assert_eq!(text_fields(body), fields_by_regex(body), "{body:?}");
        }
        assert_eq!(text_fields("a=\"x y\" b=z"), [("a", "x y"), ("b", "z")]);
        assert_eq!(text_fields("a=\"unclosed b=2"), [("a", "\"unclosed"), ("b", "2")]);
    }

    #[test]
    fn fields_first_occurrence_wins_and_ids_stay_exact() {
        let body = r#"request completed request_id=first model=m status=success elapsed_ms=1628 method=POST request_id=second model="m" ttft_ms="1203.00" decode_worker_id=7587888160958627596 total_kv_blocks=Some(2859) note="a \"q\" b=c""#;
        let pairs = text_fields(body);
        let f = Fields::Text(&pairs);
        assert_eq!(f.get("request_id").as_deref(), Some("first"));
        assert_eq!(f.all("request_id").iter().map(|c| c.as_ref()).collect::<Vec<_>>(), ["first", "second"]);
        assert_eq!(f.f64("ttft_ms"), Some(1203.0));
        assert_eq!(f.u64("decode_worker_id"), Some(7_587_888_160_958_627_596));
        assert_eq!(f.u64("total_kv_blocks"), Some(2859));
        assert_eq!(f.get("note").as_deref(), Some(r#"a \"q\" b=c"#));
        assert_eq!(f.get("b"), None, "a key inside a quoted value is not a field");
        let json =
            JsonRecord::parse(r#"{"instance_id":7587888160958627596,"elapsed_ms":"5","x":"7587888160958627596"}"#)
                .unwrap();
        let f = Fields::Json(&json);
        assert_eq!(f.u64("instance_id"), Some(7_587_888_160_958_627_596));
        assert_eq!(f.u64("x"), Some(7_587_888_160_958_627_596));
        assert_eq!(f.f64("elapsed_ms"), Some(5.0));
    }

    #[test]
    fn durations() {
        assert_eq!(duration_nanos("1.09ms"), Some(1_090_000));
        assert_eq!(duration_nanos("2s"), Some(2_000_000_000));
        assert_eq!(duration_nanos("750µs"), Some(750_000));
        assert_eq!(duration_nanos("12ns"), Some(12));
        assert_eq!(duration_nanos("3 min"), None);
    }

    /// Router lines of every generation, with the values read off the literal text by hand.
    #[test]
    fn router_wording_per_generation() {
        use Wording::*;
        let cases: &[(&str, Line<'_>)] = &[
            ("Selected worker: 7587888160958627596, logit: 0.750", sel(7_587_888_160_958_627_596, None, None, Logit)),
            ("Selected worker: 12, normalized logit: 0.000", sel(12, None, None, NormalizedLogit)),
            (
                "Selected worker: 7587890043311737930, logit: 253.000, cached blocks: 0, total blocks: 2859",
                sel(7_587_890_043_311_737_930, None, Some(0), CachedBlocks),
            ),
            ("Selected worker: 5, logit: 1.000, cached blocks: 4", sel(5, None, Some(4), CachedBlocks)),
            (
                "Selected worker: worker_id=7042394012839217798 dp_rank=0, logit: 14.031, cached blocks: 0, tree size: 0",
                sel(7_042_394_012_839_217_798, Some(0), Some(0), WorkerDpRank),
            ),
            (
                "Selected worker: worker_id=9 dp_rank=3, logit: 2.500, cached blocks: 17, tree size: 120, total blocks: 4000",
                sel(9, Some(3), Some(17), WorkerDpRank),
            ),
            (
                "Selected pinned worker: worker_type=decode, worker_id=44 dp_rank=1, logit: 0.100, effective cached blocks: 6.60",
                Line::Selected(Selection {
                    worker: 44,
                    dp_rank: Some(1),
                    worker_type: Some(WorkerType::Decode),
                    hit_blocks: Some(7),
                    blocks: None,
                    host_blocks: None,
                    disk_blocks: None,
                    wording: Pinned,
                }),
            ),
            (
                "[ROUTING] Best: worker_3 dp_rank=0 with 17/18 blocks overlap request_id=r worker_id=3",
                Line::Selected(Selection {
                    worker: 3,
                    dp_rank: Some(0),
                    worker_type: None,
                    hit_blocks: Some(17),
                    blocks: Some(18),
                    host_blocks: None,
                    disk_blocks: None,
                    wording: RoutingBest,
                }),
            ),
            (
                "Formula for 7: 0.250 = 2.0 * 0.500 - 0.400 - 0.350",
                Line::Formula { worker: 7, dp_rank: None, cached: None },
            ),
            (
                "Formula for 7: 1.500 = 1.0 * 1.000 + 0.500  (cached_blocks: 12)",
                Line::Formula { worker: 7, dp_rank: None, cached: Some(12) },
            ),
            (
                "Formula for 8 with 3 cached blocks: 4.000 = 1.0 * prefill_blocks + decode_blocks = 1.0 * 2.000 + 2.000",
                Line::Formula { worker: 8, dp_rank: None, cached: Some(3) },
            ),
            (
                "Formula for worker_id=8 dp_rank=1 with 3 cached blocks: 4.000 = 1.0 * prefill_blocks + decode_blocks",
                Line::Formula { worker: 8, dp_rank: Some(1), cached: Some(3) },
            ),
            (
                "Decode formula for worker_id=8 dp_rank=0 with 2.50 effective cached blocks: 1.000 = max(0, …)",
                Line::Formula { worker: 8, dp_rank: Some(0), cached: Some(3) },
            ),
        ];
        for (message, expected) in cases {
            let record = format!("2026-01-01T00:00:00.000000Z  INFO dynamo_llm::kv_router::scheduler: {message}");
            assert_eq!(&line_of(&record), expected, "{message}");
        }
    }

    #[test]
    fn field_form_selection_of_1_6() {
        let record = r#"2026-08-20T10:00:00.000001Z  INFO dynamo_kv_router::scheduling::selector: Selected worker router_mode="kv" request_id=r1 worker_id=7587888160958627596 worker_type=prefill dp_rank=1 logit=3.5 effective_cached_blocks=12.0 host_pinned_blocks=4 disk_blocks=2 total_kv_blocks=Some(2859)"#;
        assert_eq!(
            line_of(record),
            Line::Selected(Selection {
                worker: 7_587_888_160_958_627_596,
                dp_rank: Some(1),
                worker_type: Some(WorkerType::Prefill),
                hit_blocks: Some(12),
                blocks: None,
                host_blocks: Some(4),
                disk_blocks: Some(2),
                wording: Wording::Fields,
            })
        );
        let decode = r#"2026-08-20T10:00:00.000001Z  INFO x::selector: Selected worker router_mode="kv" request_id=r1 worker_id=5 worker_type=decode dp_rank=0 logit=1.0 host_pinned_blocks=0 disk_blocks=0"#;
        let Line::Selected(s) = line_of(decode) else { panic!() };
        assert_eq!((s.hit_blocks, s.host_blocks, s.disk_blocks), (None, Some(0), Some(0)));
        let rr =
            "2026-08-20T10:00:00.000001Z  INFO x::push_router: Selected worker router_mode=round_robin worker_id=5";
        assert_eq!(line_of(rr), Line::SelectedWithoutLookup);
        let cut = "2026-08-20T10:00:00.000001Z  INFO x::selector: Selected worker: worker_id=";
        assert!(matches!(line_of(cut), Line::Malformed(_)));
    }

    #[test]
    fn lifecycle_and_span_lines() {
        let t = "2026-01-01T00:00:00.000000Z  INFO";
        let cases: &[(String, Line<'_>)] = &[
            (
                format!("{t} http-request: dynamo_llm::http::service::metrics: request received request_id=a"),
                Line::FrontendReceived,
            ),
            (
                format!("{t} http-request: dynamo_llm::http::service::metrics: request completed request_id=a"),
                Line::FrontendCompleted,
            ),
            (
                format!("{t} http-request: dynamo_llm::http::service::disconnect: request cancelled request_id=a"),
                Line::FrontendCancelled,
            ),
            (
                format!(
                    "{t} handle_payload: dynamo_runtime::pipeline::network::ingress::push_handler: request received request_id=a component=prefill"
                ),
                Line::WorkerReceived,
            ),
            (
                format!(
                    "{t} handle_payload: dynamo_runtime::pipeline::network::ingress::push_handler: request completed request_id=a"
                ),
                Line::WorkerCompleted,
            ),
            (
                format!(
                    "{t} http-request: dynamo_llm::http::service::service_v2: http response sent status=200 latency_ms=5"
                ),
                Line::HttpResponse,
            ),
            (
                format!("{t} http-request: dynamo_runtime::logging: close time.busy=1.09ms time.idle=2s"),
                Line::Span {
                    event: SpanEvent::Closed { duration_ns: Some(2_001_090_000) },
                    name: SpanName::HttpRequest,
                },
            ),
            (
                format!("{t} router.route_request: request_span: route request failed request.outcome=\"cancelled\""),
                Line::RouteOutcome(RouteOutcome::FailedCancelled),
            ),
            (
                format!(
                    "{t} router.route_request: request_span: route request failed request.outcome=\"rejected\" error.type=\"overload\""
                ),
                Line::RouteOutcome(RouteOutcome::Failed),
            ),
            (
                format!("{t} prefill_worker.prefill_queue_handler: Dequeued prefill request: 2a3f7b10-5626"),
                Line::LegacyDequeued { id: "2a3f7b10-5626" },
            ),
            (
                format!("{t} worker.generate: Prefilling remotely for request abc with length 1024"),
                Line::LegacyRemotePrefill { id: "abc", tokens: Some(1024) },
            ),
            (format!("{t} main.init: VllmWorker for Qwen/Qwen3-0.6B has been initialized"), Line::Other),
            (format!("{t} x::y: request receivedX"), Line::Other),
        ];
        for (record, expected) in cases {
            assert_eq!(&line_of(record), expected, "{record}");
        }
    }

    #[test]
    fn json_span_events() {
        let closed = JsonRecord::parse(
            r#"{"message":"SPAN_CLOSED","span_name":"handle_payload","time.busy_us":1090,"time.duration_us":2121090,"time.idle_us":2120000}"#,
        )
        .unwrap();
        assert_eq!(
            classify("SPAN_CLOSED", "", None, &Fields::Json(&closed)),
            Line::Span { event: SpanEvent::Closed { duration_ns: Some(2_121_090_000) }, name: SpanName::HandlePayload }
        );
        let older =
            JsonRecord::parse(r#"{"method":"POST","uri":"/v1/chat/completions","time.busy_us":5,"time.idle_us":7}"#)
                .unwrap();
        assert_eq!(
            classify("SPAN_CLOSED", "", None, &Fields::Json(&older)),
            Line::Span { event: SpanEvent::Closed { duration_ns: Some(12_000) }, name: SpanName::HttpRequest }
        );
        let created = JsonRecord::parse(r#"{"span_name":"http-request"}"#).unwrap();
        for message in ["SPAN_CREATED", "SPAN_FIRST_ENTRY"] {
            assert_eq!(
                classify(message, "", None, &Fields::Json(&created)),
                Line::Span { event: SpanEvent::Opened, name: SpanName::HttpRequest }
            );
        }
    }
}
