//! `infertrace merge`: one row per request out of the rows several sources wrote about it.
//!
//! One run is often seen by several sources (a server log, a client benchmark export, OTLP spans). Merge joins the
//! request rows that describe the same request and fills each column from the source that observed it best.
//!
//! # Matching
//!
//! Rows of one source are never joined to each other. Sources are taken in name order: the first one's rows each
//! start a request; each later source's rows are then joined to requests that have no row of that source yet:
//!
//! 1. **By id**: a row joins the first request (in request order) one of whose rows has the same `request_id`.
//!    Ids made up by an adapter for a source without ids (`<file stem>:<line>`, recognised as the stem of
//!    `source_file`, a colon and `source_line`) never join: they would match by coincidence.
//! 2. **By arrival and tokens**, for the rows still alone: a row and a request are candidates when their arrivals
//!    (the request's is that of its first row having one) differ by at most the tolerance, and their token counts
//!    agree within the slack with every row of the request: `input_tokens` where both rows have it,
//!    `output_tokens` where both have it, and at least one count compared with some row. All candidate pairs are taken nearest first (ties: earlier row, then earlier
//!    request), each row and request at most once. A row that had more than one candidate is counted as
//!    `ambiguous`.
//! 3. Rows still alone become requests of their own (`unmatched`).
//!
//! # Columns
//!
//! A merged row takes each column from the first of its rows that has it, in precedence order:
//!
//! - **client first** ([`CLIENT_FIRST`]: the instants and durations a client observes — arrival, first and last
//!   token, completion, `ttft_s`, `tpot_s`, `e2e_s` — and the outcome: `status` (`unknown` counts as absent),
//!   `http_status`, `error`; `session_id`, `turn`, `max_tokens`, which the client sets; and `tool_calls`,
//!   `reasoning_tokens`, `workload_class`, which the application knows): client sources, then the others;
//! - **server first** (every other column: queue, prefill, decode and transfer, scheduling instants, token counts,
//!   cache columns, placement, model, `request_id`, `finish_reason`, `source_file`, `source_line`): the others, then
//!   client sources.
//!
//! Within each group, sources in name order. Durations are derived from each row's own instants before merging
//! (as `normalize` does), never across sources, whose clocks may differ. The merged row's `source` is its sources'
//! names joined by `+` (`aiperf+vllm-log`), and `column_sources` records `column=source` for every column that is
//! set; rows of one source keep their source and a null `column_sources`.
//!
//! Output rows are ordered by arrival (rows without one last), then by request order. Samples and cache events
//! are concatenated, dataset after dataset, and keep their own `source`.
//!
//! Key decision: matching reads only each row's [`MergeKey`] ([`plan`]), and the output rows are made from the
//! full rows one request at a time ([`combine`]), so that the CLI holds the keys, not the rows, and streams the
//! rows sorted by their place in the output. [`merge`] is the same over datasets read into memory.

use infertrace_schema::{CacheEvent, Dataset, EngineSample, MergeRecord, RequestRow, Status, Table as _, request};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How rows are matched and which sources count as client-observed.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Largest arrival difference of two rows joined by time, in nanoseconds.
    pub tolerance_ns: u64,
    /// Largest difference of `input_tokens` (and of `output_tokens`) of two rows joined by time.
    pub token_slack: u32,
    /// Sources whose rows a client wrote (benchmark exports): their TTFT and e2e take precedence.
    pub client_sources: BTreeSet<String>,
}

/// The merged tables and what was done.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    /// One row per request.
    pub requests: Vec<RequestRow>,
    /// Every sample of the inputs, in input order.
    pub samples: Vec<EngineSample>,
    /// Every cache event of the inputs, in input order.
    pub cache_events: Vec<CacheEvent>,
    /// Counts for the manifest (`datasets` left empty: the caller knows the paths).
    pub record: MergeRecord,
}

/// A table of a dataset could not be read as canonical rows.
#[derive(Debug, thiserror::Error)]
#[error("dataset {index} (from 0): table {table}: {source}")]
pub struct MergeError {
    /// Position of the dataset in the input list.
    pub index: usize,
    /// The table.
    pub table: &'static str,
    /// What arrow reported.
    #[source]
    pub source: arrow::error::ArrowError,
}

