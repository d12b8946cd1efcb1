//! Serving replay: a canonical trace held constant and replayed, by discrete-event simulation, against a serving
//! configuration (`infertrace replay`), and the efficiency factors that make the replay match a measured run
//! (`infertrace calibrate`).
//!
//! [`replay`] turns request rows into the simulation's requests (arrival, prompt tokens, generated tokens with hidden
//! reasoning), runs [`sim::simulate`] and turns the outcomes back into canonical rows with `source` `replay`, so
//! that `metrics`, `compare` and `report` work on replays unchanged. [`replay_stream`] does the same over rows that
//! come sorted by arrival (the CLI reads them from a spilling sort), holding only the requests in flight. The
//! scheduling and cost model are documented in [`sim`]; `docs/replay.md` documents the validation against measured
//! vLLM runs.
//!
//! Rows are replayed when they have an arrival and `input_tokens`; `output_tokens` missing counts as 1 token. Other
//! rows are skipped and counted. Arrivals keep their offsets from the first arrival, divided by the rate scale.
//! With a `[cache]` configuration, each instance has a tiered prefix cache (the `infertrace-cache` semantics of
//! `cache-sim`, accessed on arrival with the row's `prefix_hashes` and `block_size`) and the rows' `cached_tokens`
//! columns say what was reused from each tier; without one, the cached columns are null.

pub mod calibrate;
pub mod config;
pub mod sim;

use infertrace_model::Catalog;
use infertrace_schema::{CacheTier, EngineSample, RequestRow, Status, metrics};

pub use config::{Config, ConfigError};
pub use sim::{SimError, Simulation, simulate};

/// The `source` of replayed rows.
pub const SOURCE: &str = "replay";

/// How to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    /// Arrival rate multiplier: offsets from the first arrival are divided by it; default 1.
    pub rate_scale: f64,
    /// Seconds between engine samples; default 1.
    pub sample_interval_s: f64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { rate_scale: 1.0, sample_interval_s: 1.0 }
    }
}

/// A replay's tables and counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replayed {
    /// One row per replayed request, in input order ([`replay`]; empty from [`replay_stream`]).
    pub requests: Vec<RequestRow>,
    /// Requests replayed.
    pub replayed: u64,
    /// Of those, completed (status `ok`).
    pub completed: u64,
    /// Running, waiting and KV usage per instance every sample interval.
    pub samples: Vec<EngineSample>,
    /// Rows not replayed (no arrival or no input tokens).
    pub skipped: u64,
    /// Requests rejected (prompt larger than the KV memory) or dropped (alone on an instance without enough KV
    /// memory to finish), status `error`.
    pub rejected: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Iterations simulated.
    pub iterations: u64,
    /// Of those, decode-only iterations folded into another.
    pub folded: u64,
    /// KV blocks per instance.
    pub blocks_per_instance: u64,
    /// Simulated span, s.
    pub makespan_s: f64,
}

/// Why a replay cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplayError {
    /// A catalog entry is missing.
    #[error("{kind} {id:?} is not in the catalog (see `infertrace model --list`)")]
    Catalog {
        /// `model` or `accelerator`.
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// The simulation cannot start.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// Bad options.
    #[error("the rate scale must be a finite number > 0")]
    RateScale,
}

/// Replays `rows` on `config`.
pub fn replay(
    config: &Config,
    catalog: &Catalog,
    rows: &[RequestRow],
    options: &ReplayOptions,
) -> Result<Replayed, ReplayError> {
    let (model, accelerator) = check(config, catalog, options)?;
    let usable: Vec<usize> = (0..rows.len()).filter(|&i| replayable(&rows[i])).collect();
    let origin = origin(usable.iter().map(|&i| &rows[i]));
    let requests: Vec<sim::Request> = usable.iter().map(|&i| request(&rows[i], origin, options)).collect();
    let simulation = simulate(config, model, accelerator, &requests, options.sample_interval_s)?;
    let mut out = Replayed {
        skipped: (rows.len() - usable.len()) as u64,
        iterations: simulation.iterations,
        folded: simulation.folded,
        blocks_per_instance: simulation.blocks_per_instance,
        makespan_s: simulation.makespan_s,
        ..Replayed::default()
    };
    for ((&i, request), outcome) in usable.iter().zip(&requests).zip(&simulation.outcomes) {
        let row = replayed_row(config, &rows[i], (request.arrival, request.output), outcome, origin, &mut out);
        out.requests.push(row);
    }
    out.samples = engine_samples(config, &simulation.samples, origin);
    Ok(out)
}

