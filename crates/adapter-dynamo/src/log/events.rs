//! Folding typed records into rows: one `requests` row per request (the open-request table, joined on every id a
//! record carries), and `cache_events` lookups for router decisions.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use ahash::RandomState;
use infertrace_adapter::time::{NANOS_PER_SEC, millis_to_nanos};
use infertrace_adapter::{Diagnostic, DiagnosticKind, ParseContext, Sink};
use infertrace_schema::{CacheEvent, CacheEventKind, CacheTier, DatasetError, RequestRow, Status};

use super::DynamoLog;
use super::line::{Fields, Line, RouteOutcome, Selection, SpanEvent, SpanName, Wording};

/// A request with no end record is written once the log is this far past its first record.
pub(crate) const OPEN_REQUEST_GRACE_NS: i64 = 600 * NANOS_PER_SEC;
/// At most this many requests are held open; past it the oldest is written early, with a diagnostic.
pub(crate) const MAX_OPEN_REQUESTS: usize = 100_000;
/// Ids of requests already written, remembered so that their late records (a `SPAN_CLOSED` after `request
/// completed`, a worker's line after the frontend's) are not taken for new requests.
const RECENTLY_CLOSED: usize = 16_384;
/// Router lines waiting for their `[ROUTING] Best` (or `Selected worker`) partner.
const PENDING_LOOKUPS: usize = 64;
/// A router line waits at most this long (log time) for its partner.
const PENDING_LOOKUP_NS: i64 = 2 * NANOS_PER_SEC;
/// Formula lines remembered for the selection that follows them.
const FORMULAS: usize = 4096;
/// Longest id kept; a longer value is not an id.
const MAX_ID: usize = 256;

/// One record, as the fold needs it.
pub(crate) struct Record<'a> {
    /// First physical line of the record.
    pub(crate) line: u64,
    /// UTC nanoseconds, when the record has a usable time.
    pub(crate) time: Option<i64>,
    /// Its fields.
    pub(crate) fields: Fields<'a>,
    /// What it says.
    pub(crate) kind: Line<'a>,
}

/// The ids a record carries.
#[derive(Debug, Default)]
struct Ids {
    /// Dynamo `request_id` values in order (readable lines carry the event's, then the span's), or
    /// `x_dynamo_request_id`.
    request: Vec<String>,
    /// The client's `x_request_id`.
    x_request: Option<String>,
    /// The W3C trace id (JSONL).
    trace: Option<String>,
}

fn usable_id(text: &str) -> Option<String> {
    // An ASCII id (nearly every one) is checked byte by byte: ASCII white space is all control characters or the
    // space, so below `!` or DEL are exactly the characters refused.
    let refused = |c: char| c.is_whitespace() || c.is_control() || c == '"';
    let clean = if text.is_ascii() {
        !text.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'"')
    } else {
        !text.chars().any(refused)
    };
    let ok = !text.is_empty() && text != "-" && text.len() <= MAX_ID && clean;
    ok.then(|| text.to_owned())
}

impl Ids {
    fn of(fields: &Fields<'_>) -> Self {
        let mut request: Vec<String> = fields.all("request_id").iter().filter_map(|id| usable_id(id)).collect();
        if let Some(id) = fields.get("x_dynamo_request_id").and_then(|id| usable_id(&id)) {
            request.push(id);
        }
        request.dedup();
        Ids {
            request,
            x_request: fields.get("x_request_id").and_then(|id| usable_id(&id)),
            trace: fields.get("trace_id").and_then(|id| usable_id(&id)),
        }
    }

    fn aliases(&self) -> Vec<String> {
        let alias = |tag: &str, id: &String| [tag, id].concat();
        let mut aliases: Vec<String> = self.request.iter().map(|id| alias("r:", id)).collect();
        aliases.extend(self.x_request.iter().map(|id| alias("x:", id)));
        aliases.extend(self.trace.iter().map(|id| alias("t:", id)));
        aliases
    }
}

/// One worker's part of a request (`handle_payload` span or ingress lines).
#[derive(Debug, Default, Clone)]
struct Leg {
    instance: Option<String>,
    received: Option<i64>,
    completed: Option<i64>,
}

