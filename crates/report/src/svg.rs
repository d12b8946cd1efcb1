//! Hand-built SVG: linear scales with "nice" ticks (1, 2 or 5 × 10ⁿ), a chart frame with axes, grid, title and
//! legend, and the marks the report draws (lines, steps, bars, dots, labelled markers).
//!
//! Every coordinate is written with one decimal, so the same data always gives the same bytes; no font metrics
//! are measured (text widths are estimated from character counts) and no `xmlns` is written (HTML5 inline SVG).

use std::fmt::Write as _;

use crate::escape;

/// Width of every chart's view box, in px.
pub(crate) const WIDTH: f64 = 560.0;
/// Height of every chart's view box, in px.
pub(crate) const HEIGHT: f64 = 320.0;
/// Height of a "no data" panel's view box, in px.
pub(crate) const EMPTY_HEIGHT: f64 = 110.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 26.0;
const BOTTOM: f64 = 46.0;
const LEGEND_ROW: f64 = 16.0;

/// Ticks at a "nice" step covering a domain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ticks {
    /// The domain extended down to a multiple of `step`.
    pub(crate) lo: f64,
    /// The domain extended up to a multiple of `step`.
    pub(crate) hi: f64,
    /// 1, 2 or 5 × 10ⁿ.
    pub(crate) step: f64,
    /// `lo`, `lo + step`, …, `hi`.
    pub(crate) values: Vec<f64>,
}

/// The nice ticks of `lo..=hi` with at most about `intervals` intervals: the step is the smallest of 1, 2, 5 or
/// 10 × 10ⁿ that is at least `(hi − lo) / intervals`, and the domain is widened to multiples of it. An empty or
/// inverted domain is widened to `lo..lo + 1` (or `lo − 1..lo + 1` for a negative `lo`).
pub(crate) fn nice_ticks(lo: f64, hi: f64, intervals: usize) -> Ticks {
    let (lo, hi) = match (lo.is_finite(), hi.is_finite()) {
        (true, true) if hi > lo => (lo, hi),
        (true, _) if lo < 0.0 => (lo - 1.0, lo + 1.0),
        (true, _) => (lo, lo + 1.0),
        _ => (0.0, 1.0),
    };
    let raw = (hi - lo) / intervals.max(1) as f64;
    let exponent = raw.log10().floor() as i32;
    let normalized = raw / 10f64.powi(exponent);
    let factor = [1.0, 2.0, 5.0].into_iter().find(|f| normalized <= f * (1.0 + 1e-9)).unwrap_or(10.0);
    // k × factor × 10ⁿ in one rounding (a division for negative n): 3 × 0.2 is then 0.6, not 0.6000000000000001.
    let multiple = |k: i64| {
        if exponent < 0 { k as f64 * factor / 10f64.powi(-exponent) } else { k as f64 * factor * 10f64.powi(exponent) }
    };
    let step = multiple(1);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    let values = (first..=last).map(multiple).collect();
    Ticks { lo: multiple(first), hi: multiple(last), step, values }
}

/// Decimals that show a multiple of `step` exactly: 0 for steps of 1 or more, 1 for 0.5, 3 for 0.005.
pub(crate) fn decimals(step: f64) -> usize {
    (-(step.log10() + 1e-9).floor()).max(0.0) as usize
}

/// A tick label: fixed decimals, thousands separators on whole numbers, never `-0`.
pub(crate) fn tick_label(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let text = if text.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        text.trim_start_matches('-').to_owned()
    } else {
        text
    };
    if decimals == 0 && value.abs() >= 10_000.0 {
        let sign = if value < 0.0 { "-" } else { "" };
        format!("{sign}{}", infertrace_engine::format::count(value.abs().round() as u64))
    } else {
        text
    }
}

/// A linear map from a data domain onto a pixel range (the range may run backwards, as y does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    pub(crate) domain: (f64, f64),
    pub(crate) range: (f64, f64),
}

