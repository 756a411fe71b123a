//! # speedmatrix-viewer
//!
//! The report page of speedmatrix: a Leptos CSR app that trunk builds into the repository's
//! `dist/` (see `viewer/Trunk.toml`), which the `speedmatrix` binary embeds for `publish` and
//! `serve`.
//!
//! - [`report`]: what the page shows, as plain data (cards, prefill table, heatmap, sortable and
//!   filterable table) — pure and tested natively;
//! - [`sources`]: the browser edge (fetch, local files, query string, clipboard);
//! - [`app`]: the page's shell and state (which runs, the view in the URL, theme, files);
//! - [`components`]: the report of one run, one file per section;
//! - [`chart_model`] and [`charts`]: what each chart shows (pure) and its canvas drawing;
//! - [`compare`]: what the diff view shows (delta heatmap, matched-measurement table) — pure;
//! - [`diff`]: the diff view (`?a=…&b=…`): two runs compared.
//!
//! Loading, validation and number formats come from `speedmatrix-schema`, never from here.

#![warn(missing_docs)]

pub mod app;
pub mod chart_model;
pub mod charts;
pub mod compare;
pub mod multi;
pub mod components;
pub mod diff;
pub mod report;
pub mod sources;

/// The schema version the viewer understands (the one `speedmatrix-schema` reads).
pub const SCHEMA_VERSION: u32 = speedmatrix_schema::SCHEMA_VERSION;

/// Mount the page on `<body>`: the diff view when the URL asks for it (`?a=`, `?b=`,
/// `?compare`), else the report.
pub fn mount() {
    if diff::requested() {
        leptos::mount::mount_to_body(diff::DiffPage);
    } else {
        leptos::mount::mount_to_body(app::App);
    }
}
