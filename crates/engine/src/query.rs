//! The figures of [`Metrics`] computed by queries over datasets on disk, in memory that does not grow with rows.
//!
//! Each figure is defined in the crate documentation; this module computes the same numbers with Apache DataFusion
//! (through [`infertrace_query::Datasets`]): sums and counts are aggregations, quantiles are read off a sorted
//! stream at their ranks, the requests in flight are a running sum over arrivals and completions in time order,
//! and the prefix reuse of an unbounded cache is the first sight of each block hash. DataFusion spills its sorts
//! and aggregations to disk past the session's memory budget, so only the figures themselves are held.
//!
//! Figures whose definition breaks ties "in input order" (the first sight of a block hash when block sizes differ,
//! a session's first turn, the order of samples at one instant) read the tables through
//! [`Datasets::register_ordered`], numbered in input order: the datasets as given, files in path order, rows in
//! file order. Everything else reads the plain tables, in parallel and with only the columns it uses.
//!
//! The output does not depend on how the engine splits rows between threads: integer sums are exact, durations are
//! summed in whole nanoseconds, and means are summed in ascending order during the walk of the sorted values.
//!
//! Key decision: a grouping is a SQL expression `g` over the derived rows (`''` for the overall figures), and every
//! query is written once for any `g`: the overall figures and `--by` groups are the same code run twice.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray as _, Float64Builder, Int64Builder, RecordBatch, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, UInt64Type};
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{DataFrame, SessionContext};
use futures::StreamExt as _;
use infertrace_query::{Datasets, QueryError, QueryOptions, Session, datafusion};
use infertrace_schema::{
    CacheTier, EngineSample, RequestRow, Status, Table as _, WorkloadClass, metrics as sample_metrics, request,
};

use crate::compute::{
    Cache, GroupBy, GroupMetrics, HitRate, InstanceSamples, LoadBucket, METRICS_VERSION, Metrics, MetricsOptions,
    NULL_GROUP, Reasoning, Reuse, Throughput, TimeSplit,
};
use crate::cost::{self, Fleet, Traffic};
use crate::distinct::DistinctCounter;
use crate::slo::Latency;
use crate::stats::{Distribution, QUANTILE_METHOD, SampleSummary};
use crate::workload::{ClassCount, HIGH_REUSE, LONG_PROMPT_TOKENS};

/// Tables and views this module registers; prefixed so as not to meet a user's names.
const RAW: &str = "infertrace_raw";
const HASHES: &str = "infertrace_hashes";
pub(crate) const SAMPLES: &str = "infertrace_samples";
pub(crate) const ROWS: &str = "infertrace_rows";
const ROWS_ORDERED: &str = "infertrace_rows_ordered";
const REUSE: &str = "infertrace_reuse";
const CLASSES: &str = "infertrace_classes";
const CLASSED: &str = "infertrace_classed";
const BLOCKS: &str = "infertrace_blocks";
const BLOCKS_ORDERED: &str = "infertrace_blocks_ordered";
const BLOCKS_CLASSED: &str = "infertrace_blocks_classed";

/// The columns of the samples the figures read.
pub(crate) const SAMPLE_COLUMNS: &[&str] = &[
    infertrace_schema::sample::SOURCE,
    infertrace_schema::sample::INSTANCE,
    infertrace_schema::sample::METRIC,
    infertrace_schema::sample::TIME,
    infertrace_schema::sample::VALUE,
];

/// [`compute_over`] for a caller without an async runtime: opens the datasets at `dirs` in a [`Session`] and computes
/// on its runtime (with `query.threads` threads), its scratch files in the session's scratch directory (under
/// `query.spill_dir`, the system's temporary directory by default), removed on return.
pub fn compute_dirs(dirs: &[PathBuf], options: &MetricsOptions, query: &QueryOptions) -> Result<Metrics, QueryError> {
    let session = Session::open(dirs, query)?;
    session.block_on(compute_over(session.datasets(), options, session.scratch()))
}

/// Computes every figure over the rows of all `datasets` taken together.
///
/// It registers its own tables and views in the session (names starting `infertrace_`). `scratch` is a directory
/// for intermediate tables written once and read twice: the loads of TTFT under load, and when some row records
/// no workload class, each row's reuse and class (a few bytes a row each).
pub async fn compute_over(
    datasets: &Datasets,
    options: &MetricsOptions,
    scratch: &Path,
) -> Result<Metrics, QueryError> {
    let context = datasets.context();
    // Joins on the ordinal or a session are of tables as long as the trace: sort-merge joins spill, hash joins not.
    run(context, "SET datafusion.optimizer.prefer_hash_join = false").await?;
    let hash_columns = [request::ARRIVAL_TIME, request::BLOCK_SIZE, request::INPUT_TOKENS, request::PREFIX_HASHES];
    datasets.register_ordered::<RequestRow>(HASHES, &[KEY_COLUMNS, &hash_columns].concat())?;
    datasets.register_ordered::<RequestRow>(RAW, &[KEY_COLUMNS, RAW_COLUMNS].concat())?;
    datasets.register_ordered::<EngineSample>(SAMPLES, SAMPLE_COLUMNS)?;
    // Queries that do not depend on the order of ties read the tables in parallel, with only their columns; the
    // others read them in input order, numbered.
    run(context, &format!("CREATE OR REPLACE VIEW {ROWS} AS {}", rows_sql(RequestRow::NAME, false))).await?;
    run(context, &format!("CREATE OR REPLACE VIEW {ROWS_ORDERED} AS {}", rows_sql(RAW, true))).await?;
    run(context, &format!("CREATE OR REPLACE VIEW {BLOCKS} AS {}", blocks_sql(RequestRow::NAME, false))).await?;
    run(context, &format!("CREATE OR REPLACE VIEW {BLOCKS_ORDERED} AS {}", blocks_sql(HASHES, true))).await?;
    let plan = crate::clocks::plan(datasets, options.by).await?;
    let options = &MetricsOptions { by: plan.by, ..options.clone() };
    classify(context, !options.slo.is_empty(), scratch).await?;

    let (mut overall, overall_traffic) =
        groups(context, options, Grouping::Overall, scratch).await?.remove("").unwrap_or_else(|| empty_group(options));
    if plan.mixed_clocks {
        without_time_line(&mut overall);
    }
    let mut by_group = BTreeMap::new();
    if let Some(by) = options.by {
        by_group = groups(context, options, Grouping::By(by), scratch).await?;
        for source in &plan.mixed_sources {
            if let Some((group, _)) = by_group.get_mut(source) {
                without_time_line(group);
            }
        }
    }
    let (input_tokens, output_tokens) = (overall.throughput.input_tokens, overall.throughput.output_tokens);
    let energy = crate::energy::measure(context, input_tokens + output_tokens, output_tokens).await?;
    // The fleet serves every group: each is charged a share of it over the overall span.
    let fleet = Fleet {
        hours: overall.throughput.span_s.map(|s| s / 3600.0),
        measured_kwh: energy.as_ref().map(|e| e.kwh),
        raw_tokens: overall_traffic.raw_tokens,
        rows: overall.requests,
    };
    let price = |traffic: &Traffic| options.cost.as_ref().map(|profile| cost::cost(profile, fleet, traffic));
    overall.cost = price(&overall_traffic);
    let groups = by_group
        .into_iter()
        .map(|(key, (mut group, traffic))| {
            group.cost = price(&traffic);
            (key, group)
        })
        .collect();
    Ok(Metrics {
        metrics_version: METRICS_VERSION,
        quantile_method: QUANTILE_METHOD,
        slo: options.slo.bounds.clone(),
        by: options.by,
        overall,
        groups,
        energy,
    })
}

