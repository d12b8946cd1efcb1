//! Prometheus text exposition (prometheus_client 0.0.4), as engines serve it on `/metrics` and users save it:
//! `# HELP`, `# TYPE`, then sample lines. Shared by the adapters of every engine that exposes Prometheus metrics;
//! the mapping of names onto canonical metrics belongs to each engine's adapter.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::ops::Range;
use std::sync::Arc;

use infertrace_schema::{ClockDomain, EngineSample};

use crate::parallel::map_lines;
use crate::time::parse_rfc3339;
use crate::{
    Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, SharedText, Sink, utf8_line,
};

/// One sample line: `name{label="value",…} value [timestamp_ms]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleLine<'a> {
    /// Series name, suffix included (`_total`, `_count`, `_sum`, `_bucket`, `_created`).
    pub name: &'a str,
    /// Labels in written order, values unescaped.
    pub labels: Vec<(&'a str, String)>,
    /// The value; `NaN` and `±Inf` as written.
    pub value: f64,
    /// The sample's own timestamp in milliseconds, when written.
    pub timestamp_ms: Option<i64>,
}

/// Parses `name{labels} value [timestamp]`, or `None` when the line is not a sample.
pub fn parse_sample(line: &str) -> Option<SampleLine<'_>> {
    let name_end = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        rest = body;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after) = rest.split_once('=')?;
            let after = after.strip_prefix('"')?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '"' => break i,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    c => value.push(c),
                }
            };
            labels.push((key.trim(), value));
            rest = &after[end + 1..];
        }
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = match fields.next()? {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        text => text.parse().ok()?,
    };
    let timestamp_ms = match fields.next() {
        Some(ts) => Some(ts.parse().ok()?),
        None => None,
    };
    if fields.next().is_some() {
        return None;
    }
    Some(SampleLine { name, labels, value, timestamp_ms })
}

/// The instant of a line that is only an RFC 3339 timestamp, possibly after `# ` — what scrape loops such as
/// `while sleep 10; do date -Is; curl -s …/metrics; done` write before each scrape.
pub fn time_line(line: &str) -> Option<i64> {
    let text = line.strip_prefix('#').unwrap_or(line).trim();
    (text.len() >= 20 && text.as_bytes()[10] == b'T').then(|| parse_rfc3339(text).ok()).flatten()
}

/// Whether a line of `head` is a sample, `# HELP` or `# TYPE` line of a series whose name starts with `prefix`: how
/// the metrics adapters of one program (`vllm:`, `DCGM_FI_`) recognise its scrapes.
pub fn names_series(head: &crate::Head<'_>, prefix: &str) -> bool {
    head.text().lines().any(|line| {
        let name = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")).unwrap_or(line);
        name.starts_with(prefix)
    })
}

impl SampleLine<'_> {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

/// Where one scraped series goes: a canonical metric, the rank of the name it came under (when a scrape holds a
/// metric under two names — a rename and its deprecated original — the lower rank wins), the instance, the factor
/// that turns the scraped unit into the canonical one, and whether the series of one scrape that map onto the same
/// metric and instance add up (per-CPU counters summed into one host's) or the first is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Canonical metric name.
    pub metric: &'static str,
    /// Lower wins within one scrape.
    pub rank: u8,
    /// Engine instance the series belongs to.
    pub instance: Option<String>,
    /// The canonical value is the scraped value times this (1 when the units agree).
    pub scale: f64,
    /// Series of equal rank, metric and instance in one scrape are summed rather than the first kept.
    pub sum: bool,
}

impl Target {
    /// A series kept as scraped: scale 1, the first of a scrape kept.
    pub fn new(metric: &'static str, rank: u8, instance: Option<String>) -> Self {
        Self { metric, rank, instance, scale: 1.0, sum: false }
    }

    /// The same, its values multiplied by `scale`.
    pub fn scaled(self, scale: f64) -> Self {
        Self { scale, ..self }
    }

    /// The same, summed over the series of a scrape that share its metric and instance.
    pub fn summed(self) -> Self {
        Self { sum: true, ..self }
    }
}

/// A kept sample: the rank of the name it came under, whether later series of that rank add to it, its value, its
/// own time and its line (the first series').
#[derive(Debug, Clone, Copy)]
struct Kept {
    rank: u8,
    sum: bool,
    value: f64,
    time: Option<i64>,
    line: u64,
}