impl Leg {
    fn seen(&self) -> bool {
        self.instance.is_some() || self.received.is_some() || self.completed.is_some()
    }
}

/// What is known of one request so far.
#[derive(Debug, Default)]
struct Entry {
    request_id: Option<String>,
    x_request_id: Option<String>,
    trace_id: Option<String>,
    model: Option<String>,
    received: Option<i64>,
    span_start: Option<i64>,
    span_end: Option<i64>,
    completed_at: Option<i64>,
    elapsed_ms: Option<f64>,
    ttft_ms: Option<f64>,
    itl_ms: Option<f64>,
    input_tokens: Option<u32>,
    output_tokens: Option<u32>,
    prefill_worker: Option<String>,
    decode_worker: Option<String>,
    prefill: Leg,
    backend: Leg,
    /// From the frontend's `request completed`.
    status: Option<(Status, Option<String>)>,
    /// From `request cancelled`.
    cancelled: bool,
    /// From the last `route request …` outcome.
    route: Option<(Status, Option<String>)>,
    last_line: u64,
    aliases: Vec<String>,
}

impl Entry {
    /// The row's request id: the client's `x_request_id` when it sent one (AIPerf's own request id, so client and
    /// server rows of one run join), else Dynamo's `request_id`, else the trace id.
    fn output_id(&self) -> Option<(&str, &'static str)> {
        if let Some(id) = &self.x_request_id {
            return Some((id, "x_request_id"));
        }
        if let Some(id) = &self.request_id {
            return Some((id, "request_id"));
        }
        self.trace_id.as_deref().map(|id| (id, "trace_id"))
    }

    /// Takes the span fields recorded on the `http-request` span, which ride on every record logged inside it.
    fn absorb(&mut self, fields: &Fields<'_>) {
        if self.model.is_none() {
            self.model = fields.get("model").filter(|m| !m.is_empty() && m.len() <= 200).map(|m| m.into_owned());
        }
        let token = |key: &str| fields.u64(key).and_then(|v| u32::try_from(v).ok());
        let worker = |key: &str| fields.u64(key).map(|id| id.to_string());
        self.ttft_ms = fields.f64("ttft_ms").filter(|v| *v >= 0.0).or(self.ttft_ms);
        self.itl_ms = fields.f64("avg_itl_ms").filter(|v| *v >= 0.0).or(self.itl_ms);
        self.input_tokens = token("input_tokens").or(self.input_tokens);
        self.output_tokens = token("output_tokens").or(self.output_tokens);
        self.prefill_worker = worker("prefill_worker_id").or(self.prefill_worker.take());
        self.decode_worker = worker("decode_worker_id").or(self.decode_worker.take());
    }

    fn leg(&mut self, fields: &Fields<'_>) -> &mut Leg {
        let leg =
            if fields.get("component").as_deref() == Some("prefill") { &mut self.prefill } else { &mut self.backend };
        if leg.instance.is_none() {
            leg.instance = fields.u64("instance_id").map(|id| id.to_string());
        }
        leg
    }