/// Leaves out the figures of `group` that need its rows on one time line: its rows are on two clocks
/// ([`crate::clocks`]).
fn without_time_line(group: &mut GroupMetrics) {
    group.throughput.span_s = None;
    group.throughput.requests_per_s = None;
    group.throughput.input_tokens_per_s = None;
    group.throughput.output_tokens_per_s = None;
    if let Some(goodput) = &mut group.goodput {
        goodput.requests_per_s = None;
    }
    group.ttft_under_load = Vec::new();
}

/// The derived rows of every request in input order (datasets as given, files in path order), as the figures read
/// them: durations filled from their instants where null and kept only when finite (`queue`, `prefill`, `ttft`,
/// `tpot`, `decode`, `e2e`, `kv_transfer`, in seconds), counts as `BIGINT` (`input`, `cached`, `cached_gpu`, …,
/// `output`, `reasoning`), `a` the arrival in nanoseconds, with `columns` only. It registers the same tables and
/// views as [`compute_over`].
pub async fn rows_in_input_order(datasets: &Datasets, columns: &[&str]) -> Result<DataFrame, QueryError> {
    datasets.register_ordered::<RequestRow>(RAW, &[KEY_COLUMNS, RAW_COLUMNS].concat())?;
    run(datasets.context(), &format!("CREATE OR REPLACE VIEW {ROWS_ORDERED} AS {}", rows_sql(RAW, true))).await?;
    datasets.sql(&format!("SELECT {} FROM {ROWS_ORDERED} ORDER BY ordinal", columns.join(", "))).await
}

/// The columns of `requests` that rows are grouped and classified by.
const KEY_COLUMNS: &[&str] = &[
    request::SOURCE,
    request::MODEL,
    request::INSTANCE,
    request::SESSION_ID,
    request::STATUS,
    request::WORKLOAD_CLASS,
];

/// The other columns of `requests` the derived rows are made of.
const RAW_COLUMNS: &[&str] = &[
    request::TOOL_CALLS,
    request::RETRIEVED_DOCS,
    request::ARRIVAL_TIME,
    request::SCHEDULED_TIME,
    request::FIRST_TOKEN_TIME,
    request::PREFILL_END_TIME,
    request::DECODE_START_TIME,
    request::LAST_TOKEN_TIME,
    request::COMPLETION_TIME,
    request::QUEUE_S,
    request::PREFILL_S,
    request::TTFT_S,
    request::TPOT_S,
    request::DECODE_S,
    request::E2E_S,
    request::KV_TRANSFER_S,
    request::INPUT_TOKENS,
    request::CACHED_TOKENS,
    request::CACHED_TOKENS_GPU,
    request::CACHED_TOKENS_CPU,
    request::CACHED_TOKENS_DISK,
    request::CACHED_TOKENS_REMOTE,
    request::OUTPUT_TOKENS,
    request::REASONING_TOKENS,
];

/// The derived rows: durations filled from instants where null (as `normalize` does,
/// [`RequestRow::fill_durations`]) and kept only when finite, text columns as plain strings, an unknown status
/// text as `unknown`, counts as `BIGINT`, and each row's in-flight span end and earliest and latest instants.
pub(crate) fn rows_sql(table: &str, ordered: bool) -> String {
    let finite = |x: &str| format!("CASE WHEN abs({x}) < CAST('inf' AS DOUBLE) THEN {x} END");
    // A stored duration is kept (when finite); a null one is the span, when not negative.
    let filled = |stored: &str, span: &str| {
        format!(
            "CASE WHEN {stored} IS NOT NULL THEN {} WHEN ({span}) >= 0 THEN CAST(({span}) AS DOUBLE) / 1e9 END",
            finite(stored)
        )
    };
    let tpot = format!(
        "CASE WHEN tpot_s IS NOT NULL THEN {} WHEN output_tokens >= 2 AND lt - ft >= 0 \
         THEN CAST(lt - ft AS DOUBLE) / 1e9 / CAST(output_tokens - 1 AS DOUBLE) END",
        finite("tpot_s")
    );
    let instants = "a, s, ft, pe, ds, lt, ct";
    let int = |c: &str| format!("CAST({c} AS BIGINT)");
    format!(
        "SELECT {ordinal}{keys}, {tool_calls} AS tool_calls, {retrieved_docs} AS retrieved_docs, \
         a, CASE WHEN ct IS NOT NULL THEN ct WHEN a IS NOT NULL AND e2e IS NOT NULL \
           THEN a + CAST(round(e2e * 1e9) AS BIGINT) END AS end_t, \
         least({instants}) AS lo, greatest({instants}) AS hi, \
         queue, prefill, ttft, tpot, decode, e2e, kv_transfer, \
         input, cached, cached_gpu, cached_cpu, cached_disk, cached_remote, output, reasoning \
         FROM (SELECT *, {queue} AS queue, {prefill} AS prefill, {ttft} AS ttft, {tpot} AS tpot, \
           {decode} AS decode, {e2e} AS e2e, {kv} AS kv_transfer \
           FROM (SELECT *, arrow_cast(arrival_time, 'Int64') AS a, arrow_cast(scheduled_time, 'Int64') AS s, \
             arrow_cast(first_token_time, 'Int64') AS ft, arrow_cast(prefill_end_time, 'Int64') AS pe, \
             arrow_cast(decode_start_time, 'Int64') AS ds, arrow_cast(last_token_time, 'Int64') AS lt, \
             arrow_cast(completion_time, 'Int64') AS ct, \
             {input} AS input, {cached} AS cached, {gpu} AS cached_gpu, {cpu} AS cached_cpu, \
             {disk} AS cached_disk, {remote} AS cached_remote, {output} AS output, {reasoning} AS reasoning \
             FROM {table}))",
        ordinal = if ordered { "ordinal, " } else { "" },
        keys = key_columns_sql("stored_class"),
        tool_calls = int("tool_calls"),
        retrieved_docs = int("retrieved_docs"),
        queue = filled("queue_s", "s - a"),
        prefill = filled("prefill_s", "coalesce(pe, ft) - s"),
        ttft = filled("ttft_s", "ft - a"),
        decode = filled("decode_s", "lt - coalesce(ds, ft)"),
        e2e = filled("e2e_s", "coalesce(ct, lt) - a"),
        kv = finite("kv_transfer_s"),
        input = int("input_tokens"),
        cached = int("cached_tokens"),
        gpu = int("cached_tokens_gpu"),
        cpu = int("cached_tokens_cpu"),
        disk = int("cached_tokens_disk"),
        remote = int("cached_tokens_remote"),
        output = int("output_tokens"),
        reasoning = int("reasoning_tokens"),
    )
}

/// The rows' prefix hashes with the grouping columns of [`rows_sql`], read from `table`.
fn blocks_sql(table: &str, ordered: bool) -> String {
    format!(
        "SELECT {ordinal}{keys}, arrow_cast(arrival_time, 'Int64') AS a, CAST(block_size AS BIGINT) AS block_size, \
         CAST(input_tokens AS BIGINT) AS input, prefix_hashes FROM {table}",
        ordinal = if ordered { "ordinal, " } else { "" },
        keys = key_columns_sql("class_key"),
    )
}

/// The columns rows are grouped by, as plain strings: `source` ('' when null), `model`, `instance`, `session_id`,
/// `status` (`unknown` for text outside the vocabulary) and the stored workload class (null outside it) as `class`.
fn key_columns_sql(class: &str) -> String {
    let text = |c: &str| format!("CAST({c} AS VARCHAR)");
    let vocabulary = |values: Vec<&str>| values.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ");
    let statuses = vocabulary(Status::ALL.iter().map(|s| s.as_str()).collect());
    let classes = vocabulary(WorkloadClass::ALL.iter().map(|c| c.as_str()).collect());
    let (status, stored) = (text("status"), text("workload_class"));
    format!(
        "coalesce({source}, '') AS source, {model} AS model, {instance} AS instance, {session} AS session_id, \
         CASE WHEN {status} IN ({statuses}) THEN {status} ELSE 'unknown' END AS status, \
         CASE WHEN {stored} IN ({classes}) THEN {stored} END AS {class}",
        source = text("source"),
        model = text("model"),
        instance = text("instance"),
        session = text("session_id"),
    )
}

