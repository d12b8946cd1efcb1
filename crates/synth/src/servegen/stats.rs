//! Reading ServeGen's statistics files: `chunk-<i>-trace.csv` (arrival windows) and `chunk-<i>-dataset.json`
//! (length distributions). Both are checked fully here, so sampling cannot meet a bad value.

use std::collections::BTreeMap;

/// Why a statistics file cannot be used: what is wrong, and on which line when that is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct StatsError {
    /// 1-based line of the file, when known.
    pub line: Option<u64>,
    /// What is wrong, lower-case.
    pub message: String,
}

impl StatsError {
    fn at(line: u64, message: impl Into<String>) -> Self {
        Self { line: Some(line), message: message.into() }
    }

    fn whole(message: impl Into<String>) -> Self {
        Self { line: None, message: message.into() }
    }
}

/// The fitted inter-arrival distribution of an active window. Its scale is checked but not kept: the gaps are
/// rescaled to fill the window (as ServeGen's sampler does), so only the shape matters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// `Gamma`: gaps ~ Gamma(shape, scale); CV = 1/√shape.
    Gamma {
        /// The shape parameter `k` (> 0).
        shape: f64,
    },
    /// `Weibull`: gaps ~ Weibull(shape, scale).
    Weibull {
        /// The shape parameter `k` (> 0).
        shape: f64,
    },
}

/// One row of `chunk-<i>-trace.csv`: a window of a client's arrivals.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Seconds from the start of the statistics.
    pub start_s: u64,
    /// Length in seconds: up to the next row's start (the last row is as long as the one before it).
    pub size_s: u64,
    /// Requests per second the client sent in the window.
    pub rate: f64,
    /// The inter-arrival distribution, or `None` for an idle window (empty pattern column).
    pub pattern: Option<Pattern>,
    /// The row's line in the file, recorded as `source_line`.
    pub line: u64,
}

/// The window length ServeGen uses, for a trace of a single row.
pub const DEFAULT_WINDOW_S: u64 = 600;

/// Reads `chunk-<i>-trace.csv`: headerless rows `window_start_s,rate,cv,pattern,shape,scale`.
///
/// Blank lines are skipped; starts must increase; rates and CVs must be finite and non-negative; an active
/// window's pattern must be `Gamma` or `Weibull` with finite positive shape and scale.
pub fn parse_trace(text: &str) -> Result<Vec<Window>, StatsError> {
    let mut windows: Vec<Window> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index as u64 + 1;
        let row = raw.trim();
        if row.is_empty() {
            continue;
        }
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        let [start, rate, cv, pattern, shape, scale] = fields[..] else {
            return Err(StatsError::at(line, format!("expected 6 comma-separated fields, found {}", fields.len())));
        };
        let start_s: u64 =
            start.parse().map_err(|_| StatsError::at(line, "window start is not a whole number of seconds"))?;
        let rate = number(line, "rate", rate)?;
        number(line, "cv", cv)?;
        let pattern = match pattern {
            "" => None,
            "Gamma" | "Weibull" => {
                let shape = positive(line, "shape", shape)?;
                positive(line, "scale", scale)?;
                Some(if pattern == "Gamma" { Pattern::Gamma { shape } } else { Pattern::Weibull { shape } })
            }
            _ => return Err(StatsError::at(line, "unknown arrival pattern (expected Gamma, Weibull or empty)")),
        };
        if let Some(previous) = windows.last_mut() {
            if start_s <= previous.start_s {
                return Err(StatsError::at(line, "window starts must increase"));
            }
            previous.size_s = start_s - previous.start_s;
        }
        windows.push(Window { start_s, size_s: 0, rate, pattern, line });
    }
    let last_size = match windows.as_slice() {
        [] => return Err(StatsError::whole("no windows")),
        [_] => DEFAULT_WINDOW_S,
        [.., before, _] => before.size_s,
    };
    if let Some(last) = windows.last_mut() {
        last.size_s = last_size;
    }
    Ok(windows)
}

fn number(line: u64, name: &str, text: &str) -> Result<f64, StatsError> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(value),
        _ => Err(StatsError::at(line, format!("{name} is not a finite non-negative number"))),
    }
}

fn positive(line: u64, name: &str, text: &str) -> Result<f64, StatsError> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
        _ => Err(StatsError::at(line, format!("{name} is not a finite positive number"))),
    }
}

/// A discrete distribution as sorted values and cumulative probabilities (values of probability 0 dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    values: Vec<f64>,
    cumulative: Vec<f64>,
}

/// How far the probabilities of a distribution may sum from 1 (ServeGen's own check).
const SUM_TOLERANCE: f64 = 1e-6;

