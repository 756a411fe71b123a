//! # speedmatrix-viewer
//!
//! The report page of speedmatrix: a Leptos CSR app that scripts/build-viewer.sh builds into the repository's
//! `dist/` (cargo, wasm-bindgen, wasm-opt), which the `speedmatrix` binary embeds for `publish` and
//! `serve`.
//!
//! Two layers, one direction:
//!
//! - [`model`]: what the page shows, as plain data — pure functions of the results files (no
//!   DOM, no Leptos), unit-tested (on wasm32 in headless Chromium by CI). A model file never
//!   refers to a view file.
//! - [`view`]: the Leptos components that turn the model into elements, the four pages
//!   [`mount`] chooses from, the view state they share and the browser edge
//!   ([`view::browser`]: fetch, local files, query string, clipboard).
//!
//! What each model file is drawn by:
//!
//! | model | view |
//! |---|---|
//! | [`model::run_report`] | [`view::run_report`] (the report of one run, one file per section) |
//! | [`model::chart_spec`] | [`view::chart_view`] (the charts section), [`view::chart_canvas`] (the canvas drawing) |
//! | [`model::cell_detail`] | `view::run_report::cell_panel` (the panel under the heatmap) |
//! | [`model::trace_report`] | `view::run_report::traces` (the replayed traces and their timelines) |
//! | [`model::run_index`] | `view::report_page::run_table` (the site's run table) |
//! | [`model::run_diff`] | [`view::diff_page`] (`?a=…&b=…`: two runs compared) |
//! | [`model::multi_run`] | [`view::multi_run_page`] (`?compare=…&compare=…`: 2 … 12 runs) |
//! | [`model::live_feed`] | [`view::live_page`] (`run --serve`, `serve --watch`) |
//!
//! Loading, validation, the comparison of two runs ([`speedmatrix_schema::diff`], its
//! [`Verdict`](speedmatrix_schema::diff::Verdict)) and number formats come from
//! `speedmatrix-schema`, never from here.

#![warn(missing_docs)]

// The unit tests run on wasm32 in headless Chromium (scripts/test.sh), where the page runs.
#[cfg(all(test, target_arch = "wasm32"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub mod model;
pub mod view;

/// The schema version the viewer understands (the one `speedmatrix-schema` reads).
pub const SCHEMA_VERSION: u32 = speedmatrix_schema::SCHEMA_VERSION;

/// Mount the page on `<body>`: the live page when the server marked it live, the comparison
/// of many runs for two or more `?compare=URL`, the diff view when the URL asks for it (`?a=`,
/// `?b=`, `?compare` alone), else the report (with the site's run table).
pub fn mount() {
    if let Some(url) = view::live_page::live_url() {
        leptos::mount::mount_to_body(move || leptos::view! { <view::live_page::LivePage url=url /> });
    } else if view::multi_run_page::requested() {
        leptos::mount::mount_to_body(view::multi_run_page::MultiPage);
    } else if view::diff_page::requested() || view::browser::embedded_runs().len() == 2 {
        leptos::mount::mount_to_body(view::diff_page::DiffPage);
    } else {
        leptos::mount::mount_to_body(view::report_page::App);
    }
}
