//! Request logs (`--log-requests`): what the tokenizer manager writes when a request arrives and finishes.
//!
//! ```text
//! 0.3.0 – 0.4.0   in={GenerateReqInput repr}, out={response dict}                       (at finish only)
//! 0.4.1           Receive: obj={…}   Finish: obj={…}, out={…}   strings "…", dict keys unquoted
//! 0.4.2 – 0.5.6   the same heads, Python reprs ('…', quoted keys), long values cut as 'head' ... 'tail'
//! 0.5.7+          or --log-requests-format json: {"timestamp": …, "event": "request.received"|"request.finished",
//!                 "rid": …, "obj": {…}[, "out": {…}]}
//! 0.5.8+          Receive: obj={…}[, headers={…}]   Finish: obj={…}[, headers={…}], out={…}
//! out             {'text': …, 'output_ids': …, 'meta_info': {'id', 'prompt_tokens', 'completion_tokens',
//!                 'cached_tokens', 'cached_tokens_details' {device, host, storage}, 'reasoning_tokens',
//!                 'e2e_latency' (s), 'finish_reason' ('FINISH_LENGTH: 128' until 0.3.0, then {'type': …}),
//!                 'queue_time', 'request_received_ts' / 'response_sent_to_client_ts' (epoch s, --enable-metrics)}}
//! ```
//!
//! Only `meta_info` and a few `obj` fields are read (`rid`, `received_time`, `max_new_tokens`, the length of
//! `input_ids`); prompt and output text are skipped without being kept. Because long values are cut with `' ... '`
//! at some levels, `meta_info` is located and parsed on its own rather than the whole `out` dict.

use std::sync::LazyLock;

use infertrace_adapter::fragments::{PyValue, py_value};
use regex::Regex;
use serde_json::Value;

/// What a request line says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RequestFacts {
    pub(crate) rid: Option<String>,
    /// `received_time` of the request object (epoch seconds, 0.5.7+).
    pub(crate) received_time: Option<f64>,
    pub(crate) max_new_tokens: Option<u32>,
    pub(crate) input_ids: Option<u32>,
    /// `meta_info`, when the line is a finish.
    pub(crate) meta: Option<Meta>,
    /// The `timestamp` of a JSON record (local ISO 8601).
    pub(crate) logged_at: Option<String>,
}

/// The fields of `meta_info` that reach a request row.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Meta {
    pub(crate) id: Option<String>,
    pub(crate) prompt_tokens: Option<u32>,
    pub(crate) completion_tokens: Option<u32>,
    pub(crate) cached_tokens: Option<u32>,
    pub(crate) cached_device: Option<u32>,
    pub(crate) cached_host: Option<u32>,
    pub(crate) cached_storage: Option<u32>,
    pub(crate) reasoning_tokens: Option<u32>,
    pub(crate) e2e_latency: Option<f64>,
    pub(crate) queue_time: Option<f64>,
    pub(crate) received_ts: Option<f64>,
    pub(crate) finished_ts: Option<f64>,
    /// `stop`, `length`, `abort`, … (the dict's `type`, or the 0.3.0 `FINISH_*` name lowered).
    pub(crate) finish_reason: Option<String>,
    pub(crate) status_code: Option<u16>,
    /// Keys of `meta_info` no release is known to write, for the drift report.
    pub(crate) unknown: Vec<String>,
}

/// A request line of either kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RequestLine {
    Received(RequestFacts),
    Finished(RequestFacts),
    /// Recognised as a request line but not readable (cut short in the source, for example).
    Malformed(&'static str),
}

