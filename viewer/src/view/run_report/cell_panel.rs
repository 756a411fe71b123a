//! The detail panel of one decode cell, under the heatmap: opened by a click on a cell (or
//! Enter / Space on a focused one), closed by its button, kept in the URL (`?cell=8192x128`) so
//! a link reopens it. What it shows comes from [`crate::model::cell_detail`]: a prefix-share
//! cell's measured hit rate beside its plan, the cell's speculative decoding, its intervals,
//! its repeats and their spread, and for the window picked (the latest repeat first) its
//! per-second charts, its requests' TTFTs and its errors — or the words saying the file has none.

use crate::model::cell_detail::{self, CellKey, FigureLine, IntervalLine, RepeatLine};
use crate::model::chart_spec::ChartSpec;
use crate::model::run_report;
use crate::view::browser;
use crate::view::chart_view::ChartView;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::{DecodeCell, Results};
use std::sync::Arc;

/// The panel of the cell in `view.cell`, if the run has that cell; nothing otherwise.
#[component]
pub(super) fn CellPanel(r: Arc<Results>, view: ViewState) -> impl IntoView {
    move || panel(r.clone(), view.cell.get()?, view)
}

/// The panel of cell `key` of `r`; `None` when the run has no such cell.
fn panel(r: Arc<Results>, key: CellKey, view: ViewState) -> Option<impl IntoView> {
    let c = key.find(&r)?;
    let windows = cell_detail::windows(c).len();
    let picked = RwSignal::new(windows.saturating_sub(1));
    let close = move |_| {
        browser::push_query(&[("cell", None)]);
        view.cell.set(None);
    };
    let status = format!("{} {}", run_report::status_mark(c.status), c.status.label());
    let r_window = r.clone();
    Some(view! {
        <section class="cell-panel" id="cell-panel" data-cell=key.param() aria-labelledby="cell-panel-title">
            <div class="cell-panel-bar">
                <h3 id="cell-panel-title">{cell_detail::title(c)}</h3>
                <span class=format!("cell-status st-{}", c.status.id()) id="cell-status">{status.trim().to_string()}</span>
                <button type="button" class="png" id="cell-close" on:click=close>"Close"</button>
            </div>
            {c.reason.clone().map(|why| view! { <p class="note" id="cell-reason">{why}</p> })}
            {figures("Prefix cache", "cell-prefix-cache", cell_detail::prefix_cache_lines(c))}
            {figures("Speculative decoding", "cell-spec-decode", cell_detail::spec_decode_lines(c))}
            {intervals(c)}
            {repeats(c)}
            {window_picker(c, picked)}
            {move || window_view(&r_window, key, picked.get(), view)}
        </section>
    })
}

/// A list of the cell's figures under `heading` (its prefix cache, its speculative decoding);
/// nothing when it has none.
fn figures(heading: &'static str, id: &'static str, lines: Vec<FigureLine>) -> Option<impl IntoView> {
    (!lines.is_empty()).then(|| {
        view! {
            <h4>{heading}</h4>
            <ul class="cell-intervals" id=id>
                {lines
                    .into_iter()
                    .map(|l| view! { <li data-figure=l.figure><b>{l.label} ": "</b>{l.text}</li> })
                    .collect_view()}
            </ul>
        }
    })
}

/// The cell's intervals, one line per figure, or why there are none.
fn intervals(c: &DecodeCell) -> impl IntoView {
    let body = match cell_detail::interval_lines(c) {
        Err(why) => view! { <p class="unavailable" id="cell-intervals-missing">{why}</p> }.into_any(),
        Ok(lines) => view! {
            <ul class="cell-intervals" id="cell-intervals">
                {lines.into_iter().map(interval_item).collect_view()}
            </ul>
        }
        .into_any(),
    };
    view! {
        <h4>"Intervals"</h4>
        {body}
    }
}

/// One figure's interval line.
fn interval_item(l: IntervalLine) -> impl IntoView {
    view! {
        <li data-figure=l.figure class:unavailable=!l.available>
            <b>{l.label} ": "</b>
            {l.text}
        </li>
    }
}

