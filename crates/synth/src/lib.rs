//! Synthetic per-request traces sampled from published workload statistics.
//!
//! Some public workload releases are statistics rather than requests: ServeGen (Alibaba Cloud Model Studio, or
//! Bailian) publishes, per client and per 600 s window, an arrival rate and a fitted inter-arrival distribution, and
//! per six hours the distributions of prompt and output lengths. This crate samples canonical [`RequestRow`]s from
//! such statistics so that they go through the same dataset writer, and the same analyses, as normalized traces.
//!
//! Key decision: the output depends on nothing but the statistics and the options. Randomness comes from one seeded
//! ChaCha8 stream per client (`rand_chacha`, a generator with a specified, portable output) and the Gamma and Weibull
//! samplers of `rand_distr`; rows are sorted by arrival with a total order on ties; so the same inputs and seed give
//! byte-identical datasets, and adding or removing a client does not change the others' requests.
//!
//! It deliberately does no I/O (the CLI reads and hashes the files, then hands their text here) and knows no input
//! format adapters: it depends on the schema only.
//!
//! [`RequestRow`]: infertrace_schema::RequestRow

pub mod servegen;