/// Registers `infertrace_classed` (the derived rows with `class_key`: the stored workload class, or the inferred
/// one followed by ` (inferred)`, by the rules of [`crate::workload`]) and `infertrace_blocks` (the rows'
/// prefix hashes with the same grouping columns).
///
/// When every row stores its class, nothing is inferred and no join is needed. Otherwise the per-row reuse of the
/// prefix hashes (an unbounded cache replaying rows in arrival order, ties in input order) and the classes are
/// written to `scratch`, each sorted by ordinal, and joined back.
async fn classify(context: &SessionContext, slo_given: bool, scratch: &Path) -> Result<(), QueryError> {
    let missing = single_count(context, &format!("SELECT count(*) FROM {ROWS} WHERE stored_class IS NULL")).await?;
    if missing == 0 {
        run(context, &format!("CREATE OR REPLACE VIEW {CLASSED} AS SELECT *, stored_class AS class_key FROM {ROWS}"))
            .await?;
        run(context, &format!("CREATE OR REPLACE VIEW {BLOCKS_CLASSED} AS SELECT * FROM {BLOCKS_ORDERED}")).await?;
        return Ok(());
    }
    // Each row's reuse from its hashes: the blocks whose hash was first seen elsewhere (or earlier in the row).
    let reuse = scratch.join("reuse.parquet");
    materialize(
        context,
        &format!(
            "WITH b AS (SELECT ordinal, arrow_cast(arrival_time, 'Int64') AS a, unnest(prefix_hashes) AS h \
               FROM {HASHES} WHERE block_size IS NOT NULL AND cardinality(prefix_hashes) > 0), \
             f AS (SELECT first_value(ordinal ORDER BY a ASC NULLS LAST, ordinal ASC) AS ordinal \
               FROM b WHERE h IS NOT NULL GROUP BY h), \
             m AS (SELECT ordinal, count(*) AS misses FROM f GROUP BY ordinal) \
             SELECT x.ordinal, CAST(x.n - coalesce(m.misses, 0) AS DOUBLE) * x.bs AS reused, \
               CAST(x.n AS DOUBLE) * x.bs AS total \
             FROM (SELECT ordinal, CAST(cardinality(prefix_hashes) AS BIGINT) AS n, \
               CAST(block_size AS DOUBLE) AS bs FROM {HASHES} \
               WHERE block_size IS NOT NULL AND cardinality(prefix_hashes) > 0) x \
             LEFT JOIN m ON x.ordinal = m.ordinal ORDER BY x.ordinal"
        ),
        &reuse,
        REUSE,
    )
    .await?;
    let classes = scratch.join("classes.parquet");
    let batch_allowed = if slo_given { "false" } else { "true" };
    materialize(
        context,
        &format!(
            "WITH r AS (SELECT m.ordinal, m.session_id, m.a, m.stored_class, m.tool_calls, m.retrieved_docs, \
               m.input, m.ttft, m.e2e, m.output, \
               CASE WHEN m.cached IS NOT NULL AND m.input > 0 THEN CAST(least(m.cached, m.input) AS DOUBLE) \
                 ELSE u.reused END AS reused, \
               CASE WHEN m.cached IS NOT NULL AND m.input > 0 THEN CAST(m.input AS DOUBLE) ELSE u.total END AS total \
               FROM {ROWS_ORDERED} m LEFT JOIN {REUSE} u ON m.ordinal = u.ordinal), \
             s AS (SELECT session_id, count(*) AS members, \
               first_value(ordinal ORDER BY a ASC NULLS LAST, ordinal ASC) AS first \
               FROM r WHERE session_id IS NOT NULL GROUP BY session_id), \
             hi AS (SELECT s.session_id FROM r JOIN s ON r.session_id = s.session_id \
               WHERE s.members >= 2 AND r.ordinal <> s.first AND r.total IS NOT NULL \
               GROUP BY s.session_id HAVING sum(r.total) > 0 AND sum(r.reused) >= {HIGH_REUSE:?} * sum(r.total)) \
             SELECT r.ordinal, CASE WHEN r.stored_class IS NOT NULL THEN r.stored_class \
               WHEN r.tool_calls > 0 OR hi.session_id IS NOT NULL THEN 'agent (inferred)' \
               WHEN r.retrieved_docs > 0 OR (r.input >= {LONG_PROMPT_TOKENS} AND r.reused < {HIGH_REUSE:?} * r.total) \
                 THEN 'rag (inferred)' \
               WHEN {batch_allowed} AND r.ttft >= r.e2e AND r.output > 1 THEN 'batch (inferred)' \
               ELSE 'chat (inferred)' END AS class_key \
             FROM r LEFT JOIN hi ON r.session_id = hi.session_id ORDER BY r.ordinal"
        ),
        &classes,
        CLASSES,
    )
    .await?;
    run(
        context,
        &format!(
            "CREATE OR REPLACE VIEW {CLASSED} AS SELECT r.*, c.class_key FROM {ROWS_ORDERED} r JOIN {CLASSES} c \
             ON r.ordinal = c.ordinal"
        ),
    )
    .await?;
    run(
        context,
        &format!(
            "CREATE OR REPLACE VIEW {BLOCKS_CLASSED} AS SELECT b.* EXCLUDE (class_key), c.class_key \
             FROM {BLOCKS_ORDERED} b JOIN {CLASSES} c ON b.ordinal = c.ordinal"
        ),
    )
    .await?;
    Ok(())
}

/// The group key of the overall figures: a constant, which the queries leave out of their groupings (grouping
/// on a constant string as well as a hash is ten times slower than on the hash alone).
const OVERALL: &str = "''";

/// `with_key` when grouping on `g`, `without` for the overall figures.
fn grouped<'a>(g: &str, with_key: &'a str, without: &'a str) -> &'a str {
    if g == OVERALL { without } else { with_key }
}

/// Overall figures, or the figures of each value of a `--by` column.
#[derive(Debug, Clone, Copy)]
enum Grouping {
    Overall,
    By(GroupBy),
}

impl Grouping {
    /// The group key of a derived row, as SQL over `infertrace_classed` or `infertrace_blocks`.
    fn key(self) -> String {
        let or_null = |c: &str| format!("coalesce({c}, '{NULL_GROUP}')");
        match self {
            Grouping::Overall => OVERALL.to_owned(),
            Grouping::By(GroupBy::Source) => "source".to_owned(),
            Grouping::By(GroupBy::Model) => or_null("model"),
            Grouping::By(GroupBy::Instance) => or_null("instance"),
            Grouping::By(GroupBy::SessionId) => or_null("session_id"),
            Grouping::By(GroupBy::Status) => "status".to_owned(),
            Grouping::By(GroupBy::WorkloadClass) => "class_key".to_owned(),
        }
    }

    /// The group key of an engine sample, when samples can be attributed to groups of this kind.
    fn sample_key(self) -> Option<String> {
        match self {
            Grouping::Overall => Some("''".to_owned()),
            Grouping::By(GroupBy::Source) => Some("coalesce(CAST(source AS VARCHAR), '')".to_owned()),
            Grouping::By(GroupBy::Instance) => Some(format!("coalesce(CAST(instance AS VARCHAR), '{NULL_GROUP}')")),
            Grouping::By(_) => None,
        }
    }
}

