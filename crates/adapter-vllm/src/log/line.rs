//! One vLLM log message as a typed line: pure functions over borrowed text, table-tested per template generation.
//!
//! Literal format strings, by the first release that wrote them (reference: `vllm.md` §2-3):
//!
//! ```text
//! V0 stats     ≤0.4.2   "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs,
//!                        Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%"
//!              0.4.3    the same with a final "."
//! V0 prefix    0.5.5    "Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%"
//! V0 spec      0.4.1    "Speculative metrics: Draft acceptance rate: {:.3f}, System efficiency: {:.3f}, Number of speculative
//!                        tokens: {}, Number of accepted tokens: {}, Number of draft tokens: {}, Number of emitted tokens: {}."
//!                        (0.4.1-0.5.0: "Number of draft tokens tokens:", "Number of emitted tokens tokens:")
//! V1 stats     0.7.0    "Running: %d reqs, Waiting: %d reqs "
//!              0.7.3    "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs,
//!                        Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
//!              0.8.5    "Engine %03d: " + the 0.7.3 text
//!              0.11.1   "Engine %03d: " | "%d Engines Aggregated: " + parts joined by ", ": Avg prompt throughput,
//!                        Avg generation throughput, Running, Waiting, [Deferred: %d reqs (0.20)], [KV fetch: %d waiting to
//!                        start, %d in progress, %d completed waiting (0.32)], [Preemptions: %d], "%s KV cache usage: %.1f%%"
//!                        ("GPU" until 0.29), [Prefix cache hit rate (always until 0.30)], [Corrupted: %d reqs],
//!                        [External prefix cache hit rate: %.1f%%], [MM cache hit rate: %.1f%%]
//! V1 spec      0.8.5    "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d
//!                        tokens, Drafted: %d tokens, Per-position acceptance rate: %s"
//!              0.10.2   "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted
//!                        throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance
//!                        rate: %s, Avg Draft acceptance rate: %.1f%%"
//! requests     0.2.7    "Received request %s: prompt: %r, sampling params: %s, prompt token ids: %s."
//!              0.3.0    "Received request %s: prompt: %r, prefix_pos: %s,sampling params: %s, prompt token ids: %s, lora_request: %s."
//!              0.3.3    "Received request %s: prompt: %r, prefix_pos: %s,sampling_params: %s, prompt_token_ids: %s, lora_request: %s."
//!              0.4.0    "Received request %s: prompt: %r, sampling_params: %s, prompt_token_ids: %s, lora_request: %s."
//!              0.4.3    "Received request %s: prompt: %r, params: %s, prompt_token_ids: %s, lora_request: %s."
//!              0.5.3    "... lora_request: %s, prompt_adapter_request: %s."
//!              0.9.0    "... prompt_token_ids: %s, prompt_embeds shape: %s, lora_request: %s, prompt_adapter_request: %s."
//!              0.10.0   "... prompt_token_ids: %s, prompt_embeds shape: %s, lora_request: %s."
//!              0.11.1   INFO "Received request %s: params: %s, lora_request: %s."
//!                       DEBUG "Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s."
//!              always   "Added request %s."  "Finished request %s."  "Aborted request %s."
//!              0.8.5    "Request %s aborted."
//!              0.10.2   "Aborted request(s) %s."  (ids joined by ",")
//! ```
//!
//! The Received fields are parsed left to right as `key: <Python repr>` pairs, so the grammar is the same for every
//! generation and a prompt containing `, params:` cannot derail it. Prompt text is parsed only to be skipped.

use std::sync::LazyLock;

use infertrace_adapter::fragments::{PyValue, int_list, py_value, skip_py_string};
use regex::Regex;

/// Periodic engine statistics, already converted: percentages are fractions.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Stats<'a> {
    /// `Engine 000:` → `Some(0)`.
    pub(crate) engine: Option<u32>,
    /// `2 Engines Aggregated:` → `Some(2)`.
    pub(crate) aggregated: Option<u32>,
    pub(crate) prompt_tps: Option<f64>,
    pub(crate) generation_tps: Option<f64>,
    pub(crate) running: Option<f64>,
    pub(crate) waiting: Option<f64>,
    pub(crate) swapped: Option<f64>,
    pub(crate) deferred: Option<f64>,
    pub(crate) kv_fetch: Option<(f64, f64, f64)>,
    pub(crate) preemptions: Option<f64>,
    pub(crate) kv_usage: Option<f64>,
    pub(crate) cpu_kv_usage: Option<f64>,
    pub(crate) prefix_hit: Option<f64>,
    pub(crate) cpu_prefix_hit: Option<f64>,
    pub(crate) corrupted: Option<f64>,
    pub(crate) external_hit: Option<f64>,
    pub(crate) mm_hit: Option<f64>,
    pub(crate) spec_accept_rate: Option<f64>,
    pub(crate) spec_accept_length: Option<f64>,
    pub(crate) spec_accepted: Option<f64>,
    pub(crate) spec_drafted: Option<f64>,
    pub(crate) spec_accepted_tps: Option<f64>,
    pub(crate) spec_drafted_tps: Option<f64>,
    /// Names of the fields on the line this table does not know, in the order written.
    pub(crate) unknown: Vec<&'a str>,
}