    fn row(self, ctx: &ParseContext<'_>) -> RequestRow {
        let elapsed = self.elapsed_ms.and_then(millis_to_nanos);
        let frontend_arrival = self
            .received
            .or(self.span_start)
            .or_else(|| self.completed_at.zip(elapsed).and_then(|(end, e)| end.checked_sub(e)));
        let legs = [&self.prefill, &self.backend];
        let arrival = frontend_arrival.or_else(|| legs.iter().filter_map(|l| l.received).min());
        let completion = match (self.received, elapsed) {
            (Some(start), Some(e)) => start.checked_add(e),
            _ => self.completed_at.or(self.span_end).or_else(|| legs.iter().filter_map(|l| l.completed).max()),
        };
        let ttft = self.ttft_ms.and_then(millis_to_nanos);
        let (status, error) = match (self.status, self.cancelled, self.route) {
            (Some(status), _, _) => status,
            (None, true, _) => (Status::Aborted, None),
            (None, false, Some(route)) => route,
            (None, false, None) => (Status::Unknown, None),
        };
        let prefill_instance = self.prefill_worker.or(self.prefill.instance.clone());
        let decode_instance = self.decode_worker.or(self.backend.instance.clone());
        let disaggregated = self.prefill.seen() && self.backend.seen();
        let request_id = self
            .x_request_id
            .or(self.request_id)
            .or(self.trace_id)
            .unwrap_or_else(|| infertrace_adapter::line_id(ctx.source_stem(), self.last_line));
        RequestRow {
            request_id,
            source: DynamoLog::ID.to_owned(),
            model: self.model,
            instance: decode_instance.clone().or(prefill_instance.clone()),
            prefill_instance,
            decode_instance,
            arrival_time: arrival,
            first_token_time: frontend_arrival.zip(ttft).and_then(|(a, t)| a.checked_add(t)),
            prefill_end_time: if disaggregated { self.prefill.completed } else { None },
            decode_start_time: if disaggregated { self.backend.received } else { None },
            completion_time: completion,
            ttft_s: self.ttft_ms.map(|ms| ms / 1e3),
            tpot_s: self.itl_ms.map(|ms| ms / 1e3),
            e2e_s: self.elapsed_ms.map(|ms| ms / 1e3),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            status,
            error,
            source_file: Some(ctx.source_file.to_owned()),
            source_line: Some(self.last_line),
            ..RequestRow::default()
        }
    }
}

/// An error kind from Dynamo's closed vocabulary (`validation`, `response_timeout`, …); anything else is not copied.
fn vocabulary_word(text: &str) -> Option<String> {
    let ok = (1..=40).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-' || b == b'.');
    ok.then(|| text.to_owned())
}

/// The result of looking a record's ids up.
enum Found {
    Open(u64),
    /// The request was already written.
    Closed,
    /// No request has these ids.
    None,
}

/// Requests seen but not yet written. The tables hash with `ahash` (keyed at random per process, like the standard
/// library's SipHash, at a fraction of its cost on ids) and are never iterated.
#[derive(Debug, Default)]
struct OpenRequests {
    entries: HashMap<u64, Entry, RandomState>,
    aliases: HashMap<String, u64, RandomState>,
    /// Entry keys in the order first seen, with the time first seen (`i64::MIN` when unknown).
    order: VecDeque<(u64, i64)>,
    next: u64,
    closed: HashSet<String, RandomState>,
    closed_order: VecDeque<String>,
}

impl OpenRequests {
    fn find(&self, aliases: &[String]) -> Found {
        if let Some(key) = aliases.iter().find_map(|a| self.aliases.get(a)) {
            return Found::Open(*key);
        }
        if aliases.iter().any(|a| self.closed.contains(a)) { Found::Closed } else { Found::None }
    }

    fn open(&mut self, ids: &Ids, aliases: Vec<String>, time: Option<i64>) -> u64 {
        let key = self.next;
        self.next += 1;
        let entry = Entry {
            request_id: ids.request.first().cloned(),
            x_request_id: ids.x_request.clone(),
            trace_id: ids.trace.clone(),
            ..Entry::default()
        };
        self.entries.insert(key, entry);
        self.order.push_back((key, time.unwrap_or(i64::MIN)));
        self.register(key, ids, aliases);
        key
    }

    /// Makes every id of the record point at `key` (ids already given to another request keep theirs).
    fn register(&mut self, key: u64, ids: &Ids, aliases: Vec<String>) {
        let Some(entry) = self.entries.get_mut(&key) else { return };
        if entry.request_id.is_none() {
            entry.request_id = ids.request.first().cloned();
        }
        if entry.x_request_id.is_none() {
            entry.x_request_id = ids.x_request.clone();
        }
        if entry.trace_id.is_none() {
            entry.trace_id = ids.trace.clone();
        }
        for alias in aliases {
            if let std::collections::hash_map::Entry::Vacant(slot) = self.aliases.entry(alias.clone()) {
                slot.insert(key);
                entry.aliases.push(alias);
            }
        }
    }

