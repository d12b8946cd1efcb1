//! The report's properties on hand-built datasets: the figures it shows (computed by hand from the rows), escaping,
//! self-containment, determinism, no text columns, and the charts' "no data" panels.

mod common;

use common::{CANARIES, S, T0, at, fixture_html, html, read, write};
use infertrace_report::CHARTS;
use infertrace_schema::{EngineSample, RequestRow, Status, metrics};

/// The `<svg>` element titled `title`.
fn chart<'h>(html: &'h str, title: &str) -> &'h str {
    let start = html.find(&format!("<title>{title}</title>")).unwrap_or_else(|| panic!("no chart {title}"));
    let start = html[..start].rfind("<svg").unwrap();
    let end = start + html[start..].find("</svg>").unwrap();
    &html[start..end]
}

/// The coordinates of the first polyline of `svg`.
fn polyline(svg: &str) -> Vec<&str> {
    let start = svg.find("<polyline points=\"").unwrap() + "<polyline points=\"".len();
    svg[start..][..svg[start..].find('"').unwrap()].split(' ').collect()
}

#[test]
fn the_summary_and_latency_tables_show_the_hand_computed_figures() {
    let dir = tempfile::tempdir().unwrap();
    let html = fixture_html(dir.path(), "fixture");
    for expected in [
        "<tr><th>requests</th><td>4</td></tr>",
        "<tr><th>status</th><td>ok 2, error 1, unknown 1</td></tr>",
        // ok / (rows whose outcome is known) = 2 / 3.
        "<tr><th>success rate</th><td>66.7%</td></tr>",
        // From the first arrival (0 s) to the last token (8 s): 4 requests, 500 input and 14 output tokens.
        "<tr><th>span</th><td>8.00 s</td></tr>",
        "<tr><th>throughput</th><td>0.500 requests/s</td></tr>",
        "<tr><th>token throughput</th><td>62.5 input, 1.75 output tokens/s</td></tr>",
        // ok and ttft ≤ 1.5 s: r1 and r2, 2 of 4, 2 per 8 s.
        "<tr><th>goodput</th><td>0.250 requests/s; 50.0% of requests (2) meet ttft ≤ 1.50 s</td></tr>",
        // (40 + 0 + 60) / (100 + 200 + 100).
        "<tr><th>cache hit rate</th><td>25.0% of 400 input tokens (3 requests)</td></tr>",
        "<tr><th>reasoning multiplier R</th><td>-</td></tr>",
        // Σqueue 1.7, Σprefill 1.8, Σdecode 8 over Σe2e 11.5.
        "<tr><th>time split</th><td>queue 14.8%, prefill 15.7%, decode 69.6% of e2e (3 requests)</td></tr>",
        // TTFT 0.5, 1, 2: mean 3.5 / 3; p90 at h = 1.8 → 1 + 0.8; p95 → 1.9; p99 → 1.98.
        "<tr><th>ttft_s</th><td>3</td><td>1.17 s</td><td>1.00 s</td><td>1.80 s</td><td>1.90 s</td><td>1.98 s</td>\
         <td>2.00 s</td></tr>",
        // TPOT 0.5, 0.8, 1: mean 2.3 / 3; p90 0.8 + 0.8 × 0.2 = 0.96; p95 0.98; p99 0.996.
        "<tr><th>tpot_s</th><td>3</td><td>767 ms</td><td>800 ms</td><td>960 ms</td><td>980 ms</td><td>996 ms</td>\
         <td>1.00 s</td></tr>",
        // E2E 2.5, 3, 6: mean 11.5 / 3; p90 3 + 0.8 × 3 = 5.4; p95 5.7; p99 5.94.
        "<tr><th>e2e_s</th><td>3</td><td>3.83 s</td><td>3.00 s</td><td>5.40 s</td><td>5.70 s</td><td>5.94 s</td>\
         <td>6.00 s</td></tr>",
        // KV usage 0.2 for 1 s and 0.8 for 3 s: (0.2 + 2.4) / 4 = 65%; p95 of 0.2, 0.5, 0.8 at h = 1.9 → 0.77.
        "<tr><th>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;x&#39;</th><td>3</td><td>65.0%</td>\
         <td>77.0%</td><td>80.0%</td><td>0</td><td>-</td><td>-</td><td>-</td></tr>",
        // Queue depth 2 for 2 s; p95 of 2, 4 at h = 0.95 → 3.9.
        "<tr><th>engine-1</th><td>0</td><td>-</td><td>-</td><td>-</td><td>2</td><td>2.00</td><td>3.90</td>\
         <td>4.00</td></tr>",
    ] {
        assert!(html.contains(expected), "{expected} not in\n{html}");
    }
    assert_eq!(html.matches("<svg").count(), CHARTS);
    // The p50 and p99 markers of the TTFT CDF carry the engine's figures.
    let ttft = chart(&html, "TTFT CDF");
    assert!(ttft.contains(">p50 1.00 s</text>") && ttft.contains(">p99 1.98 s</text>"), "{ttft}");
}