/// What a `Received request` (or `Request … details`) line says, prompt text excluded.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Received {
    /// `max_tokens` of the SamplingParams, when logged and not `None`.
    pub(crate) max_tokens: Option<u32>,
    /// The prompt token ids, when logged as a list.
    pub(crate) prompt_token_ids: Option<Vec<u64>>,
    /// Names of the fields this parser does not know (a newer release's), in the order written.
    pub(crate) unknown: Vec<String>,
}

/// Every field a `Received request` or `Request … details` line of any release writes.
const RECEIVED_FIELDS: &[&str] = &[
    "prompt",
    "prefix_pos",
    "sampling params",
    "sampling_params",
    "params",
    "prompt token ids",
    "prompt_token_ids",
    "prompt_embeds shape",
    "lora_request",
    "prompt_adapter_request",
];

/// One message, typed.
// A `Line` lives on the stack for one message and is never stored, so the size of `Stats` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
///
/// `F` is what the fields of a `Received` or `Details` line became: [`Received`] as parsed, or the adapter's own
/// form of them (see [`parse_message_with`]).
pub(crate) enum Line<'a, F = Received> {
    Stats(Stats<'a>),
    Received {
        id: &'a str,
        fields: F,
    },
    Details {
        id: &'a str,
        fields: F,
    },
    Added {
        id: &'a str,
    },
    Finished {
        id: &'a str,
    },
    Aborted {
        ids: Vec<&'a str>,
    },
    /// A record this adapter has no use for (startup, warnings, tracebacks logged as records, …).
    Other,
    /// A record this adapter should understand but cannot: cut short, or of an unknown shape.
    Malformed {
        what: &'static str,
    },
}

static LIFECYCLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:
            Added\ request\ (?P<added>\S+?)
          | Finished\ request\ (?P<finished>\S+?)
          | Aborted\ request\ (?P<aborted>\S+?)
          | Aborted\ request\(s\)\ (?P<aborted_many>\S+?)
          | Request\ (?P<aborted_v1>\S+)\ aborted
        )\.\s*$",
    )
    .expect("valid regex")
});

/// Classifies one message, its fields parsed as they are written (the tests' view; the adapter hashes prompts as it
/// parses, through [`parse_message_with`]).
#[cfg(test)]
pub(crate) fn parse_message(message: &str) -> Line<'_> {
    parse_message_with(message, |rest| parse_received(rest, &mut Vec::new()))
}

/// Whether `message` may be a `Received request` or `Request … details` line, the only ones whose fields
/// [`parse_message_with`] hands to its `fields` function.
pub(crate) fn may_carry_fields(message: &str) -> bool {
    message.starts_with("Received request ") || message.starts_with("Request ")
}

/// [`parse_message`] with the fields of `Received` and `Details` lines (the text after `<id>: ` or `details: `) made
/// by `fields`, which is called at most once, and only for such lines.
pub(crate) fn parse_message_with<F>(
    message: &str,
    fields: impl FnOnce(&str) -> Result<F, &'static str>,
) -> Line<'_, F> {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("Received request ") {
        return match rest.split_once(": ") {
            Some((id, text)) => match fields(text) {
                Ok(fields) => Line::Received { id, fields },
                Err(what) => Line::Malformed { what },
            },
            None => Line::Malformed { what: "a Received request line without fields" },
        };
    }
    if let Some(rest) = message.strip_prefix("Request ")
        && let Some((id, fields_text)) = rest.split_once(" details: ")
    {
        return match fields(fields_text) {
            Ok(fields) => Line::Details { id, fields },
            Err(what) => Line::Malformed { what },
        };
    }
    if let Some(c) = LIFECYCLE.captures(message) {
        let get = |name| c.name(name).map(|m| m.as_str());
        return if let Some(id) = get("added") {
            Line::Added { id }
        } else if let Some(id) = get("finished") {
            Line::Finished { id }
        } else if let Some(id) = get("aborted").or(get("aborted_v1")) {
            Line::Aborted { ids: vec![id] }
        } else {
            Line::Aborted {
                ids: get("aborted_many").unwrap_or_default().split(',').filter(|s| !s.is_empty()).collect(),
            }
        };
    }
    match parse_stats(message) {
        StatsParse::Stats(stats) => return Line::Stats(stats),
        StatsParse::Malformed(what) => return Line::Malformed { what },
        StatsParse::NotStats => {}
    }
    Line::Other
}

