//! What the page shows, as plain data: pure functions of one or more results files (no DOM, no
//! Leptos), unit-tested on wasm32 in headless Chromium (scripts/test.sh). Nothing here refers to
//! the view; each file's view is named in its own docs and in the crate's table.

pub mod cell_detail;
pub mod chart_spec;
pub mod conversation_report;
pub mod live_feed;
pub mod multi_run;
pub mod rate_diff;
pub mod rate_report;
pub mod run_diff;
pub mod run_index;
pub mod run_report;
pub mod trace_diff;
pub mod trace_report;
