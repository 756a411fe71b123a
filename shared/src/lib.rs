//! # speedmatrix-schema
//!
//! The results model of speedmatrix and the pure computations both the collector (native CLI)
//! and the viewer (WASM) need. Nothing here does I/O, reads a clock or spawns a task, so the
//! crate builds for `wasm32-unknown-unknown` as well as natively.
//!
//! - [`model`]: the versioned results file ([`Results`], schema v1), serde + JSON Schema.
//! - [`load`]: parse, migrate and validate a results file with precise, one-line errors.
//! - [`registry`]: every metric id (DESIGN §2) with its label, unit, format and direction.
//! - [`table`]: the flat "all measurements" table (one row per prefill row / decode cell).
//! - [`export`]: the one CSV / JSON writer of that table (CLI `show --format csv`, viewer export).
//! - [`stats`]: percentiles and distributions (one method everywhere: nearest rank).
//! - [`context`]: context sizes (`8k` = 8,192 tokens, `max`).
//! - [`status`]: the cell status rules (over capacity, requests queued, …).

#![warn(missing_docs)]

pub mod context;
pub mod export;
pub mod load;
pub mod model;
pub mod registry;
pub mod stats;
pub mod status;
pub mod table;

pub use load::{load_results, LoadError};
pub use model::*;

/// The value of the top-level `schema` field of every speedmatrix results file.
pub const SCHEMA_NAME: &str = "speedmatrix-results";
/// The schema version this build writes, and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON Schema (draft 2020-12) of [`Results`], generated from the Rust types.
///
/// The committed copy lives at `shared/schema/results.schema.json`; a test fails when it
/// differs from this output (regenerate with `SPEEDMATRIX_BLESS=1 cargo test -p
/// speedmatrix-schema`).
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Results);
    serde_json::to_value(schema).expect("a generated JSON Schema always serializes")
}