/// Columns a client observes best; every other column is server first.
pub const CLIENT_FIRST: &[&str] = &[
    request::SESSION_ID,
    request::TURN,
    request::TOOL_CALLS,
    request::REASONING_TOKENS,
    request::WORKLOAD_CLASS,
    request::ARRIVAL_TIME,
    request::FIRST_TOKEN_TIME,
    request::LAST_TOKEN_TIME,
    request::COMPLETION_TIME,
    request::TTFT_S,
    request::TPOT_S,
    request::E2E_S,
    request::MAX_TOKENS,
    request::STATUS,
    request::HTTP_STATUS,
    request::ERROR,
];

/// Merges the rows of `datasets` (see the module documentation), held in memory: [`plan`] over their keys, then
/// [`combine`] per request.
pub fn merge(datasets: &[Dataset], options: &MergeOptions) -> Result<Merged, MergeError> {
    let mut rows = Vec::new();
    let mut merged = Merged::default();
    for (index, dataset) in datasets.iter().enumerate() {
        let error = |table| move |source| MergeError { index, table, source };
        rows.extend(RequestRow::from_batch(&dataset.requests).map_err(error("requests"))?);
        merged.samples.extend(EngineSample::from_batch(&dataset.samples).map_err(error("samples"))?);
        merged.cache_events.extend(CacheEvent::from_batch(&dataset.cache_events).map_err(error("cache_events"))?);
    }
    for row in &mut rows {
        // Negative spans stay null, as in `normalize`.
        let _ = row.fill_durations();
    }
    let keys: Vec<MergeKey> = rows.iter().map(MergeKey::of).collect();
    let MergePlan { requests, mut record } = plan(&keys, options);
    for members in requests {
        let row = match members[..] {
            [only] => rows[only].clone(),
            _ => combine(members.iter().map(|&i| &rows[i]).collect(), &options.client_sources, &mut record),
        };
        merged.requests.push(row);
    }
    merged.record = record;
    Ok(merged)
}

/// What matching reads of a row: its source, its `request_id` unless an adapter made it up, its arrival and token
/// counts. A few dozen bytes a row, where the row is a few hundred.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeKey {
    /// `source`.
    pub source: std::sync::Arc<str>,
    /// `request_id`, unless an adapter made it up (see the module documentation).
    pub id: Option<Box<str>>,
    /// `arrival_time`.
    pub arrival: Option<i64>,
    /// `input_tokens`.
    pub input: Option<u32>,
    /// `output_tokens`.
    pub output: Option<u32>,
}

impl MergeKey {
    /// The key of `row`.
    pub fn of(row: &RequestRow) -> Self {
        Self {
            source: row.source.as_str().into(),
            id: (!synthetic_id(row)).then(|| row.request_id.as_str().into()),
            arrival: row.arrival_time,
            input: row.input_tokens,
            output: row.output_tokens,
        }
    }
}

/// The requests of a merge, in output order (by arrival, rows without one last, then in the order they were made),
/// each the indices of its rows; and the record of what was done (without `columns`, which [`combine`] counts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergePlan {
    /// Per output row, the indices of its rows in the input.
    pub requests: Vec<Vec<usize>>,
    /// Counts for the manifest.
    pub record: MergeRecord,
}

/// A request being assembled: indices of its rows (at most one per source).
struct Request {
    rows: Vec<usize>,
    arrival: Option<i64>,
}