static RID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\brid=(?:'(?P<a>[^']*)'|"(?P<b>[^"]*)")"#).expect("valid regex"));
static RECEIVED_TIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\breceived_time=(?P<t>[0-9.e+-]+)").expect("valid regex"));
static MAX_NEW_TOKENS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"['"]?max_new_tokens['"]?: (?P<n>\d+)"#).expect("valid regex"));

/// The facts of the `obj=` part (any repr style), without parsing its text fields.
fn obj_facts(obj: &str) -> RequestFacts {
    let rid = RID.captures(obj).and_then(|c| c.name("a").or(c.name("b"))).map(|m| m.as_str().to_owned());
    let received_time = RECEIVED_TIME.captures(obj).and_then(|c| c["t"].parse().ok());
    let max_new_tokens = MAX_NEW_TOKENS.captures(obj).and_then(|c| c["n"].parse().ok());
    // `input_ids=[…]` counts only when the list is whole (levels that cut it write `[..] ... [..]`).
    let input_ids = obj.find("input_ids=[").and_then(|at| {
        let (rest, list) = py_value(&obj[at + "input_ids=".len()..]).ok()?;
        if rest.trim_start().starts_with("...") {
            return None;
        }
        match list {
            PyValue::List(items) => u32::try_from(items.len()).ok(),
            _ => None,
        }
    });
    RequestFacts { rid, received_time, max_new_tokens, input_ids, meta: None, logged_at: None }
}

/// Every key SGLang 0.3.0 to 0.5.23 writes into a finished request's `meta_info` (read from each release's
/// `tokenizer_manager.py` and the files it takes keys from); any other key is counted by name in the drift report.
/// 0.5.8+ also copies a model's `customized_info` keys there, which are counted too.
const META_KEYS: &[&str] = &[
    "id",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "completion_tokens_wo_jump_forward",
    "cached_tokens",
    "input_token_logprobs",
    "output_token_logprobs",
    "input_top_logprobs",
    "output_top_logprobs",
    "normalized_prompt_logprob",
    "spec_verify_ct",
    "hidden_states",
    "e2e_latency",
    "input_token_ids_logprobs",
    "output_token_ids_logprobs",
    "weight_version",
    "spec_accept_rate",
    "spec_accept_length",
    "total_retractions",
    "queue_time",
    "prefill_delay",
    "prefill_latency",
    "request_received_ts",
    "request_scheduled_ts",
    "prefill_finished_ts",
    "response_sent_ts",
    "decode_finished_ts",
    "forward_time",
    "decode_throughput",
    "time_per_token",
    "prefill_launch_delay",
    "prefill_launch_latency",
    "request_sent_to_scheduler_ts",
    "response_sent_to_client_ts",
    "inference_time",
    "spec_accept_token_num",
    "spec_draft_token_num",
    "routed_experts",
    "cached_tokens_details",
    "spec_accept_histogram",
    "reasoning_tokens",
    "dp_rank",
    "output_token_logprobs_length",
    "api_server_dispatch_finish_ts",
    "request_finished_ts",
    "forward_entry_time",
    "prefill_finished_time",
    "prefill_waiting_latency",
    "spec_accepted_drafts",
    "spec_proposed_drafts",
    "num_retractions",
    "indexer_topk",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_correct_drafts_histogram",
    "num_running_reqs",
    "num_waiting_reqs",
    "image_tokens",
    "audio_tokens",
    "video_tokens",
    "output_token_sampling_mask",
    "output_token_sampling_logprobs",
    "output_token_sampling_mask_length",
    "spec_cap_length",
    "spec_block_accept_length",
    "spec_cap_lens_histogram",
    "input_top_logprobs_val_flat",
    "input_top_logprobs_idx_flat",
    "input_top_logprobs_shape",
    "input_top_logprobs_null_prefix",
    "input_top_logprobs_val_flat_b64",
    "input_top_logprobs_idx_flat_b64",
    "input_top_logprobs_val_flat_b64_dtype",
    "input_top_logprobs_idx_flat_b64_dtype",
    "weight_versions",
    "beam_results",
    "sequence_score",
    "first_token_latency",
    "output_top_logprobs_val_flat",
    "output_top_logprobs_idx_flat",
    "output_top_logprobs_shape",
    "output_top_logprobs_null_prefix",
    "output_top_logprobs_val_flat_b64",
    "output_top_logprobs_idx_flat_b64",
    "output_top_logprobs_val_flat_b64_dtype",
    "output_top_logprobs_idx_flat_b64_dtype",
    "storage_prefetch_wait",
    "storage_staging_wait",
];

/// The accessors `meta_info` needs, over a Python repr or a JSON value, so one mapping serves both forms.
trait Fields {
    fn field(&self, key: &str) -> Option<&Self>;
    fn number(&self) -> Option<f64>;
    fn text(&self) -> Option<&str>;
    fn is_map(&self) -> bool;
    /// The keys of a map, in the order written (text keys only).
    fn keys(&self) -> Vec<&str>;
}

impl Fields for PyValue<'_> {
    fn field(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }
    fn number(&self) -> Option<f64> {
        self.as_f64()
    }
    fn text(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            PyValue::Name(name) => Some(name),
            _ => None,
        }
    }
    fn is_map(&self) -> bool {
        matches!(self, PyValue::Dict(_))
    }
    fn keys(&self) -> Vec<&str> {
        match self {
            PyValue::Dict(entries) => entries.iter().filter_map(|(key, _)| key.text()).collect(),
            _ => Vec::new(),
        }
    }
}

impl Fields for Value {
    fn field(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }
    fn number(&self) -> Option<f64> {
        self.as_f64()
    }
    fn text(&self) -> Option<&str> {
        self.as_str()
    }
    fn is_map(&self) -> bool {
        self.is_object()
    }
    fn keys(&self) -> Vec<&str> {
        self.as_object().map(|map| map.keys().map(String::as_str).collect()).unwrap_or_default()
    }
}

