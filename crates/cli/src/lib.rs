//! The infertrace command line: normalize inputs into a canonical dataset, sample one from published statistics
//! (`synth`), join the datasets several sources made of one run (`merge`), summarise datasets (`metrics`,
//! `compare`), report on them as HTML (`report`), simulate cache tiers on them (`cache-sim`, `mrc`), evaluate the cost
//! model (`model`, `sweep`, `size`), export segments for load generators (`export`), list formats, print the schema.
//!
//! This crate wires adapters to the dataset writer. It owns everything that touches the outside world: walking
//! directories, choosing adapters (a closed registry, not registration magic), the progress bar, the summary
//! table and exit codes. Adapters never print and never see paths beyond the one they are told to record.
//!
//! The library half exists so that `cargo xtask normalize` and the tests run exactly what the binary runs.

pub mod cache;
pub mod capture;
pub mod export;
mod merge;
pub mod metrics;
pub mod model;
mod normalize;
pub mod paths;
pub mod registry;
pub mod replay;
pub mod report;
pub mod sql;
mod stdin;
mod stream;
pub mod summary;
mod synth;

pub use merge::{MergeArgs, merge, render_merge};
pub use normalize::{NormalizeOptions, NormalizeReport, SHOWN_BYTES, SHOWN_LINES, ShownLine, normalize};
pub use synth::{ServegenOptions, synth_servegen};