/// The figures of every group of `grouping`, keyed as [`Metrics::groups`] (the overall figures under `""`).
async fn groups(
    context: &SessionContext,
    options: &MetricsOptions,
    grouping: Grouping,
    scratch: &Path,
) -> Result<BTreeMap<String, (GroupMetrics, Traffic)>, QueryError> {
    let g = grouping.key();
    let sums = aggregates(context, options, &g).await?;
    let mut groups: BTreeMap<String, (GroupMetrics, Traffic)> = BTreeMap::new();
    for (key, sum) in &sums {
        let (mut group, traffic) = group_of(sum, options);
        group.latency = Latency::ALL.iter().map(|&l| (l, Distribution::default())).collect();
        groups.insert(key.clone(), (group, traffic));
    }
    for &latency in Latency::ALL {
        let column = latency.name();
        let (source, keys) = if g == OVERALL {
            (format!("SELECT {column} AS v FROM {CLASSED}"), 0)
        } else {
            (format!("SELECT {g} AS k0, {column} AS v FROM {CLASSED}"), 1)
        };
        let key_of = |key: &String| if keys == 0 { Vec::new() } else { vec![key.clone()] };
        let counted = sums.iter().map(|(key, sum)| (key_of(key), sum.n(&format!("n_{column}"))));
        let counted = Some(counted.collect());
        for (key, distribution) in distributions(context, &source, keys, &[0.5, 0.9, 0.95, 0.99], counted).await? {
            if let Some((group, _)) = groups.get_mut(key.first().map_or("", String::as_str)) {
                group.latency.insert(latency, distribution.distribution());
            }
        }
    }
    for (key, buckets) in ttft_under_load(context, &g, scratch).await? {
        if let Some((group, _)) = groups.get_mut(&key) {
            group.ttft_under_load = buckets;
        }
    }
    let (blocks, ordered) = if matches!(grouping, Grouping::By(GroupBy::WorkloadClass)) {
        (BLOCKS_CLASSED, BLOCKS_CLASSED)
    } else {
        (BLOCKS, BLOCKS_ORDERED)
    };
    for (key, reuse) in reuse(context, &g, blocks, ordered, scratch).await? {
        if let Some((group, _)) = groups.get_mut(&key) {
            group.cache.reuse = reuse;
        }
    }
    if let Some(sample_key) = grouping.sample_key() {
        for ((key, instance), samples) in engine(context, &sample_key).await? {
            if let Some((group, _)) = groups.get_mut(&key) {
                group.engine.insert(instance, samples);
            }
        }
    }
    Ok(groups)
}

/// The figures of no rows: every count 0, every ratio and distribution null.
fn empty_group(options: &MetricsOptions) -> (GroupMetrics, Traffic) {
    let (mut group, traffic) = group_of(&Aggregate::default(), options);
    group.latency = Latency::ALL.iter().map(|&l| (l, Distribution::default())).collect();
    (group, traffic)
}

/// The sums and counts of one group, as read from the aggregate query.
#[derive(Debug, Default)]
struct Aggregate {
    values: BTreeMap<String, i64>,
    floats: BTreeMap<String, Option<f64>>,
}

impl Aggregate {
    fn n(&self, name: &str) -> u64 {
        self.values.get(name).copied().unwrap_or(0).max(0) as u64
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.values.get(name).copied()
    }

    fn float(&self, name: &str) -> f64 {
        self.floats.get(name).copied().flatten().unwrap_or(0.0)
    }
}

/// The cached-tokens column of each tier, in the derived rows.
fn tier_column(tier: CacheTier) -> &'static str {
    match tier {
        CacheTier::Gpu => "cached_gpu",
        CacheTier::Cpu => "cached_cpu",
        CacheTier::Disk => "cached_disk",
        CacheTier::Remote => "cached_remote",
    }
}

