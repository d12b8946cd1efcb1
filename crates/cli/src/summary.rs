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
