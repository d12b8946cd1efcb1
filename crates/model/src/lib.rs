//! The infertrace cost model (`docs/model.md`): the expected prefill-related cost of a request under a cache
//! hierarchy, the cost of a successful answer with hidden reasoning included, effective tokens per dollar and per
//! kWh, the retrieve-versus-recompute breakeven per tier, collocated versus disaggregated serving, and the net effect
//! of KV compression; plus parameter sweeps and sizing.
//!
//! Inputs are [`Params`] (TOML, `--set`, `--vary`) and a [`Catalog`] of accelerators and models for the roofline
//! (prefill bound by compute, decode by memory bandwidth). Nothing here reads files or prints: the CLI does.

pub mod catalog;
pub mod eval;
pub mod fit;
pub mod params;
pub mod size;
pub mod sweep;

pub use catalog::{Accelerator, Attention, Catalog, CatalogError, Model};
pub use eval::{EvalError, Evaluation, evaluate};
pub use params::{ParamError, Params};

/// The 1-based line and the first line of the message of a TOML error in `text`: what a one-line error about a
/// TOML file the user wrote says (the parameters, the catalog, and the CLI's other TOML inputs).
pub fn toml_error(text: &str, e: &toml::de::Error) -> (usize, String) {
    let line = e.span().map_or(1, |span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    (line, e.message().lines().next().unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests;