    fn close(
        &mut self,
        key: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
        counts: &mut Counts,
    ) -> Result<(), DatasetError> {
        let Some(entry) = self.entries.remove(&key) else { return Ok(()) };
        for alias in &entry.aliases {
            self.aliases.remove(alias);
            if self.closed_order.len() >= RECENTLY_CLOSED
                && let Some(old) = self.closed_order.pop_front()
            {
                self.closed.remove(&old);
            }
            self.closed.insert(alias.clone());
            self.closed_order.push_back(alias.clone());
        }
        let from = entry.output_id().map_or("line", |(_, from)| from);
        *counts.request_id_from.entry(from).or_default() += 1;
        sink.request(entry.row(ctx))
    }

    fn expire(
        &mut self,
        now: i64,
        line: u64,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
        counts: &mut Counts,
    ) -> Result<(), DatasetError> {
        while let Some(&(key, seen)) = self.order.front() {
            if !self.entries.contains_key(&key) {
                self.order.pop_front();
                continue;
            }
            let stale = seen != i64::MIN && now.saturating_sub(seen) > OPEN_REQUEST_GRACE_NS;
            let over = self.entries.len() > MAX_OPEN_REQUESTS;
            if !stale && !over {
                break;
            }
            self.order.pop_front();
            if over && !stale {
                sink.diagnostic(Diagnostic::new(
                    line,
                    DiagnosticKind::Inconsistent,
                    format!("more than {MAX_OPEN_REQUESTS} requests open: the oldest was written before its end"),
                ));
            }
            self.close(key, ctx, sink, counts)?;
        }
        Ok(())
    }
}

/// A router decision waiting for its partner line.
#[derive(Debug)]
struct PendingLookup {
    selection: Selection,
    time: Option<i64>,
    line: u64,
    request_id: Option<String>,
}

/// Run-level counts for the manifest.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    router_wording: BTreeMap<&'static str, u64>,
    formula_lines: u64,
    selections_without_lookup: u64,
    route_outcomes: BTreeMap<&'static str, u64>,
    route_outcomes_joined: u64,
    http_responses: BTreeMap<String, u64>,
    lines_after_request_end: u64,
    non_inference_spans: u64,
    request_id_from: BTreeMap<&'static str, u64>,
}

/// The fold over one input.
pub(crate) struct Folder<'c> {
    ctx: &'c ParseContext<'c>,
    open: OpenRequests,
    pending: VecDeque<PendingLookup>,
    formulas: BTreeMap<(u64, Option<u32>), u32>,
    counts: Counts,
}

impl<'c> Folder<'c> {
    pub(crate) fn new(ctx: &'c ParseContext<'c>) -> Self {
        Self {
            ctx,
            open: OpenRequests::default(),
            pending: VecDeque::new(),
            formulas: BTreeMap::new(),
            counts: Counts::default(),
        }
    }

