//! `servegen-synth`: requests sampled from ServeGen's statistics of Alibaba Cloud Model Studio (Bailian) traffic.
//!
//! ServeGen (`alibaba/ServeGen`, `data/<category>/<model>/`, paper arXiv 2505.09999) characterises each client of
//! a model with two files, which are all this module reads:
//!
//! ```text
//! chunk-<i>-trace.csv     headerless, one row per 600 s window (14 days for language models, 1 day otherwise):
//!                         window_start_s,rate_rps,cv,pattern,shape,scale
//!                         600,0.0766,1.156,Gamma,0.748,0.0443      pattern Gamma | Weibull
//!                         1200,0,0,,0,0                            idle window: empty pattern
//! chunk-<i>-dataset.json  {"<window_start_s, every 21600>": {"<field>": "<Python dict {value: probability}>"}}
//!                         fields input_tokens, output_tokens (language); + reason_ratio (reasoning, values in
//!                         [0, 1]); text_tokens, image_tokens, audio_tokens, video_tokens, image_count,
//!                         audio_count, video_count, output_tokens (multimodal); "{}" when the window saw nothing
//! ```
//!
//! # Sampling (ServeGen's `construct.generate_workload`, with the differences marked)
//!
//! * **Span.** The trace covers `[from, from + duration)` of the statistics (ServeGen's `pool.span`); windows cut
//!   by either end are sampled over the part inside, at the same rate. Going past the last window is an error
//!   (ServeGen would stretch the last window without end).
//! * **Count.** A window of a client with rate `r`, covered for `s` seconds, gets `x = r · rate_scale · s`
//!   requests. ServeGen's rates are counts / 600 s, so at `rate_scale` 1 and full windows `x` is the recorded count
//!   and is used exactly; a fractional `x` is rounded up with probability equal to its fraction, so counts are
//!   unbiased. *Differs:* ServeGen draws `ceil(x)` gaps and then drops the arrival that falls on the window's end,
//!   one request short per window (a client's one-request windows vanish).
//! * **Arrivals.** `n + 1` gaps are drawn from the window's Gamma or Weibull shape and rescaled to sum to `s`; the
//!   first `n` partial sums are the arrivals, strictly inside the window. The rescaling (ServeGen's) makes the
//!   fitted scale irrelevant, so gaps are drawn with scale 1: the same distribution after rescaling, without the
//!   underflow the files' tiny scales invite. Windows are independent, as in ServeGen.
//! * **Lengths.** From the latest `dataset.json` window at or before the arrival window (windows with an empty
//!   field are skipped, as ServeGen's loader does); an active window with no such distributions is an error (as in
//!   ServeGen). A value is drawn by inverse CDF (`searchsorted`, as ServeGen). *Differs:* every field gets its own
//!   uniform number; ServeGen reuses one per request for all fields, which makes input and output lengths perfectly
//!   rank-correlated, a dependence the statistics (marginals) do not state.
//! * **Multimodal.** As ServeGen, `<medium>_count` items are drawn per request, each with its own
//!   `<medium>_tokens` (a medium without a count field is drawn once). `input_tokens` = text + all media tokens:
//!   the prompt the engine prefills. When `input_tokens` itself is present, it is used and the rest ignored.
//! * **Reasoning.** `reasoning_tokens` = `round(reason_ratio · output_tokens)`, reading `reason_ratio` as the share
//!   of the output spent reasoning (ServeGen only passes the ratio through).
//!
//! # Rows
//!
//! One `requests` row per arrival, sorted by arrival time (ties by client, then sequence): `request_id`
//! `<model>:<client>:<n>` with `n` counting that client's requests from 0; `source` `servegen-synth`; `model` the
//! statistics directory's name (`m-large`, `mm-image`, …); `arrival_time` = `--start` + seconds since `from`;
//! `input_tokens`, `output_tokens`, `reasoning_tokens` (reasoning models); `status` `unknown`; `source_file` the
//! client's `trace.csv` and `source_line` the window's row. Sessions, turns, prefix hashes and outcomes are left
//! null: ServeGen does not model conversations, prompt contents or service.
//!
//! # Determinism
//!
//! Client `i` draws from `ChaCha8Rng::seed_from_u64(seed)` on stream `i` (`set_stream`), window after window: per
//! active window one uniform for the count, then the `n + 1` gaps, then per request its fields in the order input
//! (or text, then image, audio, video: count, then each item), output, reason ratio. A client's requests therefore
//! depend only on its own statistics, the seed and the span, not on which other clients are included, and a longer
//! duration extends a trace without changing the windows both cover (the last, cut window aside). ChaCha8's output
//! is fixed by its specification; the Gamma and Weibull samplers use `ln`, `exp` and `powf`, whose last bit may
//! differ between platforms' math libraries, so byte-identical output is promised on one platform.