#[test]
fn the_ttft_cdf_steps_through_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let html = fixture_html(dir.path(), "fixture");
    // TTFT 0.5, 1, 2 s on an x axis 0..2 s (plot x 62..534) and 0..100% (plot y 274..54, under the note line):
    // (0.5, 0) → (0.5, 33.3%) → (1, 33.3%) → (1, 66.7%) → (2, 66.7%) → (2, 100%).
    // x: 62 + 472 × 0.25 = 180, 62 + 472 × 0.5 = 298, 534; y: 274 − 220 / 3 = 200.7, 274 − 440 / 3 = 127.3, 54.
    assert_eq!(
        polyline(chart(&html, "TTFT CDF")),
        ["180.0,274.0", "180.0,200.7", "298.0,200.7", "298.0,127.3", "534.0,127.3", "534.0,54.0"]
    );
}

#[test]
fn dataset_strings_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let html = fixture_html(dir.path(), "<b>title</b> & 'more'");
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("alert(1)</script>"));
    assert!(html.contains("<title>&lt;b&gt;title&lt;/b&gt; &amp; &#39;more&#39;</title>"));
    assert!(html.contains("<h1>&lt;b&gt;title&lt;/b&gt; &amp; &#39;more&#39;</h1>"));
    // The model in the header line, the hostile instance in the KV chart's legend (one instance: its note).
    assert!(html.contains("models: m&amp;&quot;1&#39;"), "{html}");
    let kv = chart(&html, "KV-cache usage over time");
    assert!(kv.contains("instance &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;x&#39;"), "{kv}");
    for (i, c) in html.char_indices().filter(|(_, c)| *c == '<') {
        // Every tag the report writes is one of its own.
        let tag: String =
            html[i + 1..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/' || *c == '!').collect();
        assert!(
            [
                "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "h1", "p", "section", "h2",
                "div", "table", "caption", "tr", "th", "td", "figure", "svg", "text", "line", "path", "polyline",
                "rect", "circle", "footer", "code"
            ]
            .contains(&tag.trim_start_matches('/')),
            "unexpected tag <{tag} at {i} ({c})"
        );
    }
}

#[test]
fn the_report_is_self_contained_and_printable() {
    let dir = tempfile::tempdir().unwrap();
    let html = fixture_html(dir.path(), "fixture");
    for forbidden in ["http:", "https:", "//", "<script", "<link", "src=", "href=", "@import", "url(", "@font-face"] {
        assert!(!html.contains(forbidden), "{forbidden} in the report");
    }
    assert!(html.starts_with("<!DOCTYPE html>\n"));
    assert!(html.contains("<style>") && html.contains("@media print"));
    assert!(html.contains("max-width: 1232px"), "fits a 1280-px screen");
    assert!(!html.contains("xmlns"), "HTML5 inline SVG needs no namespace");
}

#[test]
fn no_text_column_but_the_allowed_ones_reaches_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let html = fixture_html(dir.path(), "fixture");
    for canary in CANARIES {
        assert!(!html.contains(canary), "{canary} in the report");
    }
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_html(&dir.path().join("a"), "t");
    let b = fixture_html(&dir.path().join("b"), "t");
    assert_eq!(a, b);
}

#[test]
fn an_empty_dataset_has_every_panel_saying_why_it_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = write(&dir.path().join("empty"), &[], &[]);
    let html = html(&read(&dataset, ""), "empty");
    assert_eq!(html.matches("<svg").count(), CHARTS);
    assert_eq!(html.matches(">no data: ").count(), CHARTS, "{html}");
    for reason in [
        "no data: no request has ttft_s",
        "no data: no request has queue_s",
        "no data: no request has both arrival_time and e2e_s",
        "no data: no kv_cache_usage samples",
        "no data: no requests_waiting samples",
    ] {
        assert!(html.contains(reason), "{reason} not in the report");
    }
    assert!(html.contains("<tr><th>requests</th><td>0</td></tr>"));
    assert!(html.contains("<tr><th>status</th><td>none</td></tr>"));
    assert!(html.contains("no request has a duration"));
    assert!(html.contains("no kv_cache_usage or requests_waiting samples"));
    assert!(html.contains("no SLO given"));
}