/// What a statistics field's value is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// `%d reqs`.
    Reqs,
    /// `%.1f tokens/s`.
    Tps,
    /// `%d tokens`.
    Tokens,
    /// `%.1f%%`, kept as a fraction.
    Percent,
    /// A bare number (`Preemptions: %d`, `Mean acceptance length: %.2f`).
    Bare,
    /// A rate written as a percentage (V1) or a fraction (V0 `{:.3f}`): kept as a fraction either way.
    Rate,
}

/// Where a known statistics field goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    PromptTps,
    GenerationTps,
    Running,
    Waiting,
    Swapped,
    Deferred,
    Preemptions,
    Corrupted,
    PrefixHit,
    ExternalHit,
    MmHit,
    SpecRate,
    SpecLength,
    SpecAccepted,
    SpecDrafted,
    SpecAcceptedTps,
    SpecDraftedTps,
    /// Known and deliberately not kept (`System efficiency`, the per-position rates, emitted tokens).
    Ignored,
}

/// Every statistics field any release writes (see the format strings above), by name. `<device> KV cache usage`,
/// `KV fetch` and V0's `Prefix cache hit rate: GPU: …, CPU: …` are read apart, in [`known_field`].
const STATS_FIELDS: &[(&str, Slot, Unit)] = &[
    ("Avg prompt throughput", Slot::PromptTps, Unit::Tps),
    ("Avg generation throughput", Slot::GenerationTps, Unit::Tps),
    ("Running", Slot::Running, Unit::Reqs),
    ("Waiting", Slot::Waiting, Unit::Reqs),
    ("Pending", Slot::Waiting, Unit::Reqs),
    ("Swapped", Slot::Swapped, Unit::Reqs),
    ("Deferred", Slot::Deferred, Unit::Reqs),
    ("Preemptions", Slot::Preemptions, Unit::Bare),
    ("Corrupted", Slot::Corrupted, Unit::Reqs),
    ("Prefix cache hit rate", Slot::PrefixHit, Unit::Percent),
    ("External prefix cache hit rate", Slot::ExternalHit, Unit::Percent),
    ("MM cache hit rate", Slot::MmHit, Unit::Percent),
    ("Draft acceptance rate", Slot::SpecRate, Unit::Rate),
    ("Avg Draft acceptance rate", Slot::SpecRate, Unit::Rate),
    ("Mean acceptance length", Slot::SpecLength, Unit::Bare),
    ("Accepted throughput", Slot::SpecAcceptedTps, Unit::Tps),
    ("Drafted throughput", Slot::SpecDraftedTps, Unit::Tps),
    ("Accepted", Slot::SpecAccepted, Unit::Tokens),
    ("Drafted", Slot::SpecDrafted, Unit::Tokens),
    ("Number of accepted tokens", Slot::SpecAccepted, Unit::Bare),
    ("Number of draft tokens", Slot::SpecDrafted, Unit::Bare),
    ("Number of draft tokens tokens", Slot::SpecDrafted, Unit::Bare),
    ("Per-position acceptance rate", Slot::Ignored, Unit::Bare),
    ("System efficiency", Slot::Ignored, Unit::Bare),
    ("Number of speculative tokens", Slot::Ignored, Unit::Bare),
    ("Number of emitted tokens", Slot::Ignored, Unit::Bare),
    ("Number of emitted tokens tokens", Slot::Ignored, Unit::Bare),
];

/// Fields whose presence, read, makes a run of `Key: value` fields a statistics line even without a lead-in
/// (`Engine 000:`, `SpecDecoding metrics:`): 0.7.0's `Running: %d reqs, Waiting: %d reqs`.
const ANCHORS: &[Slot] = &[Slot::PromptTps, Slot::GenerationTps, Slot::Running, Slot::Waiting];

/// `text` as a number written in `unit`, or `None` when it is not one (a value cut short, another unit).
fn read_value(text: &str, unit: Unit) -> Option<f64> {
    let text = text.trim().trim_end_matches('.');
    let number = |t: &str| -> Option<f64> {
        let t = t.trim_end();
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.')).then(|| t.parse().ok()).flatten()
    };
    match unit {
        Unit::Reqs => number(text.strip_suffix(" reqs")?),
        Unit::Tps => number(text.strip_suffix(" tokens/s")?),
        Unit::Tokens => number(text.strip_suffix(" tokens")?),
        Unit::Percent => number(text.strip_suffix('%')?).map(|p| p / 100.0),
        Unit::Bare => number(text),
        Unit::Rate => match text.strip_suffix('%') {
            Some(p) => number(p).map(|p| p / 100.0),
            None => number(text),
        },
    }
}