/// The repeats table and the spread lines; nothing for a cell measured once.
fn repeats(c: &DecodeCell) -> Option<impl IntoView> {
    let lines = cell_detail::repeat_lines(c);
    if lines.is_empty() {
        return None;
    }
    let spread = cell_detail::spread_lines(c);
    Some(view! {
        <h4>"Repeats"</h4>
        <div class="table-wrap">
            <table class="measurements" id="cell-repeats">
                <thead>
                    <tr>
                        <th scope="col" class="num">"Repeat"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col" class="num">"Total tok/s"</th>
                        <th scope="col" class="num">"TTFT p50"</th>
                        <th scope="col" class="num">"TPOT p50"</th>
                        <th scope="col" class="num">"Window opened (from run start)"</th>
                    </tr>
                </thead>
                <tbody>{lines.into_iter().map(repeat_row).collect_view()}</tbody>
            </table>
        </div>
        <ul class="cell-spread" id="cell-spread">
            {spread.into_iter().map(|s| view! { <li>{s}</li> }).collect_view()}
        </ul>
    })
}

/// One repeat's row (its status' reason on hover).
fn repeat_row(l: RepeatLine) -> impl IntoView {
    view! {
        <tr class=format!("st-{}", l.status.id())>
            <td class="num">{l.repeat}</td>
            <td title=l.reason>{l.status.label()}</td>
            <td class="num">{l.total_tps}</td>
            <td class="num">{l.ttft_p50}</td>
            <td class="num">{l.tpot_p50}</td>
            <td class="num">{l.window_start}</td>
        </tr>
    }
}

/// The picker of the window drawn, with two or more windows (repeats).
fn window_picker(c: &DecodeCell, picked: RwSignal<usize>) -> Option<impl IntoView> {
    let labels: Vec<String> = cell_detail::windows(c).into_iter().map(|w| w.label).collect();
    (labels.len() > 1).then(|| {
        view! {
            <label class="filter">
                "Window of "
                <select id="cell-window-select" on:change=move |ev| {
                    if let Ok(i) = event_target_value(&ev).parse() {
                        picked.set(i);
                    }
                }>
                    {labels
                        .into_iter()
                        .enumerate()
                        .map(|(i, l)| view! { <option value=i.to_string() selected=move || picked.get() == i>{l}</option> })
                        .collect_view()}
                </select>
            </label>
        }
    })
}

/// Window `i` of the cell: its per-second charts (or why there are none), its TTFT chart (or
/// why) and its errors.
fn window_view(r: &Results, key: CellKey, i: usize, view: ViewState) -> Option<impl IntoView> {
    let c = key.find(r)?;
    let windows = cell_detail::windows(c);
    let w = windows.get(i).or(windows.last())?;
    let stem = run_report::file_stem(r);
    let chart = |spec: Result<ChartSpec, &'static str>, missing: &'static str| match spec {
        Ok(spec) => view! { <ChartView spec=spec view=view stem=stem.clone() /> }.into_any(),
        Err(why) => view! { <p class="unavailable" id=missing>{why}</p> }.into_any(),
    };
    let series = match (cell_detail::rate_chart(w), cell_detail::streams_chart(w)) {
        (Ok(rate), Ok(streams)) => view! { {chart(Ok(rate), "")} {chart(Ok(streams), "")} }.into_any(),
        (rate, _) => chart(rate, "cell-series-missing"),
    };
    let errors = cell_detail::errors(w);
    Some(view! {
        <h4>{w.label.clone()}</h4>
        <div class="charts">
            {series}
            {chart(cell_detail::ttft_chart(w), "cell-ttft-missing")}
        </div>
        {(!errors.is_empty()).then(|| view! {
            <h4>"Errors"</h4>
            <ul class="cell-errors" id="cell-errors">
                {errors.into_iter().map(|e| view! { <li>{e}</li> }).collect_view()}
            </ul>
        })}
    })
}
