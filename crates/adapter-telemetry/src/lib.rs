//! infertrace adapters for the resource counters of the machines that serve: what the accelerators drew and moved,
//! and what the hosts read, wrote and sent, as Prometheus exporters expose them.
//!
//! - [`DcgmExporter`] (`dcgm-exporter`): NVIDIA dcgm-exporter's `/metrics`: power, energy, utilization, device
//!   memory, HBM activity, PCIe and NVLink bytes per second, per GPU.
//! - [`NodeExporter`] (`node-exporter`): Prometheus node_exporter's `/metrics`: disk and network bytes, CPU time
//!   and memory, per host.
//!
//! Both read one scrape or many per file with the shared scrape reader
//! ([`infertrace_adapter::prometheus::read_scrapes`]), as the engines' metrics adapters do, and map each exporter's
//! series onto the canonical sample metrics ([`infertrace_schema::metrics`]) in canonical units. [`generate`]
//! writes scrapes of both shapes whose values change from one scrape to the next, for tests.

mod dcgm;
pub mod generate;
mod node;

pub use dcgm::DcgmExporter;
pub use node::NodeExporter;
