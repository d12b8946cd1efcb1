//! The summary table printed after a run.

pub use infertrace_engine::format::count;
use infertrace_schema::Manifest;

/// Renders rows under headers as an aligned plain-text table; columns from `right_from` on (counts) are
/// right-aligned.
pub fn render_table(headers: &[&str], rows: &[Vec<String>], right_from: usize) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = " ".repeat(widths[i] - cell.chars().count());
                if i >= right_from { format!("{pad}{cell}") } else { format!("{cell}{pad}") }
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Index of the first count column of [`input_rows`].
pub const INPUT_COUNTS_FROM: usize = 3;

/// Headers of [`input_rows`].
pub const INPUT_HEADERS: &[&str] =
    &["input", "format", "version", "lines", "requests", "samples", "cache events", "diagnostics"];

/// One row per input of `manifest`.
pub fn input_rows(manifest: &Manifest) -> Vec<Vec<String>> {
    manifest
        .inputs
        .iter()
        .map(|i| {
            vec![
                i.path.clone(),
                i.format.clone(),
                i.format_version.clone().unwrap_or_else(|| "-".to_owned()),
                count(i.lines),
                count(i.records.requests),
                count(i.records.samples),
                count(i.records.cache_events),
                count(i.diagnostics.total),
            ]
        })
        .collect()
}

/// A few lines on stderr's behalf: every diagnostic kind of every input, with its first example.
pub fn diagnostics_lines(manifest: &Manifest) -> Vec<String> {
    let mut lines = Vec::new();
    for input in &manifest.inputs {
        for (kind, summary) in &input.diagnostics.by_kind {
            let first = summary.first.first().map(|d| format!(" (first at line {}: {})", d.line, d.message));
            lines.push(format!("{}: {} × {kind}{}", input.path, count(summary.count), first.unwrap_or_default()));
        }
    }
    lines
}

/// One line per skipped input (at most ten, then how many more): a file of an input directory no adapter claims,
/// or an input that repeats an earlier one.
pub fn skipped_lines(manifest: &Manifest) -> Vec<String> {
    let mut lines: Vec<String> = manifest
        .skipped
        .iter()
        .take(10)
        .map(|s| {
            if s.reason.starts_with(crate::normalize::DUPLICATE_REASON) {
                format!("skipped {} ({}): its rows are read once", s.path, s.reason)
            } else {
                format!("skipped {} ({}); pass --format to read it", s.path, s.reason)
            }
        })
        .collect();
    if manifest.skipped.len() > 10 {
        lines
            .push(format!("skipped {} more files; the manifest lists them", count(manifest.skipped.len() as u64 - 10)));
    }
    lines
}

/// The drift report of every input (`normalize --explain`): the format and generation detected, the envelopes
/// found around its records, where their times came from, how many lines made rows, and the fields this version
/// does not know, with counts. Names and counts only, never an input's text.
pub fn explain(manifest: &Manifest) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let counts = |map: &std::collections::BTreeMap<String, u64>| {
        let mut items: Vec<(&String, &u64)> = map.iter().collect();
        // Most frequent first; names in order among equals.
        items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        items.iter().map(|(name, n)| format!("{name} ×{}", count(**n))).collect::<Vec<_>>().join(", ")
    };
    for input in &manifest.inputs {
        let generation = input.format_version.as_deref().unwrap_or("one generation");
        let _ = writeln!(out, "{}: {} ({generation})", input.path, input.format);
        let rows = input.records.total();
        let drift = input.drift.clone().unwrap_or_default();
        let share = |n: u64| if input.lines == 0 { 0.0 } else { 100.0 * n as f64 / input.lines as f64 };
        match drift.lines_used {
            Some(used) => {
                let _ = writeln!(
                    out,
                    "  lines      {} read, {} made rows ({:.1} %), {} diagnostics; the rest carry no data",
                    count(input.lines),
                    count(used),
                    share(used),
                    count(input.diagnostics.total)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  lines      {} read, {} rows, {} diagnostics",
                    count(input.lines),
                    count(rows),
                    count(input.diagnostics.total)
                );
            }
        }
        if !drift.envelopes.is_empty() {
            let _ = writeln!(out, "  envelopes  {}", counts(&drift.envelopes));
        }
        if !drift.times_from.is_empty() {
            let _ = writeln!(out, "  times from {}", counts(&drift.times_from));
        }
        if let Some(year) = input.year {
            let source = serde_json::to_value(year.source).ok().and_then(|v| v.as_str().map(str::to_owned));
            let _ = writeln!(out, "  year       {} (from {})", year.year, source.unwrap_or_default());
        }
        let _ = writeln!(
            out,
            "  clock      {}",
            serde_json::to_value(input.clock_domain)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        );
        if drift.unknown_fields.is_empty() {
            if input.drift.is_some() {
                let _ = writeln!(out, "  unknown    no field this version does not know");
            }
        } else {
            let _ = writeln!(out, "  unknown    {}", counts(&drift.unknown_fields));
        }
        for (kind, summary) in &input.diagnostics.by_kind {
            let first = summary.first.first().map(|d| format!(" (first at line {}: {})", d.line, d.message));
            let _ = writeln!(out, "  diagnostic {kind} ×{}{}", count(summary.count), first.unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(12_031), "12,031");
        assert_eq!(count(1_234_567), "1,234,567");
    }

    #[test]
    fn tables_align_text_left_and_numbers_right() {
        let table =
            render_table(&["name", "n"], &[vec!["a".into(), "1,000".into()], vec!["long".into(), "5".into()]], 1);
        assert_eq!(table, "name      n\na     1,000\nlong      5\n");
    }
}