mod stats;

use infertrace_schema::{DatasetError, RequestRow};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_distr::{Distribution, Gamma, OpenClosed01, Weibull};

pub use stats::{
    Cdf, DEFAULT_WINDOW_S, LengthTable, Lengths, MEDIA, Media, Pattern, StatsError, Window, parse_lengths, parse_trace,
};

/// The `source` of every row, and the format recorded for the statistics files.
pub const SOURCE: &str = "servegen-synth";

/// One client of a model: its two statistics files, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// The `<i>` of its file names.
    pub id: u64,
    /// How `chunk-<i>-trace.csv` is recorded (`source_file`, error messages).
    pub trace_file: String,
    /// How `chunk-<i>-dataset.json` is recorded (error messages).
    pub dataset_file: String,
    /// Its arrival windows.
    pub windows: Vec<Window>,
    /// Its length distributions.
    pub lengths: LengthTable,
}

impl Client {
    /// The length distributions in force at `start_s`: the latest window at or before it.
    pub fn lengths_at(&self, start_s: u64) -> Option<&Lengths> {
        self.lengths.range(..=start_s).next_back().map(|(_, lengths)| lengths)
    }
}

/// What to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
    /// The `model` column and the first part of request ids.
    pub model: String,
    /// Seed of every client's random stream.
    pub seed: u64,
    /// Seconds into the statistics where the trace begins.
    pub from_s: u64,
    /// Seconds of trace to sample.
    pub duration_s: u64,
    /// Factor applied to every client's rate (ServeGen's `get_scaled_rate_fn`).
    pub rate_scale: f64,
    /// UTC nanoseconds of the trace's first instant (statistics time `from_s`).
    pub start_ns: i64,
}

/// What one client contributed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientSummary {
    /// Requests sampled.
    pub requests: u64,
    /// Windows of the span in which the client was active.
    pub active_windows: u64,
    /// Windows of the span in which it was idle.
    pub idle_windows: u64,
    /// Σ rate · rate_scale · seconds over the span: the requests the statistics call for.
    pub expected_requests: f64,
    /// Σ `input_tokens` sampled.
    pub input_tokens: u64,
    /// Σ `output_tokens` sampled.
    pub output_tokens: u64,
}

/// Why sampling could not run.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A statistics file is unusable as a whole or together with the others.
    #[error("{file}: {message}")]
    Statistics {
        /// The file, as recorded.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The options do not fit the statistics.
    #[error("{0}")]
    Options(String),
    /// A row could not be written.
    #[error(transparent)]
    Write(#[from] DatasetError),
}

/// Checks that `clients` (sorted by id, at least one) and `options` fit together, before anything is written:
/// the clients share their windows, the span lies inside the statistics, every active window of the span has
/// length distributions, and the times fit the timestamp range.
pub fn check(clients: &[Client], options: &SynthOptions) -> Result<(), SynthError> {
    let Some(first) = clients.first() else {
        return Err(SynthError::Options("no clients to sample".to_owned()));
    };
    let same = |a: &Window, b: &Window| (a.start_s, a.size_s) == (b.start_s, b.size_s);
    for client in clients {
        if client.windows.len() != first.windows.len()
            || !client.windows.iter().zip(&first.windows).all(|(a, b)| same(a, b))
        {
            return Err(SynthError::Statistics {
                file: client.trace_file.clone(),
                message: format!("its windows differ from those of {}", first.trace_file),
            });
        }
    }
    if !(options.rate_scale.is_finite() && options.rate_scale >= 0.0) {
        return Err(SynthError::Options("--rate-scale must be a finite non-negative number".to_owned()));
    }
    if options.duration_s == 0 {
        return Err(SynthError::Options("--duration must be positive".to_owned()));
    }
    let trace_end = first.windows.last().map_or(0, |w| w.start_s + w.size_s);
    let trace_start = first.windows.first().map_or(0, |w| w.start_s);
    let end = options.from_s.checked_add(options.duration_s).filter(|&end| end <= trace_end).ok_or_else(|| {
        SynthError::Options(format!(
            "--from {} s + --duration {} s go past the end of the statistics ({} s, in {})",
            options.from_s, options.duration_s, trace_end, first.trace_file
        ))
    })?;
    if options.from_s < trace_start {
        return Err(SynthError::Options(format!(
            "--from {} s is before the first window ({} s, in {})",
            options.from_s, trace_start, first.trace_file
        )));
    }
    i64::try_from(options.duration_s)
        .ok()
        .and_then(|d| d.checked_mul(NANOS_PER_S))
        .and_then(|d| options.start_ns.checked_add(d))
        .ok_or_else(|| SynthError::Options("--start + --duration go past the year 2262".to_owned()))?;
    for client in clients {
        for window in &client.windows {
            let inside = window.start_s < end && window.start_s + window.size_s > options.from_s;
            if inside && window.pattern.is_some() && client.lengths_at(window.start_s).is_none() {
                return Err(no_lengths(client, window));
            }
        }
    }
    Ok(())
}

fn no_lengths(client: &Client, window: &Window) -> SynthError {
    SynthError::Statistics {
        file: client.dataset_file.clone(),
        message: format!(
            "no length distributions at or before {} s, where {} line {} has arrivals",
            window.start_s, client.trace_file, window.line
        ),
    }
}

const NANOS_PER_S: i64 = 1_000_000_000;

/// One sampled request, before it becomes a row.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    time: i64,
    client: usize,
    seq: u64,
    input: u32,
    output: u32,
    reasoning: Option<u32>,
    line: u64,
}

