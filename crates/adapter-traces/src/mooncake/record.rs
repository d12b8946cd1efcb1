//! One line of any Mooncake variant, as a borrowing superset of the variants' keys.
//!
//! Every field is optional, so that a missing one is reported by name rather than as a parse failure, and so that
//! one struct reads every variant: the file's variant decides which fields are used. Unknown keys (`group_id`,
//! `routing_constraints`, `request_kind`, `branches`, `prefix_reset`, `source_play_ordinal`, …) are ignored.
//! Token ids (`output_token_ids`) and tool events are counted while parsing and never stored.

use std::borrow::Cow;
use std::fmt;

use std::sync::LazyLock;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};

use crate::sessions::{Digest, Key};

/// One line. The aliases are the ones Dynamo's `MooncakeRow` accepts.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Record<'a> {
    // The agentic v2 header line.
    #[serde(borrow)]
    pub(super) schema: Option<Cow<'a, str>>,
    pub(super) version: Option<u64>,
    pub(super) block_size: Option<u64>,
    #[serde(borrow)]
    pub(super) hash_id_scope: Option<Cow<'a, str>>,

    // Mooncake rows (every variant but applied_compute_agentic).
    #[serde(alias = "created_time")]
    pub(super) timestamp: Option<f64>,
    #[serde(alias = "input_tokens")]
    pub(super) input_length: Option<u64>,
    #[serde(alias = "output_tokens")]
    pub(super) output_length: Option<u64>,
    pub(super) output_token_ids: Option<Count>,
    pub(super) hash_ids: Option<Vec<u64>>,
    #[serde(borrow)]
    pub(super) request_id: Option<Id<'a>>,
    #[serde(borrow)]
    pub(super) session_id: Option<Id<'a>>,
    #[serde(alias = "delay_ms")]
    pub(super) delay: Option<f64>,
    pub(super) priority: Option<IgnoredAny>,
    pub(super) strict_priority: Option<IgnoredAny>,
    pub(super) policy_class: Option<IgnoredAny>,

    // Agentic Mooncake v2 rows.
    #[serde(borrow)]
    pub(super) play_id: Option<Id<'a>>,
    #[serde(borrow)]
    pub(super) model: Option<Cow<'a, str>>,
    pub(super) not_before_ms: Option<f64>,
    pub(super) recorded_api_time_ms: Option<f64>,
    #[serde(borrow)]
    pub(super) dependencies: Option<Vec<Dependency<'a>>>,

    // Legacy (headerless) agentic rows.
    #[serde(borrow)]
    pub(super) wait_for: Option<Vec<Id<'a>>>,
    pub(super) tool_wait_ms: Option<f64>,
    pub(super) tool_events: Option<Count>,

    // Applied Compute agentic sessions.
    pub(super) num_turns: Option<u64>,
    pub(super) input_prompt_length: Option<u64>,
    pub(super) assistant_response_length: Option<Vec<u64>>,
    pub(super) tool_call_output_length: Option<Vec<u64>>,
    pub(super) tool_call_latency: Option<Vec<f64>>,
    pub(super) final_assistant_response_length: Option<u64>,
}

