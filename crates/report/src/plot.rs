//! Standalone SVG files (for `infertrace sweep --svg`): a line chart for one swept parameter and a heat map for two,
//! drawn with the report's chart kit and carrying their own styles (a standalone file needs `xmlns` and cannot
//! use the page's stylesheet).

use infertrace_engine::format::figure as number;

use crate::svg::{Axis, Chart, HEIGHT, Series, WIDTH};

/// The chart styles, the same as in the HTML report.
const CHART_STYLE: &str = "text { font-family: system-ui, sans-serif; }\n\
.title { font-size: 14px; font-weight: 600; fill: #222; }\n\
.note { font-size: 11px; fill: #666; }\n\
.legend { font-size: 11px; fill: #333; }\n\
.tick { font-size: 11px; fill: #555; }\n\
.axis-label { font-size: 12px; fill: #333; }\n\
.mark { font-size: 11px; fill: #222; }\n\
.marker { font-size: 10px; fill: #444; }\n\
polyline { stroke-linejoin: round; }\n\
.grid { stroke: #e6e6e6; stroke-width: 1; }\n\
.axis { stroke: #888; stroke-width: 1; }\n";

/// Series colours, in order.
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// `svg` (an inline chart) as a standalone SVG document: with `xmlns`, a white background and its styles.
fn standalone(svg: &str) -> String {
    let svg = svg.replacen("<svg class=\"chart\"", "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\"", 1);
    let (head, rest) = svg.split_once('\n').unwrap_or((&svg, ""));
    format!(
        "{head}\n<style>\n{CHART_STYLE}</style>\n<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#fff\"/>\n{rest}"
    )
}

/// One named line of `(x, y)` points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend name.
    pub name: String,
    /// Points, in x order; `None` values break the line.
    pub points: Vec<(f64, Option<f64>)>,
}

/// A vertical marker with a label.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Where, in x units.
    pub x: f64,
    /// Its label.
    pub text: String,
}

/// A line chart of one or more lines (at most four drawn), with vertical markers.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, lines: &[Line], markers: &[Marker]) -> String {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines.iter().flat_map(|l| l.points.iter().filter_map(|p| p.1));
    let (x_lo, x_hi) = bounds(xs);
    let (y_lo, y_hi) = bounds(ys);
    let legend: Vec<Series> = lines.iter().zip(COLOURS).map(|(l, c)| Series::new(&l.name, c)).collect();
    let mut chart = Chart::new(
        title,
        None,
        Axis::numeric(x_lo, x_hi, 6, x_label),
        Axis::numeric(y_lo.min(0.0), y_hi, 5, y_label),
        legend,
    );
    for (line, colour) in lines.iter().zip(COLOURS) {
        // A missing value ends a segment.
        for segment in line.points.split(|p| p.1.is_none()) {
            let points: Vec<(f64, f64)> = segment.iter().filter_map(|&(x, y)| Some((x, y?))).collect();
            chart.line(&points, colour, false);
            for &(x, y) in &points {
                chart.dot(x, y, colour);
            }
        }
    }
    for (row, marker) in markers.iter().enumerate() {
        chart.marker(marker.x, "#444", &marker.text, row % 3);
    }
    standalone(&chart.finish())
}

/// A heat map of `values[i][j]` at (`xs[j]`, `ys[i]`), `None` cells grey, with the colour scale in the note and
/// an optional ringed cell (the optimum).
pub fn heat_map(
    title: &str,
    x_label: &str,
    y_label: &str,
    xs: &[f64],
    ys: &[f64],
    values: &[Vec<Option<f64>>],
    marked: Option<(usize, usize)>,
) -> String {
    let (lo, hi) = bounds(values.iter().flatten().flatten().copied());
    let mark = if marked.is_some() { "; ring: the optimum" } else { "" };
    let note = format!("colour: {} (dark) to {} (light); grey: no value{mark}", number(lo), number(hi));
    let categories = |v: &[f64]| v.iter().map(|x| number(*x)).collect::<Vec<_>>();
    let mut chart = Chart::new(
        title,
        Some(note),
        Axis::categories(&categories(xs), x_label),
        Axis::categories(&categories(ys), y_label),
        Vec::new(),
    );
    for (i, row) in values.iter().enumerate() {
        for (j, value) in row.iter().enumerate() {
            let colour = value
                .map_or_else(|| "#d9d9d9".to_owned(), |v| colour_at(if hi > lo { (v - lo) / (hi - lo) } else { 0.0 }));
            chart.cell(j as f64, i as f64, j as f64 + 1.0, i as f64 + 1.0, &colour);
        }
    }
    if let Some((i, j)) = marked {
        chart.ring(j as f64 + 0.5, i as f64 + 0.5);
    }
    standalone(&chart.finish())
}

/// The smallest and largest of `values`, or `(0, 1)` when there are none.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
}

/// A sequential colour from dark blue (0) through teal to pale yellow (1), as `#rrggbb`.
pub fn colour_at(t: f64) -> String {
    const STOPS: [(f64, [f64; 3]); 3] =
        [(0.0, [8.0, 29.0, 88.0]), (0.5, [29.0, 145.0, 192.0]), (1.0, [255.0, 255.0, 204.0])];
    let t = t.clamp(0.0, 1.0);
    let k = if t <= 0.5 { 0 } else { 1 };
    let (t0, c0) = STOPS[k];
    let (t1, c1) = STOPS[k + 1];
    let f = (t - t0) / (t1 - t0);
    let channel = |i: usize| (c0[i] + f * (c1[i] - c0[i])).round() as u8;
    format!("#{:02x}{:02x}{:02x}", channel(0), channel(1), channel(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_dark_to_light() {
        assert_eq!(colour_at(0.0), "#081d58");
        assert_eq!(colour_at(0.5), "#1d91c0");
        assert_eq!(colour_at(1.0), "#ffffcc");
        // Halfway between the first two stops: (8 + 29) / 2 = 18.5 → 19 (0x13), (29 + 145) / 2 = 87 (0x57),
        // (88 + 192) / 2 = 140 (0x8c).
        assert_eq!(colour_at(0.25), "#13578c");
        assert_eq!(colour_at(7.0), "#ffffcc");
    }

    #[test]
    fn standalone_files_declare_their_namespace_and_styles() {
        let svg = line_chart(
            "cost",
            "R",
            "$",
            &[Line { name: "a".into(), points: vec![(0.0, Some(1.0)), (1.0, None), (2.0, Some(3.0))] }],
            &[Marker { x: 1.5, text: "breakeven <1.5>".into() }],
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\""), "{svg}");
        assert!(svg.contains("<style>\n") && svg.contains(".grid { stroke: #e6e6e6"));
        // The missing value splits the line into two one-point segments: two dots, and polylines of one point.
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("breakeven &lt;1.5&gt;"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn heat_maps_colour_every_cell() {
        let values = vec![vec![Some(1.0), Some(2.0)], vec![Some(3.0), None]];
        let svg = heat_map("cost", "x", "y", &[0.1, 0.2], &[10.0, 20.0], &values, Some((0, 0)));
        // Four cells: the lowest darkest, the highest lightest, the missing one grey.
        assert_eq!(svg.matches("<rect x=").count(), 4);
        assert!(svg.contains(r##"fill="#081d58""##) && svg.contains(r##"fill="#ffffcc""##));
        assert!(svg.contains(r##"fill="#d9d9d9""##));
        assert!(svg.contains("colour: 1 (dark) to 3 (light); grey: no value; ring: the optimum"));
        // The ring is at the centre of cell (0, 0).
        assert_eq!(svg.matches(r#"<circle cx="#).count(), 2);
    }
}