/// One `Key: value` field of a statistics line, its value running on over the segments that continue it (`KV fetch:
/// 1 waiting to start, 2 in progress, …`, the per-position rates).
struct Field<'a> {
    key: &'a str,
    value: &'a str,
}

/// The `Key: value` fields of `text`, split at `, ` where what follows starts with a field name and `:`; other
/// segments continue the value before them. `None` when `text` does not start with a field.
fn stats_fields(text: &str) -> Option<Vec<Field<'_>>> {
    // Each field's name, where its value starts and where its segment starts.
    let mut starts: Vec<(&str, usize, usize)> = Vec::new();
    let mut at = 0;
    loop {
        let end = memchr::memmem::find(&text.as_bytes()[at..], b", ").map_or(text.len(), |i| at + i);
        let segment = &text[at..end];
        if let Some((name, _)) = segment.split_once(':')
            && let Some(key) = infertrace_adapter::drift::field_name(name)
        {
            starts.push((key, at + name.len() + 1, at));
        } else if starts.is_empty() {
            return None;
        }
        if end == text.len() {
            break;
        }
        at = end + 2;
    }
    // A value ends where the next field's segment starts, before its `, `.
    let ends = starts.iter().skip(1).map(|&(_, _, segment)| segment - 2).chain([text.len()]);
    Some(starts.iter().zip(ends).map(|(&(key, from, _), to)| Field { key, value: &text[from..to] }).collect())
}

/// What [`parse_stats`] made of a message.
// Returned once per message and never stored, as `Line` is.
#[allow(clippy::large_enum_variant)]
enum StatsParse<'a> {
    Stats(Stats<'a>),
    /// A statistics line (it has a lead-in or `Avg prompt throughput`) whose known fields cannot all be read.
    Malformed(&'static str),
    NotStats,
}

/// Reads a statistics line of any generation by its fields' names, wherever they stand and in any order: a field
/// this table does not know is skipped and named in `unknown`, so a release that adds one loses nothing it had.
fn parse_stats(message: &str) -> StatsParse<'_> {
    let mut stats = Stats::default();
    let mut rest = message.trim_end();
    let mut lead_in = false;
    if let Some(after) = rest.strip_prefix("Engine ")
        && let Some((digits, after)) = after.split_once(": ")
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        stats.engine = digits.parse().ok();
        rest = after;
        lead_in = true;
    } else if let Some((digits, after)) = rest.split_once(" Engines Aggregated: ")
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        stats.aggregated = digits.parse().ok();
        rest = after;
        lead_in = true;
    }
    for head in ["SpecDecoding metrics: ", "Speculative metrics: "] {
        if let Some(after) = rest.strip_prefix(head) {
            rest = after;
            lead_in = true;
        }
    }
    lead_in |= rest.starts_with("Avg prompt throughput:") || rest.starts_with("Prefix cache hit rate: GPU:");
    let Some(fields) = stats_fields(rest) else {
        return if lead_in { StatsParse::Malformed(UNKNOWN_SHAPE) } else { StatsParse::NotStats };
    };
    let (mut known, mut unreadable, mut anchored) = (0, 0, false);
    // KV cache usage by device word: one pool (`GPU`, `XPU`, a CPU backend's `CPU`) is the main one; V0 writes
    // `CPU KV cache usage` beside `GPU KV cache usage` for its swap space.
    let mut devices: Vec<(&str, f64)> = Vec::new();
    let mut v0_prefix = false;
    for field in &fields {
        let (key, value) = (field.key, field.value);
        let read = if let Some(device) = key.strip_suffix(" KV cache usage") {
            read_value(value, Unit::Percent).map(|v| devices.push((device, v)))
        } else if key == "KV fetch" {
            read_kv_fetch(value).map(|t| stats.kv_fetch = Some(t))
        } else if key == "Prefix cache hit rate" && value.trim_start().starts_with("GPU:") {
            (v0_prefix, anchored) = (true, true);
            read_value(value.trim_start().trim_start_matches("GPU:"), Unit::Percent).map(|v| stats.prefix_hit = Some(v))
        } else if key == "CPU" && v0_prefix {
            read_value(value, Unit::Percent).map(|v| stats.cpu_prefix_hit = Some(v))
        } else if let Some(&(_, slot, unit)) = STATS_FIELDS.iter().find(|(name, _, _)| *name == key) {
            anchored |= ANCHORS.contains(&slot);
            if slot == Slot::Ignored { Some(()) } else { read_value(value, unit).map(|v| stats.set(slot, v)) }
        } else {
            stats.unknown.push(key);
            continue;
        };
        match read {
            Some(()) => known += 1,
            None => unreadable += 1,
        }
    }
    match devices.as_slice() {
        [] => {}
        [(_, usage)] => stats.kv_usage = Some(*usage),
        several => {
            for &(device, usage) in several {
                if device == "CPU" {
                    stats.cpu_kv_usage = Some(usage);
                } else {
                    stats.kv_usage = Some(usage);
                }
            }
        }
    }
    anchored |= !devices.is_empty();
    if lead_in || (anchored && unreadable > 0) {
        if unreadable > 0 || known == 0 {
            return StatsParse::Malformed(if known == 0 && unreadable == 0 { NO_KNOWN_FIELD } else { UNKNOWN_SHAPE });
        }
        return StatsParse::Stats(stats);
    }
    if anchored && known >= 2 { StatsParse::Stats(stats) } else { StatsParse::NotStats }
}