impl Cdf {
    /// Builds a distribution from `(value, probability)` pairs; `None` when there are none.
    fn new(mut pairs: Vec<(f64, f64)>) -> Result<Option<Self>, String> {
        if pairs.is_empty() {
            return Ok(None);
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err("a value is listed twice".to_owned());
        }
        let mut values = Vec::with_capacity(pairs.len());
        let mut cumulative = Vec::with_capacity(pairs.len());
        let mut total = 0.0;
        for (value, probability) in pairs {
            if probability > 0.0 {
                total += probability;
                values.push(value);
                cumulative.push(total);
            }
        }
        if (total - 1.0).abs() > SUM_TOLERANCE {
            return Err(format!("probabilities sum to {total}, not 1"));
        }
        Ok(Some(Self { values, cumulative }))
    }

    /// The value at quantile `u` in (0, 1]: the smallest value whose cumulative probability reaches `u` (numpy's
    /// `searchsorted` as ServeGen uses it), with the probabilities normalised to sum to exactly 1.
    pub fn quantile(&self, u: f64) -> f64 {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let index = self.cumulative.partition_point(|&c| c < u * total);
        self.values.get(index).or(self.values.last()).copied().unwrap_or(0.0)
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        let mut previous = 0.0;
        let mut sum = 0.0;
        for (value, cumulative) in self.values.iter().zip(&self.cumulative) {
            sum += value * (cumulative - previous);
            previous = *cumulative;
        }
        sum / previous
    }
}

/// One medium of a multimodal request: per-item token counts, and how many items a request has.
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    /// Tokens of one item (`image_tokens`, …).
    pub tokens: Cdf,
    /// Items per request (`image_count`, …); without it, `tokens` is drawn once per request.
    pub count: Option<Cdf>,
}

/// The length distributions of one `chunk-<i>-dataset.json` window.
#[derive(Debug, Clone, PartialEq)]
pub struct Lengths {
    /// `input_tokens` (language and reasoning models).
    pub input: Option<Cdf>,
    /// `text_tokens` (multimodal models): the text part of the prompt.
    pub text: Option<Cdf>,
    /// `image_*`, `audio_*`, `video_*`, in that order.
    pub media: [Option<Media>; 3],
    /// `output_tokens`.
    pub output: Cdf,
    /// `reason_ratio`: the share of the output spent reasoning, in [0, 1] (reasoning models).
    pub reason_ratio: Option<Cdf>,
}

/// The media of multimodal statistics, in the order they are drawn.
pub const MEDIA: [&str; 3] = ["image", "audio", "video"];

/// Length distributions by window start (seconds), windows whose distributions are all present only.
pub type LengthTable = BTreeMap<u64, Lengths>;

/// Reads `chunk-<i>-dataset.json`: `{"<window start s>": {"<field>": "<Python dict {value: probability}>"}}`.
///
/// A window in which any field is `{}` is left out, as ServeGen's loader does; requests in it take the
/// distributions of the latest earlier window.
pub fn parse_lengths(text: &str) -> Result<LengthTable, StatsError> {
    let document: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_str(text).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "expected an object of objects of strings",
            _ => "not valid JSON",
        };
        StatsError { line: Some(e.line() as u64).filter(|&l| l > 0), message: what.to_owned() }
    })?;
    let mut table = LengthTable::new();
    for (key, fields) in document {
        let start: u64 = key
            .parse()
            .map_err(|_| StatsError::whole(format!("window key {key:?} is not a whole number of seconds")))?;
        let context = |field: &str, message: String| StatsError::whole(format!("window {start}, {field}: {message}"));
        let mut parsed: BTreeMap<&str, Cdf> = BTreeMap::new();
        let mut empty = false;
        for (field, dict) in &fields {
            let Some(known) = FIELDS.iter().find(|f| **f == field.as_str()) else {
                return Err(StatsError::whole(format!("window {start}: unknown field {field:?}")));
            };
            let ratio = *known == "reason_ratio";
            let pairs = python_dict(dict, ratio).map_err(|m| context(field, m))?;
            match Cdf::new(pairs).map_err(|m| context(field, m))? {
                Some(cdf) => {
                    parsed.insert(known, cdf);
                }
                None => empty = true,
            }
        }
        if empty || fields.is_empty() {
            continue;
        }
        let lengths = lengths(parsed).map_err(|m| StatsError::whole(format!("window {start}: {m}")))?;
        table.insert(start, lengths);
    }
    Ok(table)
}

/// Every field ServeGen's statistics carry.
const FIELDS: &[&str] = &[
    "input_tokens",
    "output_tokens",
    "reason_ratio",
    "text_tokens",
    "image_tokens",
    "audio_tokens",
    "video_tokens",
    "image_count",
    "audio_count",
    "video_count",
];