/// Samples the requests of `clients` (sorted by id) under `options` and hands each row, in arrival order, to
/// `emit`. Memory holds one window of requests at a time. Returns one summary per client, in order.
pub fn generate(
    clients: &[Client],
    options: &SynthOptions,
    emit: &mut dyn FnMut(&RequestRow) -> Result<(), DatasetError>,
) -> Result<Vec<ClientSummary>, SynthError> {
    check(clients, options)?;
    let end_s = options.from_s + options.duration_s;
    let mut rngs: Vec<ChaCha8Rng> = clients
        .iter()
        .map(|client| {
            let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
            rng.set_stream(client.id);
            rng
        })
        .collect();
    let mut summaries = vec![ClientSummary::default(); clients.len()];
    let mut sequences = vec![0u64; clients.len()];
    let mut batch: Vec<Arrival> = Vec::new();
    let windows = clients.first().map_or(0, |c| c.windows.len());
    for index in 0..windows {
        batch.clear();
        for (ci, client) in clients.iter().enumerate() {
            let Some(window) = client.windows.get(index) else { continue };
            let low = window.start_s.max(options.from_s);
            let high = (window.start_s + window.size_s).min(end_s);
            if low >= high {
                continue;
            }
            let summary = &mut summaries[ci];
            let Some(pattern) = window.pattern else {
                summary.idle_windows += 1;
                continue;
            };
            summary.active_windows += 1;
            let lengths = client.lengths_at(window.start_s).ok_or_else(|| no_lengths(client, window))?;
            let seconds = high - low;
            let expected = window.rate * options.rate_scale * seconds as f64;
            summary.expected_requests += expected;
            let rng = &mut rngs[ci];
            let count = request_count(expected, rng);
            // `check` bounded start + duration in nanoseconds, so these cannot overflow.
            let base = options.start_ns + (low - options.from_s) as i64 * NANOS_PER_S;
            for offset in arrival_offsets(pattern, count, seconds as i64 * NANOS_PER_S, rng) {
                let (input, output, reasoning) = draw_lengths(lengths, rng);
                batch.push(Arrival {
                    time: base + offset,
                    client: ci,
                    seq: sequences[ci],
                    input,
                    output,
                    reasoning,
                    line: window.line,
                });
                sequences[ci] += 1;
                summary.requests += 1;
                summary.input_tokens += u64::from(input);
                summary.output_tokens += u64::from(output);
            }
        }
        batch.sort_unstable_by_key(|a| (a.time, a.client, a.seq));
        for arrival in &batch {
            let client = &clients[arrival.client];
            emit(&RequestRow {
                request_id: format!("{}:{}:{}", options.model, client.id, arrival.seq),
                source: SOURCE.to_owned(),
                model: Some(options.model.clone()),
                arrival_time: Some(arrival.time),
                input_tokens: Some(arrival.input),
                output_tokens: Some(arrival.output),
                reasoning_tokens: arrival.reasoning,
                source_file: Some(client.trace_file.clone()),
                source_line: Some(arrival.line),
                ..RequestRow::default()
            })?;
        }
    }
    Ok(summaries)
}

/// The number of requests of a window that calls for `expected`: exact when it is a whole number (up to rounding
/// error), else rounded up with probability equal to its fraction. Draws one number either way.
fn request_count(expected: f64, rng: &mut ChaCha8Rng) -> u64 {
    let u: f64 = OpenClosed01.sample(rng);
    let nearest = expected.round();
    if (expected - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        return nearest as u64;
    }
    let floor = expected.floor();
    floor as u64 + u64::from(u <= expected - floor)
}