impl Scale {
    /// The pixel of `value`; a degenerate domain maps everything to the start of the range.
    pub(crate) fn map(&self, value: f64) -> f64 {
        let (d0, d1) = self.domain;
        let (r0, r1) = self.range;
        if d1 == d0 { r0 } else { r0 + (value - d0) / (d1 - d0) * (r1 - r0) }
    }
}

/// One axis: its domain, labelled tick positions (data units), its title, and whether grid lines are drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) ticks: Vec<(f64, String)>,
    pub(crate) label: String,
    pub(crate) grid: bool,
}

impl Axis {
    /// A numeric axis over `lo..=hi` widened to nice ticks (about `intervals` of them).
    pub(crate) fn numeric(lo: f64, hi: f64, intervals: usize, label: &str) -> Self {
        let ticks = nice_ticks(lo, hi, intervals);
        let places = decimals(ticks.step);
        Self {
            lo: ticks.lo,
            hi: ticks.hi,
            ticks: ticks.values.iter().map(|&v| (v, tick_label(v, places))).collect(),
            label: label.to_owned(),
            grid: true,
        }
    }

    /// Categories side by side: category `i` spans `i..i + 1` and is labelled at its centre (a label may have a
    /// second line after `\n`).
    pub(crate) fn categories(names: &[String], label: &str) -> Self {
        Self {
            lo: 0.0,
            hi: names.len().max(1) as f64,
            ticks: names.iter().enumerate().map(|(i, n)| (i as f64 + 0.5, n.clone())).collect(),
            label: label.to_owned(),
            grid: false,
        }
    }
}

/// A legend entry: name, colour and whether its line is dashed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) colour: &'static str,
    pub(crate) dashed: bool,
}

impl Series {
    pub(crate) fn new(name: &str, colour: &'static str) -> Self {
        Self { name: name.to_owned(), colour, dashed: false }
    }

    pub(crate) fn dashed(name: &str, colour: &'static str) -> Self {
        Self { name: name.to_owned(), colour, dashed: true }
    }
}

/// Estimated width of `text` at `size` px (no font is measured: 0.6 em per character).
pub(crate) fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// `text` cut to `max` characters, with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// A pixel coordinate with one decimal (never `-0.0`).
pub(crate) fn px(value: f64) -> String {
    let text = format!("{value:.1}");
    if text == "-0.0" { "0.0".to_owned() } else { text }
}

/// Legend rows: each entry's (row, x) with entries laid left to right and wrapped at the right margin.
pub(crate) fn legend_layout(legend: &[Series]) -> Vec<(usize, f64)> {
    let mut placed = Vec::with_capacity(legend.len());
    let (mut row, mut x) = (0, LEFT);
    for series in legend {
        let width = 24.0 + text_width(&series.name, 11.0);
        if x > LEFT && x + width > WIDTH - RIGHT {
            row += 1;
            x = LEFT;
        }
        placed.push((row, x));
        x += width + 14.0;
    }
    placed
}

/// A chart under construction: marks are added in data coordinates and [`finish`](Chart::finish) writes the
/// `<svg>` element.
#[derive(Debug)]
pub(crate) struct Chart {
    title: String,
    note: Option<String>,
    x: Axis,
    y: Axis,
    legend: Vec<Series>,
    xs: Scale,
    ys: Scale,
    marks: String,
}

impl Chart {
    /// A chart titled `title` (with an optional note line under it), axes `x` and `y`, and a legend (drawn when
    /// it has more than one entry).
    pub(crate) fn new(title: &str, note: Option<String>, x: Axis, y: Axis, legend: Vec<Series>) -> Self {
        let mut top = if note.is_some() { 46.0 } else { 32.0 };
        if legend.len() > 1 {
            let rows = legend_layout(&legend).last().map_or(0, |p| p.0 + 1);
            top += rows as f64 * LEGEND_ROW;
        }
        let top = top + 8.0;
        let xs = Scale { domain: (x.lo, x.hi), range: (LEFT, WIDTH - RIGHT) };
        let ys = Scale { domain: (y.lo, y.hi), range: (HEIGHT - BOTTOM, top) };
        Self { title: title.to_owned(), note, x, y, legend, xs, ys, marks: String::new() }
    }

