//! Property tests: statistics files of any content are read or refused, never a panic, and sampling any valid
//! statistics stays inside its span.

use infertrace_synth::servegen::{self, Client, SynthOptions};
use proptest::prelude::*;

const TRACE: &str = include_str!("../../../testdata/synth/servegen/mm-image/chunk-2-trace.csv");
const DATASET: &str = include_str!("../../../testdata/synth/servegen/mm-image/chunk-2-dataset.json");

/// `text` with the byte range `at..at + len` replaced by `with` (on character boundaries).
fn splice(text: &str, at: usize, len: usize, with: &str) -> String {
    let mut start = at % (text.len() + 1);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + len).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{with}{}", &text[..start], &text[end..])
}

proptest! {
    #[test]
    fn random_text_never_panics(text in "\\PC{0,400}") {
        let _ = servegen::parse_trace(&text);
        let _ = servegen::parse_lengths(&text);
    }

    #[test]
    fn mutated_statistics_never_panic(
        at in 0usize..20_000,
        len in 0usize..40,
        with in "[0-9a-zA-Z,.:{}\"\\- \n]{0,12}",
    ) {
        let _ = servegen::parse_trace(&splice(TRACE, at, len, &with));
        let _ = servegen::parse_lengths(&splice(DATASET, at, len, &with));
    }

    #[test]
    fn rows_stay_inside_the_span(
        rate in 0.0f64..3.0,
        shape in 0.01f64..20.0,
        gamma in any::<bool>(),
        from_s in 0u64..1_200,
        duration_s in 1u64..600,
        rate_scale in 0.0f64..4.0,
        seed in any::<u64>(),
    ) {
        let pattern = if gamma { "Gamma" } else { "Weibull" };
        let trace = format!("0,{rate},1,{pattern},{shape},1\n600,0,0,,0,0\n1200,{rate},1,{pattern},{shape},0.5\n");
        let client = Client {
            id: 3,
            trace_file: "chunk-3-trace.csv".to_owned(),
            dataset_file: "chunk-3-dataset.json".to_owned(),
            windows: servegen::parse_trace(&trace).unwrap(),
            lengths: servegen::parse_lengths(r#"{"0": {"input_tokens": "{5: 0.5, 9: 0.5}", "output_tokens": "{2: 1.0}"}}"#)
                .unwrap(),
        };
        let options = SynthOptions {
            model: "m".to_owned(), seed, from_s, duration_s, rate_scale, start_ns: 1_000,
        };
        let mut times = Vec::new();
        let summaries = servegen::generate(&[client], &options, &mut |row| {
            times.push(row.arrival_time.unwrap());
            Ok(())
        })
        .unwrap();
        prop_assert_eq!(summaries[0].requests, times.len() as u64);
        prop_assert!(times.windows(2).all(|w| w[0] <= w[1]));
        let end = 1_000 + duration_s as i64 * 1_000_000_000;
        prop_assert!(times.iter().all(|&t| (1_000..end).contains(&t)));
        // Counts are the expected value rounded up or down.
        let expected = summaries[0].expected_requests;
        prop_assert!((times.len() as f64 - expected).abs() < 1.0 * summaries[0].active_windows as f64 + 1e-6);
    }
}
