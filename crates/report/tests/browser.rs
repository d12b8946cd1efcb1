//! The report in a real browser: headless Chromium parses it into the DOM we expect and paints the charts where
//! they belong.
//!
//! Chromium is found through `INFERTRACE_CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome` on
//! `PATH`. Without one these tests fail, unless `INFERTRACE_SKIP_BROWSER_TESTS=1` is set (then they pass with a
//! note on stderr).
#![allow(clippy::print_stderr)]

mod common;

use std::env;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use infertrace_report::CHARTS;

/// How long Chromium may take before it is killed.
const DEADLINE: Duration = Duration::from_secs(120);

fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = env::var_os("INFERTRACE_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .flat_map(|name| env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium, or `None` (with a note) when it is missing and the browser tests may be skipped.
fn chromium(test: &str) -> Option<PathBuf> {
    if let Some(path) = find_chromium() {
        return Some(path);
    }
    if env::var("INFERTRACE_SKIP_BROWSER_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("skipping {test}: no Chromium found and INFERTRACE_SKIP_BROWSER_TESTS=1");
        return None;
    }
    panic!(
        "no Chromium found: apt-get install chromium, set INFERTRACE_CHROMIUM to its path, or set \
         INFERTRACE_SKIP_BROWSER_TESTS=1 to skip the browser tests"
    );
}

/// Runs headless Chromium on `page` with `args`, its stdout into `stdout`, killed after [`DEADLINE`].
fn run_chromium(browser: &Path, work: &Path, args: &[OsString], page: &Path, stdout: &Path) {
    let stderr_path = work.join("chromium.stderr");
    let mut profile = OsString::from("--user-data-dir=");
    profile.push(work.join("profile"));
    let mut url = OsString::from("file://");
    url.push(page);
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1"])
        .arg(profile)
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(File::create(stdout).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", browser.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish within {} s", browser.display(), DEADLINE.as_secs());
        }
        sleep(Duration::from_millis(100));
    };
    let stderr = fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(status.success(), "{} failed ({status}): {stderr}", browser.display());
}

/// Writes the fixture report into a new temporary directory.
fn fixture_page() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let html = common::fixture_html(dir.path(), "browser fixture");
    let page = dir.path().join("report.html");
    fs::write(&page, html).unwrap();
    (dir, page)
}

#[test]
fn chromium_parses_every_chart_heading_and_figure() {
    let Some(browser) = chromium("chromium_parses_every_chart_heading_and_figure") else { return };
    let (dir, page) = fixture_page();
    let dom_path = dir.path().join("dom.html");
    run_chromium(&browser, dir.path(), &["--dump-dom".into()], &page, &dom_path);
    let dom = fs::read_to_string(&dom_path).unwrap();
    assert_eq!(dom.matches("<svg").count(), CHARTS, "{dom}");
    assert_eq!(dom.matches("<figure>").count(), CHARTS);
    for heading in ["Summary", "Latency distributions", "Over time", "Cache and load", "Engine samples per instance"] {
        assert!(dom.contains(&format!("<h2>{heading}</h2>")), "{heading} missing from\n{dom}");
    }
    for title in [
        "TTFT CDF",
        "TPOT CDF",
        "E2E latency CDF",
        "queue time CDF",
        "TTFT over time",
        "E2E latency over time",
        "KV-cache usage over time",
        "Queue depth over time",
        "Cache hit rate per tier",
        "TTFT under load",
    ] {
        assert!(dom.contains(&format!("<title>{title}</title>")), "{title} missing");
    }
    // Figures computed by hand in tests/report.rs: success rate 2 / 3, mean TTFT 3.5 / 3 s, cache 100 / 400.
    for figure in [
        "<td>66.7%</td>",
        "<th>ttft_s</th><td>3</td><td>1.17 s</td><td>1.00 s</td>",
        "<td>25.0% of 400 input tokens (3 requests)</td>",
        "<th>engine-1</th><td>0</td><td>-</td><td>-</td><td>-</td><td>2</td><td>2.00</td>",
    ] {
        assert!(dom.contains(figure), "{figure} missing");
    }
    // The hostile instance name stayed text: no script element exists.
    assert!(!dom.contains("<script"), "{dom}");
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; \"q\" 'x'"), "{dom}");
}

/// Decoded RGB pixels of a PNG: (width, height, 3 bytes per pixel).
fn decode(path: &Path) -> (usize, usize, Vec<u8>) {
    let mut decoder = png::Decoder::new(BufReader::new(File::open(path).unwrap()));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let rgb = buffer[..info.buffer_size()].chunks(channels).flat_map(|p| [p[0], p[1], p[2]]).collect();
    (info.width as usize, info.height as usize, rgb)
}

/// Pixels within 40 of `colour` on every channel in rows `rows` and columns `columns`.
fn count_near(image: &(usize, usize, Vec<u8>), colour: &str, rows: (usize, usize), columns: (usize, usize)) -> usize {
    let (width, height, rgb) = image;
    let target: Vec<u8> = (0..3).map(|i| u8::from_str_radix(&colour[1 + 2 * i..3 + 2 * i], 16).unwrap()).collect();
    let mut n = 0;
    for y in rows.0..rows.1.min(*height) {
        for x in columns.0..columns.1.min(*width) {
            let p = &rgb[(y * width + x) * 3..][..3];
            if p.iter().zip(&target).all(|(a, b)| a.abs_diff(*b) <= 40) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn the_screenshot_shows_the_cdfs_in_their_colours() {
    let Some(browser) = chromium("the_screenshot_shows_the_cdfs_in_their_colours") else { return };
    let (dir, page) = fixture_page();
    let shot = dir.path().join("shot.png");
    let mut screenshot = OsString::from("--screenshot=");
    screenshot.push(&shot);
    let args = [screenshot, "--window-size=1280,2400".into()];
    run_chromium(&browser, dir.path(), &args, &page, &dir.path().join("stdout"));
    let image = decode(&shot);
    let (width, height, rgb) = &image;
    assert_eq!((*width, *height), (1280, 2400));
    // Not blank: a fair share of the page is ink, in many colours.
    let ink = rgb.chunks(3).filter(|p| p.iter().any(|c| *c < 200)).count();
    assert!(ink > width * height / 100, "{ink} dark pixels");
    let colours: std::collections::BTreeSet<&[u8]> = rgb.chunks(3).collect();
    assert!(colours.len() > 50, "{} colours", colours.len());
    // The TTFT CDF (blue) is the first blue thing on the page, in the left column; the TPOT CDF (orange) is beside
    // it, and the E2E (green) and queue (purple) CDFs are under them. A chart is about 330 px tall at this width.
    let first_blue = (0..*height)
        .find(|&y| count_near(&image, "#1f77b4", (y, y + 1), (0, 640)) >= 3)
        .expect("no blue pixel: the TTFT CDF is missing");
    let (top, middle, bottom) = (first_blue.saturating_sub(40), first_blue + 260, first_blue + 700);
    for (colour, rows, columns) in [
        ("#1f77b4", (top, middle), (0, 640)),
        ("#ff7f0e", (top, middle), (640, 1280)),
        ("#2ca02c", (middle, bottom), (0, 640)),
        ("#9467bd", (middle, bottom), (640, 1280)),
    ] {
        let n = count_near(&image, colour, rows, columns);
        assert!(
            n >= 150,
            "{n} pixels near {colour} in rows {rows:?}, columns {columns:?} (first blue row {first_blue})"
        );
    }
    // The CDF colours are not elsewhere in those rows: orange is not in the left column.
    assert!(count_near(&image, "#ff7f0e", (top, middle), (0, 640)) < 10);
}