/// A whole, non-negative number that fits `T`.
fn whole<T: TryFrom<u64>>(n: f64) -> Option<T> {
    (n >= 0.0 && n.fract() == 0.0 && n <= u64::MAX as f64).then(|| T::try_from(n as u64).ok()).flatten()
}

/// The `meta_info` fields that reach a request row.
fn meta_from<F: Fields>(meta: &F) -> Meta {
    let number = |key: &str| meta.field(key).and_then(F::number);
    let count = |key: &str| number(key).and_then(whole::<u32>);
    let details = meta.field("cached_tokens_details");
    let detail = |key: &str| details.and_then(|d| d.field(key)).and_then(F::number).and_then(whole::<u32>);
    let reason = meta.field("finish_reason");
    let (finish_reason, status_code) = match reason {
        Some(r) if r.is_map() => (
            r.field("type").and_then(F::text).map(str::to_owned),
            r.field("status_code").and_then(F::number).and_then(whole::<u16>),
        ),
        // 0.3.0: `FINISH_LENGTH: 128`, `FINISH_MATCHED_TOKEN: 2`, `FINISH_ABORT`.
        Some(r) => (r.text().map(legacy_reason), None),
        None => (None, None),
    };
    Meta {
        id: meta.field("id").and_then(F::text).map(str::to_owned),
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
        cached_tokens: count("cached_tokens"),
        cached_device: detail("device"),
        cached_host: detail("host"),
        cached_storage: detail("storage"),
        reasoning_tokens: count("reasoning_tokens"),
        e2e_latency: number("e2e_latency"),
        queue_time: number("queue_time"),
        received_ts: number("request_received_ts"),
        finished_ts: number("response_sent_to_client_ts").or_else(|| number("request_finished_ts")),
        finish_reason,
        status_code,
        unknown: meta
            .keys()
            .into_iter()
            .filter(|key| !META_KEYS.contains(key))
            .filter_map(infertrace_adapter::drift::field_name)
            .map(str::to_owned)
            .collect(),
    }
}

/// `meta_info` from a Python-repr `out` (quoted or, in 0.4.1, unquoted keys).
fn meta_from_repr(text: &str) -> Option<Meta> {
    let at = text
        .rfind("'meta_info': {")
        .map(|i| i + "'meta_info': ".len())
        .or_else(|| text.rfind("meta_info: {").map(|i| i + "meta_info: ".len()))?;
    let (_, dict) = py_value(&text[at..]).ok()?;
    Some(meta_from(&dict))
}

/// `meta_info` from the JSON form (a request log's `out.meta_info`, or a request-metrics record).
pub(crate) fn meta_from_json(meta: &Value) -> Meta {
    meta_from(meta)
}

fn legacy_reason(text: &str) -> String {
    let name = text.split(':').next().unwrap_or(text).trim();
    match name {
        "FINISH_LENGTH" => "length",
        "FINISH_ABORT" => "abort",
        "FINISH_MATCHED_TOKEN" | "FINISH_MATCHED_STR" => "stop",
        other => return other.to_ascii_lowercase(),
    }
    .to_owned()
}