fn lengths(mut fields: BTreeMap<&str, Cdf>) -> Result<Lengths, String> {
    let output = fields.remove("output_tokens").ok_or("no output_tokens")?;
    let input = fields.remove("input_tokens");
    let text = fields.remove("text_tokens");
    if input.is_none() && text.is_none() {
        return Err("neither input_tokens nor text_tokens".to_owned());
    }
    let mut media = [None, None, None];
    for (slot, medium) in media.iter_mut().zip(MEDIA) {
        let tokens = fields.remove(format!("{medium}_tokens").as_str());
        let count = fields.remove(format!("{medium}_count").as_str());
        *slot = match (tokens, count) {
            (Some(tokens), count) => Some(Media { tokens, count }),
            (None, Some(_)) => return Err(format!("{medium}_count without {medium}_tokens")),
            (None, None) => None,
        };
    }
    Ok(Lengths { input, text, media, output, reason_ratio: fields.remove("reason_ratio") })
}

/// Reads a Python dict literal of numbers, `{163: 0.25, 165: 0.0135}`; token values must be whole numbers that
/// fit 32 bits, ratios numbers in [0, 1]; probabilities finite and non-negative.
fn python_dict(text: &str, ratio: bool) -> Result<Vec<(f64, f64)>, String> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or("not a {value: probability} dict")?
        .trim();
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    let mut pairs = Vec::new();
    for (index, item) in inner.split(',').enumerate() {
        let malformed = || format!("entry {} is not value: probability", index + 1);
        let (key, probability) = item.split_once(':').ok_or_else(malformed)?;
        let key: f64 = key.trim().parse().map_err(|_| malformed())?;
        let probability: f64 = probability.trim().parse().map_err(|_| malformed())?;
        let key_ok = if ratio {
            (0.0..=1.0).contains(&key)
        } else {
            key.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&key)
        };
        if !key_ok {
            let expected = if ratio { "a ratio in [0, 1]" } else { "a whole token count" };
            return Err(format!("entry {}: value is not {expected}", index + 1));
        }
        if !(probability.is_finite() && probability >= 0.0) {
            return Err(format!("entry {}: probability is not a finite non-negative number", index + 1));
        }
        pairs.push((key, probability));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_rows_become_windows() {
        let text = "0,0,0,,0,0\n600,0.5,1.2,Gamma,0.7,0.04\r\n\n1200,0.1,3.0,Weibull,0.4,0.009\n";
        let windows = parse_trace(text).unwrap();
        assert_eq!(
            windows,
            [
                Window { start_s: 0, size_s: 600, rate: 0.0, pattern: None, line: 1 },
                Window { start_s: 600, size_s: 600, rate: 0.5, pattern: Some(Pattern::Gamma { shape: 0.7 }), line: 2 },
                Window {
                    start_s: 1200,
                    size_s: 600,
                    rate: 0.1,
                    pattern: Some(Pattern::Weibull { shape: 0.4 }),
                    line: 4
                },
            ]
        );
        // Uneven steps: each window lasts until the next; the last as long as the one before it.
        let windows = parse_trace("0,1,1,Gamma,1,1\n300,1,1,Gamma,1,1\n1000,1,1,Gamma,1,1").unwrap();
        assert_eq!(windows.iter().map(|w| w.size_s).collect::<Vec<_>>(), [300, 700, 700]);
        assert_eq!(parse_trace("60,2,1,Gamma,1,1").unwrap()[0].size_s, 600);
    }

    #[test]
    fn bad_trace_rows_are_errors_with_their_line() {
        let cases: &[(&str, u64, &str)] = &[
            ("0,0,0,,0", 1, "expected 6 comma-separated fields, found 5"),
            ("0,0,0,,0,0\nx,1,1,Gamma,1,1", 2, "window start is not a whole number of seconds"),
            ("0,-1,0,Gamma,1,1", 1, "rate is not a finite non-negative number"),
            ("0,NaN,0,Gamma,1,1", 1, "rate is not a finite non-negative number"),
            ("0,1,x,Gamma,1,1", 1, "cv is not a finite non-negative number"),
            ("0,1,1,Poisson,1,1", 1, "unknown arrival pattern (expected Gamma, Weibull or empty)"),
            ("0,1,1,Gamma,0,1", 1, "shape is not a finite positive number"),
            ("0,1,1,Weibull,1,inf", 1, "scale is not a finite positive number"),
            ("600,0,0,,0,0\n600,0,0,,0,0", 2, "window starts must increase"),
        ];
        for (text, line, message) in cases {
            assert_eq!(parse_trace(text), Err(StatsError::at(*line, *message)), "{text}");
        }
        assert_eq!(parse_trace("\n\n").unwrap_err().to_string(), "no windows");
        assert_eq!(StatsError::at(3, "x").to_string(), "line 3: x");
    }

    #[test]
    fn cdf_quantiles_follow_searchsorted() {
        // P(10) = 0.25, P(20) = 0 (dropped), P(30) = 0.75.
        let cdf = Cdf::new(vec![(30.0, 0.75), (10.0, 0.25), (20.0, 0.0)]).unwrap().unwrap();
        assert_eq!(cdf.quantile(1e-12), 10.0);
        assert_eq!(cdf.quantile(0.25), 10.0);
        assert_eq!(cdf.quantile(0.2500001), 30.0);
        assert_eq!(cdf.quantile(1.0), 30.0);
        assert_eq!(cdf.mean(), 10.0 * 0.25 + 30.0 * 0.75);
        assert_eq!(Cdf::new(vec![]), Ok(None));
        assert_eq!(Cdf::new(vec![(1.0, 0.5)]), Err("probabilities sum to 0.5, not 1".to_owned()));
        assert_eq!(Cdf::new(vec![(1.0, 0.5), (1.0, 0.5)]), Err("a value is listed twice".to_owned()));
    }

    #[test]
    fn python_dicts_are_read() {
        assert_eq!(python_dict("{9: 0.25, 163: 7.5e-01}", false), Ok(vec![(9.0, 0.25), (163.0, 0.75)]));
        assert_eq!(python_dict(" {} ", false), Ok(vec![]));
        assert_eq!(python_dict("{0.0: 0.5, 0.5: 0.5}", true), Ok(vec![(0.0, 0.5), (0.5, 0.5)]));
        assert_eq!(python_dict("[1, 2]", false), Err("not a {value: probability} dict".to_owned()));
        assert_eq!(python_dict("{1: 0.5, 2 0.5}", false), Err("entry 2 is not value: probability".to_owned()));
        assert_eq!(python_dict("{1.5: 1.0}", false), Err("entry 1: value is not a whole token count".to_owned()));
        assert_eq!(python_dict("{1.5: 1.0}", true), Err("entry 1: value is not a ratio in [0, 1]".to_owned()));
        assert_eq!(
            python_dict("{1: -1.0}", false),
            Err("entry 1: probability is not a finite non-negative number".to_owned())
        );
    }

    #[test]
    fn dataset_windows_become_length_tables() {
        let text = r#"{
            "0": {"input_tokens": "{}", "output_tokens": "{}"},
            "21600": {"input_tokens": "{100: 0.5, 300: 0.5}", "output_tokens": "{7: 1.0}",
                      "reason_ratio": "{0.0: 0.5, 1.0: 0.5}"}
        }"#;
        let table = parse_lengths(text).unwrap();
        assert_eq!(table.keys().copied().collect::<Vec<_>>(), [21600], "the empty window is left out");
        let lengths = &table[&21600];
        assert_eq!(lengths.input.as_ref().unwrap().mean(), 200.0);
        assert_eq!(lengths.output.mean(), 7.0);
        assert_eq!(lengths.reason_ratio.as_ref().unwrap().mean(), 0.5);
        assert!(lengths.text.is_none() && lengths.media.iter().all(Option::is_none));

        let multimodal = r#"{"0": {"text_tokens": "{136: 1.0}", "image_tokens": "{1196: 1.0}",
            "image_count": "{1: 0.5, 2: 0.5}", "audio_tokens": "{0: 1.0}", "output_tokens": "{20: 1.0}"}}"#;
        let lengths = &parse_lengths(multimodal).unwrap()[&0];
        let image = lengths.media[0].as_ref().unwrap();
        assert_eq!((image.tokens.mean(), image.count.as_ref().unwrap().mean()), (1196.0, 1.5));
        assert!(lengths.media[1].as_ref().unwrap().count.is_none());
        assert!(lengths.media[2].is_none());
    }

    #[test]
    fn bad_datasets_are_errors() {
        let cases: &[(&str, &str)] = &[
            ("{", "line 1: not valid JSON"),
            (r#"{"0": {"input_tokens": 5}}"#, "line 1: expected an object of objects of strings"),
            (r#"{"x": {}}"#, "window key \"x\" is not a whole number of seconds"),
            (r#"{"0": {"prompt": "{}"}}"#, "window 0: unknown field \"prompt\""),
            (r#"{"0": {"input_tokens": "{1: 1.0}"}}"#, "window 0: no output_tokens"),
            (r#"{"0": {"output_tokens": "{1: 1.0}"}}"#, "window 0: neither input_tokens nor text_tokens"),
            (
                r#"{"0": {"text_tokens": "{1: 1.0}", "image_count": "{1: 1.0}", "output_tokens": "{1: 1.0}"}}"#,
                "window 0: image_count without image_tokens",
            ),
            (r#"{"600": {"input_tokens": "{1: 0.9}"}}"#, "window 600, input_tokens: probabilities sum to 0.9, not 1"),
        ];
        for (text, message) in cases {
            assert_eq!(parse_lengths(text).unwrap_err().to_string(), *message, "{text}");
        }
    }
}