const UNKNOWN_SHAPE: &str = "a statistics line of an unknown or truncated shape";
const NO_KNOWN_FIELD: &str = "a statistics line with no field this version knows";

/// `%d waiting to start, %d in progress, %d completed waiting` (0.32+).
fn read_kv_fetch(value: &str) -> Option<(f64, f64, f64)> {
    let mut parts = value.split(", ");
    let mut next = |suffix: &str| -> Option<f64> { parts.next()?.trim().strip_suffix(suffix)?.parse().ok() };
    let t = (next(" waiting to start")?, next(" in progress")?, next(" completed waiting")?);
    parts.next().is_none().then_some(t)
}

impl Stats<'_> {
    fn set(&mut self, slot: Slot, value: f64) {
        let target = match slot {
            Slot::PromptTps => &mut self.prompt_tps,
            Slot::GenerationTps => &mut self.generation_tps,
            Slot::Running => &mut self.running,
            Slot::Waiting => &mut self.waiting,
            Slot::Swapped => &mut self.swapped,
            Slot::Deferred => &mut self.deferred,
            Slot::Preemptions => &mut self.preemptions,
            Slot::Corrupted => &mut self.corrupted,
            Slot::PrefixHit => &mut self.prefix_hit,
            Slot::ExternalHit => &mut self.external_hit,
            Slot::MmHit => &mut self.mm_hit,
            Slot::SpecRate => &mut self.spec_accept_rate,
            Slot::SpecLength => &mut self.spec_accept_length,
            Slot::SpecAccepted => &mut self.spec_accepted,
            Slot::SpecDrafted => &mut self.spec_drafted,
            Slot::SpecAcceptedTps => &mut self.spec_accepted_tps,
            Slot::SpecDraftedTps => &mut self.spec_drafted_tps,
            Slot::Ignored => return,
        };
        *target = Some(value);
    }
}

/// Parses the `key: value` fields after `Received request <id>: ` (or `Request <id> details: `). The prompt's token
/// ids are read into `spare`'s buffer, taken from it (the caller hands a spent one back, see `parse_fields`).
pub(crate) fn parse_received(mut rest: &str, spare: &mut Vec<u64>) -> Result<Received, &'static str> {
    let mut fields = Received::default();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest == "." {
            return Ok(fields);
        }
        let Some((key, after)) = rest.split_once(": ") else { return Err("a Received request field without a value") };
        if key.contains(['(', '[', '\'', '"']) {
            return Err("a Received request field name that is not a name");
        }
        // The two long values take fast paths: the prompt is skipped unread, the ids parsed straight into a vector.
        // Anything unusual falls through to the general repr parser, which also explains what is wrong.
        let fast = match key {
            "prompt" => skip_py_string(after),
            "prompt token ids" | "prompt_token_ids" => {
                // Room for the ids the rest of the line can hold at the usual `12345, ` (a prompt of tens of
                // thousands of ids would otherwise be copied at every doubling of the vector).
                let mut ids = std::mem::take(spare);
                ids.clear();
                ids.reserve(after.len() / 6);
                let rest = int_list(after, &mut ids);
                if rest.is_some() {
                    fields.prompt_token_ids = Some(ids);
                } else {
                    *spare = ids;
                }
                rest
            }
            _ => None,
        };
        let after = match fast {
            Some(after) => after,
            None => general_field(key, after, &mut fields)?,
        };
        rest = match after.strip_prefix(',') {
            Some(next) => next,
            None if after.trim() == "." || after.trim().is_empty() => return Ok(fields),
            None => return Err("a Received request line with unexpected text between fields"),
        };
    }
}