/// Classifies one message (after the envelope), or a bare JSON line.
pub(crate) fn parse(message: &str) -> Option<RequestLine> {
    if message.starts_with('{') && message.contains("\"event\"") && message.contains("\"request.") {
        let json: Value = match serde_json::from_str(message) {
            Ok(json) => json,
            Err(_) => return Some(RequestLine::Malformed("a JSON request log cut short")),
        };
        let event = json.get("event").and_then(Value::as_str)?;
        let obj = json.get("obj");
        let mut facts = RequestFacts {
            rid: json.get("rid").and_then(Value::as_str).map(str::to_owned),
            received_time: obj.and_then(|o| o.get("received_time")).and_then(Value::as_f64),
            max_new_tokens: obj
                .and_then(|o| o.get("sampling_params"))
                .and_then(|s| s.get("max_new_tokens"))
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            input_ids: None,
            meta: None,
            logged_at: json.get("timestamp").and_then(Value::as_str).map(str::to_owned),
        };
        return match event {
            "request.received" => Some(RequestLine::Received(facts)),
            "request.finished" => {
                facts.meta = json.get("out").and_then(|o| o.get("meta_info")).map(meta_from_json);
                Some(RequestLine::Finished(facts))
            }
            _ => None, // `request.received.openai`: the raw payload of a request logged again as `received`.
        };
    }
    if let Some(obj) = message.strip_prefix("Receive: obj=") {
        let facts = obj_facts(obj);
        return Some(if facts.rid.is_some() {
            RequestLine::Received(facts)
        } else {
            RequestLine::Malformed("a Receive line without a rid")
        });
    }
    let finish = message.strip_prefix("Finish: obj=").or_else(|| message.strip_prefix("in="));
    if let Some(text) = finish {
        let mut facts = obj_facts(text);
        facts.meta = meta_from_repr(text);
        return Some(match (&facts.meta, &facts.rid) {
            (None, _) => RequestLine::Malformed("a Finish line whose meta_info is missing or cut short"),
            _ => RequestLine::Finished(facts),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_lines_of_every_generation() {
        // 0.4.2+ repr with cut text, quoted keys, a dict finish_reason and HiCache details.
        let line = "Finish: obj=GenerateReqInput(rid='r1', text='Tell me' ... 'story', input_ids=None, sampling_params={'max_new_tokens': 64}), out={'text': 'Once' ... 'end', 'meta_info': {'id': 'r1', 'finish_reason': {'type': 'length', 'length': 64}, 'prompt_tokens': 12, 'completion_tokens': 64, 'cached_tokens': 8, 'cached_tokens_details': {'device': 4, 'host': 2, 'storage': 2, 'storage_backend': 'file'}, 'reasoning_tokens': 10, 'e2e_latency': 1.5}}";
        let Some(RequestLine::Finished(facts)) = parse(line) else { panic!() };
        assert_eq!((facts.rid.as_deref(), facts.max_new_tokens), (Some("r1"), Some(64)));
        let meta = facts.meta.unwrap();
        assert_eq!(
            meta,
            Meta {
                id: Some("r1".into()),
                prompt_tokens: Some(12),
                completion_tokens: Some(64),
                cached_tokens: Some(8),
                cached_device: Some(4),
                cached_host: Some(2),
                cached_storage: Some(2),
                reasoning_tokens: Some(10),
                e2e_latency: Some(1.5),
                finish_reason: Some("length".into()),
                ..Meta::default()
            }
        );
        // 0.4.1: double-quoted strings, unquoted keys; an abort with its status code.
        let v041 = r#"Finish: obj=GenerateReqInput(rid="r2", text="hi"), out={text: "", meta_info: {id: "r2", finish_reason: {type: "abort", message: "client gone", status_code: 499}, prompt_tokens: 3, completion_tokens: 0}}"#;
        let Some(RequestLine::Finished(facts)) = parse(v041) else { panic!() };
        let meta = facts.meta.unwrap();
        assert_eq!(
            (meta.finish_reason.as_deref(), meta.status_code, meta.prompt_tokens),
            (Some("abort"), Some(499), Some(3))
        );
        // 0.3.0: in=/out= with the string finish reason.
        let v030 = "in=GenerateReqInput(text='x', input_ids=[1, 2, 3], sampling_params={'max_new_tokens': 128}, rid='r3'), out={'text': 'y', 'meta_info': {'prompt_tokens': 3, 'completion_tokens': 128, 'completion_tokens_wo_jump_forward': 128, 'finish_reason': 'FINISH_LENGTH: 128', 'id': 'r3'}}";
        let Some(RequestLine::Finished(facts)) = parse(v030) else { panic!() };
        assert_eq!((facts.input_ids, facts.meta.as_ref().unwrap().finish_reason.as_deref()), (Some(3), Some("length")));
    }

    #[test]
    fn receive_lines_and_json() {
        let line = "Receive: obj=GenerateReqInput(validation_time=2.3e-05, received_time=1766581510.102859, received_time_perf=13744958.7, rid='request_id-test', input_ids=[1, 2] ... [9], sampling_params={'max_new_tokens': 7})";
        assert_eq!(
            parse(line),
            Some(RequestLine::Received(RequestFacts {
                rid: Some("request_id-test".into()),
                received_time: Some(1766581510.102859),
                max_new_tokens: Some(7),
                input_ids: None,
                meta: None,
                logged_at: None,
            }))
        );
        let json = r#"{"timestamp": "2025-12-24T21:05:35.1", "event": "request.finished", "rid": "j1", "obj": {"received_time": 1766581510.5, "sampling_params": {"max_new_tokens": 9}}, "out": {"meta_info": {"id": "j1", "prompt_tokens": 5, "completion_tokens": 9, "finish_reason": {"type": "stop", "matched": 2}, "e2e_latency": 0.25}}}"#;
        let Some(RequestLine::Finished(facts)) = parse(json) else { panic!() };
        assert_eq!(
            (facts.rid.as_deref(), facts.received_time, facts.max_new_tokens),
            (Some("j1"), Some(1766581510.5), Some(9))
        );
        assert_eq!(facts.meta.unwrap().finish_reason.as_deref(), Some("stop"));
        assert_eq!(parse(r#"{"event": "request.received.openai", "rid": "x"}"#), None);
        assert!(matches!(
            parse("Finish: obj=GenerateReqInput(rid='x', validation_time=2.386048436164856e-05, conver"),
            Some(RequestLine::Malformed(_))
        ));
        assert_eq!(parse("Prefill batch. #new-seq: 1"), None);
    }
}