impl Record<'_> {
    /// The record as the fold receives it (see [`Prepared`]), its borrowed strings copied so that it can outlive
    /// its line: lines are parsed on worker threads and folded on another.
    pub(super) fn prepare(mut self, digest: &Digest) -> Prepared {
        let request_id = self.request_id.take().map(Id::into_key);
        let session_id = self.session_id.take().map(Id::into_key);
        let prioritized =
            [self.priority.take(), self.strict_priority.take(), self.policy_class.take()].iter().any(Option::is_some);
        Prepared {
            timestamp: self.timestamp.take(),
            input_length: self.input_length.take(),
            output_length: self.output_length.take(),
            output_token_ids: self.output_token_ids.take(),
            hash_ids: self.hash_ids.take(),
            delay: self.delay.take(),
            request_key: request_id.as_deref().map(|id| digest.key(id)),
            session_key: session_id.as_deref().map(|id| digest.key(id)),
            request_id,
            session_id,
            prioritized,
            rest: (!self.is_empty()).then(|| Box::new(self.into_owned())),
        }
    }

    /// Whether every field [`prepare`](Self::prepare) leaves in the record is absent.
    fn is_empty(&self) -> bool {
        let Record {
            schema,
            version,
            block_size,
            hash_id_scope,
            timestamp,
            input_length,
            output_length,
            output_token_ids,
            hash_ids,
            request_id,
            session_id,
            delay,
            priority,
            strict_priority,
            policy_class,
            play_id,
            model,
            not_before_ms,
            recorded_api_time_ms,
            dependencies,
            wait_for,
            tool_wait_ms,
            tool_events,
            num_turns,
            input_prompt_length,
            assistant_response_length,
            tool_call_output_length,
            tool_call_latency,
            final_assistant_response_length,
        } = self;
        // Every field is named above, so a field added to `Record` must be added here too.
        [schema.is_none(), version.is_none(), block_size.is_none(), hash_id_scope.is_none(), timestamp.is_none()]
            .into_iter()
            .chain([input_length.is_none(), output_length.is_none(), output_token_ids.is_none(), hash_ids.is_none()])
            .chain([request_id.is_none(), session_id.is_none(), delay.is_none(), priority.is_none()])
            .chain([strict_priority.is_none(), policy_class.is_none(), play_id.is_none(), model.is_none()])
            .chain([not_before_ms.is_none(), recorded_api_time_ms.is_none(), dependencies.is_none()])
            .chain([wait_for.is_none(), tool_wait_ms.is_none(), tool_events.is_none(), num_turns.is_none()])
            .chain([input_prompt_length.is_none(), assistant_response_length.is_none()])
            .chain([tool_call_output_length.is_none(), tool_call_latency.is_none()])
            .chain([final_assistant_response_length.is_none()])
            .all(|absent| absent)
    }

    /// The record with its borrowed strings copied.
    fn into_owned(self) -> Record<'static> {
        Record {
            schema: self.schema.map(owned),
            version: self.version,
            block_size: self.block_size,
            hash_id_scope: self.hash_id_scope.map(owned),
            timestamp: self.timestamp,
            input_length: self.input_length,
            output_length: self.output_length,
            output_token_ids: self.output_token_ids,
            hash_ids: self.hash_ids,
            request_id: self.request_id.map(Id::into_owned),
            session_id: self.session_id.map(Id::into_owned),
            delay: self.delay,
            priority: self.priority,
            strict_priority: self.strict_priority,
            policy_class: self.policy_class,
            play_id: self.play_id.map(Id::into_owned),
            model: self.model.map(owned),
            not_before_ms: self.not_before_ms,
            recorded_api_time_ms: self.recorded_api_time_ms,
            dependencies: self.dependencies.map(|d| d.into_iter().map(Dependency::into_owned).collect()),
            wait_for: self.wait_for.map(|ids| ids.into_iter().map(Id::into_owned).collect()),
            tool_wait_ms: self.tool_wait_ms,
            tool_events: self.tool_events,
            num_turns: self.num_turns,
            input_prompt_length: self.input_prompt_length,
            assistant_response_length: self.assistant_response_length,
            tool_call_output_length: self.tool_call_output_length,
            tool_call_latency: self.tool_call_latency,
            final_assistant_response_length: self.final_assistant_response_length,
        }
    }

    /// Whether the line carries a key only the legacy agentic rows have.
    pub(super) fn has_agentic_keys(&self) -> bool {
        self.wait_for.is_some() || self.tool_wait_ms.is_some() || self.tool_events.is_some()
    }

    /// Whether the line carries a key only Applied Compute sessions have.
    pub(super) fn has_applied_compute_keys(&self) -> bool {
        self.num_turns.is_some() || self.input_prompt_length.is_some() || self.assistant_response_length.is_some()
    }
}