/// Every figure that is a sum or a count, per group.
async fn aggregates(
    context: &SessionContext,
    options: &MetricsOptions,
    g: &str,
) -> Result<BTreeMap<String, Aggregate>, QueryError> {
    let meets_slo = if options.slo.is_empty() {
        "true".to_owned()
    } else {
        options
            .slo
            .bounds
            .iter()
            .map(|(&l, bound)| format!("{} <= {bound:?}", l.name()))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let successful = format!("(status = 'ok' AND coalesce({meets_slo}, false))");
    let mut ints: Vec<(String, String)> = vec![("requests".into(), "count(*)".into())];
    let mut floats: Vec<(String, String)> = Vec::new();
    for status in Status::ALL {
        let s = status.as_str();
        ints.push((format!("status_{s}"), format!("sum(CASE WHEN status = '{s}' THEN 1 ELSE 0 END)")));
    }
    for class in WorkloadClass::ALL {
        let c = class.as_str();
        ints.push((format!("stored_{c}"), format!("sum(CASE WHEN class_key = '{c}' THEN 1 ELSE 0 END)")));
        ints.push((format!("inferred_{c}"), format!("sum(CASE WHEN class_key = '{c} (inferred)' THEN 1 ELSE 0 END)")));
    }
    ints.extend([
        ("lo".into(), "min(lo)".into()),
        ("hi".into(), "max(hi)".into()),
        ("input_tokens".into(), "sum(input)".into()),
        ("output_tokens".into(), "sum(output)".into()),
        ("good".into(), format!("sum(CASE WHEN {successful} THEN 1 ELSE 0 END)")),
    ]);
    let tiers = [("cached", "cached")].into_iter().chain(CacheTier::ALL.iter().map(|&t| (t.as_str(), tier_column(t))));
    for (name, column) in tiers {
        let both = format!("input IS NOT NULL AND {column} IS NOT NULL");
        ints.push((format!("hit_{name}_requests"), format!("sum(CASE WHEN {both} THEN 1 ELSE 0 END)")));
        ints.push((format!("hit_{name}_input"), format!("sum(CASE WHEN {both} THEN input END)")));
        ints.push((format!("hit_{name}_cached"), format!("sum(CASE WHEN {both} THEN {column} END)")));
    }
    let both = "reasoning IS NOT NULL AND output IS NOT NULL";
    let answer = "CASE WHEN output IS NULL THEN 0 WHEN output > coalesce(reasoning, 0) \
                  THEN output - coalesce(reasoning, 0) ELSE 0 END";
    let all_four = "queue IS NOT NULL AND prefill IS NOT NULL AND decode IS NOT NULL AND e2e IS NOT NULL";
    let raw = "coalesce(input, 0) + coalesce(output, 0)";
    let capped =
        "CASE WHEN coalesce(cached, 0) < coalesce(input, 0) THEN coalesce(cached, 0) ELSE coalesce(input, 0) END";
    ints.extend([
        ("reasoning_requests".into(), format!("sum(CASE WHEN {both} THEN 1 ELSE 0 END)")),
        ("reasoning_tokens".into(), format!("sum(CASE WHEN {both} THEN reasoning END)")),
        ("answer_tokens".into(), format!("sum(CASE WHEN {both} THEN {answer} END)")),
        ("split_requests".into(), format!("sum(CASE WHEN {all_four} THEN 1 ELSE 0 END)")),
        ("raw_tokens".into(), format!("sum({raw})")),
        ("effective_tokens".into(), format!("sum(CASE WHEN {successful} THEN {raw} ELSE 0 END)")),
        ("answer_all".into(), format!("sum({answer})")),
        ("answer_successful".into(), format!("sum(CASE WHEN {successful} THEN {answer} ELSE 0 END)")),
        ("external_tokens".into(), "sum(coalesce(cached_disk, 0) + coalesce(cached_remote, 0))".into()),
        ("uncached_input".into(), format!("sum(coalesce(input, 0) - {capped})")),
        ("cached_input".into(), format!("sum({capped})")),
        ("all_output".into(), "sum(coalesce(output, 0))".into()),
    ]);
    // In whole nanoseconds, summed exactly: a sum of floats would depend on how the engine split the rows
    // between its threads, and the output must not.
    for part in ["queue", "prefill", "decode", "e2e"] {
        let nanoseconds = format!("CAST(round(CASE WHEN {all_four} THEN {part} END * 1e9) AS DECIMAL(38, 0))");
        floats.push((format!("split_{part}"), format!("sum({nanoseconds})")));
    }
    for &latency in Latency::ALL {
        let column = latency.name();
        ints.push((format!("n_{column}"), format!("count({column})")));
    }
    let select: Vec<String> = ints
        .iter()
        .map(|(name, sql)| format!("CAST({sql} AS BIGINT) AS {name}"))
        .chain(floats.iter().map(|(name, sql)| format!("CAST({sql} AS DOUBLE) AS {name}")))
        .collect();
    let group_by = if g == OVERALL { String::new() } else { format!("GROUP BY {g}") };
    let query = format!("SELECT {g} AS g, {} FROM {CLASSED} {group_by}", select.join(", "));
    let mut groups = BTreeMap::new();
    for batch in collect(context, &query).await? {
        let keys = strings(batch.column(0))?;
        let int_columns: Vec<ArrayRef> =
            (0..ints.len()).map(|i| cast(batch.column(1 + i), &DataType::Int64)).collect::<Result<_, _>>()?;
        let float_columns: Vec<ArrayRef> = (0..floats.len())
            .map(|i| cast(batch.column(1 + ints.len() + i), &DataType::Float64))
            .collect::<Result<_, _>>()?;
        for (row, key) in keys.into_iter().enumerate() {
            let mut aggregate = Aggregate::default();
            for ((name, _), column) in ints.iter().zip(&int_columns) {
                let column = column.as_primitive::<Int64Type>();
                if column.is_valid(row) {
                    aggregate.values.insert(name.clone(), column.value(row));
                }
            }
            for ((name, _), column) in floats.iter().zip(&float_columns) {
                let column = column.as_primitive::<Float64Type>();
                aggregate.floats.insert(name.clone(), column.is_valid(row).then(|| column.value(row)));
            }
            groups.insert(key.unwrap_or_default(), aggregate);
        }
    }
    Ok(groups)
}

/// A group's figures from its sums and counts, and the sums its cost is priced from once the fleet is known; the
/// distributions, loads, reuse and samples are filled later.
fn group_of(a: &Aggregate, options: &MetricsOptions) -> (GroupMetrics, Traffic) {
    let requests = a.n("requests");
    let status: BTreeMap<Status, u64> = Status::ALL.iter().map(|&s| (s, a.n(&format!("status_{}", s)))).collect();
    let known = requests - status[&Status::Unknown];
    let success_rate = ratio(status[&Status::Ok], known);
    let span_s = match (a.int("lo"), a.int("hi")) {
        (Some(lo), Some(hi)) if hi > lo => Some((i128::from(hi) - i128::from(lo)) as f64 / 1e9),
        _ => None,
    };
    let per_s = |n: u64| span_s.map(|s| n as f64 / s);
    let (input_tokens, output_tokens) = (a.n("input_tokens"), a.n("output_tokens"));
    let throughput = Throughput {
        span_s,
        requests_per_s: per_s(requests),
        input_tokens,
        output_tokens,
        input_tokens_per_s: per_s(input_tokens),
        output_tokens_per_s: per_s(output_tokens),
    };
    let good = a.n("good");
    let goodput = (!options.slo.is_empty()).then(|| crate::compute::Goodput {
        requests: good,
        fraction: ratio(good, requests),
        requests_per_s: per_s(good),
    });
    let hit_rate = |name: &str| {
        let (input, cached) = (a.n(&format!("hit_{name}_input")), a.n(&format!("hit_{name}_cached")));
        HitRate {
            requests: a.n(&format!("hit_{name}_requests")),
            input_tokens: input,
            cached_tokens: cached,
            hit_rate: ratio(cached, input),
        }
    };
    let cache = Cache {
        total: hit_rate("cached"),
        tiers: CacheTier::ALL.iter().map(|&t| (t, hit_rate(t.as_str()))).collect(),
        reuse: Reuse::default(),
    };
    let (reasoning_tokens, answer_tokens) = (a.n("reasoning_tokens"), a.n("answer_tokens"));
    let reasoning = Reasoning {
        requests: a.n("reasoning_requests"),
        reasoning_tokens,
        answer_tokens,
        multiplier: ratio(reasoning_tokens, answer_tokens),
    };
    let split_requests = a.n("split_requests");
    let e2e = a.float("split_e2e");
    let share = |part: &str| (split_requests > 0 && e2e > 0.0).then(|| a.float(part) / e2e);
    let time_split = TimeSplit {
        requests: split_requests,
        queue: share("split_queue"),
        prefill: share("split_prefill"),
        decode: share("split_decode"),
    };
    let workload = WorkloadClass::ALL
        .iter()
        .map(|&c| {
            let count = ClassCount {
                stored: a.n(&format!("stored_{}", c.as_str())),
                inferred: a.n(&format!("inferred_{}", c.as_str())),
            };
            (c, count)
        })
        .collect();
    let outcome_known = known > 0;
    let traffic = Traffic {
        rows: requests,
        outcome_known,
        raw_tokens: a.n("raw_tokens"),
        successful_answers: if outcome_known { good } else { requests },
        effective_tokens: if outcome_known { a.n("effective_tokens") } else { a.n("raw_tokens") },
        effective_answer_tokens: if outcome_known { a.n("answer_successful") } else { a.n("answer_all") },
        external_tokens: a.n("external_tokens"),
        uncached_input_tokens: a.n("uncached_input"),
        cached_input_tokens: a.n("cached_input"),
        output_tokens: a.n("all_output"),
    };
    let group = GroupMetrics {
        requests,
        status,
        success_rate,
        latency: BTreeMap::new(),
        throughput,
        goodput,
        cache,
        reasoning,
        time_split,
        ttft_under_load: Vec::new(),
        engine: BTreeMap::new(),
        workload,
        cost: None,
    };
    (group, traffic)
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// What is kept of the values of one key read in ascending order: their count, sum, largest, and the values at
/// the ranks of some quantiles.
#[derive(Debug)]
pub(crate) struct Ranked {
    count: u64,
    seen: usize,
    /// Σ in ascending order, from −0.0 as [`Iterator::sum`] does: the mean is the in-memory one to the bit.
    sum: f64,
    max: Option<f64>,
    ranks: Vec<Rank>,
}

/// Where one quantile is read: its lower and upper rank, the fraction between them, and the values found there.
#[derive(Debug)]
struct Rank {
    lower: usize,
    upper: usize,
    fraction: f64,
    at_lower: Option<f64>,
    at_upper: Option<f64>,
}

impl Ranked {
    fn new(count: u64, quantiles: &[f64]) -> Self {
        let last = count.saturating_sub(1) as usize;
        let ranks = quantiles
            .iter()
            .map(|&p| {
                // As `stats::quantile`: h = (n − 1) p between ranks ⌊h⌋ and ⌊h⌋ + 1.
                let h = last as f64 * p;
                let lower = h.floor() as usize;
                Rank { lower, upper: (lower + 1).min(last), fraction: h - lower as f64, at_lower: None, at_upper: None }
            })
            .collect();
        Self { count, seen: 0, sum: -0.0, max: None, ranks }
    }

    fn push(&mut self, value: f64) {
        for rank in &mut self.ranks {
            if self.seen == rank.lower {
                rank.at_lower = Some(value);
            }
            if self.seen == rank.upper {
                rank.at_upper = Some(value);
            }
        }
        self.seen += 1;
        self.sum += value;
        self.max = Some(value);
    }

    /// The quantiles, in the order asked; `None` without values.
    pub(crate) fn quantiles(&self) -> Vec<Option<f64>> {
        self.ranks.iter().map(|r| Some(r.at_lower? + r.fraction * (r.at_upper? - r.at_lower?))).collect()
    }

    fn mean(&self) -> Option<f64> {
        (self.seen > 0).then(|| self.sum / self.seen as f64)
    }

    fn distribution(&self) -> Distribution {
        let q = self.quantiles();
        Distribution {
            count: self.seen as u64,
            mean: self.mean(),
            p50: q[0],
            p90: q[1],
            p95: q[2],
            p99: q[3],
            max: self.max,
        }
    }
}

/// For each key of `source` (a query of columns `k0`, `k1`, … and `v`), the values `v` that are not null, ranked:
/// first counted per key (unless `counted` says), then read in ascending order off a sort that spills.
pub(crate) async fn distributions(
    context: &SessionContext,
    source: &str,
    keys: usize,
    quantiles: &[f64],
    counted: Option<BTreeMap<Vec<String>, u64>>,
) -> Result<BTreeMap<Vec<String>, Ranked>, QueryError> {
    // Keys first in each row and in the sort; without keys (the overall figures), the sort is of the values alone,
    // which the engine sorts several times faster than with a constant key beside them.
    let key_list: String = (0..keys).map(|k| format!("k{k}, ")).collect();
    let group_by = if keys == 0 { String::new() } else { format!("GROUP BY {}", key_list.trim_end_matches(", ")) };
    let counts_query = format!("SELECT {key_list}count(v) FROM ({source}) WHERE v IS NOT NULL {group_by}");
    let known = counted.is_some();
    let mut counts: BTreeMap<Vec<String>, u64> = counted.unwrap_or_default();
    let batches = if known { Vec::new() } else { collect(context, &counts_query).await? };
    for batch in batches {
        let key_columns = (0..keys).map(|k| strings(batch.column(k))).collect::<Result<Vec<_>, _>>()?;
        let n = cast(batch.column(keys), &DataType::Int64)?;
        let n = n.as_primitive::<Int64Type>();
        for row in 0..batch.num_rows() {
            let key = key_columns.iter().map(|c| c[row].clone().unwrap_or_default()).collect();
            counts.insert(key, n.value(row).max(0) as u64);
        }
    }
    let sorted = format!("SELECT {key_list}v FROM ({source}) WHERE v IS NOT NULL ORDER BY {key_list}v");
    let mut ranked: BTreeMap<Vec<String>, Ranked> = BTreeMap::new();
    let mut current: Option<(Vec<String>, Ranked)> = None;
    let mut stream = context.sql(&sorted).await?.execute_stream().await?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let key_columns = (0..keys).map(|k| utf8(batch.column(k))).collect::<Result<Vec<_>, _>>()?;
        let values = cast(batch.column(keys), &DataType::Float64)?;
        let values = values.as_primitive::<Float64Type>();
        for row in 0..batch.num_rows() {
            let same = current.as_ref().is_some_and(|(key, _)| {
                key.iter().zip(&key_columns).all(|(k, c)| c.as_string::<i32>().value(row) == k.as_str())
            });
            if !same {
                let key: Vec<String> = key_columns.iter().map(|c| c.as_string::<i32>().value(row).to_owned()).collect();
                let walk = Ranked::new(counts.get(&key).copied().unwrap_or(0), quantiles);
                if let Some((key, walk)) = current.replace((key, walk)) {
                    ranked.insert(key, walk);
                }
            }
            if let Some((_, walk)) = current.as_mut() {
                walk.push(values.value(row));
            }
        }
    }
    if let Some((key, walk)) = current {
        ranked.insert(key, walk);
    }
    for (key, walk) in &ranked {
        if walk.seen as u64 != walk.count {
            return Err(QueryError::Engine(Box::new(datafusion::error::DataFusionError::Internal(format!(
                "{} values of {key:?} counted, {} sorted",
                walk.count, walk.seen
            )))));
        }
    }
    Ok(ranked)
}

/// TTFT per group and power-of-two bucket of the requests in flight at each arrival.
///
/// The requests in flight at an arrival t are those with arrival ≤ t < completion, less the request itself:
/// the arrivals up to t (ties taken together; a request without a completion, or completing before it arrives, is
/// nobody's load) less the completions up to t. The engine numbers the arrivals with a running count over them in
/// time order and sorts the completions; a walk over the two sorted streams counts the completions passed.
///
/// The loads are written to `scratch` once (group, bucket and TTFT of each arrival), then counted and sorted.
async fn ttft_under_load(
    context: &SessionContext,
    g: &str,
    scratch: &Path,
) -> Result<BTreeMap<String, Vec<LoadBucket>>, QueryError> {
    let keyed = g != OVERALL;
    let (partition, group, by_group) = if keyed { ("PARTITION BY g", "g", "g, ") } else { ("", "''", "") };
    let spans = format!("SELECT {g} AS g, a, end_t AS c, ttft FROM {CLASSED} WHERE a IS NOT NULL");
    let arrivals = format!(
        "SELECT {group} AS g, a, ttft, CAST(CASE WHEN c > a THEN 1 ELSE 0 END AS BIGINT) AS own, \
           CAST(sum(CASE WHEN c >= a THEN 1 ELSE 0 END) OVER ({partition} ORDER BY a \
             RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS BIGINT) AS arrived \
         FROM ({spans}) ORDER BY {by_group}a"
    );
    let completions = format!("SELECT {group} AS g, c FROM ({spans}) WHERE c >= a ORDER BY {by_group}c");
    let name = if keyed { "infertrace_group_loads" } else { "infertrace_loads" };
    let path = scratch.join(format!("{name}.parquet"));
    let schema = Arc::new(Schema::new(vec![
        Field::new("k0", DataType::Utf8, false),
        Field::new("k1", DataType::Int64, false),
        Field::new("v", DataType::Float64, false),
    ]));
    let file = std::fs::File::create(&path).map_err(|source| QueryError::Scratch { path: path.clone(), source })?;
    let mut writer = ArrowWriter::try_new(file, schema.clone(), None).map_err(DataFusionError::from)?;
    let mut completions = Cursor::new(context.sql(&completions).await?.execute_stream().await?);
    let mut arrivals = context.sql(&arrivals).await?.execute_stream().await?;
    // The group being walked and the completions of it passed so far.
    let (mut walking, mut completed) = (None::<String>, 0i64);
    while let Some(batch) = arrivals.next().await {
        let batch = batch?;
        let keys = utf8(batch.column(0))?;
        let keys = keys.as_string::<i32>();
        let (times, ttfts) =
            (batch.column(1).as_primitive::<Int64Type>(), batch.column(2).as_primitive::<Float64Type>());
        let (own, arrived) = (batch.column(3).as_primitive::<Int64Type>(), batch.column(4).as_primitive::<Int64Type>());
        let (mut k0, mut k1, mut v) = (StringBuilder::new(), Int64Builder::new(), Float64Builder::new());
        for row in 0..batch.num_rows() {
            let key = keys.value(row);
            if walking.as_deref() != Some(key) {
                walking = Some(key.to_owned());
                completed = 0;
            }
            // Completions of earlier groups (keys sort as bytes, here and in the engine) are passed over.
            while let Some((group, time)) = completions.peek().await? {
                match group.cmp(key) {
                    Ordering::Less => {}
                    Ordering::Equal if time <= times.value(row) => completed += 1,
                    _ => break,
                }
                completions.advance();
            }
            if ttfts.is_valid(row) {
                let load = arrived.value(row) - completed - own.value(row);
                let bucket = if load <= 0 { 0 } else { 1i64 << (63 - load.leading_zeros()) };
                k0.append_value(key);
                k1.append_value(bucket);
                v.append_value(ttfts.value(row));
            }
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(k0.finish()), Arc::new(k1.finish()), Arc::new(v.finish())];
        writer.write(&RecordBatch::try_new(schema.clone(), columns)?).map_err(DataFusionError::from)?;
    }
    writer.close().map_err(DataFusionError::from)?;
    context.deregister_table(name)?;
    context.register_parquet(name, &path.to_string_lossy(), datafusion::prelude::ParquetReadOptions::default()).await?;
    // The overall figures sort by the bucket alone.
    let (source, keys) = if g == OVERALL {
        (format!("SELECT k1 AS k0, v FROM {name}"), 1)
    } else {
        (format!("SELECT k0, k1, v FROM {name}"), 2)
    };
    let mut loads: BTreeMap<String, Vec<LoadBucket>> = BTreeMap::new();
    let mut ranked: Vec<(String, u64, Ranked)> = distributions(context, &source, keys, &[0.5, 0.9, 0.95, 0.99], None)
        .await?
        .into_iter()
        .map(|(mut key, walk)| {
            let low = key[keys - 1].parse().unwrap_or(0);
            let group = if keys == 1 { String::new() } else { std::mem::take(&mut key[0]) };
            (group, low, walk)
        })
        .collect();
    ranked.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    for (key, low, walk) in ranked {
        let (in_flight_min, in_flight_max) = crate::compute::load_bucket(low);
        loads.entry(key).or_default().push(LoadBucket { in_flight_min, in_flight_max, ttft: walk.distribution() });
    }
    Ok(loads)
}

/// The reuse an unbounded prefix cache finds per group: requests replayed in arrival order (ties in input order),
/// each hitting the blocks whose hash the group saw before, in an earlier request or earlier in its own; a request's
/// hit tokens are `min(hit blocks × block_size, input_tokens)` and the hit rate divides their sum by Σ`input_tokens`
/// (blocks × `block_size` where null): the definition `cache-sim` and `mrc` use (`schemas/metrics.schema.json`).
///
/// One pass over the blocks counts each group's rows, blocks and tokens, and hands each block to a
/// [`DistinctCounter`] (with its partition files in `scratch`) with its share of its request's input tokens, as
/// `mrc` weighs it: `block_size`, what a partly filled last block holds, 0 past the input. Every block but the first
/// sight of a hash hits, so the hit tokens are the shares of all blocks less those of the first sights (the
/// earliest by arrival); with prefix hashes (each names its whole prefix, as in every format read) a request's hits
/// are a prefix of its blocks and their shares add up to `min(hit blocks × block_size, input_tokens)`. Only when a
/// hash's earliest sights, at one arrival instant, weigh differently does input order decide: then the query
/// engine finds each hash's first row (ten times slower). `from` holds the blocks, `ordered` the same with their
/// ordinals.
async fn reuse(
    context: &SessionContext,
    g: &str,
    from: &str,
    ordered: &str,
    scratch: &Path,
) -> Result<BTreeMap<String, Reuse>, QueryError> {
    let filter = "WHERE block_size IS NOT NULL AND prefix_hashes IS NOT NULL";
    let keyed = g != OVERALL;
    let threads = context.state().config().target_partitions();
    let mut counter = DistinctCounter::new(scratch, keyed, threads)?;
    /// One group's totals.
    #[derive(Default)]
    struct Totals {
        rows: u64,
        blocks: u64,
        /// Σ`input_tokens` (blocks × `block_size` where null).
        input: u64,
        /// Σ of the blocks' shares: Σ min(blocks × `block_size`, `input_tokens`).
        shares: u64,
    }
    // Per group, numbered as first seen: its name and totals.
    let mut index: BTreeMap<String, u32> = BTreeMap::new();
    let mut totals: Vec<Totals> = Vec::new();
    let key = if keyed { g } else { "''" };
    let query = format!(
        "SELECT {key} AS g, CAST(block_size AS BIGINT) AS block_size, input, a, prefix_hashes FROM {from} {filter}"
    );
    let mut stream = context.sql(&query).await?.execute_stream().await?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let keys = utf8(batch.column(0))?;
        let keys = keys.as_string::<i32>();
        let sizes = batch.column(1).as_primitive::<Int64Type>();
        let inputs = batch.column(2).as_primitive::<Int64Type>();
        let arrivals = batch.column(3).as_primitive::<Int64Type>();
        let lists = batch.column(4).as_list::<i32>();
        let hashes = lists.values().as_primitive::<UInt64Type>();
        for row in 0..batch.num_rows() {
            let key = if keys.is_valid(row) { keys.value(row) } else { "" };
            let group = match index.get(key) {
                Some(&group) => group,
                None => {
                    index.insert(key.to_owned(), totals.len() as u32);
                    totals.push(Totals::default());
                    totals.len() as u32 - 1
                }
            };
            let block_size = sizes.value(row).clamp(0, i64::from(u32::MAX)) as u64;
            let input = inputs.is_valid(row).then(|| inputs.value(row).max(0) as u64);
            let arrival = if arrivals.is_valid(row) { arrivals.value(row) } else { i64::MAX };
            let t = &mut totals[group as usize];
            t.rows += 1;
            let span = lists.value_offsets()[row] as usize..lists.value_offsets()[row + 1] as usize;
            let mut blocks = 0u64;
            for item in span.filter(|&i| hashes.is_valid(i)) {
                // Tokens of the input within this block: min((i + 1) × b, input) − min(i × b, input).
                let (start, end) = (blocks * block_size, (blocks + 1) * block_size);
                let share = input.map_or(block_size, |n| end.min(n) - start.min(n));
                counter.insert(group, hashes.value(item), share as u32, arrival)?;
                blocks += 1;
                t.shares += share;
            }
            t.blocks += blocks;
            t.input += input.unwrap_or(blocks * block_size);
        }
    }
    let tallies = counter.counts(totals.len())?;
    let mut reuse: BTreeMap<String, Reuse> = BTreeMap::new();
    for (key, &group) in &index {
        let (t, tally) = (&totals[group as usize], tallies[group as usize]);
        let entry = reuse.entry(key.clone()).or_default();
        (entry.requests, entry.blocks, entry.tokens) = (t.rows, t.blocks, t.input);
        (entry.hit_blocks, entry.hit_tokens) = (t.blocks - tally.distinct, t.shares - tally.first_shares);
    }
    if tallies.iter().any(|t| t.mixed) {
        first_sight_reuse(context, g, ordered, filter, &mut reuse).await?;
    }
    for entry in reuse.values_mut() {
        entry.hit_rate = ratio(entry.hit_tokens, entry.tokens);
    }
    Ok(reuse)
}