    /// Folds one record in.
    pub(crate) fn apply(&mut self, record: Record<'_>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let ctx = self.ctx;
        let Record { line, time, fields, kind } = record;
        if let Some(now) = time {
            self.open.expire(now, line, ctx, sink, &mut self.counts)?;
            self.flush_lookups(Some(now), sink)?;
        }
        match kind {
            Line::Other => {}
            Line::Malformed(what) => sink.diagnostic(Diagnostic::new(line, DiagnosticKind::MalformedRecord, what)),
            Line::HttpResponse => {
                let status = fields.u64("status").filter(|s| (100..600).contains(s));
                let key = status.map_or_else(|| "unknown".to_owned(), |s| s.to_string());
                *self.counts.http_responses.entry(key).or_default() += 1;
            }
            Line::Formula { worker, dp_rank, cached } => {
                self.counts.formula_lines += 1;
                if let Some(cached) = cached {
                    if self.formulas.len() >= FORMULAS {
                        self.formulas.clear();
                    }
                    self.formulas.insert((worker, dp_rank), cached);
                }
            }
            Line::SelectedWithoutLookup => self.counts.selections_without_lookup += 1,
            Line::Selected(selection) => self.selected(selection, &fields, time, line, sink)?,
            Line::RouteOutcome(outcome) => {
                *self.counts.route_outcomes.entry(outcome.as_str()).or_default() += 1;
                let ids = Ids::of(&fields);
                if let Found::Open(key) = self.open.find(&ids.aliases())
                    && let Some(entry) = self.open.entries.get_mut(&key)
                {
                    self.counts.route_outcomes_joined += 1;
                    entry.route = Some(match outcome {
                        RouteOutcome::Completed => (Status::Ok, None),
                        RouteOutcome::Cancelled | RouteOutcome::FailedCancelled => (Status::Aborted, None),
                        RouteOutcome::Failed => {
                            let kind = fields.get("error.type").or_else(|| fields.get("request.outcome"));
                            (Status::Error, kind.and_then(|k| vocabulary_word(&k)))
                        }
                    });
                }
            }
            Line::Span { name: SpanName::Other, .. } => {}
            Line::Span { name: SpanName::HttpRequest, .. } if fields.get("method").as_deref() == Some("GET") => {
                self.counts.non_inference_spans += 1;
            }
            kind => self.lifecycle(kind, &fields, time, line, sink)?,
        }
        Ok(())
    }