/// Matches the rows whose keys are `keys` (see the module documentation).
pub fn plan(keys: &[MergeKey], options: &MergeOptions) -> MergePlan {
    let rows = keys;
    let mut record = MergeRecord {
        tolerance_ns: options.tolerance_ns,
        token_slack: options.token_slack,
        client_sources: options.client_sources.iter().cloned().collect(),
        ..MergeRecord::default()
    };
    let mut by_source: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        by_source.entry(&row.source).or_default().push(i);
    }
    let mut requests: Vec<Request> = Vec::new();
    // Request of each row, and requests by the (real) ids of their rows.
    let mut owner: Vec<Option<usize>> = vec![None; rows.len()];
    let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut sources_of: Vec<BTreeSet<&str>> = Vec::new();
    for (source, members) in &by_source {
        record.rows_in.insert((*source).to_owned(), members.len() as u64);
        let mut alone = Vec::new();
        // 1. By id.
        for &i in members {
            let row = &rows[i];
            let target = row
                .id
                .as_deref()
                .and_then(|id| by_id.get(id))
                .and_then(|candidates| candidates.iter().copied().find(|&r| !sources_of[r].contains(source)));
            match target {
                Some(r) => {
                    attach(&mut requests, &mut sources_of, &mut owner, r, i, row);
                    record.matched_by_id += 1;
                }
                None => alone.push(i),
            }
        }
        // 2. By arrival and token counts.
        let mut open: Vec<(i64, usize)> = requests
            .iter()
            .enumerate()
            .filter(|(r, _)| !sources_of[*r].contains(source))
            .filter_map(|(r, request)| Some((request.arrival?, r)))
            .collect();
        open.sort_unstable();
        let tolerance = i64::try_from(options.tolerance_ns).unwrap_or(i64::MAX);
        let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
        let mut candidates: HashMap<usize, u32> = HashMap::new();
        for &i in &alone {
            let Some(arrival) = rows[i].arrival else { continue };
            let from = open.partition_point(|&(a, _)| a < arrival.saturating_sub(tolerance));
            for &(a, r) in open[from..].iter().take_while(|&&(a, _)| a <= arrival.saturating_add(tolerance)) {
                let verdicts = requests[r].rows.iter().map(|&j| tokens_agree(&rows[i], &rows[j], options.token_slack));
                let verdicts: Vec<Option<bool>> = verdicts.collect();
                if verdicts.contains(&Some(true)) && !verdicts.contains(&Some(false)) {
                    pairs.push((arrival.abs_diff(a), i, r));
                    *candidates.entry(i).or_default() += 1;
                }
            }
        }
        pairs.sort_unstable();
        let mut taken_requests = BTreeSet::new();
        for (_, i, r) in pairs {
            if owner[i].is_some() || taken_requests.contains(&r) {
                continue;
            }
            taken_requests.insert(r);
            attach(&mut requests, &mut sources_of, &mut owner, r, i, &rows[i]);
            record.matched_by_time += 1;
            record.ambiguous += u64::from(candidates.get(&i).copied().unwrap_or(0) > 1);
        }
        // 3. The rest start requests of their own.
        for &i in &alone {
            if owner[i].is_none() {
                let r = requests.len();
                requests.push(Request { rows: Vec::new(), arrival: None });
                sources_of.push(BTreeSet::new());
                attach(&mut requests, &mut sources_of, &mut owner, r, i, &rows[i]);
            }
        }
        // Ids of this source's rows become joinable for later sources.
        for &i in members {
            if let (Some(r), Some(id)) = (owner[i], rows[i].id.as_deref()) {
                let list = by_id.entry(id).or_default();
                if !list.contains(&r) {
                    list.push(r);
                }
            }
        }
    }
    for source in by_source.keys() {
        record.unmatched.insert((*source).to_owned(), 0);
    }
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by_key(|&r| (requests[r].arrival.is_none(), requests[r].arrival, r));
    let mut out = Vec::with_capacity(requests.len());
    for r in order {
        let members = std::mem::take(&mut requests[r].rows);
        if let [only] = members[..] {
            *record.unmatched.entry(rows[only].source.to_string()).or_default() += 1;
        } else {
            record.merged_requests += 1;
        }
        out.push(members);
    }
    MergePlan { requests: out, record }
}

/// Adds row `i` to request `r`.
fn attach<'a>(
    requests: &mut [Request],
    sources_of: &mut [BTreeSet<&'a str>],
    owner: &mut [Option<usize>],
    r: usize,
    i: usize,
    row: &'a MergeKey,
) {
    requests[r].rows.push(i);
    requests[r].arrival = requests[r].arrival.or(row.arrival);
    sources_of[r].insert(&row.source);
    owner[i] = Some(r);
}

