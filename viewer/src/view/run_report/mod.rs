//! The report of one run ([`Report`]) and its sections, in page order:
//!
//! - `header`: the summary cards, what the file lacks, the downloads, the launch command;
//! - `prefill`: the prefill table;
//! - `heatmap`: the sustained-decode heatmap, its metric picker and legend (its table, cells
//!   and metric options are shared with the diff view);
//! - `cell_panel`: the detail panel of the heatmap cell opened (its window, requests, repeats
//!   and intervals);
//! - `rates`: the open-loop rate cells (table, status legend, TTFT against the achieved rate),
//!   when the run has any;
//! - `traces`: the replayed traces (their figures, the trace in words, each one's timeline:
//!   offered and completed, in flight, TTFT), when the run has any;
//! - `conversations`: the multi-turn conversations (the per-turn table, TTFT and ITL by turn),
//!   when the run has any;
//! - the charts, each with its readout, table mirror and PNG ([`crate::view::chart_view`]);
//! - `measurements`: the all-measurements table with its sort and filters.
//!
//! What each section shows is computed by [`crate::model::run_report`] (pure, unit-tested); these
//! components only turn it into elements. Every string from a results file is inserted as
//! text, never as HTML.

mod cell_panel;
mod conversations;
mod header;
mod heatmap;
mod measurements;
mod prefill;
mod rates;
mod traces;

pub(crate) use heatmap::{heat_cell, matrix_table, metric_options};

use crate::model::run_report;
use crate::view::browser;
use crate::view::chart_view;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// The report of one run: title, cards, launch command, prefill table, heatmap, request rates,
/// trace replay, conversations, charts and the all-measurements table.
#[component]
pub fn Report(
    /// The run.
    r: Arc<Results>,
    /// The heatmap's metric, a registry column id (`total_tps`, `ttft_ms_p50`).
    metric: RwSignal<String>,
    /// Table state, theme and viewport (default: [`ViewState::detached`]).
    #[prop(optional)]
    view: Option<ViewState>,
) -> impl IntoView {
    let view = view.unwrap_or_else(ViewState::detached);
    let notes = r.run.notes.clone();
    // A link to a section (`#decode`, `#all`) scrolls there once the report is drawn.
    request_animation_frame(|| {
        // For the render benchmark (tests/benches/viewer_render.rs): the report is in the DOM.
        browser::mark("speedmatrix-report");
        let hash = window().location().hash().unwrap_or_default();
        if let Some(el) =
            hash.strip_prefix('#').filter(|h| !h.is_empty()).and_then(|id| document().get_element_by_id(id))
        {
            el.scroll_into_view();
        }
    });
    view! {
        <article class="report">
            <p class="eyebrow">"Speed test matrix"</p>
            <h1 id="run-title">{run_report::title(&r)}</h1>
            <p class="subtitle" id="run-subtitle">{run_report::subtitle(&r)}</p>
            <crate::view::simulated_marks::SimulatedBanner r=r.clone() />
            {notes.map(|n| view! {
                <details class="run-notes">
                    <summary>"Notes"</summary>
                    <p>{n}</p>
                </details>
            })}
            <header::Cards r=r.clone() />
            <header::Gaps r=r.clone() />
            <header::Exports r=r.clone() />
            {r.engine.launch_command.clone().map(|cmd| view! { <header::LaunchCommand cmd=cmd /> })}
            <prefill::PrefillTable r=r.clone() />
            <heatmap::DecodeHeatmap r=r.clone() metric=metric view=view />
            <rates::RateSection r=r.clone() view=view />
            <traces::TraceSection r=r.clone() view=view />
            <conversations::ConversationSection r=r.clone() view=view />
            <chart_view::Charts r=r.clone() view=view />
            <measurements::AllMeasurements r=r view=view />
        </article>
    }
}