    /// A record about one request's lifecycle.
    fn lifecycle(
        &mut self,
        kind: Line<'_>,
        fields: &Fields<'_>,
        time: Option<i64>,
        line: u64,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        let mut ids = Ids::of(fields);
        match kind {
            Line::LegacyRemotePrefill { id, .. } | Line::LegacyDequeued { id } => {
                ids = Ids { request: usable_id(id).into_iter().collect(), ..Ids::default() };
            }
            _ => {}
        }
        let aliases = ids.aliases();
        if aliases.is_empty() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MissingField,
                "request record without `request_id`, `x_request_id` or `trace_id`",
            ));
            return Ok(());
        }
        if time.is_none() {
            sink.diagnostic(Diagnostic::new(
                line,
                DiagnosticKind::MissingField,
                "request record without a usable `time`: its instants are unknown",
            ));
        }
        let key = match self.open.find(&aliases) {
            Found::Open(key) => {
                self.open.register(key, &ids, aliases);
                key
            }
            Found::Closed => {
                self.counts.lines_after_request_end += 1;
                return Ok(());
            }
            Found::None => self.open.open(&ids, aliases, time),
        };
        let Some(entry) = self.open.entries.get_mut(&key) else { return Ok(()) };
        entry.last_line = line;
        let mut close = false;
        match kind {
            Line::FrontendReceived => {
                entry.absorb(fields);
                entry.received = entry.received.or(time);
            }
            Line::FrontendCompleted => {
                entry.absorb(fields);
                entry.completed_at = time;
                entry.elapsed_ms = fields.f64("elapsed_ms").filter(|v| *v >= 0.0).or(entry.elapsed_ms);
                let error_type = fields.get("error_type").and_then(|e| vocabulary_word(&e));
                entry.status = match fields.get("status").as_deref() {
                    Some("success") => Some((Status::Ok, None)),
                    Some("cancelled") => Some((Status::Aborted, None)),
                    Some("error") if error_type.as_deref() == Some("response_timeout") => {
                        Some((Status::Timeout, error_type))
                    }
                    Some("error") => Some((Status::Error, error_type)),
                    Some(_) => {
                        sink.diagnostic(Diagnostic::new(
                            line,
                            DiagnosticKind::InvalidValue,
                            "`status` is not success, cancelled or error",
                        ));
                        None
                    }
                    None => None,
                };
                close = true;
            }
            Line::FrontendCancelled => {
                entry.absorb(fields);
                entry.cancelled = true;
                entry.elapsed_ms = entry.elapsed_ms.or(fields.f64("elapsed_ms").filter(|v| *v >= 0.0));
            }
            Line::WorkerReceived => {
                let leg = entry.leg(fields);
                leg.received = leg.received.or(time);
            }
            Line::WorkerCompleted => {
                let leg = entry.leg(fields);
                leg.completed = time.or(leg.completed);
            }
            Line::Span { event, name: SpanName::HttpRequest } => {
                entry.absorb(fields);
                match event {
                    SpanEvent::Opened => entry.span_start = entry.span_start.or(time),
                    SpanEvent::Closed { duration_ns } => {
                        entry.span_end = time;
                        let start = time.zip(duration_ns).and_then(|(t, d)| t.checked_sub(d));
                        entry.span_start = entry.span_start.or(start);
                        close = true;
                    }
                }
            }
            Line::Span { event, name: SpanName::HandlePayload } => {
                let leg = entry.leg(fields);
                match event {
                    SpanEvent::Opened => leg.received = leg.received.or(time),
                    SpanEvent::Closed { duration_ns } => {
                        leg.completed = time;
                        let start = time.zip(duration_ns).and_then(|(t, d)| t.checked_sub(d));
                        leg.received = leg.received.or(start);
                    }
                }
            }
            Line::LegacyRemotePrefill { tokens, .. } => {
                entry.input_tokens = tokens.or(entry.input_tokens);
                entry.backend.received = entry.backend.received.or(time);
            }
            Line::LegacyDequeued { .. } => entry.prefill.received = entry.prefill.received.or(time),
            _ => {}
        }
        if close {
            self.open.close(key, self.ctx, sink, &mut self.counts)?;
        }
        Ok(())
    }

    /// A router decision: merged with its partner line when one is waiting, else held for a moment.
    fn selected(
        &mut self,
        mut selection: Selection,
        fields: &Fields<'_>,
        time: Option<i64>,
        line: u64,
        sink: &mut dyn Sink,
    ) -> Result<(), DatasetError> {
        *self.counts.router_wording.entry(selection.wording.as_str()).or_default() += 1;
        let best = selection.wording == Wording::RoutingBest;
        if !best {
            if selection.hit_blocks.is_none() {
                selection.hit_blocks = self
                    .formulas
                    .get(&(selection.worker, selection.dp_rank))
                    .or_else(|| self.formulas.get(&(selection.worker, None)))
                    .copied();
            }
            self.formulas.clear();
        }
        let ids = Ids::of(fields);
        let request_id = match self.open.find(&ids.aliases()) {
            Found::Open(key) => self.open.entries.get(&key).and_then(|e| e.output_id()).map(|(id, _)| id.to_owned()),
            _ => None,
        }
        .or_else(|| ids.request.first().cloned());
        let partner = self.pending.iter().position(|p| {
            (p.selection.wording == Wording::RoutingBest) != best
                && p.selection.worker == selection.worker
                && (p.selection.dp_rank == selection.dp_rank
                    || p.selection.dp_rank.is_none()
                    || selection.dp_rank.is_none())
                && (p.request_id == request_id || p.request_id.is_none() || request_id.is_none())
        });
        let this = PendingLookup { selection, time, line, request_id };
        match partner.and_then(|at| self.pending.remove(at)) {
            Some(other) => {
                let (mut chosen, routing) = if best { (other, this) } else { (this, other) };
                let s = &mut chosen.selection;
                s.blocks = s.blocks.or(routing.selection.blocks);
                s.hit_blocks = s.hit_blocks.or(routing.selection.hit_blocks);
                s.dp_rank = s.dp_rank.or(routing.selection.dp_rank);
                chosen.request_id = chosen.request_id.or(routing.request_id);
                self.emit(chosen, sink)
            }
            None => {
                self.pending.push_back(this);
                if self.pending.len() > PENDING_LOOKUPS
                    && let Some(old) = self.pending.pop_front()
                {
                    self.emit(old, sink)?;
                }
                Ok(())
            }
        }
    }

    /// Writes the lookups that waited long enough (all of them when `now` is `None`).
    fn flush_lookups(&mut self, now: Option<i64>, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        while let Some(front) = self.pending.front() {
            let due = match (now, front.time) {
                (None, _) => true,
                (Some(now), Some(t)) => now.saturating_sub(t) > PENDING_LOOKUP_NS,
                (Some(_), None) => false,
            };
            if !due {
                break;
            }
            if let Some(lookup) = self.pending.pop_front() {
                self.emit(lookup, sink)?;
            }
        }
        Ok(())
    }

    /// One `lookup` row for the device tier, then one per lower tier the line reports.
    fn emit(&mut self, lookup: PendingLookup, sink: &mut dyn Sink) -> Result<(), DatasetError> {
        let s = &lookup.selection;
        let instance = match s.dp_rank {
            Some(dp) => format!("{}/dp{dp}", s.worker),
            None => s.worker.to_string(),
        };
        let row = |tier: CacheTier, hit_blocks: Option<u32>, blocks: Option<u32>| CacheEvent {
            time: lookup.time,
            source: DynamoLog::ID.into(),
            instance: Some(instance.as_str().into()),
            tier: Some(tier),
            event: CacheEventKind::Lookup,
            request_id: lookup.request_id.clone(),
            blocks,
            hit_blocks,
            source_file: Some(self.ctx.source_file.into()),
            source_line: Some(lookup.line),
            ..CacheEvent::default()
        };
        sink.cache_event(row(CacheTier::Gpu, s.hit_blocks, s.blocks))?;
        if let Some(host) = s.host_blocks {
            sink.cache_event(row(CacheTier::Cpu, Some(host), s.blocks))?;
        }
        if let Some(disk) = s.disk_blocks {
            sink.cache_event(row(CacheTier::Disk, Some(disk), s.blocks))?;
        }
        Ok(())
    }

    /// Writes what is still held, and returns the run's counts.
    pub(crate) fn finish(mut self, sink: &mut dyn Sink) -> Result<BTreeMap<String, serde_json::Value>, DatasetError> {
        self.flush_lookups(None, sink)?;
        while let Some((key, _)) = self.open.order.pop_front() {
            self.open.close(key, self.ctx, sink, &mut self.counts)?;
        }
        let c = self.counts;
        let mut details = BTreeMap::new();
        let mut put = |name: &str, value: serde_json::Value, present: bool| {
            if present {
                details.insert(name.to_owned(), value);
            }
        };
        put("router_wording", serde_json::json!(c.router_wording), !c.router_wording.is_empty());
        put("formula_lines", serde_json::json!(c.formula_lines), c.formula_lines > 0);
        put(
            "selections_without_lookup",
            serde_json::json!(c.selections_without_lookup),
            c.selections_without_lookup > 0,
        );
        put("route_outcomes", serde_json::json!(c.route_outcomes), !c.route_outcomes.is_empty());
        put("route_outcomes_joined", serde_json::json!(c.route_outcomes_joined), !c.route_outcomes.is_empty());
        put("http_responses", serde_json::json!(c.http_responses), !c.http_responses.is_empty());
        put("lines_after_request_end", serde_json::json!(c.lines_after_request_end), c.lines_after_request_end > 0);
        put("non_inference_spans", serde_json::json!(c.non_inference_spans), c.non_inference_spans > 0);
        put("request_id_from", serde_json::json!(c.request_id_from), !c.request_id_from.is_empty());
        Ok(details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_ids_are_refused_as_the_character_rule_refuses_them() {
        let refused = |c: char| c.is_whitespace() || c.is_control() || c == '"';
        for byte in 0..=0x7f_u8 {
            let c = char::from(byte);
            let id = format!("a{c}b");
            assert_eq!(usable_id(&id).is_none(), refused(c), "{byte:#04x}");
        }
        // Not ASCII: the character rule itself (U+00A0 is white space, U+0085 a control character).
        assert_eq!(usable_id("a\u{a0}b"), None);
        assert_eq!(usable_id("a\u{85}b"), None);
        assert_eq!(usable_id("réq-1").as_deref(), Some("réq-1"));
        assert_eq!((usable_id(""), usable_id("-")), (None, None));
        assert_eq!(usable_id(&"x".repeat(MAX_ID)).map(|id| id.len()), Some(MAX_ID));
        assert_eq!(usable_id(&"x".repeat(MAX_ID + 1)), None);
    }
}