/// The hit blocks and tokens of [`reuse`] when some hash weighs differently at different sights: the query engine
/// finds each hash's first row (by arrival, then input order), each row's hits are its blocks less the hashes it saw
/// first, and its hit tokens `min(hits × block_size, input_tokens)`.
async fn first_sight_reuse(
    context: &SessionContext,
    g: &str,
    ordered: &str,
    filter: &str,
    reuse: &mut BTreeMap<String, Reuse>,
) -> Result<(), QueryError> {
    let key = grouped(g, g, "''");
    let query = format!(
        "WITH b AS (SELECT {key} AS g, ordinal, a, unnest(prefix_hashes) AS h FROM {ordered} {filter}), \
         f AS (SELECT g, first_value(ordinal ORDER BY a ASC NULLS LAST, ordinal ASC) AS ordinal \
             FROM b WHERE h IS NOT NULL GROUP BY g, h), \
         m AS (SELECT g, ordinal, count(*) AS misses FROM f GROUP BY g, ordinal), \
         r AS (SELECT {key} AS g, ordinal, CAST(block_size AS BIGINT) AS bs, input, \
             CAST(cardinality(prefix_hashes) AS BIGINT) AS n FROM {ordered} {filter}), \
         hits AS (SELECT r.g, r.bs, r.input, r.n - coalesce(m.misses, 0) AS hit \
             FROM r LEFT JOIN m ON r.g = m.g AND r.ordinal = m.ordinal) \
         SELECT g, CAST(sum(hit) AS BIGINT), \
             CAST(sum(CASE WHEN input IS NULL THEN hit * bs ELSE least(hit * bs, input) END) AS BIGINT) \
         FROM hits GROUP BY g"
    );
    for batch in collect(context, &query).await? {
        let keys = strings(batch.column(0))?;
        let column = |i: usize| cast(batch.column(i), &DataType::Int64);
        let (blocks, tokens) = (column(1)?, column(2)?);
        let value = |a: &ArrayRef, row| a.as_primitive::<Int64Type>().value(row).max(0) as u64;
        for (row, key) in keys.into_iter().enumerate() {
            let entry = reuse.entry(key.unwrap_or_default()).or_default();
            entry.hit_blocks = value(&blocks, row);
            entry.hit_tokens = value(&tokens, row);
        }
    }
    Ok(())
}