/// Replays rows that come as a stream: `(index, row)` of the rows that have an arrival and `input_tokens` (see
/// [`replayable`]), in the order of their arrival offsets (`request(row).arrival`), equal ones by index, with
/// `origin` the earliest of their arrivals. Each replayed row goes to `done` with its index once its outcome is
/// final, in no particular order; memory holds the requests in flight, not the trace. The returned [`Replayed`]
/// has no requests: its counts (`skipped` left 0 for the caller), the samples and the simulation's figures.
pub fn replay_stream(
    config: &Config,
    catalog: &Catalog,
    origin: i64,
    rows: impl Iterator<Item = (usize, RequestRow)>,
    options: &ReplayOptions,
    done: &mut dyn FnMut(usize, RequestRow),
) -> Result<Replayed, ReplayError> {
    let (model, accelerator) = check(config, catalog, options)?;
    // The source rows in flight, by index: taken as the simulation reads them, returned with their outcome.
    let sources: std::rc::Rc<std::cell::RefCell<std::collections::HashMap<usize, RequestRow>>> = Default::default();
    let stash = std::rc::Rc::clone(&sources);
    let arrivals = rows.map(move |(i, row)| {
        let request = request(&row, origin, options);
        stash.borrow_mut().insert(i, row);
        (i, request)
    });
    let mut out = Replayed::default();
    let simulation = sim::simulate_stream(
        config,
        model,
        accelerator,
        arrivals,
        options.sample_interval_s,
        true,
        &mut |i, outcome| {
            let source = sources.borrow_mut().remove(&i).expect("every outcome is of a row read");
            let row = replayed_row(config, &source, arrival(&source, origin, options), &outcome, origin, &mut out);
            done(i, row);
        },
    )?;
    out.iterations = simulation.iterations;
    out.folded = simulation.folded;
    out.blocks_per_instance = simulation.blocks_per_instance;
    out.makespan_s = simulation.makespan_s;
    out.samples = engine_samples(config, &simulation.samples, origin);
    Ok(out)
}

/// Whether a row is replayed: it has an arrival and `input_tokens`.
pub fn replayable(row: &RequestRow) -> bool {
    row.arrival_time.is_some() && row.input_tokens.is_some()
}

/// The earliest arrival of `rows` (0 without one): replayed arrivals keep their offsets from it.
pub fn origin<'a>(rows: impl Iterator<Item = &'a RequestRow>) -> i64 {
    rows.filter_map(|r| r.arrival_time).min().unwrap_or(0)
}

/// The catalog entries of `config`, once the options are checked.
fn check<'c>(
    config: &Config,
    catalog: &'c Catalog,
    options: &ReplayOptions,
) -> Result<(&'c infertrace_model::Model, &'c infertrace_model::Accelerator), ReplayError> {
    if !(options.rate_scale > 0.0 && options.rate_scale.is_finite()) {
        return Err(ReplayError::RateScale);
    }
    let h = &config.hardware;
    let model = catalog.model(&h.model).ok_or_else(|| ReplayError::Catalog { kind: "model", id: h.model.clone() })?;
    let accelerator = catalog
        .accelerator(&h.accelerator)
        .ok_or_else(|| ReplayError::Catalog { kind: "accelerator", id: h.accelerator.clone() })?;
    Ok((model, accelerator))
}

/// The simulation's request of a replayable row: its arrival offset from `origin` in seconds, divided by the rate
/// scale, its prompt and output tokens (missing output counts as 1) and its prefix hashes.
pub fn request(row: &RequestRow, origin: i64, options: &ReplayOptions) -> sim::Request {
    let (arrival, output) = arrival(row, origin, options);
    sim::Request {
        arrival,
        prompt: row.input_tokens.unwrap_or(0),
        output,
        hashes: match (&row.prefix_hashes, row.block_size) {
            (Some(hashes), Some(_)) => hashes.clone(),
            _ => Vec::new(),
        },
        hash_block: row.block_size.unwrap_or(0),
    }
}

/// A replayable row's arrival offset from `origin` in seconds, divided by the rate scale, and its output tokens
/// (missing counts as 1).
fn arrival(row: &RequestRow, origin: i64, options: &ReplayOptions) -> (f64, u32) {
    // Integer offset first: instants near 2^60 ns lose precision as f64.
    let offset = (row.arrival_time.unwrap_or(origin) - origin) as f64 / 1e9 / options.rate_scale;
    (offset, row.output_tokens.unwrap_or(1).max(1))
}

