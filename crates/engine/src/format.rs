//! Figures as text, written one way for the terminal (`infertrace metrics`) and the HTML report alike: counts with
//! thousands separators, three significant digits, durations in s, ms or µs, percentages with one decimal.
//! Missing figures are `-`.

/// Formats a count with thousands separators: `12031` → `12,031`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Three significant digits with a unit suffix: `7.10`, `65.5`, `0.400`, `1234`.
pub fn significant(value: f64, unit: &str) -> String {
    if value == 0.0 {
        return format!("0{unit}");
    }
    let digits = value.abs().log10().floor() as i32;
    let decimals = (2 - digits).clamp(0, 6) as usize;
    format!("{value:.decimals$}{unit}")
}

/// A duration with three significant digits in s, ms or µs: `7.10 s`, `65.5 s`, `123 ms`.
pub fn seconds(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1.0 || magnitude == 0.0 {
        significant(value, " s")
    } else if magnitude >= 1e-3 {
        significant(value * 1e3, " ms")
    } else {
        significant(value * 1e6, " µs")
    }
}

/// A rate (or any plain figure) with three significant digits, `-` when missing.
pub fn rate(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |v| significant(v, ""))
}

/// Four significant digits with trailing zeros dropped, whole numbers with thousands separators from 10,000:
/// `6.66`, `0.0001235`, `4000`, `24,000`; non-finite values as Rust writes them.
pub fn figure(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    if v.abs() >= 10_000.0 {
        let sign = if v < 0.0 { "-" } else { "" };
        return format!("{sign}{}", count(v.abs().round() as u64));
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    let digits = v.abs().log10().floor() as i32;
    let decimals = (3 - digits).clamp(0, 9) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

/// Dollars with three significant digits (`$6.25`, `$0.00144`), `-` when missing.
pub fn dollars(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |v| format!("${}", significant(v, "")))
}

/// Three significant digits below 1,000, whole numbers with thousands separators from there: `0.375`, `264`,
/// `1,375`; `-` when absent.
pub fn quantity(value: Option<f64>) -> String {
    match value {
        Some(v) if v.abs() >= 1000.0 && v.is_finite() => {
            let sign = if v < 0.0 { "-" } else { "" };
            format!("{sign}{}", count(v.abs().round() as u64))
        }
        other => rate(other),
    }
}

/// A fraction as a percentage with one decimal: `0.4567` → `45.7%`; `-` when missing.
pub fn percent(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_four_significant_digits() {
        assert_eq!(figure(6.66), "6.66");
        assert_eq!(figure(0.000_123_46), "0.0001235");
        assert_eq!(figure(4000.0), "4000");
        assert_eq!(figure(24_000.4), "24,000");
        assert_eq!(figure(-0.5), "-0.5");
        assert_eq!(figure(0.0), "0");
    }

    #[test]
    fn money_and_large_figures() {
        assert_eq!(quantity(Some(1374.6)), "1,375");
        assert_eq!(quantity(Some(0.0036)), "0.00360");
        assert_eq!(quantity(None), "-");
        assert_eq!(dollars(Some(6.25)), "$6.25");
        assert_eq!(dollars(None), "-");
    }

    #[test]
    fn durations_keep_three_significant_digits() {
        assert_eq!(seconds(7.1), "7.10 s");
        assert_eq!(seconds(65.49), "65.5 s");
        assert_eq!(seconds(123.4), "123 s");
        assert_eq!(seconds(0.1234), "123 ms");
        assert_eq!(seconds(0.00456), "4.56 ms");
        assert_eq!(seconds(0.0000456), "45.6 µs");
        assert_eq!(seconds(0.0), "0 s");
        assert_eq!(significant(0.4, ""), "0.400");
        assert_eq!(significant(12345.6, ""), "12346");
    }

    #[test]
    fn counts_and_percentages() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(12031), "12,031");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(percent(Some(0.4567)), "45.7%");
        assert_eq!(percent(None), "-");
        assert_eq!(rate(Some(2.0)), "2.00");
    }
}
