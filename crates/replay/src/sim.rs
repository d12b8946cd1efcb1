//! The discrete-event simulation: instances running vLLM-style continuous batching on a roofline cost model.
//!
//! # Scheduling (per instance, every iteration)
//!
//! Like vLLM's v1 scheduler: a token budget of `max_num_batched_tokens` is spent first on the running sequences in
//! admission order (a decoding sequence takes 1 token, one still prefilling takes what remains of its prompt, cut to
//! the budget when prefill is chunked), then on waiting sequences in arrival order while fewer than `max_num_seqs`
//! run. KV memory is allocated in blocks of `block_size` tokens as tokens are scheduled; a waiting sequence is
//! admitted only when its blocks are free, and when a running sequence needs a block that is not free the most
//! recently admitted other running sequence is preempted: its blocks are freed and it returns to the front of the
//! queue to recompute its prompt and what it had generated (vLLM's recompute preemption). A prompt that cannot fit in
//! the whole KV memory is rejected (status `error`, as vLLM rejects it).
//!
//! # Cost of an iteration (the roofline)
//!
//! With `N` active parameters, `ℓ` layers, `H` heads of dimension `d`, `k` KV bytes per token (÷ κ), `b` bytes per
//! weight: scheduling `t` prompt tokens at context offset `o` costs `2 N t + 4 ℓ H d (t o + t²/2)` FLOPs and reads
//! `o k` bytes of KV; a decode token at context `L` costs `2 N + 4 ℓ H d L` FLOPs and reads `L k` bytes. The
//! iteration takes `max(FLOPs / (tp × peak × mfu), (N b + KV bytes) / (tp × bandwidth × mbu)) + step_overhead_s`.
//!
//! # Tokens and times
//!
//! The iteration that schedules a sequence's last prompt token ends with its first output token; each later
//! iteration that schedules it adds one token (after a preemption, the recompute's last iteration adds the next
//! token). A request is complete with its last token (`output_tokens`, hidden reasoning included). Disaggregated,
//! a prefill instance stops after the first token; the KV of prompt + 1 tokens then moves over the link
//! (`link_latency_s + bytes / link_gbs`) to a decode instance chosen by the routing policy, which admits it like a
//! sequence whose prompt is already computed.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::iter::Peekable;
use std::rc::Rc;

use infertrace_cache::{TierSpec, TieredCache};
use infertrace_model::{Accelerator, Model};
use infertrace_schema::CacheTier;

use crate::config::{Config, Retrieve, Routing};

/// One request to replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// Arrival, seconds from the start of the replay.
    pub arrival: f64,
    /// Prompt tokens.
    pub prompt: u32,
    /// Generated tokens (at least 1).
    pub output: u32,
    /// Chained prefix hashes of the prompt's blocks (empty: nothing to reuse).
    pub hashes: Vec<u64>,
    /// Tokens per block of `hashes`.
    pub hash_block: u32,
}

/// What happened to one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Rejected: the prompt does not fit in an instance's KV memory.
    pub rejected: bool,
    /// Instance that prefilled it (the only one, collocated).
    pub prefill_instance: usize,
    /// Instance that decoded it (disaggregated).
    pub decode_instance: Option<usize>,
    /// First admitted into a batch.
    pub scheduled: Option<f64>,
    /// First token.
    pub first_token: Option<f64>,
    /// KV arrived at the decode instance (disaggregated).
    pub decode_start: Option<f64>,
    /// Last token.
    pub last_token: Option<f64>,
    /// KV transfer time (disaggregated), s.
    pub transfer_s: Option<f64>,
    /// KV bytes transferred (disaggregated).
    pub transfer_bytes: Option<f64>,
    /// Times it was preempted.
    pub preemptions: u32,
    /// Dropped: alone on its instance, it needed more KV memory than the instance has.
    pub out_of_memory: bool,
    /// Prompt tokens reused from each prefix-cache tier (in the configuration's order): found in the accelerator's
    /// memory, or loaded from a lower tier; empty without a cache.
    pub cached: Vec<u64>,
    /// Seconds spent loading the reused prefix from lower tiers.
    pub load_s: f64,
}

/// A state sample of one instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceSample {
    /// When, s.
    pub time: f64,
    /// Instance.
    pub instance: usize,
    /// Sequences running.
    pub running: u32,
    /// Sequences waiting.
    pub waiting: u32,
    /// Fraction of KV blocks in use.
    pub kv_usage: f64,
}

