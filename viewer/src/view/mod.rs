//! The page's elements: Leptos components that turn the [`crate::model`] into elements.
//!
//! - the four pages [`crate::mount`] chooses from: [`report_page`] (the site's run table and
//!   one run's report), [`diff_page`], [`multi_run_page`] and [`live_page`];
//! - what they share: [`run_report`] (the report of one run, one file per section),
//!   [`chart_view`] with [`chart_canvas`], [`simulated_marks`], [`view_state`] (sort, filters,
//!   the open cell, theme and viewport) and [`browser`] (the browser edge).
//!
//! The imports go one way: a page uses the shared parts, never another page; the shared parts
//! never use a page.

pub mod browser;
pub mod chart_canvas;
pub mod chart_view;
pub mod diff_page;
pub mod live_page;
pub mod multi_run_page;
pub mod report_page;
pub mod run_report;
pub mod simulated_marks;
pub mod site_digests;
pub mod view_state;
