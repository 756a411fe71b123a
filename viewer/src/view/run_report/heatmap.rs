//! The sustained-decode section: the context × concurrency heatmap of one metric (picked from
//! the registry's heatmap metrics, kept in the URL), its colour legend, the marks of the
//! statuses and the detail panel of the cell clicked (or Enter / Space on a focused one). The
//! table, its cells and the metric options are also drawn by the diff view.

use super::cell_panel::CellPanel;
use crate::model::cell_detail::CellKey;
use crate::model::run_report::{self, HeatCell};
use crate::view::browser;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::prefix;
use speedmatrix_schema::registry::{column, Column};
use speedmatrix_schema::{CellStatus, PrefillMode, Results};
use std::sync::Arc;
use wasm_bindgen::JsCast;

/// A context × concurrency table (the heatmap, and the diff view's matrices): a header row of
/// concurrency levels, one row per context, each cell drawn by `cell`.
pub(crate) fn matrix_table<C: 'static, V: IntoView + 'static>(
    id: &'static str,
    class: &'static str,
    concurrency: &[u32],
    rows: Vec<(String, Vec<C>)>,
    cell: fn(C) -> V,
) -> impl IntoView {
    view! {
        <div class="heatmap-wrap">
            <table class=class id=id>
                <thead>
                    <tr>
                        <th scope="col" class="corner">"Context"</th>
                        {concurrency.iter().map(|n| view! { <th scope="col" class="num">{n.to_string()}</th> }).collect_view()}
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|(label, cells)| {
                            view! {
                                <tr>
                                    <th scope="row">{label}</th>
                                    {cells.into_iter().map(cell).collect_view()}
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// The `<option>`s of a metric selector: (id, label, has data) each, the selected one marked,
/// those without data disabled with `no_data` after the label.
pub(crate) fn metric_options(
    choices: Vec<(String, String, bool)>,
    selected: Memo<Column>,
    no_data: &'static str,
) -> impl IntoView {
    choices
        .into_iter()
        .map(|(id, label, has)| {
            let is_selected = {
                let id = id.clone();
                move || selected.get().id() == id
            };
            let text = if has { label } else { format!("{label} — {no_data}") };
            view! { <option value=id selected=is_selected disabled=!has>{text}</option> }
        })
        .collect_view()
}

/// One heatmap cell (also drawn by the diff view's side-by-side matrices).
pub(crate) fn heat_cell(c: HeatCell) -> impl IntoView {
    let status = c.status;
    let class = match status {
        None => "hm-cell st-none".to_string(),
        Some(s) => format!("hm-cell st-{}", s.id()),
    };
    let light = c.light_text();
    let background = c.background();
    let tip = match (status, &c.reason) {
        (Some(s), Some(why)) => Some(format!("{}: {why}", s.label())),
        (Some(s), None) if s != CellStatus::Valid => Some(format!("{}: {}", s.label(), run_report::status_meaning(s))),
        _ => None,
    };
    // Why the figure is empty goes after the status' reason (a queued cell may have both).
    let tip = match (tip, &c.empty) {
        (Some(t), Some(e)) => Some(format!("{t}. Empty: {}", e.reason)),
        (None, Some(e)) => Some(format!("Empty: {}", e.reason)),
        (t, None) => t,
    };
    let empty = c.empty.as_ref().map(|e| e.short);
    let spoken = c.spoken();
    let main = match (status, c.value) {
        (_, Some(v)) => v,
        (None, None) => run_report::DASH.to_string(),
        (Some(s), None) if s.is_measured() => run_report::DASH.to_string(),
        (Some(s), None) => format!("{} {}", run_report::status_mark(s), s.label()),
    };
    let status_line = status.filter(|s| *s != CellStatus::Valid && s.is_measured());
    view! {
        <td
            class=class
            class:light=light
            data-context=c.context
            data-concurrency=c.concurrency.to_string()
            style:background-color=background
            tabindex="0"
            aria-label=spoken
        >
            <span class="hm-value">{main}</span>
            {status_line.map(|s| view! { <span class="hm-status">{run_report::status_mark(s)} " " {s.label()}</span> })}
            {c.note.map(|n| view! { <span class="hm-status cell-note">{n}</span> })}
            {empty.map(|e| view! { <span class="hm-status hm-empty">{e}</span> })}
            {c.ttft.map(|t| view! { <span class="hm-ttft">{t}</span> })}
            {tip.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

/// Sustained decode: the context × concurrency heatmap with a metric selector and a legend,
/// and the panel of the cell opened (`view.cell`).
#[component]
pub(super) fn DecodeHeatmap(r: Arc<Results>, metric: RwSignal<String>, view: ViewState) -> impl IntoView {
    if r.decode.is_empty() {
        return None;
    }
    let total = column(run_report::DEFAULT_METRIC).expect("total_tps is in the registry");
    let options = run_report::heatmap_metrics();
    let selected =
        Memo::new(move |_| run_report::heatmap_column(&metric.get()).filter(|c| options.contains(c)).unwrap_or(total));
    let choices: Vec<(String, String, bool)> = run_report::heatmap_metrics()
        .iter()
        .map(|c| (c.id(), run_report::metric_option_label(c), run_report::has_decode_data(&r, c)))
        .collect();
    let warmup_note = r.config.prefill_mode == Some(PrefillMode::DecodeWarmup);
    let shares = run_report::decode_shares(&r);
    let r_share = r.clone();
    let shown_share = Memo::new(move |_| run_report::heatmap_share(&r_share, view.share.get()));
    let statuses_present: Vec<CellStatus> =
        CellStatus::ALL.into_iter().filter(|s| r.decode.iter().any(|c| c.status == *s)).collect();
    Some(view! {
        <section class="section" id="decode">
            <h2>"Sustained decode"</h2>
            <div class="section-bar">
                <p class="section-sub">
                    {move || run_report::metric_option_label(&selected.get())}
                    {move || shown_share.get().map(|k| format!(" · prefix share {}", prefix::share_label(f64::from(k) / 10_000.0)))}
                    " · rows are context length, columns are simultaneous requests"
                </p>
                {share_picker(shares.clone(), shown_share, view)}
                <label class="metric-picker">
                    "Metric "
                    <select
                        id="heatmap-metric"
                        on:change=move |ev| {
                            let id = event_target_value(&ev);
                            browser::push_query(&[("metric", (id != run_report::DEFAULT_METRIC).then(|| id.clone()))]);
                            metric.set(id);
                        }
                    >
                        {metric_options(choices, selected, "no data in this run")}
                    </select>
                </label>
            </div>
            {
                let r = r.clone();
                move || {
                    let shown = Arc::new(run_report::at_share(&r, shown_share.get()));
                    clickable_cells(shown.clone(), view.cell, heatmap_and_legend(shown, selected))
                }
            }
            {status_marks(&statuses_present)}
            {warmup_note
                .then(|| {
                    view! {
                        <p class="note">
                            "TTFT is measured after the benchmark warms the server's prompt cache, so it mostly excludes prefill."
                        </p>
                    }
                })}
            {move || {
                run_report::share_note(shown_share.get(), shares.len())
                    .map(|n| view! { <p class="note" id="heatmap-prefix-shares">{n}</p> })
            }}
            {
                let r = r.clone();
                move || {
                    let shown = Arc::new(run_report::at_share(&r, shown_share.get()));
                    view! { <CellPanel r=shown view=view /> }
                }
            }
        </section>
    })
}

/// The picker of the prefix share whose cells the heatmap shows, for a run with cells at two
/// or more shares (`run --prefix-share 0,50%,90%`); kept in the URL (`?share=90`).
fn share_picker(shares: Vec<u32>, shown: Memo<Option<u32>>, view: ViewState) -> Option<impl IntoView> {
    (shares.len() > 1).then(|| {
        view! {
            <label class="metric-picker">
                "Prefix share "
                <select
                    id="heatmap-share"
                    on:change=move |ev| {
                        if let Some(k) = run_report::parse_share_param(&event_target_value(&ev)) {
                            browser::push_query(&[("share", Some(run_report::share_param(k)))]);
                            view.share.set(Some(k));
                        }
                    }
                >
                    {shares
                        .into_iter()
                        .map(|k| {
                            let label = prefix::share_label(f64::from(k) / 10_000.0);
                            view! { <option value=run_report::share_param(k) selected=move || shown.get() == Some(k)>{label}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
        }
    })
}

/// The heatmap `inner` with its cells opening their panel: a click on a cell, or Enter / Space
/// on a focused one (one listener for all cells, so the cells stay those the diff view draws).
fn clickable_cells(r: Arc<Results>, cell: RwSignal<Option<CellKey>>, inner: impl IntoView) -> impl IntoView {
    let r_key = r.clone();
    let on_click = move |ev: web_sys::MouseEvent| {
        open_cell(&r, &ev, cell);
    };
    let on_key = move |ev: web_sys::KeyboardEvent| {
        if matches!(ev.key().as_str(), "Enter" | " ") && open_cell(&r_key, &ev, cell) {
            ev.prevent_default();
        }
    };
    view! { <div class="heatmap-cells" on:click=on_click on:keydown=on_key>{inner}</div> }
}

/// Open the panel of the heatmap cell event `ev` happened in: its key goes to `cell` and the
/// URL (`?cell=8192x128`). Whether a cell of the file was hit (a cell the file lacks opens
/// nothing).
fn open_cell(r: &Results, ev: &web_sys::Event, cell: RwSignal<Option<CellKey>>) -> bool {
    let target = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
    let Some(td) = target.and_then(|e| e.closest("#heatmap td.hm-cell").ok().flatten()) else { return false };
    let label = td.get_attribute("data-context").unwrap_or_default();
    let Some(n) = td.get_attribute("data-concurrency").and_then(|v| v.parse().ok()) else { return false };
    let Some(key) = CellKey::from_label(r, &label, n).filter(|k| k.find(r).is_some()) else { return false };
    browser::push_query(&[("cell", Some(key.param()))]);
    cell.set(Some(key));
    true
}

/// The heatmap of the selected metric and its colour scale (redrawn when the metric changes).
fn heatmap_and_legend(r: Arc<Results>, selected: Memo<Column>) -> impl IntoView {
    move || {
        let h = run_report::heatmap(&r, &selected.get());
        let (lo, hi) = h.scale_ends.clone().unwrap_or_else(|| (run_report::DASH.into(), run_report::DASH.into()));
        let direction = match (h.darker_is_better, h.log_scale) {
            (Some(_), true) => "darker is better · logarithmic scale",
            (Some(_), false) => "darker is better",
            (None, true) => "darker is higher · logarithmic scale",
            (None, false) => "darker is higher",
        };
        view! {
            {matrix_table("heatmap", "heatmap", &h.concurrency, h.rows, heat_cell)}
            <div class="legend" id="heatmap-legend">
                <div class="scale">
                    <span class="scale-lo">{lo}</span>
                    <span class="scale-bar" style:background=run_report::scale_gradient()></span>
                    <span class="scale-hi">{hi}</span>
                    <span class="scale-dir">{direction}</span>
                </div>
                {h.assumed.map(|a| view! { <p class="assumed" id="heatmap-assumed">{a}</p> })}
            </div>
        }
    }
}

/// The marks of the statuses a cell can have, those absent from this run dimmed.
fn status_marks(present: &[CellStatus]) -> impl IntoView {
    view! {
        <ul class="marks">
            {[CellStatus::RequestsQueued, CellStatus::OverCapacity, CellStatus::Error, CellStatus::NotRun]
                .into_iter()
                .map(|s| {
                    let present = present.contains(&s);
                    view! {
                        <li class:absent=!present>
                            <span class=format!("swatch st-{}", s.id())>{run_report::status_mark(s)}</span>
                            <b>{s.label()} ":"</b>
                            " "
                            {run_report::status_meaning(s)}
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}