/// The name of instance `i` of `config`: `replay-<i>`, or `prefill-<i>` and `decode-<i>` when disaggregated.
fn instance_name(config: &Config, i: usize) -> String {
    if config.disaggregated() {
        let prefill = config.cluster.prefill_instances.unwrap_or(0) as usize;
        if i < prefill { format!("prefill-{i}") } else { format!("decode-{}", i - prefill) }
    } else {
        format!("replay-{i}")
    }
}

/// The canonical row of a replayed request, from its source row, its arrival offset and output tokens (see
/// [`arrival`]) and its outcome; counts it in `out`.
fn replayed_row(
    config: &Config,
    source: &RequestRow,
    (arrival, output): (f64, u32),
    outcome: &sim::Outcome,
    origin: i64,
    out: &mut Replayed,
) -> RequestRow {
    let h = &config.hardware;
    let at = |seconds: f64| origin + (seconds * 1e9).round() as i64;
    out.preemptions += u64::from(outcome.preemptions);
    out.replayed += 1;
    let mut row = RequestRow {
        request_id: source.request_id.clone(),
        source: SOURCE.to_owned(),
        model: Some(h.model.clone()),
        session_id: source.session_id.clone(),
        turn: source.turn,
        arrival_time: Some(at(arrival)),
        input_tokens: source.input_tokens,
        output_tokens: Some(output),
        reasoning_tokens: source.reasoning_tokens,
        max_tokens: source.max_tokens,
        prefix_hashes: source.prefix_hashes.clone(),
        block_size: source.block_size,
        retrieved_docs: source.retrieved_docs,
        tool_calls: source.tool_calls,
        workload_class: source.workload_class,
        ..RequestRow::default()
    };
    if let Some(cache) = &config.cache {
        let tokens = |i: usize| outcome.cached.get(i).map(|&t| t as u32).unwrap_or(0);
        row.cached_tokens = Some((0..cache.tiers.len()).map(tokens).sum());
        for (i, tier) in cache.tiers.iter().enumerate() {
            let column = match tier.tier {
                CacheTier::Gpu => &mut row.cached_tokens_gpu,
                CacheTier::Cpu => &mut row.cached_tokens_cpu,
                CacheTier::Disk => &mut row.cached_tokens_disk,
                CacheTier::Remote => &mut row.cached_tokens_remote,
            };
            *column = Some(tokens(i));
        }
    }
    if outcome.rejected || outcome.out_of_memory {
        out.rejected += 1;
        row.status = Status::Error;
        row.error =
            Some(if outcome.rejected { "prompt larger than the KV memory" } else { "out of KV memory" }.to_owned());
        row.scheduled_time = outcome.scheduled.map(at);
        row.first_token_time = outcome.first_token.map(at);
    } else {
        out.completed += 1;
        row.status = Status::Ok;
        row.scheduled_time = outcome.scheduled.map(at);
        row.first_token_time = outcome.first_token.map(at);
        row.last_token_time = outcome.last_token.map(at);
        row.completion_time = outcome.last_token.map(at);
        match outcome.decode_instance {
            Some(decode) => {
                row.prefill_instance = Some(instance_name(config, outcome.prefill_instance));
                row.decode_instance = Some(instance_name(config, decode));
                row.instance = Some(instance_name(config, decode));
                row.prefill_end_time = outcome.first_token.map(at);
                row.decode_start_time = outcome.decode_start.map(at);
                row.kv_transfer_s = outcome.transfer_s;
                row.kv_transfer_bytes = outcome.transfer_bytes.map(|b| b.round() as u64);
            }
            None => row.instance = Some(instance_name(config, outcome.prefill_instance)),
        }
    }
    // Negative spans cannot occur in a replay; nothing to report.
    let _ = row.fill_durations();
    row
}

/// The engine samples of the simulation's instance states: running, waiting and KV usage.
fn engine_samples(config: &Config, samples: &[sim::InstanceSample], origin: i64) -> Vec<EngineSample> {
    let at = |seconds: f64| origin + (seconds * 1e9).round() as i64;
    let mut out = Vec::with_capacity(samples.len() * 3);
    for s in samples {
        let instance = Some(instance_name(config, s.instance).into());
        let sample = |metric: &str, value: f64| EngineSample {
            time: at(s.time),
            source: SOURCE.into(),
            instance: instance.clone(),
            metric: metric.into(),
            value,
            ..EngineSample::default()
        };
        out.push(sample(metrics::REQUESTS_RUNNING, f64::from(s.running)));
        out.push(sample(metrics::REQUESTS_WAITING, f64::from(s.waiting)));
        out.push(sample(metrics::KV_CACHE_USAGE, s.kv_usage));
    }
    out
}

#[cfg(test)]
mod tests;