/// `kv_cache_usage` and `requests_waiting` per group key `sample_key` and instance: the summary of the values,
/// and the mean over time with each sample holding until the next (ties in input order).
async fn engine(
    context: &SessionContext,
    sample_key: &str,
) -> Result<BTreeMap<(String, String), InstanceSamples>, QueryError> {
    let wanted = [sample_metrics::KV_CACHE_USAGE, sample_metrics::REQUESTS_WAITING];
    let filter = format!(
        "CAST(metric AS VARCHAR) IN ({}) AND abs(value) < CAST('inf' AS DOUBLE) AND time IS NOT NULL",
        wanted.iter().map(|m| format!("'{m}'")).collect::<Vec<_>>().join(", ")
    );
    let keys = format!(
        "{sample_key} AS k0, coalesce(CAST(instance AS VARCHAR), '{NULL_GROUP}') AS k1, CAST(metric AS VARCHAR) AS k2"
    );
    let source = format!("SELECT {keys}, value AS v FROM {SAMPLES} WHERE {filter}");
    let ranked = distributions(context, &source, 3, &[0.95], None).await?;
    let ordered = format!(
        "SELECT {keys}, arrow_cast(time, 'Int64') AS t, value AS v, ordinal FROM {SAMPLES} WHERE {filter} \
         ORDER BY k0, k1, k2, t, ordinal"
    );
    // Per key: the first instant, the last point, and Σ vₖ (tₖ₊₁ − tₖ).
    let mut weighted: BTreeMap<Vec<String>, (i64, (i64, f64), f64)> = BTreeMap::new();
    let mut stream = context.sql(&ordered).await?.execute_stream().await?;
    let mut last_key: Vec<String> = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let key_columns = (0..3).map(|k| utf8(batch.column(k))).collect::<Result<Vec<_>, _>>()?;
        let (times, values) = (cast(batch.column(3), &DataType::Int64)?, cast(batch.column(4), &DataType::Float64)?);
        let (times, values) = (times.as_primitive::<Int64Type>(), values.as_primitive::<Float64Type>());
        for row in 0..batch.num_rows() {
            let key_matches = last_key.len() == 3
                && key_columns.iter().zip(&last_key).all(|(c, k)| c.as_string::<i32>().value(row) == k.as_str());
            if !key_matches {
                last_key = key_columns.iter().map(|c| c.as_string::<i32>().value(row).to_owned()).collect();
            }
            let point = (times.value(row), values.value(row));
            match weighted.get_mut(&last_key) {
                Some((_, previous, sum)) if key_matches => {
                    *sum += previous.1 * (point.0 - previous.0) as f64;
                    *previous = point;
                }
                _ => {
                    weighted.insert(last_key.clone(), (point.0, point, -0.0));
                }
            }
        }
    }
    let mut engine: BTreeMap<(String, String), InstanceSamples> = BTreeMap::new();
    for (key, walk) in ranked {
        let time_weighted_mean = weighted.get(&key).and_then(|&(first, last, sum)| {
            let span = last.0 - first;
            (span > 0).then(|| sum / span as f64)
        });
        let summary = SampleSummary {
            count: walk.seen as u64,
            mean: walk.mean(),
            time_weighted_mean,
            p95: walk.quantiles()[0],
            max: walk.max,
        };
        let [group, instance, metric] = <[String; 3]>::try_from(key).expect("three key columns");
        let samples = engine.entry((group, instance)).or_default();
        if metric == sample_metrics::KV_CACHE_USAGE {
            samples.kv_cache_usage = summary;
        } else {
            samples.requests_waiting = summary;
        }
    }
    Ok(engine)
}

