//! # speedmatrix-viewer
//!
//! The report page of speedmatrix: a Leptos CSR app that trunk builds into the repository's
//! `dist/` (see `viewer/Trunk.toml`), which the `speedmatrix` binary embeds for `publish` and
//! `serve`.
//!
//! - [`report`]: what the page shows, as plain data (cards, prefill table, heatmap, sortable and
//!   filterable table) — pure and unit-tested (on wasm32 in headless Chromium by CI);
//! - [`sources`]: the browser edge (fetch, local files, query string, clipboard);
//! - [`app`]: the page's shell and state (which runs, the view in the URL, theme, files);
//! - [`components`]: the report of one run, one file per section;
//! - [`chart_model`] and [`charts`]: what each chart shows (pure) and its canvas drawing;
//! - [`cell_detail`]: one decode cell in detail (its window per second, its requests' TTFTs,
//!   its repeats and intervals) for the panel under the heatmap — pure;
//! - [`compare`]: what the diff view shows (delta heatmap, matched-measurement table) — pure;
//! - [`diff`]: the diff view (`?a=…&b=…`): two runs compared.
//! - [`run_index`]: the site's run table (sort, filters, picks) — pure; drawn by [`app`].
//! - [`multi`] and [`multi_view`]: the comparison of 2 … 12 runs (`?compare=…&compare=…`):
//!   overlaid charts, per-GPU Pareto frontiers, capacity at the reader's SLO, every cell side
//!   by side — what it shows (pure) and its elements.
//! - [`live`]: the live page (`run --serve`, `serve --watch`): a run followed while it is
//!   measured.
//! - [`simulated`]: the "Simulated" banner and marks of runs that measured the twin.
//!
//! Loading, validation and number formats come from `speedmatrix-schema`, never from here.

#![warn(missing_docs)]

// The unit tests run on wasm32 in headless Chromium (scripts/test.sh), where the page runs.
#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod app;
pub mod cell_detail;
pub mod chart_model;
pub mod charts;
pub mod compare;
pub mod components;
pub mod diff;
pub mod live;
pub mod multi;
pub mod multi_view;
pub mod report;
pub mod run_index;
pub mod simulated;
pub mod sources;

/// The schema version the viewer understands (the one `speedmatrix-schema` reads).
pub const SCHEMA_VERSION: u32 = speedmatrix_schema::SCHEMA_VERSION;

/// Mount the page on `<body>`: the live page when the server marked it live, the comparison
/// of many runs for two or more `?compare=URL`, the diff view when the URL asks for it (`?a=`,
/// `?b=`, `?compare` alone), else the report (with the site's run table).
pub fn mount() {
    if let Some(url) = live::live_url() {
        leptos::mount::mount_to_body(move || leptos::view! { <live::LivePage url=url /> });
    } else if multi_view::requested() {
        leptos::mount::mount_to_body(multi_view::MultiPage);
    } else if diff::requested() || sources::embedded_runs().len() == 2 {
        leptos::mount::mount_to_body(diff::DiffPage);
    } else {
        leptos::mount::mount_to_body(app::App);
    }
}
