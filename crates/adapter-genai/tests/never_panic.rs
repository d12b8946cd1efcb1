//! Property tests: whatever the bytes, the three adapters neither panic nor fail (content is diagnostics, never
//! an error), starting from the real examples of `testdata/genai/` cut, spliced and flipped at random.

use infertrace_adapter::{Adapter, CollectSink, ParseContext, ParseOptions};
use infertrace_adapter_genai::{LitellmSpend, OpenaiUsage, OtelGenai};
use proptest::prelude::*;

fn parses(adapter: &dyn Adapter, bytes: &[u8]) {
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "input", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    adapter.parse(&mut &bytes[..], &ctx, &mut sink).expect("content never fails a parse");
    let _ = adapter.detect(&bytes[..bytes.len().min(4096)]);
}

fn seeds() -> Vec<(&'static dyn Adapter, Vec<u8>)> {
    let file = |path: &str| std::fs::read(format!("../../testdata/genai/{path}")).unwrap();
    vec![
        (&OtelGenai, file("otel/microsoft-agent-framework.otlp.jsonl")),
        (&OtelGenai, file("otel/pydantic-ai-gemini.otlp.json")),
        (&LitellmSpend, file("litellm/spend-logs.csv")),
        (&LitellmSpend, file("litellm/standard-logging-payload.json")),
        (&OpenaiUsage, file("openai-usage/openai-api-examples.jsonl")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn mutated_examples_never_panic(which in 0usize..5, cut in 0usize..20_000, flips in prop::collection::vec((0usize..20_000, any::<u8>()), 0..24), splice in prop::collection::vec(any::<u8>(), 0..64)) {
        let (adapter, mut bytes) = seeds().swap_remove(which);
        for (at, byte) in flips {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        let at = cut % (bytes.len() + 1);
        bytes.splice(at..at, splice);
        bytes.truncate(bytes.len().saturating_sub(cut % 7));
        parses(adapter, &bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048), which in 0usize..3) {
        let adapter: &dyn Adapter = [&OtelGenai as &dyn Adapter, &LitellmSpend, &OpenaiUsage][which];
        parses(adapter, &bytes);
        // Framed as protobuf, so that the OTLP reader takes its binary path.
        let mut framed = u32::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
        framed.push(0x0A);
        framed.extend_from_slice(&bytes);
        parses(&OtelGenai, &framed);
    }
}
