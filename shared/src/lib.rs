//! # speedmatrix-schema
//!
//! The results model of speedmatrix and the pure computations both the collector (native CLI)
//! and the viewer (WASM) need. Nothing here does I/O, reads a clock or spawns a task, so the
//! crate builds for `wasm32-unknown-unknown` as well as natively.
//!
//! - [`model`]: the versioned results file ([`Results`], versioned, older versions migrated on load), serde + JSON Schema.
//! - [`load`]: parse, migrate and validate a results file with precise, one-line errors.
//! - [`registry`]: every metric id with its label, unit, format and direction (definitions:
//!   `docs/METHODOLOGY.md`).
//! - [`table`]: the flat "all measurements" table (one row per prefill row / decode cell).
//! - [`export`]: the one CSV / JSON writer of that table (CLI `show --format csv`, viewer export).
//! - [`cells`]: the cells table across runs (`speedmatrix export`, a site's `cells.csv` and
//!   `cells.parquet`): every row of every run with its run's header, typed and versioned
//!   (`docs/EXPORT.md`).
//! - [`site`]: a published site's run index (`runs/index.json`), written by `publish`, read by
//!   the viewer.
//! - [`stats`]: percentiles and distributions (one method everywhere: nearest rank), and the
//!   rounding of figures.
//! - [`noise`]: confidence intervals (batch means over a window's series, bootstrap over
//!   requests, t between repeats), the interval of a difference and the false-alarm control.
//! - [`command_line`]: a launch command split like a shell and read flag by flag.
//! - [`context`]: context sizes (`8k` = 8,192 tokens, `max`).
//! - [`conversation`]: multi-turn conversations — turn 1's share of the context, a turn's
//!   figures and what it costs against turn 1.
//! - [`status`]: the cell status rules (over capacity, requests queued, …).
//! - [`endings`]: how requests ended: finish reasons that are completed requests, requests the
//!   server cut short, output lengths against `max_tokens`.
//! - [`tokens`]: which source a decode cell's token count uses, checked against the cell's
//!   other evidence (text chunks, per-chunk and final usage, the server counter).
//! - [`summary`]: a run's subtitle and header cards, as the terminal and the page show them.
//! - [`progress`]: where a run stands for a person (the terminal bar and the live page).
//! - [`resume`]: a resumed run's header against the server it reaches now.
//! - [`diff`]: two runs compared (A = baseline, B = candidate): deltas, verdicts, status and
//!   header changes, the regression gate.
//! - [`derived`]: figures derived from a cell and its run: tok/s per GPU, tokens per joule,
//!   cost per million output tokens.
//! - [`frontier`]: operating points (throughput against per-user speed) and Pareto frontiers.
//! - [`slo`]: capacity at a service-level objective (TTFT limit, per-user tok/s floor): the
//!   largest concurrency per context that meets it, and its goodput.
//! - [`trace`]: request traces to replay (the Mooncake format, slices, each request's prompt
//!   plan from its prefix blocks).
//! - [`trace_reuse`]: a replayed trace's ideal prefix reuse, and a measured hit rate judged
//!   against it.
//! - [`trace_timeline`]: a replayed trace's timeline (offered and completed requests, requests
//!   in flight, each request's TTFT over the replay), as the page draws it.
//! - [`simulation`]: how the speedmatrix twin says it is one on the wire, and how a run
//!   against it is told apart from a run against a real server.

#![warn(missing_docs)]

pub mod arrivals;
pub mod cells;
pub mod command_line;
pub mod context;
pub mod conversation;
pub mod derived;
pub mod diff;
pub mod endings;
pub mod estimate;
pub mod export;
pub mod fleet;
pub mod frontier;
pub mod load;
pub mod model;
pub mod noise;
pub mod prefix;
pub mod progress;
pub mod rate;
pub mod rate_slo;
pub mod registry;
pub mod repeats;
pub mod resume;
pub mod simulation;
pub mod site;
pub mod site_table;
pub mod slo;
pub mod stats;
pub mod status;
pub mod summary;
pub mod table;
pub mod tokens;
pub mod trace;
pub mod trace_reuse;
pub mod trace_timeline;

pub use load::{load_results, LoadError};
pub use model::*;

/// The value of the top-level `schema` field of every speedmatrix results file.
pub const SCHEMA_NAME: &str = "speedmatrix-results";
/// The schema version this build writes, and the newest it reads.
pub const SCHEMA_VERSION: u32 = 4;

/// The JSON Schema (draft 2020-12) of [`Results`], generated from the Rust types and tightened
/// with the rules the loader enforces that types alone cannot say: every number is ≥ 0,
/// fractions are ≤ 1, concurrency is ≥ 1, times are RFC 3339, `schema` is
/// `"speedmatrix-results"` and `schema_version` is [`SCHEMA_VERSION`].
///
/// The committed copy lives at `shared/schema/results.schema.json`; a test fails when it
/// differs from this output (regenerate with `SPEEDMATRIX_BLESS=1 cargo test -p
/// speedmatrix-schema --test schema_file`).
#[cfg(feature = "json-schema")]
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Results);
    let mut v = serde_json::to_value(schema).expect("a generated JSON Schema always serializes");
    tighten(&mut v, None);
    v["properties"]["schema"]["const"] = SCHEMA_NAME.into();
    v["properties"]["schema_version"]["const"] = SCHEMA_VERSION.into();
    v
}

/// Fields holding a fraction 0–1.
#[cfg(feature = "json-schema")]
const FRACTIONS: [&str; 9] = [
    "spec_accept_rate",
    "kv_cache_usage_avg",
    "kv_cache_usage_max",
    "kv_cache_usage",
    "level",
    "prefix_share",
    "prefix_shares",
    "planned_share",
    "measured_hit_rate",
];

#[cfg(feature = "json-schema")]
fn tighten(v: &mut serde_json::Value, property: Option<&str>) {
    use serde_json::Value;
    let Value::Object(map) = v else {
        if let Value::Array(items) = v {
            items.iter_mut().for_each(|i| tighten(i, None));
        }
        return;
    };
    let is_number = |t: &Value| t == "number" || t == "integer";
    let numeric =
        map.get("type").is_some_and(|t| is_number(t) || t.as_array().is_some_and(|a| a.iter().any(is_number)));
    if numeric {
        let min = if property == Some("concurrency") { 1 } else { 0 };
        map.insert("minimum".into(), min.into());
        if property.is_some_and(|p| FRACTIONS.contains(&p)) {
            map.insert("maximum".into(), 1.into());
        }
    }
    if matches!(property, Some("started_at" | "finished_at")) {
        map.insert("format".into(), "date-time".into());
    }
    if let Some(Value::String(d)) = map.get_mut("description") {
        // Rust doc links read badly outside rustdoc: [`X`] → `X`.
        *d = d.replace("[`", "`").replace("`]", "`");
    }
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" => {
                if let Value::Object(props) = child {
                    for (name, schema) in props.iter_mut() {
                        tighten(schema, Some(name));
                    }
                }
            }
            "items" => tighten(child, property),
            _ => tighten(child, None),
        }
    }
}