/// Reads the Python repr of field `key` at the start of `text` into `fields`, returning what follows it.
fn general_field<'a>(key: &str, text: &'a str, fields: &mut Received) -> Result<&'a str, &'static str> {
    let (mut after, value) =
        py_value(text).map_err(|_| "a Received request value that is cut short or not a Python repr")?;
    match key {
        "sampling params" | "sampling_params" | "params" => {
            fields.max_tokens = value.get("max_tokens").and_then(PyValue::as_i64).and_then(|n| u32::try_from(n).ok());
            // 0.6.3's SamplingParams repr closes before `, guided_decoding=…`: skip such trailing keywords.
            while let Some(next) = trailing_keyword(after) {
                after = next;
            }
        }
        "prompt token ids" | "prompt_token_ids" => {
            if let PyValue::List(items) = &value {
                let ids: Option<Vec<u64>> =
                    items.iter().map(|v| v.as_i64().and_then(|n| u64::try_from(n).ok())).collect();
                fields.prompt_token_ids = Some(ids.ok_or("prompt token ids that are not integers")?);
            }
        }
        known if RECEIVED_FIELDS.contains(&known) => {}
        unknown => {
            if let Some(name) = infertrace_adapter::drift::field_name(unknown) {
                fields.unknown.push(name.to_owned());
            }
        }
    }
    Ok(after)
}

