//! The canonical infertrace trace dataset: the API boundary between adapters and the engine.
//!
//! A dataset is a directory of three Parquet tables (`requests`, `samples`, `cache_events`) and a
//! `manifest.json`. This crate owns their Arrow schema, column-name constants, [`SCHEMA_VERSION`], one typed
//! builder per table, the streaming dataset writer and the reader, and the generated reference in `schemas/`.
//!
//! Key decision: each table is declared once with the `table!` macro, and the row struct, the column constants,
//! the Arrow schema, the builder and the documentation are all generated from that one declaration, so they
//! cannot drift apart.
//!
//! It deliberately knows nothing of input formats (that is `infertrace-adapter`) nor of metrics derived from the
//! rows (that is the engine): it only defines, writes and reads the canonical form.

mod dataset;
pub mod docs;
mod kind;
mod manifest;
pub mod metrics;
pub mod partition;
pub mod render;
mod table;
mod tables;
mod vocab;
mod writer;

pub use dataset::{
    BATCH_LIST_BYTES, BATCH_ROWS, Dataset, DatasetError, DatasetWriter, MANIFEST_FILE, ROW_GROUP_BYTES, ROW_GROUP_ROWS,
    SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLE_KEY, TableFile, manifest_json, read_manifest, read_table, table_files,
};
pub use kind::{ColumnKind, Dict, F64, TIME_ZONE, Text, Time, U16, U32, U64, U64List, Utf8};
pub use manifest::{
    Assumptions, CacheSimModel, CacheSimRecord, CacheSimTier, CaptureRecord, DiagnosticSample, DiagnosticSummary,
    DriftSummary, HashSalt, InputEntry, KindSummary, MANIFEST_FIELDS, Manifest, MergeRecord, Producer, RowCounts,
    SkippedInput, YearAssumption, YearSource,
};
pub use partition::PartitionKey;
pub use table::{ColumnDoc, Table, TableBuilder};
pub use tables::{
    CacheEvent, CacheEventsBuilder, EngineSample, NegativeDurations, RequestRow, RequestsBuilder, SamplesBuilder,
    cache_event, request, sample,
};
pub use vocab::{
    CacheEventKind, CacheTier, ClockDomain, SIMULATED_SOURCES, SYNTHETIC_SOURCES, SourceKind, Status, WorkloadClass,
};