/// The samples of one scrape, keyed by (metric, instance) so that renamed duplicates collapse.
#[derive(Default)]
struct Scrape {
    samples: BTreeMap<(&'static str, Option<String>), Kept>,
    families: BTreeSet<String>,
}

/// What one line is, read on any thread ([`prepare`]); names are byte ranges of the line.
#[derive(Debug)]
enum Prepared {
    /// Not UTF-8: the fold reports it.
    NotUtf8,
    /// Blank, a `# HELP` line, or a sample that is skipped (NaN, `_created`, `_bucket`).
    Nothing,
    /// An RFC 3339 line: a new scrape at that time.
    Time(i64),
    /// `# TYPE <family>`.
    Family(Range<usize>),
    /// Not exposition.
    NotASample,
    /// A sample of a series `target` has no name for.
    Unmapped(Range<usize>),
    /// A sample to keep.
    Sample { target: Target, value: f64, timestamp_ms: Option<i64> },
}

/// Reads one line: what [`read_scrapes`]'s fold needs of it, whatever came before.
fn prepare(bytes: &[u8], target: &(dyn Fn(&SampleLine<'_>) -> Option<Target> + Sync)) -> Prepared {
    let Some(text) = crate::utf8(bytes) else { return Prepared::NotUtf8 };
    let line = text.trim();
    let range = |part: &str| {
        let start = part.as_ptr() as usize - text.as_ptr() as usize;
        start..start + part.len()
    };
    if line.is_empty() {
        return Prepared::Nothing;
    }
    if let Some(at) = time_line(line) {
        return Prepared::Time(at);
    }
    if let Some(rest) = line.strip_prefix("# TYPE ") {
        // A trimmed line always has a word after `# TYPE `; were it ever empty, the family is the empty name.
        return Prepared::Family(rest.split_whitespace().next().map_or(0..0, range));
    }
    if line.starts_with("# HELP ") {
        return Prepared::Nothing;
    }
    let Some(sample) = parse_sample(line) else { return Prepared::NotASample };
    if sample.value.is_nan() || sample.name.ends_with("_created") || sample.name.ends_with("_bucket") {
        return Prepared::Nothing;
    }
    match target(&sample) {
        Some(target) => Prepared::Sample { target, value: sample.value, timestamp_ms: sample.timestamp_ms },
        None => Prepared::Unmapped(range(sample.name)),
    }
}

/// Reads one or many scrapes into canonical samples of `source`, naming series with `target`.
///
/// A scrape's time is a sample's own timestamp, else the last RFC 3339 line ([`time_line`]), else the file's
/// modification time, else `--start` (with one diagnostic). A new scrape starts at a time line or when a `# TYPE`
/// family repeats. NaN samples ("no value"), `_created` and `_bucket` series are skipped; series `target` has no
/// name for are listed in the report's `details.unmapped_series`; lines that are not exposition are
/// `not-a-record` diagnostics.
///
/// Each line is read, and its series named, on the pool ([`map_lines`]); the scrapes are put together in order.
pub fn read_scrapes(
    input: &mut dyn BufRead,
    ctx: &ParseContext<'_>,
    sink: &mut dyn Sink,
    source: &'static str,
    target: &(dyn Fn(&SampleLine<'_>) -> Option<Target> + Sync),
) -> Result<ParseReport, ParseError> {
    let mut lines = LineReader::new(input);
    let mut scrape = Scrape::default();
    let mut scrape_time: Option<i64> = None;
    let mut unmapped: BTreeSet<String> = BTreeSet::new();
    let mut clock_utc = true;
    let mut warned = false;
    // Every sample names its source, file, metric and instance: one shared copy of each text, not four strings a
    // sample.
    let (source, file): (Arc<str>, Arc<str>) = (source.into(), ctx.source_file.into());
    let mut shared = SharedText::default();
    let mut flush = |scrape: &mut Scrape, at: Option<i64>, sink: &mut dyn Sink| -> Result<(), ParseError> {
        let fallback = at.or(ctx.modified).unwrap_or(ctx.options.start_ns);
        for ((metric, instance), kept) in std::mem::take(&mut scrape.samples) {
            sink.sample(EngineSample {
                time: kept.time.unwrap_or(fallback),
                source: Arc::clone(&source),
                instance: instance.map(|i| shared.get(&i)),
                metric: shared.get(metric),
                value: kept.value,
                source_file: Some(Arc::clone(&file)),
                source_line: Some(kept.line),
            })?;
        }
        scrape.families.clear();
        Ok(())
    };
    map_lines(
        &mut lines,
        |bytes| prepare(bytes, target),
        |line_no, bytes, prepared| {
            // A name `prepare` found in the line's text.
            let text = |range: Range<usize>| String::from_utf8_lossy(&bytes[range]).into_owned();
            let (Target { metric, rank, instance, scale, sum }, value, timestamp_ms) = match prepared {
                Prepared::NotUtf8 => {
                    utf8_line(line_no, bytes, sink);
                    return Ok(());
                }
                Prepared::Nothing => return Ok(()),
                Prepared::Time(at) => {
                    flush(&mut scrape, scrape_time, sink)?;
                    scrape_time = Some(at);
                    return Ok(());
                }
                Prepared::Family(range) => {
                    let family = text(range);
                    if !scrape.families.insert(family.clone()) {
                        // The same family again: a new scrape without a time line of its own.
                        flush(&mut scrape, scrape_time, sink)?;
                        scrape.families.insert(family);
                    }
                    return Ok(());
                }
                Prepared::NotASample => {
                    sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a Prometheus sample"));
                    return Ok(());
                }
                Prepared::Unmapped(range) => {
                    unmapped.insert(text(range));
                    return Ok(());
                }
                Prepared::Sample { target, value, timestamp_ms } => (target, value, timestamp_ms),
            };
            // Milliseconds past 2262 overflow nanoseconds: the sample is skipped, said so, rather than wrapped.
            let time = match timestamp_ms.map(|ms| ms.checked_mul(1_000_000)) {
                Some(None) => {
                    sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::InvalidValue,
                        "sample timestamp past the year 2262 (not milliseconds?); the sample was skipped",
                    ));
                    return Ok(());
                }
                Some(Some(ns)) => Some(ns),
                None => None,
            };
            if timestamp_ms.is_none() && scrape_time.is_none() {
                if ctx.modified.is_none() && !warned {
                    warned = true;
                    sink.diagnostic(Diagnostic::new(
                        line_no,
                        DiagnosticKind::MissingField,
                        "no scrape time (no timestamps, no RFC 3339 line, no file time): --start is used",
                    ));
                }
                clock_utc &= ctx.modified.is_some();
            }
            let kept = Kept { rank, sum, value: value * scale, time, line: line_no };
            match scrape.samples.entry((metric, instance)) {
                Entry::Vacant(vacant) => {
                    vacant.insert(kept);
                }
                Entry::Occupied(mut entry) => {
                    let entry = entry.get_mut();
                    if rank < entry.rank {
                        *entry = kept;
                    } else if rank == entry.rank && entry.sum {
                        entry.value += kept.value;
                    }
                }
            }
            Ok::<_, ParseError>(())
        },
    )?;
    flush(&mut scrape, scrape_time, sink)?;
    let mut details = BTreeMap::new();
    if !unmapped.is_empty() {
        details.insert("unmapped_series".to_owned(), serde_json::Value::from(unmapped.into_iter().collect::<Vec<_>>()));
    }
    Ok(ParseReport {
        format_version: None,
        clock_domain: if clock_utc { ClockDomain::Utc } else { ClockDomain::Relative },
        year: None,
        lines: lines.lines_read(),
        details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_lines() {
        assert_eq!(
            parse_sample(r#"vllm:kv_cache_usage_perc{engine="0",model_name="zai-org/GLM-4.5"} 9.75010481363281e-06"#),
            Some(SampleLine {
                name: "vllm:kv_cache_usage_perc",
                labels: vec![("engine", "0".into()), ("model_name", "zai-org/GLM-4.5".into())],
                value: 9.75010481363281e-06,
                timestamp_ms: None,
            })
        );
        let s = parse_sample(r#"x{a="q\"uo,te"} +Inf 1700000000000"#).unwrap();
        assert_eq!(
            (s.labels[0].1.as_str(), s.value, s.timestamp_ms),
            ("q\"uo,te", f64::INFINITY, Some(1_700_000_000_000))
        );
        assert_eq!(
            parse_sample("vllm:x 1.0"),
            Some(SampleLine { name: "vllm:x", labels: vec![], value: 1.0, timestamp_ms: None })
        );
        for bad in ["", "# HELP x", "vllm:x{a=\"1\" 2", "vllm:x", "vllm:x one", "1abc 2", "vllm:x 1 2 3"] {
            assert_eq!(parse_sample(bad), None, "{bad:?}");
        }
    }
}