/// `, name=<repr>` at the start of `text`, returning what follows it.
fn trailing_keyword(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(", ")?;
    let (name, value) = rest.split_once('=')?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    py_value(value).ok().map(|(after, _)| after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(message: &str) -> (&str, Received) {
        match parse_message(message) {
            Line::Received { id, fields } => (id, fields),
            other => panic!("{other:?} for {message}"),
        }
    }

    const SP_04: &str = "SamplingParams(n=1, best_of=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, top_p=1.0, top_k=-1, min_p=0.0, seed=None, use_beam_search=False, length_penalty=1.0, early_stopping=False, stop=[], stop_token_ids=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens=256, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True)";

    #[test]
    fn prompt_ids_are_read_into_the_spare_buffer_emptied_first() {
        let line = format!("prompt: 'a', params: {SP_04}, prompt_token_ids: [1, 2, 3], lora_request: None.");
        let mut spare = Vec::with_capacity(64);
        spare.extend([7, 8, 9, 10]);
        let received = parse_received(&line, &mut spare).unwrap();
        assert_eq!(received.prompt_token_ids, Some(vec![1, 2, 3]), "not appended to the ids left in the buffer");
        assert_eq!(received.prompt_token_ids.unwrap().capacity(), 64, "the spare buffer, not a new one");
        assert_eq!(spare.capacity(), 0, "taken from the caller");
        // Ids the fast path declines are read by the general parser into a vector of their own, and the spare
        // buffer is left to the caller.
        let line = format!("prompt: 'a', params: {SP_04}, prompt_token_ids: [1, 2, 3.5], lora_request: None.");
        let mut spare = Vec::with_capacity(64);
        assert_eq!(parse_received(&line, &mut spare), Err("prompt token ids that are not integers"));
        assert_eq!(spare.capacity(), 64);
        // That buffer serves the next line.
        let line = format!("prompt: 'a', params: {SP_04}, prompt_token_ids: [1,  2], lora_request: None.");
        let ids = parse_received(&line, &mut spare).unwrap().prompt_token_ids.unwrap();
        assert_eq!((ids.as_slice(), ids.capacity(), spare.capacity()), (&[1, 2][..], 64, 0));
    }

    #[test]
    fn received_request_in_every_generation() {
        // One line per template generation, written from the format strings; the prompt tries to derail the parser.
        let prompt = r#"'say ", params: x", then \'quote\''"#;
        let cases = [
            format!("Received request a: prompt: {prompt}, sampling params: {SP_04}, prompt token ids: [1, 2, 3]."),
            format!(
                "Received request a: prompt: {prompt}, prefix_pos: None,sampling params: {SP_04}, prompt token ids: [1, 2, 3], lora_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, prefix_pos: None,sampling_params: {SP_04}, prompt_token_ids: [1, 2, 3], lora_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, sampling_params: {SP_04}, prompt_token_ids: [1, 2, 3], lora_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, params: {SP_04}, prompt_token_ids: [1, 2, 3], lora_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, params: {SP_04}, prompt_token_ids: [1, 2, 3], lora_request: None, prompt_adapter_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, params: {SP_04}, prompt_token_ids: [1, 2, 3], prompt_embeds shape: None, lora_request: None, prompt_adapter_request: None."
            ),
            format!(
                "Received request a: prompt: {prompt}, params: {SP_04}, prompt_token_ids: [1, 2, 3], prompt_embeds shape: None, lora_request: None."
            ),
            // 0.6.3: the repr closes before guided_decoding.
            format!(
                "Received request a: prompt: {prompt}, params: {}, guided_decoding=GuidedDecodingParams(json=None, regex=None, choice=None, grammar=None, json_object=None, backend=None, whitespace_pattern=None), prompt_token_ids: [1, 2, 3], lora_request: None, prompt_adapter_request: None.",
                SP_04
            ),
        ];
        for line in &cases {
            let (id, fields) = received(line);
            assert_eq!(id, "a");
            assert_eq!(
                fields,
                Received { max_tokens: Some(256), prompt_token_ids: Some(vec![1, 2, 3]), unknown: Vec::new() },
                "{line}"
            );
        }
        // 0.11.1+: no prompt on the INFO line; the ids come on a DEBUG line.
        let (id, fields) = received(
            "Received request chatcmpl-a269fdcb7c6ce890: params: SamplingParams(n=1, max_tokens=None), lora_request: None.",
        );
        assert_eq!(
            (id, fields),
            ("chatcmpl-a269fdcb7c6ce890", Received { max_tokens: None, prompt_token_ids: None, unknown: Vec::new() })
        );
        assert_eq!(
            parse_message(
                "Request chatcmpl-x details: prompt: 'hi', prompt_token_ids: [7, 8], prompt_embeds shape: None."
            ),
            Line::Details {
                id: "chatcmpl-x",
                fields: Received { max_tokens: None, prompt_token_ids: Some(vec![7, 8]), unknown: Vec::new() }
            }
        );
        // 0.7-0.11.0 chat requests log no ids.
        let (_, fields) = received(&format!(
            "Received request chatcmpl-1: prompt: 'x', params: {SP_04}, prompt_token_ids: None, lora_request: None, prompt_adapter_request: None."
        ));
        assert_eq!(fields.prompt_token_ids, None);
    }

    #[test]
    fn truncated_received_lines_are_malformed() {
        let cut = format!("Received request chat-1: prompt: 'x', params: {}", &SP_04[..60]);
        assert!(matches!(parse_message(&cut), Line::Malformed { .. }));
        assert!(matches!(parse_message("Received request chat-1: prompt: 'unterminated"), Line::Malformed { .. }));
    }

    #[test]
    fn lifecycle_lines() {
        assert_eq!(
            parse_message("Added request chatcmpl-17b89d9812784abb94a100224e1208af."),
            Line::Added { id: "chatcmpl-17b89d9812784abb94a100224e1208af" }
        );
        assert_eq!(parse_message("Finished request cmpl-e3ab-0."), Line::Finished { id: "cmpl-e3ab-0" });
        assert_eq!(
            parse_message("Aborted request 0e89f1d2d94c4a039f868222c100cc8a."),
            Line::Aborted { ids: vec!["0e89f1d2d94c4a039f868222c100cc8a"] }
        );
        assert_eq!(parse_message("Aborted request(s) a,b,c."), Line::Aborted { ids: vec!["a", "b", "c"] });
        assert_eq!(parse_message("Request chatcmpl-9 aborted."), Line::Aborted { ids: vec!["chatcmpl-9"] });
        assert_eq!(parse_message("Preempted request cmpl-e5-0 has been resumed!"), Line::Other);
    }

    #[test]
    fn stats_in_every_generation() {
        let v0 = "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 2136.3 tokens/s, Running: 247 reqs, Swapped: 0 reqs, Pending: 740 reqs, GPU KV cache usage: 99.7%, CPU KV cache usage: 0.0%";
        let expected_v0 = Stats {
            prompt_tps: Some(0.0),
            generation_tps: Some(2136.3),
            running: Some(247.0),
            swapped: Some(0.0),
            waiting: Some(740.0),
            kv_usage: Some(0.997),
            cpu_kv_usage: Some(0.0),
            ..Stats::default()
        };
        assert_eq!(parse_message(v0), Line::Stats(expected_v0.clone()));
        assert_eq!(parse_message(&format!("{v0}.")), Line::Stats(expected_v0), "0.4.3+ trailing period");

        assert_eq!(
            parse_message("Prefix cache hit rate: GPU: 0.00%, CPU: 90.00%"),
            Line::Stats(Stats { prefix_hit: Some(0.0), cpu_prefix_hit: Some(0.9), ..Stats::default() })
        );
        assert_eq!(
            parse_message("Running: 3 reqs, Waiting: 1 reqs "),
            Line::Stats(Stats { running: Some(3.0), waiting: Some(1.0), ..Stats::default() })
        );
        let v1 = "Avg prompt throughput: 10.8 tokens/s, Avg generation throughput: 34.3 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 85.7%";
        let expected_v1 = Stats {
            prompt_tps: Some(10.8),
            generation_tps: Some(34.3),
            running: Some(0.0),
            waiting: Some(0.0),
            kv_usage: Some(0.001),
            prefix_hit: Some(0.857),
            ..Stats::default()
        };
        assert_eq!(parse_message(v1), Line::Stats(expected_v1.clone()), "0.7.3-0.8.0");
        assert_eq!(
            parse_message(&format!("Engine 000: {v1}")),
            Line::Stats(Stats { engine: Some(0), ..expected_v1.clone() })
        );

        // 0.11.1+ with every optional part, and 0.30+ device word, and 0.31+ without the prefix cache.
        let full = "2 Engines Aggregated: Avg prompt throughput: 1.5 tokens/s, Avg generation throughput: 2.5 tokens/s, Running: 4 reqs, Waiting: 5 reqs, Deferred: 6 reqs, KV fetch: 1 waiting to start, 2 in progress, 3 completed waiting, Preemptions: 7, XPU KV cache usage: 12.5%, Prefix cache hit rate: 50.0%, Corrupted: 1 reqs, External prefix cache hit rate: 25.0%, MM cache hit rate: 75.0%";
        assert_eq!(
            parse_message(full),
            Line::Stats(Stats {
                aggregated: Some(2),
                prompt_tps: Some(1.5),
                generation_tps: Some(2.5),
                running: Some(4.0),
                waiting: Some(5.0),
                deferred: Some(6.0),
                kv_fetch: Some((1.0, 2.0, 3.0)),
                preemptions: Some(7.0),
                kv_usage: Some(0.125),
                prefix_hit: Some(0.5),
                corrupted: Some(1.0),
                external_hit: Some(0.25),
                mm_hit: Some(0.75),
                ..Stats::default()
            })
        );
        let no_prefix = "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 3.0%";
        assert_eq!(
            parse_message(no_prefix),
            Line::Stats(Stats {
                engine: Some(1),
                prompt_tps: Some(0.0),
                generation_tps: Some(0.0),
                running: Some(0.0),
                waiting: Some(0.0),
                kv_usage: Some(0.03),
                ..Stats::default()
            })
        );
    }

    #[test]
    fn speculative_decoding_in_every_generation() {
        let new = "SpecDecoding metrics: Mean acceptance length: 2.63, Accepted throughput: 76.80 tokens/s, Drafted throughput: 235.49 tokens/s, Accepted: 768 tokens, Drafted: 2355 tokens, Per-position acceptance rate: 0.700, 0.560, 0.372, Avg Draft acceptance rate: 32.6%";
        assert_eq!(
            parse_message(new),
            Line::Stats(Stats {
                spec_accept_length: Some(2.63),
                spec_accepted_tps: Some(76.8),
                spec_drafted_tps: Some(235.49),
                spec_accepted: Some(768.0),
                spec_drafted: Some(2355.0),
                spec_accept_rate: Some(0.326),
                ..Stats::default()
            })
        );
        let old = "SpecDecoding metrics: Draft acceptance rate: 60.0%, Mean acceptance length: 2.20, Accepted: 120 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.800, 0.400";
        assert_eq!(
            parse_message(old),
            Line::Stats(Stats {
                spec_accept_rate: Some(0.6),
                spec_accept_length: Some(2.2),
                spec_accepted: Some(120.0),
                spec_drafted: Some(200.0),
                ..Stats::default()
            })
        );
        let v0 = "Speculative metrics: Draft acceptance rate: 0.651, System efficiency: 0.570, Number of speculative tokens: 5, Number of accepted tokens: 651, Number of draft tokens tokens: 1000, Number of emitted tokens tokens: 700.";
        assert_eq!(
            parse_message(v0),
            Line::Stats(Stats {
                spec_accept_rate: Some(0.651),
                spec_accepted: Some(651.0),
                spec_drafted: Some(1000.0),
                ..Stats::default()
            })
        );
    }

    #[test]
    fn truncated_stats_are_malformed() {
        assert!(matches!(
            parse_message("Engine 000: Avg prompt throughput: 0.0 [TRUNCATED-IN-SOURCE]"),
            Line::Malformed { .. }
        ));
        assert_eq!(parse_message("Starting vLLM API server on http://0.0.0.0:8000"), Line::Other);
    }
}