    /// The pixel of data point `(x, y)`, clamped into the plot area.
    pub(crate) fn point(&self, x: f64, y: f64) -> (f64, f64) {
        let clamp = |v: f64, (a, b): (f64, f64)| v.clamp(a.min(b), a.max(b));
        (clamp(self.xs.map(x), self.xs.range), clamp(self.ys.map(y), self.ys.range))
    }

    /// A polyline through `points` (data coordinates).
    pub(crate) fn line(&mut self, points: &[(f64, f64)], colour: &str, dashed: bool) {
        if points.is_empty() {
            return;
        }
        let mut coordinates: Vec<String> = points
            .iter()
            .map(|&(x, y)| {
                let (px_, py) = self.point(x, y);
                format!("{},{}", px(px_), px(py))
            })
            .collect();
        // Steps over equal values repeat a pixel: write it once.
        coordinates.dedup();
        let (width, dash) = if dashed { ("1.6", r#" stroke-dasharray="5 3""#) } else { ("2", "") };
        writeln!(
            self.marks,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>"#,
            coordinates.join(" ")
        )
        .unwrap();
    }

    /// A small filled circle at data point `(x, y)`.
    pub(crate) fn dot(&mut self, x: f64, y: f64, colour: &str) {
        let (cx, cy) = self.point(x, y);
        writeln!(self.marks, r#"<circle cx="{}" cy="{}" r="2.5" fill="{colour}"/>"#, px(cx), px(cy)).unwrap();
    }

    /// A bar over `x0..x1` from the bottom of the y axis up to `y`.
    pub(crate) fn bar(&mut self, x0: f64, x1: f64, y: f64, colour: &str) {
        let (left, top) = self.point(x0, y);
        let (right, bottom) = self.point(x1, self.y.lo);
        writeln!(
            self.marks,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{colour}"/>"#,
            px(left),
            px(top),
            px(right - left),
            px(bottom - top)
        )
        .unwrap();
    }

    /// A ring at data point `(x, y)`, white with a dark edge, visible on any fill (the optimum of a heat map).
    pub(crate) fn ring(&mut self, x: f64, y: f64) {
        let (cx, cy) = self.point(x, y);
        writeln!(
            self.marks,
            r##"<circle cx="{}" cy="{}" r="6" fill="none" stroke="#fff" stroke-width="3"/><circle cx="{}" cy="{}" r="6" fill="none" stroke="#d62728" stroke-width="1.5"/>"##,
            px(cx),
            px(cy),
            px(cx),
            px(cy)
        )
        .unwrap();
    }

    /// A filled rectangle between data points `(x0, y0)` and `(x1, y1)` (a heat-map cell).
    pub(crate) fn cell(&mut self, x0: f64, y0: f64, x1: f64, y1: f64, colour: &str) {
        let (ax, ay) = self.point(x0, y0);
        let (bx, by) = self.point(x1, y1);
        writeln!(
            self.marks,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{colour}"/>"#,
            px(ax.min(bx)),
            px(ay.min(by)),
            px((bx - ax).abs()),
            px((by - ay).abs())
        )
        .unwrap();
    }

    /// Text at data point `(x, y)` moved by `dy` px, anchored `start`, `middle` or `end`.
    pub(crate) fn label(&mut self, x: f64, y: f64, dy: f64, anchor: &str, text: &str) {
        let (lx, ly) = self.point(x, y);
        writeln!(
            self.marks,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" class="mark">{}</text>"#,
            px(lx),
            px(ly + dy),
            escape(text)
        )
        .unwrap();
    }

    /// A dashed vertical marker at `x` with `text` beside it, in label row `row` (0 at the top of the plot) so
    /// that two markers close together do not write over each other.
    pub(crate) fn marker(&mut self, x: f64, colour: &str, text: &str, row: usize) {
        let (mx, top) = self.point(x, self.y.hi);
        let (_, bottom) = self.point(x, self.y.lo);
        writeln!(
            self.marks,
            r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{colour}" stroke-width="1" stroke-dasharray="3 3"/>"#,
            px(top),
            px(bottom),
            x = px(mx)
        )
        .unwrap();
        // Beside the line, on the side with room for the text.
        let right_room = WIDTH - RIGHT - mx;
        let (anchor, tx) =
            if right_room > text_width(text, 10.0) + 6.0 { ("start", mx + 4.0) } else { ("end", mx - 4.0) };
        writeln!(
            self.marks,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" class="marker">{}</text>"#,
            px(tx),
            px(top + 11.0 + row as f64 * 12.0),
            escape(text)
        )
        .unwrap();
    }

    /// The `<svg>` element: title, note, legend, grid, axes, tick labels, axis titles, then the marks.
    pub(crate) fn finish(self) -> String {
        let mut out = open_svg(&self.title);
        if let Some(note) = &self.note {
            writeln!(out, r#"<text x="{LEFT}" y="34" class="note">{}</text>"#, escape(note)).unwrap();
        }
        if self.legend.len() > 1 {
            let first_row = if self.note.is_some() { 52.0 } else { 38.0 };
            for (series, (row, x)) in self.legend.iter().zip(legend_layout(&self.legend)) {
                let y = first_row + row as f64 * LEGEND_ROW;
                let dash = if series.dashed { r#" stroke-dasharray="5 3""# } else { "" };
                writeln!(
                    out,
                    concat!(
                        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3"{dash}/>"#,
                        r#"<text x="{}" y="{}" class="legend">{}</text>"#
                    ),
                    px(x),
                    px(y - 4.0),
                    px(x + 18.0),
                    px(y - 4.0),
                    series.colour,
                    px(x + 24.0),
                    px(y),
                    escape(&series.name),
                    dash = dash
                )
                .unwrap();
            }
        }
        let (left, right) = self.xs.range;
        let (bottom, top) = self.ys.range;
        for (value, text) in &self.y.ticks {
            let y = self.ys.map(*value);
            if self.y.grid {
                writeln!(
                    out,
                    r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" class="grid"/>"#,
                    px(left),
                    px(right),
                    y = px(y)
                )
                .unwrap();
            }
            writeln!(
                out,
                r#"<text x="{}" y="{}" text-anchor="end" class="tick">{}</text>"#,
                px(left - 6.0),
                px(y + 4.0),
                escape(text)
            )
            .unwrap();
        }
        for (value, text) in &self.x.ticks {
            let x = self.xs.map(*value);
            if self.x.grid {
                writeln!(
                    out,
                    r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" class="grid"/>"#,
                    px(top),
                    px(bottom),
                    x = px(x)
                )
                .unwrap();
            }
            for (line, part) in text.split('\n').enumerate() {
                writeln!(
                    out,
                    r#"<text x="{}" y="{}" text-anchor="middle" class="tick">{}</text>"#,
                    px(x),
                    px(bottom + 15.0 + line as f64 * 11.0),
                    escape(part)
                )
                .unwrap();
            }
        }
        writeln!(
            out,
            r#"<path d="M{l},{t}V{b}H{r}" fill="none" class="axis"/>"#,
            l = px(left),
            t = px(top),
            b = px(bottom),
            r = px(right)
        )
        .unwrap();
        writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" class="axis-label">{}</text>"#,
            px((left + right) / 2.0),
            px(HEIGHT - 6.0),
            escape(&self.x.label)
        )
        .unwrap();
        writeln!(
            out,
            r#"<text transform="translate(14,{}) rotate(-90)" text-anchor="middle" class="axis-label">{}</text>"#,
            px((top + bottom) / 2.0),
            escape(&self.y.label)
        )
        .unwrap();
        out.push_str(&self.marks);
        out.push_str("</svg>\n");
        out
    }
}

fn open_svg(title: &str) -> String {
    let title = escape(title);
    format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\">\n<title>{title}</title>\n\
         <text x=\"{LEFT}\" y=\"18\" class=\"title\">{title}</text>\n"
    )
}

/// The panel drawn instead of empty axes, shorter than a chart: the title and `no data: <reason>`, wrapped to
/// the panel's width.
pub(crate) fn no_data(title: &str, reason: &str) -> String {
    let mut out = open_svg(title).replacen(&format!("0 0 {WIDTH} {HEIGHT}"), &format!("0 0 {WIDTH} {EMPTY_HEIGHT}"), 1);
    let (top, bottom) = (30.0, EMPTY_HEIGHT - 4.0);
    writeln!(
        out,
        r#"<rect x="{LEFT}" y="{top}" width="{}" height="{}" class="empty"/>"#,
        px(WIDTH - LEFT - RIGHT),
        px(bottom - top)
    )
    .unwrap();
    let lines = wrap(&format!("no data: {reason}"), ((WIDTH - LEFT - RIGHT - 24.0) / (13.0 * 0.6)) as usize);
    let first = (top + bottom) / 2.0 + 4.0 - (lines.len() as f64 - 1.0) * 9.0;
    for (i, line) in lines.iter().enumerate() {
        writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" class="no-data">{}</text>"#,
            px((LEFT + WIDTH - RIGHT) / 2.0),
            px(first + i as f64 * 18.0),
            escape(line)
        )
        .unwrap();
    }
    out.push_str("</svg>\n");
    out
}

/// `text` split at spaces into lines of at most `width` characters (a longer word stands alone).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// The corner points of a step line through `points` (sorted by x): each value holds until the next point.
pub(crate) fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_pick_one_two_or_five_times_a_power_of_ten() {
        // 7.3 / 5 = 1.46 → step 2, domain widened to 8.
        let t = nice_ticks(0.0, 7.3, 5);
        assert_eq!((t.lo, t.hi, t.step), (0.0, 8.0, 2.0));
        assert_eq!(t.values, [0.0, 2.0, 4.0, 6.0, 8.0]);
        // 0.0123 / 5 = 0.00246 → 2.46 × 10⁻³ → step 5 × 10⁻³; ceil(0.0123 / 0.005) = 3 → 0.015.
        let t = nice_ticks(0.0, 0.0123, 5);
        assert_eq!(t.step, 0.005);
        assert_eq!(t.values, [0.0, 0.005, 0.01, 0.015]);
        // 1 / 5 = 0.2 exactly → step 0.2, six ticks, no widening.
        let t = nice_ticks(0.0, 1.0, 5);
        assert_eq!(t.step, 0.2);
        assert_eq!(t.values.len(), 6);
        assert_eq!((t.lo, t.hi), (0.0, 1.0));
        // 15 / 4 = 3.75 → step 5; −3 → −5 and 12 → 15.
        let t = nice_ticks(-3.0, 12.0, 4);
        assert_eq!(t.values, [-5.0, 0.0, 5.0, 10.0, 15.0]);
        // 730 / 6 = 121.7 → 1.217 × 10² → step 200; 100 → 0, 830 → 1000.
        let t = nice_ticks(100.0, 830.0, 6);
        assert_eq!(t.values, [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        // Empty domains widen by one unit.
        assert_eq!(nice_ticks(0.0, 0.0, 5).values, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!((nice_ticks(3.0, 3.0, 1).lo, nice_ticks(3.0, 3.0, 1).hi), (3.0, 4.0));
        assert_eq!(nice_ticks(f64::NAN, 1.0, 5).hi, 1.0);
    }

    #[test]
    fn tick_labels_have_fixed_decimals_and_separators() {
        assert_eq!(decimals(2.0), 0);
        assert_eq!(decimals(1.0), 0);
        assert_eq!(decimals(0.5), 1);
        assert_eq!(decimals(0.2), 1);
        assert_eq!(decimals(0.005), 3);
        assert_eq!(tick_label(0.01, 3), "0.010");
        assert_eq!(tick_label(-0.0, 1), "0.0");
        assert_eq!(tick_label(-1e-12, 2), "0.00");
        assert_eq!(tick_label(20_000.0, 0), "20,000");
        assert_eq!(tick_label(-5.0, 0), "-5");
        assert_eq!(px(-0.01), "0.0");
        assert_eq!(px(12.345), "12.3");
    }

    #[test]
    fn scales_map_linearly_and_y_runs_up() {
        let x = Scale { domain: (0.0, 10.0), range: (50.0, 550.0) };
        assert_eq!(x.map(2.5), 175.0);
        assert_eq!(x.map(10.0), 550.0);
        let y = Scale { domain: (0.0, 1.0), range: (260.0, 20.0) };
        assert_eq!(y.map(0.25), 200.0);
        assert_eq!(Scale { domain: (3.0, 3.0), range: (1.0, 9.0) }.map(7.0), 1.0);
    }

    #[test]
    fn steps_hold_each_value_until_the_next_point() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 3.0), (5.0, 0.0)]),
            [(0.0, 1.0), (2.0, 1.0), (2.0, 3.0), (5.0, 3.0), (5.0, 0.0)]
        );
        assert!(steps(&[]).is_empty());
    }

    #[test]
    fn legends_wrap_at_the_right_margin() {
        // Each entry is 24 + 11 × 0.6 × chars wide plus a 14 px gap: 40 characters → 24 + 264 = 288 px.
        let long = "x".repeat(40);
        let legend = vec![Series::new(&long, "#000"), Series::new(&long, "#000"), Series::new("p50", "#000")];
        // 62 + 288 + 14 = 364; 364 + 288 > 534 → second row; then 62 + 302 = 364 and "p50" (43.8 px) fits.
        assert_eq!(legend_layout(&legend), [(0, 62.0), (1, 62.0), (1, 364.0)]);
    }

    #[test]
    fn a_chart_maps_data_into_its_plot_area() {
        // One series (no legend), no note: the plot runs from x 62 to 534 (472 px) and from y 274 up to 40.
        let x = Axis::numeric(0.0, 10.0, 5, "time (s)");
        let y = Axis::numeric(0.0, 1.0, 5, "fraction");
        let mut chart = Chart::new("t", None, x, y, vec![Series::new("a", "#123456")]);
        assert_eq!(chart.point(5.0, 0.5), (298.0, 157.0));
        // Points outside the domain are clamped to the frame.
        assert_eq!(chart.point(20.0, -1.0), (534.0, 274.0));
        // A repeated point is written once.
        chart.line(&[(0.0, 0.0), (0.0, 0.0), (10.0, 1.0)], "#123456", false);
        chart.bar(1.0, 2.0, 0.5, "#654321");
        let svg = chart.finish();
        assert!(svg.contains(r##"<polyline points="62.0,274.0 534.0,40.0" fill="none" stroke="#123456""##), "{svg}");
        // x: 1 → 62 + 47.2 = 109.2, 2 → 156.4; y: 0.5 → 157, 0 → 274.
        assert!(svg.contains(r##"<rect x="109.2" y="157.0" width="47.2" height="117.0" fill="#654321"/>"##), "{svg}");
        assert!(svg.contains(">time (s)</text>") && svg.contains(">fraction</text>"), "{svg}");
        assert!(svg.contains(">0.6</text>") && svg.contains(">10</text>"), "{svg}");
        assert!(!svg.contains("class=\"legend\""), "a single series has no legend: {svg}");
    }

    #[test]
    fn text_is_escaped_and_truncated() {
        let svg = no_data("<b>", "no \"ttft_s\" & more");
        assert!(svg.contains("<title>&lt;b&gt;</title>"), "{svg}");
        assert!(svg.contains("no data: no &quot;ttft_s&quot; &amp; more"), "{svg}");
        assert_eq!(wrap("no data: a bb ccc", 8), ["no data:", "a bb ccc"]);
        assert_eq!(wrap("abcdefghij k", 4), ["abcdefghij", "k"]);
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