/// Offsets in nanoseconds, ascending, of `count` arrivals in a window of `span_ns`: `count + 1` gaps of the
/// pattern rescaled to fill the window, cut after the `count`-th.
fn arrival_offsets(pattern: Pattern, count: u64, span_ns: i64, rng: &mut ChaCha8Rng) -> Vec<i64> {
    if count == 0 {
        return Vec::new();
    }
    let gaps: Vec<f64> = match pattern {
        Pattern::Gamma { shape } => match Gamma::new(shape, 1.0) {
            Ok(gamma) => (0..=count).map(|_| gamma.sample(rng)).collect(),
            Err(_) => Vec::new(),
        },
        Pattern::Weibull { shape } => match Weibull::new(1.0, shape) {
            Ok(weibull) => (0..=count).map(|_| weibull.sample(rng)).collect(),
            Err(_) => Vec::new(),
        },
    };
    let total: f64 = gaps.iter().sum();
    // Shapes are checked positive, so this only guards against every gap underflowing to zero.
    let even = !(total.is_finite() && total > 0.0) || gaps.len() as u64 != count + 1;
    let mut sum = 0.0;
    (0..count)
        .map(|i| {
            let fraction = if even {
                (i + 1) as f64 / (count + 1) as f64
            } else {
                sum += gaps[i as usize];
                sum / total
            };
            ((fraction * span_ns as f64).round() as i64).clamp(0, span_ns - 1)
        })
        .collect()
}

/// One request's input, output and reasoning tokens.
fn draw_lengths(lengths: &Lengths, rng: &mut ChaCha8Rng) -> (u32, u32, Option<u32>) {
    let mut draw = |cdf: &Cdf| cdf.quantile(OpenClosed01.sample(rng));
    let input = match &lengths.input {
        Some(input) => draw(input) as u32,
        None => {
            let mut tokens = lengths.text.as_ref().map_or(0, |text| draw(text) as u32);
            for media in lengths.media.iter().flatten() {
                let items = media.count.as_ref().map_or(1, |count| draw(count) as u32);
                for _ in 0..items {
                    tokens = tokens.saturating_add(draw(&media.tokens) as u32);
                }
            }
            tokens
        }
    };
    let output = draw(&lengths.output) as u32;
    let reasoning = lengths.reason_ratio.as_ref().map(|ratio| (draw(ratio) * f64::from(output)).round() as u32);
    (input, output, reasoning)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sampled_rows_are_synthetic() {
        assert_eq!(infertrace_schema::SourceKind::of(super::SOURCE), infertrace_schema::SourceKind::Synthetic);
    }

    use super::*;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn whole_counts_are_exact_and_fractions_unbiased() {
        let mut r = rng();
        assert_eq!(request_count(46.0, &mut r), 46);
        assert_eq!(request_count(0.07666666666666666 * 600.0, &mut r), 46, "rates are counts / 600 s");
        assert_eq!(request_count(0.0, &mut r), 0);
        let n = 100_000;
        let total: u64 = (0..n).map(|_| request_count(2.25, &mut r)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 2.25).abs() < 0.01, "{mean}");
    }

    #[test]
    fn arrivals_lie_strictly_inside_the_window_in_order() {
        let mut r = rng();
        for pattern in
            [Pattern::Gamma { shape: 0.26 }, Pattern::Weibull { shape: 0.198 }, Pattern::Gamma { shape: 4.0 }]
        {
            let offsets = arrival_offsets(pattern, 500, 600 * NANOS_PER_S, &mut r);
            assert_eq!(offsets.len(), 500);
            assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{pattern:?}");
            assert!(offsets.iter().all(|&o| (0..600 * NANOS_PER_S).contains(&o)));
        }
        assert!(arrival_offsets(Pattern::Gamma { shape: 1.0 }, 0, 1, &mut r).is_empty());
    }

    #[test]
    fn gamma_gaps_keep_their_burstiness() {
        // Gamma gaps with shape k have CV 1/√k; rescaling to the window keeps it (up to the n + 1 constraint).
        let mut r = rng();
        let offsets = arrival_offsets(Pattern::Gamma { shape: 0.25 }, 20_000, 600 * NANOS_PER_S, &mut r);
        let gaps: Vec<f64> = offsets.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let variance = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = variance.sqrt() / mean;
        assert!((cv - 2.0).abs() < 0.1, "{cv}");
    }

    #[test]
    fn multimodal_input_adds_text_and_every_item() {
        let lengths = parse_lengths(
            r#"{"0": {"text_tokens": "{100: 1.0}", "image_tokens": "{1000: 1.0}", "image_count": "{3: 1.0}",
                "video_tokens": "{7: 1.0}", "output_tokens": "{20: 1.0}", "reason_ratio": "{0.25: 1.0}"}}"#,
        )
        .unwrap();
        assert_eq!(draw_lengths(&lengths[&0], &mut rng()), (100 + 3 * 1000 + 7, 20, Some(5)));
    }
}