/// Whether `row.request_id` is one an adapter made up for a source without ids: `<stem>:<number>`, the stem being
/// the file name of `source_file` without directories, a `.gz`/`.zst` suffix and one extension (as the adapters'
/// `ParseContext::source_stem` makes it).
fn synthetic_id(row: &RequestRow) -> bool {
    let Some(file) = &row.source_file else { return false };
    let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
    let name = name.strip_suffix(".gz").or_else(|| name.strip_suffix(".zst")).unwrap_or(name);
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    row.request_id
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the token counts two rows both have agree within `slack`; `None` when they have none in common.
fn tokens_agree(a: &MergeKey, b: &MergeKey, slack: u32) -> Option<bool> {
    let pairs = [(a.input, b.input), (a.output, b.output)];
    let compared: Vec<bool> = pairs.iter().filter_map(|&(x, y)| Some(x?.abs_diff(y?) <= slack)).collect();
    (!compared.is_empty()).then(|| compared.iter().all(|&ok| ok))
}

/// One row out of the rows of one request (one per source), column by column (see the module documentation);
/// counts in `record.columns` which source filled each column.
pub fn combine(mut members: Vec<&RequestRow>, clients: &BTreeSet<String>, record: &mut MergeRecord) -> RequestRow {
    members.sort_by(|a, b| a.source.cmp(&b.source));
    let is_client = |m: &&&RequestRow| clients.contains(&m.source);
    let client_first: Vec<&RequestRow> =
        members.iter().filter(is_client).chain(members.iter().filter(|m| !is_client(m))).copied().collect();
    let server_first: Vec<&RequestRow> =
        members.iter().filter(|m| !is_client(m)).chain(members.iter().filter(is_client)).copied().collect();
    let order = |column: &str| if CLIENT_FIRST.contains(&column) { &client_first } else { &server_first };
    let mut chosen: BTreeMap<&'static str, &str> = BTreeMap::new();
    let mut row = RequestRow {
        source: members.iter().map(|m| m.source.as_str()).collect::<Vec<_>>().join("+"),
        ..RequestRow::default()
    };
    if let Some(m) = order(request::REQUEST_ID).iter().find(|m| !m.request_id.is_empty()) {
        row.request_id = m.request_id.clone();
        chosen.insert(request::REQUEST_ID, &m.source);
    }
    if let Some(m) = order(request::STATUS).iter().find(|m| m.status != Status::Unknown) {
        row.status = m.status;
        chosen.insert(request::STATUS, &m.source);
    }
    macro_rules! fill {
        ($($field:ident),* $(,)?) => {$(
            if let Some(m) = order(stringify!($field)).iter().find(|m| m.$field.is_some()) {
                row.$field = m.$field.clone();
                chosen.insert(stringify!($field), &m.source);
            }
        )*};
    }
    fill!(
        model,
        session_id,
        turn,
        instance,
        prefill_instance,
        decode_instance,
        arrival_time,
        scheduled_time,
        first_token_time,
        prefill_end_time,
        decode_start_time,
        last_token_time,
        completion_time,
        queue_s,
        prefill_s,
        ttft_s,
        tpot_s,
        decode_s,
        e2e_s,
        kv_transfer_s,
        kv_transfer_bytes,
        input_tokens,
        cached_tokens,
        cached_tokens_gpu,
        cached_tokens_cpu,
        cached_tokens_disk,
        cached_tokens_remote,
        output_tokens,
        reasoning_tokens,
        max_tokens,
        prefix_hashes,
        block_size,
        retrieved_docs,
        tool_calls,
        workload_class,
        finish_reason,
        http_status,
        error,
        source_file,
        source_line,
    );
    let mut pairs = Vec::new();
    for column in RequestRow::COLUMNS {
        if let Some(source) = chosen.get(column.name) {
            pairs.push(format!("{}={source}", column.name));
            *record.columns.entry(column.name.to_owned()).or_default().entry((*source).to_owned()).or_default() += 1;
        }
    }
    row.column_sources = Some(pairs.join(";"));
    row
}