/// The whole replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Simulation {
    /// One per request, in input order ([`simulate`]; empty from [`simulate_stream`], which hands each outcome on
    /// as its request finishes).
    pub outcomes: Vec<Outcome>,
    /// Instance states every `sample_interval_s`.
    pub samples: Vec<InstanceSample>,
    /// Iterations run.
    pub iterations: u64,
    /// Of those, decode-only iterations folded into another (computed without an event of their own).
    pub folded: u64,
    /// KV blocks of one instance.
    pub blocks_per_instance: u64,
    /// Simulated seconds until the last event.
    pub makespan_s: f64,
}

/// The replay cannot start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The weights do not fit.
    #[error(
        "the model's weights ({weights_gb:.1} GB) leave no KV memory on {tp} × {accelerator} at this memory utilization; give memory.kv_tokens or more accelerators (hardware.tp)"
    )]
    NoKvMemory {
        /// Weights, GB.
        weights_gb: f64,
        /// Accelerators per instance.
        tp: f64,
        /// Accelerator id.
        accelerator: String,
    },
}

/// Roofline constants of one instance.
#[derive(Debug, Clone, Copy)]
struct Cost {
    flops_per_token: f64,
    attention_pair_flops: f64,
    kv_bytes: f64,
    weight_bytes: f64,
    flops_rate: f64,
    bytes_rate: f64,
    overhead: f64,
}

impl Cost {
    fn new(config: &Config, model: &Model, accelerator: &Accelerator) -> Self {
        let h = &config.hardware;
        let e = &config.efficiency;
        Self {
            flops_per_token: 2.0 * model.active_parameters,
            attention_pair_flops: 2.0 * model.attention_flops_per_token_squared(),
            kv_bytes: model.kv_bytes_per_token(h.dtype_bytes) / config.kappa,
            weight_bytes: model.active_weight_bytes(h.dtype_bytes),
            flops_rate: h.tp * accelerator.bf16_dense_tflops * 1e12 * e.mfu,
            bytes_rate: h.tp * accelerator.memory_bandwidth_gbs * 1e9 * e.mbu,
            overhead: e.step_overhead_s,
        }
    }
}

#[derive(Debug, Clone)]
struct Seq {
    request: usize,
    /// Tokens whose KV must be computed before the next token comes out: the prompt, or after a preemption
    /// everything that had KV (prompt and generated tokens but the last).
    target: u32,
    /// Tokens whose KV is computed (the context).
    kv: u32,
    generated: u32,
    output: u32,
    blocks: u64,
    /// When preempted: the instance's allocation count and free blocks just before its blocks were freed, and how
    /// many it freed (see [`Instance::allocated`]).
    freed: Option<(u64, u64, u64)>,
}

