use super::*;

const MS: i64 = 1_000_000;

fn row(session: Option<&str>, arrival_ms: i64, input: u32, output: u32, hashes: &[u64]) -> RequestRow {
    RequestRow {
        session_id: session.map(str::to_owned),
        arrival_time: Some(1_000 * MS + arrival_ms * MS),
        input_tokens: Some(input),
        output_tokens: Some(output),
        prefix_hashes: Some(hashes.to_vec()),
        block_size: Some(4),
        ..RequestRow::default()
    }
}

fn options(format: Format) -> Options {
    Options { format, block_size: 4, time_scale: 1.0, max_input_tokens: None, start_ns: 1_000 * MS, seed: 0 }
}

fn export(options: Options, rows: &[RequestRow]) -> (Vec<serde_json::Value>, Counts) {
    let mut out = Vec::new();
    let mut exporter = Exporter::new(&mut out, options);
    for (ordinal, row) in rows.iter().enumerate() {
        exporter.push(row, ordinal as u64).unwrap();
    }
    let counts = exporter.finish().unwrap();
    let text = String::from_utf8(out).unwrap();
    (text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), counts)
}

#[test]
fn mooncake_lines_have_offsets_lengths_dense_ids_and_sessions() {
    let rows = [
        row(Some("s1"), 0, 10, 3, &[70, 71, 72]),
        row(None, 1_500, 8, 2, &[70, 80]),
        row(Some("s1"), 2_250, 17, 1, &[70, 71, 90, 91, 92]),
    ];
    let (lines, counts) = export(options(Format::Mooncake), &rows);
    let expected = [
        r#"{"session_id":"s1","timestamp":0,"input_length":10,"output_length":3,"hash_ids":[0,1,2]}"#,
        r#"{"timestamp":1500,"input_length":8,"output_length":2,"hash_ids":[0,3]}"#,
        r#"{"session_id":"s1","timestamp":2250,"input_length":17,"output_length":1,"hash_ids":[0,1,4,5,6]}"#,
    ];
    let expected: Vec<serde_json::Value> = expected.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, expected);
    assert_eq!((counts.requests, counts.sessions, counts.blocks_shared, counts.blocks_own), (3, 1, 10, 0));
}

#[test]
fn time_scale_and_clipping_apply_and_are_counted() {
    let rows = [row(None, 1_000, 10, 3, &[70, 71, 72]), row(None, 3_001, 6, 3, &[70, 75])];
    let mut options = options(Format::Mooncake);
    options.time_scale = 0.5;
    options.max_input_tokens = Some(7);
    let (lines, counts) = export(options, &rows);
    assert_eq!(lines[0]["timestamp"], 500);
    assert_eq!(lines[1]["timestamp"], 1_501); // 3001 × 0.5 = 1500.5, rounded half away from zero
    assert_eq!(lines[0]["input_length"], 7);
    // 7 tokens: a full block (hash 70) and 3 tokens of the block hashed 71.
    assert_eq!(lines[0]["hash_ids"], serde_json::json!([0, 1]));
    assert_eq!(lines[1]["hash_ids"], serde_json::json!([0, 2]));
    assert_eq!((counts.clipped, counts.clipped_tokens), (1, 3));
}

#[test]
fn rows_that_cannot_be_replayed_are_counted_not_written() {
    let mut no_input = row(None, 0, 1, 1, &[]);
    no_input.input_tokens = None;
    let mut no_output = row(None, 0, 1, 1, &[]);
    no_output.output_tokens = None;
    let mut limit = no_output.clone();
    limit.max_tokens = Some(64);
    let mut no_arrival = row(None, 0, 1, 1, &[]);
    no_arrival.arrival_time = None;
    let (lines, counts) = export(options(Format::Mooncake), &[no_input, no_output, limit, no_arrival]);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["output_length"], 64);
    assert_eq!(
        (counts.requests, counts.without_input_tokens, counts.without_output_tokens, counts.without_arrival),
        (1, 1, 1, 1)
    );
    assert_eq!(counts.output_from_max_tokens, 1);
}