#[test]
fn public_traces_without_ttft_still_chart_what_they_have() {
    // Arrivals, token counts and prefix hashes only, as in Mooncake: blocks 1, 2 then 1, 2, 3 → 2 of 5 hit.
    let dir = tempfile::tempdir().unwrap();
    let row = |arrival: f64, hashes: Vec<u64>| RequestRow {
        source: "trace".into(),
        arrival_time: at(arrival),
        input_tokens: Some(16 * hashes.len() as u32),
        prefix_hashes: Some(hashes),
        block_size: Some(16),
        status: Status::Unknown,
        ..RequestRow::default()
    };
    let dataset = write(&dir.path().join("trace"), &[row(0.0, vec![1, 2]), row(1.0, vec![1, 2, 3])], &[]);
    let html = html(&read(&dataset, ""), "trace");
    assert!(html.contains("no data: no request has ttft_s"));
    let cache = chart(&html, "Cache hit rate per tier");
    // 2 × 16 of 5 × 16 tokens: 40.0%, labelled 32/80; the recorded tiers are n/a.
    assert!(cache.contains(">40.0%</text>") && cache.contains(">32/80</text>"), "{cache}");
    assert_eq!(cache.matches(">n/a</text>").count(), 5, "{cache}");
    assert!(html.contains("<tr><th>prefix reuse (unbounded cache)</th><td>40.0% of 80 tokens (2 requests)</td></tr>"));
}

#[test]
fn long_cdfs_are_downsampled_and_keep_both_ends() {
    // TTFT 1 ms, 2 ms, …, 1000 ms: 512 ranks plus the start point, as steps (two corners per rank).
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<RequestRow> = (1..=1000)
        .map(|i| RequestRow {
            source: "t".into(),
            arrival_time: at(f64::from(i)),
            ttft_s: Some(f64::from(i) / 1000.0),
            ..RequestRow::default()
        })
        .collect();
    let dataset = write(&dir.path().join("long"), &rows, &[]);
    let html = html(&read(&dataset, ""), "long");
    let points = polyline(chart(&html, "TTFT CDF"));
    // The start point and two corners per rank, less the first corner, which repeats the start point.
    assert_eq!(points.len(), 1 + 2 * 512 - 1);
    // The minimum (1 ms on a 0..1 s axis: x 62 + 0.472) at 0%, the maximum (1 s) at 100%.
    assert_eq!(points.first(), Some(&"62.5,274.0"));
    assert_eq!(points.last(), Some(&"534.0,54.0"));
    // Latency over time: 60 bins, one line per quantile.
    let over_time = chart(&html, "TTFT over time");
    assert_eq!(over_time.matches("<polyline").count(), 2, "{over_time}");
    assert_eq!(polyline(over_time).len(), 60);
}

#[test]
fn sample_charts_draw_the_most_sampled_instances() {
    // inst-00 … inst-09, instance i with i + 1 KV samples one second apart: inst-00 and inst-01 are left out.
    let dir = tempfile::tempdir().unwrap();
    let samples: Vec<EngineSample> = (0..10)
        .flat_map(|i| {
            (0..=i).map(move |k| EngineSample {
                time: T0 + k * S,
                source: "t".into(),
                instance: Some(format!("inst-{i:02}").into()),
                metric: metrics::KV_CACHE_USAGE.into(),
                value: 0.5,
                ..EngineSample::default()
            })
        })
        .collect();
    let dataset = write(&dir.path().join("many"), &[], &samples);
    let html = html(&read(&dataset, ""), "many");
    let kv = chart(&html, "KV-cache usage over time");
    assert!(kv.contains("the 8 most sampled of 10 instances; 2 omitted"), "{kv}");
    assert_eq!(kv.matches("class=\"legend\"").count(), 8);
    assert!(!kv.contains("inst-00") && !kv.contains("inst-01") && kv.contains("inst-02") && kv.contains("inst-09"));
    // inst-00 has a single sample: its row in the table, a dot nowhere (it is not drawn).
    assert!(html.contains("<tr><th>inst-00</th><td>1</td>"));
    assert!(html.contains("no data: no requests_waiting samples"));
}