/// One line as the fold receives it: the fields a Mooncake row reads inline, the digests of its ids, and every
/// other field in a boxed [`Record`] when the line has any (never on a plain Mooncake row).
///
/// A whole `Record` is several hundred bytes, mostly absent fields; handed from the thread that parsed it to the
/// one that folds it, every one of its cache lines moved between cores, and the fold read most of them to find the
/// fields absent. This is a quarter of that, stored in place in the batch.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) timestamp: Option<f64>,
    pub(super) input_length: Option<u64>,
    pub(super) output_length: Option<u64>,
    pub(super) output_token_ids: Option<Count>,
    pub(super) hash_ids: Option<Vec<u64>>,
    pub(super) delay: Option<f64>,
    /// `request_id` as text (a number written in decimal).
    pub(super) request_id: Option<String>,
    /// `session_id` as text.
    pub(super) session_id: Option<String>,
    /// [`Digest::key`] of `request_id`.
    pub(super) request_key: Option<Key>,
    /// [`Digest::key`] of `session_id`.
    pub(super) session_key: Option<Key>,
    /// Whether `priority`, `strict_priority` or `policy_class` is present.
    pub(super) prioritized: bool,
    rest: Option<Box<Record<'static>>>,
}

/// The record of a line that has no other field.
static EMPTY: LazyLock<Record<'static>> = LazyLock::new(Record::default);

impl Prepared {
    /// The line's other fields (all absent when it has none); the fields above are absent from it.
    pub(super) fn rest(&self) -> &Record<'static> {
        self.rest.as_deref().unwrap_or(&EMPTY)
    }
}

/// One entry of a v2 row's `dependencies`.
#[derive(Debug, Deserialize)]
pub(super) struct Dependency<'a> {
    #[serde(borrow)]
    pub(super) request_id: Option<Id<'a>>,
    #[serde(borrow)]
    pub(super) trigger: Option<Cow<'a, str>>,
    pub(super) delay_ms: Option<f64>,
    #[serde(borrow)]
    pub(super) relation: Option<Cow<'a, str>>,
}

impl Dependency<'_> {
    fn into_owned(self) -> Dependency<'static> {
        Dependency {
            request_id: self.request_id.map(Id::into_owned),
            trigger: self.trigger.map(owned),
            delay_ms: self.delay_ms,
            relation: self.relation.map(owned),
        }
    }
}

fn owned(text: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(text.into_owned())
}

/// Ids are strings in Dynamo's fixtures but may be numbers elsewhere (u64, never through f64).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Id<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Number(u64),
}

impl Id<'_> {
    fn into_owned(self) -> Id<'static> {
        match self {
            Id::Text(text) => Id::Text(owned(text)),
            Id::Number(n) => Id::Number(n),
        }
    }

    /// The id as text, without a copy when it is text already.
    fn into_key(self) -> String {
        match self {
            Id::Text(text) => text.into_owned(),
            Id::Number(n) => n.to_string(),
        }
    }

    pub(super) fn to_key(&self) -> Cow<'_, str> {
        match self {
            Id::Text(text) => Cow::Borrowed(text),
            Id::Number(n) => Cow::Owned(n.to_string()),
        }
    }
}

/// The length of a JSON array whose elements are skipped unread (token ids, tool events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        deserializer.deserialize_seq(Counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_counts() {
        let r: Record<'_> = serde_json::from_str(
            r#"{"input_tokens":5,"output_tokens":2,"created_time":1.5,"delay_ms":3,
                "output_token_ids":[9,8,7],"tool_events":[{"a":1},{}],"group_id":4,"priority":-1}"#,
        )
        .unwrap();
        assert_eq!((r.input_length, r.output_length, r.timestamp, r.delay), (Some(5), Some(2), Some(1.5), Some(3.0)));
        assert_eq!((r.output_token_ids, r.tool_events), (Some(Count(3)), Some(Count(2))));
        assert!(r.priority.is_some() && r.has_agentic_keys() && !r.has_applied_compute_keys());
        let both = serde_json::from_str::<Record<'_>>(r#"{"delay":1,"delay_ms":2}"#);
        assert!(both.is_err(), "an alias and its field together are a duplicate key, as in Dynamo");
    }
}