impl Seq {
    fn prefilling(&self) -> bool {
        self.kv < self.target
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Both,
    Prefill,
    Decode,
}

#[derive(Debug)]
struct Instance {
    role: Role,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    free_blocks: u64,
    busy: bool,
    /// Prompt tokens to prefill plus tokens to generate, over waiting and running sequences.
    load: u64,
    /// Sequences scheduled in the iteration in flight: (index in `running`, tokens).
    plan: Vec<(usize, u32)>,
    /// Identical decode-only iterations folded into the one in flight (see [`Sim::fold_steps`]).
    repeat: u32,
    /// The instance's prefix cache.
    cache: Option<TieredCache>,
    /// Sequences whose prefix is being loaded from a lower tier.
    loading: Vec<Seq>,
    /// Blocks ever taken from the head of the free queue. Free blocks keep their KV until taken (vLLM's prefix
    /// cache): a preempted sequence frees its blocks to the tail, last block first, so when it returns, the blocks
    /// of its prefix not yet taken are still valid and need no recompute.
    allocated: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    /// A request's prefix has been loaded from a lower tier: it joins the queue of `instance`.
    Ready {
        request: usize,
        instance: usize,
    },
    StepEnd(usize),
    TransferDone {
        request: usize,
        decode: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Timed {
    time: f64,
    order: u64,
    event: Event,
}

impl Eq for Timed {}

impl Ord for Timed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.time.total_cmp(&other.time).then(self.order.cmp(&other.order))
    }
}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Runs the replay of `requests` (arrivals in any order) on `config`, sampling instance states every
/// `sample_interval_s` simulated seconds.
pub fn simulate(
    config: &Config,
    model: &Model,
    accelerator: &Accelerator,
    requests: &[Request],
    sample_interval_s: f64,
) -> Result<Simulation, SimError> {
    simulate_folding(config, model, accelerator, requests, sample_interval_s, true)
}

/// [`simulate`], with folding of decode-only iterations on or off (the results are the same; tests check it).
pub fn simulate_folding(
    config: &Config,
    model: &Model,
    accelerator: &Accelerator,
    requests: &[Request],
    sample_interval_s: f64,
    fold: bool,
) -> Result<Simulation, SimError> {
    let mut order: Vec<usize> = (0..requests.len()).collect();
    // A stable sort: equal arrivals in input order.
    order.sort_by(|&a, &b| requests[a].arrival.total_cmp(&requests[b].arrival));
    let mut outcomes = vec![Outcome::default(); requests.len()];
    let arrivals = order.into_iter().map(|i| (i, requests[i].clone()));
    let mut simulation =
        simulate_stream(config, model, accelerator, arrivals, sample_interval_s, fold, &mut |i, o| {
            outcomes[i] = o;
        })?;
    simulation.outcomes = outcomes;
    Ok(simulation)
}

/// The replay of requests that arrive as a stream, `(index, request)` in arrival order (equal arrivals by index):
/// memory holds the requests in flight, not the trace. Each request's outcome goes to `done` once it is final
/// (completed, rejected or dropped; the rest when the simulation ends), in no particular order.
pub fn simulate_stream(
    config: &Config,
    model: &Model,
    accelerator: &Accelerator,
    arrivals: impl Iterator<Item = (usize, Request)>,
    sample_interval_s: f64,
    fold: bool,
    done: &mut dyn FnMut(usize, Outcome),
) -> Result<Simulation, SimError> {
    let cost = Cost::new(config, model, accelerator);
    let block_size = f64::from(config.memory.block_size);
    let kv_tokens = match config.memory.kv_tokens {
        Some(tokens) => tokens,
        None => {
            let memory = accelerator.hbm_gb * 1e9 * config.hardware.tp * config.memory.gpu_memory_utilization;
            let free = memory - model.parameters * config.hardware.dtype_bytes;
            if free <= 0.0 {
                return Err(SimError::NoKvMemory {
                    weights_gb: model.parameters * config.hardware.dtype_bytes / 1e9,
                    tp: config.hardware.tp,
                    accelerator: accelerator.id.clone(),
                });
            }
            free / cost.kv_bytes
        }
    };
    let blocks = (kv_tokens / block_size).floor().max(1.0) as u64;
    let c = &config.cluster;
    let roles: Vec<Role> = if config.disaggregated() {
        let (p, d) = (c.prefill_instances.unwrap_or(1), c.decode_instances.unwrap_or(1));
        std::iter::repeat_n(Role::Prefill, p as usize).chain(std::iter::repeat_n(Role::Decode, d as usize)).collect()
    } else {
        vec![Role::Both; c.instances as usize]
    };
    let mut sim = Sim {
        config,
        cost,
        block_size: config.memory.block_size,
        blocks,
        instances: roles
            .iter()
            .map(|&role| Instance {
                role,
                waiting: VecDeque::new(),
                running: Vec::new(),
                free_blocks: blocks,
                allocated: 0,
                repeat: 0,
                loading: Vec::new(),
                cache: config.cache.as_ref().map(|c| {
                    let specs = c
                        .tiers
                        .iter()
                        .map(|t| TierSpec {
                            tier: t.tier,
                            capacity_tokens: t.capacity_tokens.unwrap_or(blocks as f64 * block_size).max(0.0) as u64,
                        })
                        .collect();
                    TieredCache::new(specs, c.policy, c.placement)
                }),
                busy: false,
                load: 0,
                plan: Vec::new(),
            })
            .collect(),
        events: BinaryHeap::new(),
        order: 0,
        outcomes: HashMap::new(),
        requests: HashMap::new(),
        finished: Vec::new(),
        pools: [
            (0..roles.len()).filter(|&i| roles[i] != Role::Decode).collect(),
            (0..roles.len()).filter(|&i| roles[i] == Role::Decode).collect(),
        ],
        rr: [0, 0],
        samples: Vec::new(),
        arrivals: (Box::new(arrivals) as Box<dyn Iterator<Item = (usize, Request)> + '_>).peekable(),
        loading: BinaryHeap::new(),
        fold,
        next_sample: 0.0,
        sample_interval_s,
        iterations: 0,
        folded: 0,
        now: 0.0,
    };
    loop {
        // An arrival comes before any other event at the same instant, and arrivals at one instant in index order
        // (as if every arrival had been queued first).
        let next_arrival = sim.arrivals.peek().map(|(_, r)| r.arrival);
        let next_event = sim.events.peek().map(|Reverse(t)| t.time);
        let arrival_first = match (next_arrival, next_event) {
            (Some(a), Some(e)) => a.total_cmp(&e) != Ordering::Greater,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if arrival_first {
            let (request, r) = sim.arrivals.next().expect("peeked");
            sim.sample_until(r.arrival);
            sim.now = r.arrival;
            sim.requests.insert(request, Rc::new(r));
            sim.outcomes.insert(request, Outcome::default());
            sim.arrive(request);
        } else {
            let Reverse(timed) = sim.events.pop().expect("peeked");
            sim.sample_until(timed.time);
            sim.now = timed.time;
            match timed.event {
                Event::StepEnd(instance) => sim.step_end(instance),
                Event::TransferDone { request, decode } => sim.transfer_done(request, decode),
                Event::Ready { request, instance } => sim.ready(request, instance),
            }
        }
        for request in std::mem::take(&mut sim.finished) {
            sim.requests.remove(&request);
            done(request, sim.outcomes.remove(&request).expect("in flight"));
        }
    }
    // Requests that never finished, by index.
    let mut left: Vec<usize> = sim.outcomes.keys().copied().collect();
    left.sort_unstable();
    for request in left {
        done(request, sim.outcomes.remove(&request).expect("in flight"));
    }
    Ok(Simulation {
        outcomes: Vec::new(),
        samples: sim.samples,
        iterations: sim.iterations,
        folded: sim.folded,
        blocks_per_instance: blocks,
        makespan_s: sim.now,
    })
}

struct Sim<'a> {
    config: &'a Config,
    cost: Cost,
    block_size: u32,
    blocks: u64,
    instances: Vec<Instance>,
    events: BinaryHeap<Reverse<Timed>>,
    order: u64,
    /// The requests in flight and their outcomes so far, by index.
    outcomes: HashMap<usize, Outcome>,
    requests: HashMap<usize, Rc<Request>>,
    /// Requests whose outcome became final during the event being handled.
    finished: Vec<usize>,
    /// Instances of the prefill (or collocated) pool and of the decode pool.
    pools: [Vec<usize>; 2],
    /// Round-robin counters of the pools.
    rr: [usize; 2],
    samples: Vec<InstanceSample>,
    /// The arrivals not yet processed: the next one bounds a fold.
    arrivals: Peekable<Box<dyn Iterator<Item = (usize, Request)> + 'a>>,
    /// Times of the pending `Ready` events, which bound a fold too.
    loading: BinaryHeap<Reverse<Timed>>,
    /// Fold runs of decode-only iterations (off only to check that folding changes nothing).
    fold: bool,
    next_sample: f64,
    sample_interval_s: f64,
    iterations: u64,
    folded: u64,
    now: f64,
}

impl Sim<'_> {
    fn push(&mut self, time: f64, event: Event) {
        self.order += 1;
        self.events.push(Reverse(Timed { time, order: self.order, event }));
    }

    fn blocks_for(&self, tokens: u32) -> u64 {
        u64::from(tokens.div_ceil(self.block_size))
    }

    /// Records every instance's state at each sample instant up to `time`.
    fn sample_until(&mut self, time: f64) {
        if self.sample_interval_s <= 0.0 {
            return;
        }
        while self.next_sample <= time {
            for (i, inst) in self.instances.iter().enumerate() {
                self.samples.push(InstanceSample {
                    time: self.next_sample,
                    instance: i,
                    running: inst.running.len() as u32,
                    waiting: inst.waiting.len() as u32,
                    kv_usage: 1.0 - inst.free_blocks as f64 / self.blocks as f64,
                });
            }
            self.next_sample += self.sample_interval_s;
        }
    }

    /// The instance of `pool` (0: prefill or collocated, 1: decode) a new sequence goes to.
    fn route(&mut self, pool: usize, request: usize) -> usize {
        let members = &self.pools[pool];
        match self.config.cluster.routing {
            Routing::RoundRobin => {
                let chosen = members[self.rr[pool] % members.len()];
                self.rr[pool] += 1;
                chosen
            }
            Routing::LeastLoaded => {
                *members.iter().min_by_key(|&&i| (self.instances[i].load, i)).expect("pools are not empty")
            }
            // As a KV-aware router: the instance with the least work once this request joins it, counting only
            // the prompt tokens its cache (any tier) does not hold: load + prompt − cached prefix tokens.
            Routing::PrefixAware => {
                let r = &self.requests[&request];
                let cached = |i: usize| {
                    let blocks = self.instances[i].cache.as_ref().map_or(0, |c| c.lookup(&r.hashes).hit_blocks);
                    (blocks * u64::from(r.hash_block)).min(u64::from(r.prompt))
                };
                *members
                    .iter()
                    .min_by_key(|&&i| (self.instances[i].load + u64::from(r.prompt) - cached(i), i))
                    .expect("pools are not empty")
            }
        }
    }

    /// The outcome of a request in flight.
    fn outcome(&mut self, request: usize) -> &mut Outcome {
        self.outcomes.get_mut(&request).expect("in flight")
    }

    fn arrive(&mut self, request: usize) {
        let r = Rc::clone(&self.requests[&request]);
        let output = r.output.max(1);
        // A prompt (plus its first token) that cannot fit in the whole KV memory is rejected.
        if self.blocks_for(r.prompt + 1) > self.blocks {
            self.outcome(request).rejected = true;
            self.finished.push(request);
            return;
        }
        let instance = self.route(0, request);
        self.outcome(request).prefill_instance = instance;
        let (kv, load_s) = self.reuse(request, instance);
        let seq = Seq { request, target: r.prompt, kv, generated: 0, output, blocks: 0, freed: None };
        let inst = &mut self.instances[instance];
        inst.load += u64::from(r.prompt - kv) + u64::from(output);
        if load_s > 0.0 {
            self.outcomes.get_mut(&request).expect("in flight").load_s = load_s;
            inst.loading.push(seq);
            let time = self.now + load_s;
            self.order += 1;
            self.loading.push(Reverse(Timed { time, order: self.order, event: Event::Ready { request, instance } }));
            self.push(time, Event::Ready { request, instance });
        } else {
            inst.waiting.push_back(seq);
            self.start(instance);
        }
    }

    /// The prompt tokens of `request` that `instance` reuses instead of computing, and the seconds spent loading
    /// them from lower tiers. The cache is accessed (looked up, then the prompt's blocks inserted) on arrival;
    /// hits in `gpu` cost nothing; the hits of each lower tier, in order, are loaded when the retrieve policy says
    /// so (`faster`: when `latency + tokens × KV bytes / bandwidth` is below the roofline time of computing those
    /// tokens after what is already reused), and once a tier's hits are recomputed, so are the deeper ones (a prefix
    /// must be contiguous). At least one prompt token is always computed.
    fn reuse(&mut self, request: usize, instance: usize) -> (u32, f64) {
        let r = Rc::clone(&self.requests[&request]);
        let Some(cache) = self.instances[instance].cache.as_mut() else { return (0, 0.0) };
        let Some(config) = self.config.cache.as_ref() else { return (0, 0.0) };
        let access = cache.access(&r.hashes, r.hash_block);
        let hits = access.hit_tokens(r.hash_block, Some(r.prompt.saturating_sub(1)));
        let mut cached = vec![0; config.tiers.len()];
        let (mut kv, mut load_s) = (0u32, 0.0);
        for (i, (tier, &tokens)) in config.tiers.iter().zip(&hits.per_tier).enumerate() {
            if tokens == 0 {
                continue;
            }
            let t = tokens as f64;
            if tier.tier != CacheTier::Gpu {
                let load =
                    tier.latency_s + t * self.cost.kv_bytes / (tier.bandwidth_gbs.unwrap_or(f64::INFINITY) * 1e9);
                let offset = f64::from(kv);
                let compute = (self.cost.flops_per_token * t
                    + self.cost.attention_pair_flops * (t * offset + t * t / 2.0))
                    / self.cost.flops_rate;
                let retrieve = match config.retrieve {
                    Retrieve::Always => true,
                    Retrieve::Never => false,
                    Retrieve::Faster => load < compute,
                };
                if !retrieve {
                    break;
                }
                load_s += load;
            }
            kv += tokens as u32;
            cached[i] = tokens;
        }
        self.outcome(request).cached = cached;
        (kv, load_s)
    }

    /// A request whose prefix was loaded joins its instance's queue.
    fn ready(&mut self, request: usize, instance: usize) {
        self.loading.pop();
        let inst = &mut self.instances[instance];
        if let Some(position) = inst.loading.iter().position(|s| s.request == request) {
            let seq = inst.loading.swap_remove(position);
            inst.waiting.push_back(seq);
        }
        self.start(instance);
    }

    fn transfer_done(&mut self, request: usize, decode: usize) {
        let r = Rc::clone(&self.requests[&request]);
        let now = self.now;
        self.outcome(request).decode_start = Some(now);
        let seq = Seq {
            request,
            target: r.prompt,
            kv: r.prompt,
            generated: 1,
            output: r.output.max(1),
            blocks: 0,
            freed: None,
        };
        let inst = &mut self.instances[decode];
        inst.load += u64::from(seq.output - 1);
        inst.waiting.push_back(seq);
        self.start(decode);
    }

    /// Starts an iteration on `instance` if it is idle and has work.
    fn start(&mut self, instance: usize) {
        if self.instances[instance].busy {
            return;
        }
        let inst = &self.instances[instance];
        let before = inst.running.len();
        let decoding = inst.role == Role::Both && inst.running.iter().all(|s| !s.prefilling());
        let Some(duration) = self.plan(instance) else { return };
        let mut end = self.now + duration;
        let inst = &self.instances[instance];
        let folds = self.fold && decoding && inst.running.len() == before && inst.plan.len() == before;
        let repeat = if folds { self.fold_steps(instance, &mut end) } else { 0 };
        let inst = &mut self.instances[instance];
        inst.repeat = repeat;
        inst.busy = true;
        self.iterations += 1 + u64::from(repeat);
        self.folded += u64::from(repeat);
        self.push(end, Event::StepEnd(instance));
    }

    /// Folds the decode-only iterations that would follow the planned one into it, and returns how many.
    ///
    /// The planned iteration decodes every running sequence and admits nothing; until something changes, every
    /// next one does the same with each context one token longer (nothing is admitted while blocks only shrink, and
    /// nothing is preempted while blocks suffice). So iterations `1..=k` are folded while no sequence would finish
    /// (its last token comes from a normal iteration), every sequence's blocks for `k` more tokens surely fit
    /// (`k ≤ block_size × (free / n − 1)`), and each ends strictly before the next arrival (which could be routed
    /// here, reading this instance's load). Their durations follow the roofline with contexts `kv + i` and are
    /// added in the same order as unfolded iterations would be, so the times are identical; `end` becomes the end
    /// of the last folded iteration.
    fn fold_steps(&mut self, instance: usize, end: &mut f64) -> u32 {
        let next_arrival = self.arrivals.peek().map_or(f64::INFINITY, |(_, r)| r.arrival);
        let until = self.loading.peek().map_or(next_arrival, |Reverse(t)| next_arrival.min(t.time));
        let cost = self.cost;
        let block_size = self.block_size;
        let inst = &mut self.instances[instance];
        let n = inst.running.len() as u64;
        if n == 0 {
            return 0;
        }
        let by_output = inst.running.iter().map(|s| s.output - s.generated).min().unwrap_or(0).saturating_sub(2);
        let by_blocks = (inst.free_blocks / n).saturating_sub(1) * u64::from(block_size);
        let limit = u64::from(by_output).min(by_blocks).min(u64::from(u32::MAX)) as u32;
        let context: f64 = inst.running.iter().map(|s| f64::from(s.kv)).sum();
        let n = n as f64;
        let mut k = 0;
        while k < limit {
            let i = f64::from(k + 1);
            let ctx = context + n * i;
            let flops = n * cost.flops_per_token + cost.attention_pair_flops * (ctx + n / 2.0);
            let bytes = cost.weight_bytes + ctx * cost.kv_bytes;
            let duration = (flops / cost.flops_rate).max(bytes / cost.bytes_rate) + cost.overhead;
            if *end + duration >= until {
                break;
            }
            *end += duration;
            k += 1;
        }
        if k > 0 {
            for seq in &mut inst.running {
                let blocks = u64::from((seq.kv + 1 + k).div_ceil(block_size));
                let extra = blocks.saturating_sub(seq.blocks);
                seq.blocks += extra;
                inst.free_blocks -= extra;
                inst.allocated += extra;
            }
        }
        k
    }

    /// Chooses what the next iteration of `instance` computes, allocating blocks (and preempting), and returns its
    /// duration; `None` when there is nothing to run.
    fn plan(&mut self, instance: usize) -> Option<f64> {
        let sched = self.config.scheduler;
        let block_size = self.block_size;
        let blocks_for = |tokens: u32| u64::from(tokens.div_ceil(block_size));
        let mut budget = sched.max_num_batched_tokens;
        let now = self.now;
        let inst = &mut self.instances[instance];
        inst.plan.clear();
        // Running sequences, in admission order.
        let mut i = 0;
        while i < inst.running.len() && budget > 0 {
            let seq = &inst.running[i];
            let tokens = if seq.prefilling() {
                let rest = seq.target - seq.kv;
                if sched.chunked_prefill {
                    rest.min(budget)
                } else if rest <= budget || inst.plan.is_empty() {
                    rest
                } else {
                    0
                }
            } else {
                1
            };
            if tokens == 0 {
                break;
            }
            let need = blocks_for(seq.kv + tokens).saturating_sub(seq.blocks);
            // Preempt the most recently admitted other sequences until the blocks are free: each goes back to the
            // front of the queue to recompute everything that had KV.
            while inst.free_blocks < need && inst.running.len() > i + 1 {
                let mut victim = inst.running.pop().expect("more than one running");
                victim.freed = Some((inst.allocated, inst.free_blocks, victim.blocks));
                inst.free_blocks += victim.blocks;
                victim.blocks = 0;
                victim.target = victim.target.max(victim.kv);
                inst.load += u64::from(victim.kv);
                victim.kv = 0;
                self.outcomes.get_mut(&victim.request).expect("in flight").preemptions += 1;
                inst.waiting.push_front(victim);
            }
            if inst.free_blocks < need {
                if i == 0 && inst.running.len() == 1 {
                    // Alone and still short of memory: it can never finish here. vLLM bounds max_model_len by the
                    // KV memory at start-up; the replay drops the request and says so.
                    let seq = inst.running.pop().expect("one running");
                    inst.free_blocks += seq.blocks;
                    inst.load = inst.load.saturating_sub(
                        u64::from(seq.target.saturating_sub(seq.kv)) + u64::from(seq.output - seq.generated),
                    );
                    self.outcomes.get_mut(&seq.request).expect("in flight").out_of_memory = true;
                    self.finished.push(seq.request);
                    continue;
                }
                break;
            }
            let seq = &mut inst.running[i];
            seq.blocks += need;
            inst.free_blocks -= need;
            inst.allocated += need;
            inst.plan.push((i, tokens));
            budget -= tokens;
            i += 1;
        }
        // Waiting sequences, in order, while there is room.
        while budget > 0 && (inst.running.len() as u32) < sched.max_num_seqs {
            let Some(seq) = inst.waiting.front() else { break };
            // A preempted sequence finds the blocks of its prefix that were not taken since it left: block j (from
            // 0) went to queue position F + B − 1 − j and survives while fewer than that many blocks were taken.
            let (kv, kept) = match seq.freed {
                Some((allocated, free, freed)) => {
                    let taken = inst.allocated - allocated;
                    let kept = (free + freed).saturating_sub(taken).min(freed);
                    let kv = seq.kv.max((kept * u64::from(block_size)).min(u64::from(seq.target)) as u32);
                    (kv, kept.min(u64::from(kv.div_ceil(block_size))))
                }
                None => (seq.kv, 0),
            };
            let tokens = if kv >= seq.target {
                1
            } else if sched.chunked_prefill {
                (seq.target - kv).min(budget)
            } else if seq.target - kv <= budget || inst.plan.is_empty() {
                seq.target - kv
            } else {
                break;
            };
            let need = blocks_for(kv + tokens);
            if inst.free_blocks < need {
                break;
            }
            let mut seq = inst.waiting.pop_front().expect("front exists");
            inst.load = inst.load.saturating_sub(u64::from(kv - seq.kv));
            seq.kv = kv;
            seq.freed = None;
            seq.blocks = need;
            inst.free_blocks -= need;
            inst.allocated += need - kept.min(need);
            let outcome = self.outcomes.get_mut(&seq.request).expect("in flight");
            if outcome.scheduled.is_none() && inst.role != Role::Decode {
                outcome.scheduled = Some(now);
            }
            inst.running.push(seq);
            inst.plan.push((inst.running.len() - 1, tokens));
            budget = budget.saturating_sub(tokens);
        }
        if inst.plan.is_empty() {
            return None;
        }
        // The roofline cost of the batch.
        let (mut flops, mut bytes) = (0.0, self.cost.weight_bytes);
        for &(index, tokens) in &inst.plan {
            let seq = &inst.running[index];
            // `tokens` new tokens attend over the `kv` before them and over each other.
            let (t, offset) = (f64::from(tokens), f64::from(seq.kv));
            flops += self.cost.flops_per_token * t + self.cost.attention_pair_flops * (t * offset + t * t / 2.0);
            bytes += offset * self.cost.kv_bytes;
        }
        Some((flops / self.cost.flops_rate).max(bytes / self.cost.bytes_rate) + self.cost.overhead)
    }

    fn step_end(&mut self, instance: usize) {
        let now = self.now;
        let plan = std::mem::take(&mut self.instances[instance].plan);
        let repeat = std::mem::take(&mut self.instances[instance].repeat);
        let role = self.instances[instance].role;
        let mut done: Vec<usize> = Vec::new();
        let mut handoff: Vec<usize> = Vec::new();
        {
            let inst = &mut self.instances[instance];
            for &(index, tokens) in &plan {
                let seq = &mut inst.running[index];
                let was_prefilling = seq.prefilling();
                seq.kv += tokens;
                if was_prefilling {
                    inst.load = inst.load.saturating_sub(u64::from(tokens));
                    if seq.prefilling() {
                        continue;
                    }
                }
                // Folded iterations (decode only) add one token of KV and one output token each.
                seq.kv += repeat;
                seq.generated += 1 + repeat;
                inst.load = inst.load.saturating_sub(1 + u64::from(repeat));
                let outcome = self.outcomes.get_mut(&seq.request).expect("in flight");
                if outcome.first_token.is_none() {
                    outcome.first_token = Some(now);
                }
                if seq.generated >= seq.output {
                    outcome.last_token = Some(now);
                    self.finished.push(seq.request);
                    done.push(index);
                } else if role == Role::Prefill {
                    handoff.push(index);
                }
            }
            // Remove finished and handed-off sequences (highest index first keeps the others' indices valid).
            let mut leaving: Vec<usize> = done.iter().chain(&handoff).copied().collect();
            leaving.sort_unstable_by(|a, b| b.cmp(a));
            let mut handed = Vec::new();
            for index in leaving {
                let seq = inst.running.remove(index);
                inst.free_blocks += seq.blocks;
                if handoff.contains(&index) {
                    inst.load = inst.load.saturating_sub(u64::from(seq.output - seq.generated));
                    handed.push(seq);
                }
            }
            handed.reverse();
            inst.busy = false;
            for seq in handed {
                self.transfer(seq);
            }
        }
        self.start(instance);
    }

    /// Sends the KV of a prefilled sequence to a decode instance.
    fn transfer(&mut self, seq: Seq) {
        let r = Rc::clone(&self.requests[&seq.request]);
        let bytes = f64::from(r.prompt + 1) * self.cost.kv_bytes;
        let seconds = self.config.cluster.link_latency_s + bytes / (self.config.cluster.link_gbs * 1e9);
        let decode = self.route(1, seq.request);
        let outcome = self.outcome(seq.request);
        outcome.decode_instance = Some(decode);
        outcome.transfer_s = Some(seconds);
        outcome.transfer_bytes = Some(bytes);
        self.push(self.now + seconds, Event::TransferDone { request: seq.request, decode });
    }
}