/// The rows of a stream of `(g, t)` batches (text, `BIGINT`), one at a time.
struct Cursor {
    stream: SendableRecordBatchStream,
    batch: Option<(ArrayRef, ArrayRef)>,
    row: usize,
}

impl Cursor {
    fn new(stream: SendableRecordBatchStream) -> Self {
        Self { stream, batch: None, row: 0 }
    }

    /// The current row, `None` past the last.
    async fn peek(&mut self) -> Result<Option<(&str, i64)>, QueryError> {
        while self.batch.as_ref().is_none_or(|(keys, _)| self.row >= keys.len()) {
            match self.stream.next().await {
                Some(batch) => {
                    let batch = batch?;
                    self.batch = Some((utf8(batch.column(0))?, batch.column(1).clone()));
                    self.row = 0;
                }
                None => return Ok(None),
            }
        }
        let (keys, times) = self.batch.as_ref().expect("a batch with rows left");
        Ok(Some((keys.as_string::<i32>().value(self.row), times.as_primitive::<Int64Type>().value(self.row))))
    }

    fn advance(&mut self) {
        self.row += 1;
    }
}

/// Runs a statement whose result is not wanted (a `SET`, a `CREATE VIEW`).
pub(crate) async fn run(context: &SessionContext, sql: &str) -> Result<(), QueryError> {
    context.sql(sql).await?.collect().await?;
    Ok(())
}

/// The result of a query expected to be small (one row per group).
pub(crate) async fn collect(context: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, QueryError> {
    Ok(context.sql(sql).await?.collect().await?)
}

/// The one number a `SELECT count(*)` gives.
pub(crate) async fn single_count(context: &SessionContext, sql: &str) -> Result<u64, QueryError> {
    let batches = collect(context, sql).await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0);
    Ok(batch.map_or(Ok(0), |b| {
        cast(b.column(0), &DataType::Int64).map(|c| c.as_primitive::<Int64Type>().value(0).max(0) as u64)
    })?)
}

/// Writes the result of `query` to the Parquet file `path`, in the query's order, and registers it as `name`.
async fn materialize(context: &SessionContext, query: &str, path: &Path, name: &str) -> Result<(), QueryError> {
    let options = datafusion::dataframe::DataFrameWriteOptions::new().with_single_file_output(true);
    context.sql(query).await?.write_parquet(&path.to_string_lossy(), options, None).await?;
    context.register_parquet(name, &path.to_string_lossy(), datafusion::prelude::ParquetReadOptions::default()).await?;
    Ok(())
}

/// A text column as `Utf8`.
fn utf8(array: &ArrayRef) -> Result<ArrayRef, QueryError> {
    Ok(cast(array, &DataType::Utf8)?)
}

/// A text column as owned strings.
fn strings(array: &ArrayRef) -> Result<Vec<Option<String>>, QueryError> {
    Ok(utf8(array)?.as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect())
}