fn turns() -> Vec<RequestRow> {
    let mut first = row(Some("a"), 0, 8, 2, &[1, 2]);
    first.completion_time = Some(1_000 * MS + 400 * MS);
    // 8 + 2 = 10 tokens of context, then 3 new ones; arrives 600 ms after the first completed.
    let second = row(Some("a"), 1_000, 13, 4, &[1, 2, 3]);
    // Compacted: 5 tokens, less than 13 + 4; a session of its own.
    let third = row(Some("a"), 5_000, 5, 1, &[9]);
    vec![first, second, third, row(None, 7_000, 4, 4, &[1])]
}

#[test]
fn aiperf_mooncake_writes_later_turns_as_new_tokens_after_a_delay() {
    let (lines, counts) = export(options(Format::AiperfMooncake), &turns());
    let expected = [
        r#"{"session_id":"a","timestamp":0,"input_length":8,"output_length":2,"hash_ids":[0,1]}"#,
        r#"{"session_id":"a","delay":600,"input_length":3,"output_length":4}"#,
        r#"{"session_id":"a~2","timestamp":5000,"input_length":5,"output_length":1,"hash_ids":[2,3]}"#,
        r#"{"timestamp":7000,"input_length":4,"output_length":4,"hash_ids":[0]}"#,
    ];
    let expected: Vec<serde_json::Value> = expected.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, expected);
    assert_eq!((counts.sessions, counts.sessions_restarted, counts.delays_from_arrivals), (2, 1, 0));
}

#[test]
fn aiperf_multi_turn_writes_one_line_per_session_with_new_text_per_turn() {
    let rows = turns();
    let (lines, _) = export(options(Format::AiperfMultiTurn), &rows);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["session_id"], "a");
    let turns = lines[0]["turns"].as_array().unwrap();
    let words = |v: &serde_json::Value| v["text"].as_str().unwrap().split(' ').skip(1).count();
    assert_eq!((words(&turns[0]), words(&turns[1])), (8, 3));
    assert_eq!((&turns[0]["timestamp"], &turns[1]["delay"]), (&serde_json::json!(0), &serde_json::json!(600)));
    assert!(turns[0].get("delay").is_none() && turns[1].get("timestamp").is_none());
    // The second turn's text is tokens 10..13 of its prompt.
    let prompt = PromptText::new(&[1, 2, 3], Some(4), mix(mix(1)));
    assert_eq!(turns[1]["text"], prompt.text(10..13));
    assert_eq!(lines[1]["session_id"], "a~2");
    assert!(lines[2].get("session_id").is_none());
    assert_eq!(lines[2]["turns"][0]["output_length"], 4);
}

#[test]
fn vllm_custom_prompts_share_text_where_hashes_are_shared() {
    let rows = [row(None, 0, 10, 3, &[70, 71, 72]), row(None, 5, 9, 2, &[70, 71, 99])];
    let (lines, _) = export(options(Format::VllmCustom), &rows);
    let words =
        |i: usize| lines[i]["prompt"].as_str().unwrap().split(' ').skip(1).map(str::to_owned).collect::<Vec<_>>();
    let (a, b) = (words(0), words(1));
    assert_eq!((a.len(), b.len()), (10, 9));
    assert_eq!(a[..8], b[..8]);
    assert_eq!(lines[0]["output_tokens"], 3);
}

#[test]
fn delays_without_a_completion_count_from_the_previous_arrival() {
    let rows = [row(Some("s"), 0, 4, 1, &[]), row(Some("s"), 2_000, 6, 1, &[])];
    let (lines, counts) = export(options(Format::AiperfMooncake), &rows);
    assert_eq!(lines[1]["delay"], 2_000);
    assert_eq!(counts.delays_from_arrivals, 1);
    assert_eq!(lines[0]["hash_ids"], serde_json::json!([0]));
    assert_eq!(counts.blocks_own, 1);
}
