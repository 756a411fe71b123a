//! The all-measurements section: every prefill and decode row in one table, sortable on every
//! column (click; shift-click adds the next key), filterable by phase, context, concurrency and
//! status, with the registry's other columns on demand. Sort, filters and columns live in the
//! URL ([`ViewState`]).

use crate::model::run_report::{self, Filters, SortKey, TableColumn};
use crate::view::browser;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::table::{rows, Phase};
use speedmatrix_schema::{CellStatus, Results};
use std::sync::Arc;

/// All measurements: sortable on every column, filterable.
#[component]
pub(super) fn AllMeasurements(r: Arc<Results>, view: ViewState) -> impl IntoView {
    let all_columns = view.all_columns;
    let filters = view.filters;
    let r_cols = r.clone();
    let cols = Memo::new(move |_| run_report::table_columns(&r_cols, all_columns.get()));
    let keys = Memo::new(move |_| cols.with(|cs| run_report::sort_keys(cs, &view.sort.get())));
    let r_order = r.clone();
    let order =
        Signal::derive(move || cols.with(|cs| run_report::table_order(&r_order, cs, &keys.get(), &filters.get())));
    view! {
        <section class="section" id="all">
            <h2>"All measurements"</h2>
            <p class="section-sub">
                "Latencies are medians. Total tok/s is output across all simultaneous requests (prompt tok/s on prefill rows)."
            </p>
            {filter_bar(&r, view, order)}
            <p class="hint">"Click a column header to sort by it; shift-click adds it as the next sort key."</p>
            <div class="table-wrap">
                <table class="measurements" id="measurements">
                    <thead>
                        <tr>{header_cells(cols, keys, view)}</tr>
                    </thead>
                    <tbody>{body_rows(r, cols, order)}</tbody>
                </table>
            </div>
        </section>
    }
}

/// The filters (phase, context, requests at once, status), the every-column switch and the
/// row count.
fn filter_bar(r: &Results, view: ViewState, order: Signal<Vec<usize>>) -> impl IntoView {
    let (all_columns, filters) = (view.all_columns, view.filters);
    let total = rows(r).len();
    let (contexts, levels, statuses) = run_report::filter_choices(r);
    let phase_choices = vec![
        (Phase::Prefill.id().to_string(), Phase::Prefill.label().to_string()),
        (Phase::Decode.id().to_string(), Phase::Decode.label().to_string()),
    ];
    let context_choices = contexts.iter().map(|(t, l)| (t.to_string(), l.clone())).collect();
    let level_choices = levels.iter().map(|n| (n.to_string(), n.to_string())).collect();
    let status_choices = statuses.iter().map(|s| (s.id().to_string(), s.label().to_string())).collect();
    let set_phase =
        |f: &mut Filters, v: &str| f.phase = [Phase::Prefill, Phase::Decode].into_iter().find(|p| p.id() == v);
    let set_status = |f: &mut Filters, v: &str| f.status = CellStatus::ALL.into_iter().find(|s| s.id() == v);
    view! {
        <div class="filters">
            {filter_select(filters, "filter-phase", "Phase", phase_choices, set_phase, "phase")}
            {filter_select(filters, "filter-context", "Context", context_choices, |f, v| f.context = v.parse().ok(), "context")}
            {filter_select(
                filters,
                "filter-concurrency",
                "Requests at once",
                level_choices,
                |f, v| f.concurrency = v.parse().ok(),
                "concurrency",
            )}
            {filter_select(filters, "filter-status", "Status", status_choices, set_status, "status")}
            <label class="filter">
                <input
                    type="checkbox"
                    id="all-columns"
                    prop:checked=move || all_columns.get()
                    on:change=move |ev| {
                        let all = event_target_checked(&ev);
                        view.sort.set(Vec::new());
                        all_columns.set(all);
                        browser::push_query(&[("sort", None), ("columns", all.then(|| "all".to_string()))]);
                    }
                />
                " every column"
            </label>
            <span class="row-count" id="row-count">{move || format!("{} of {total} rows", order.get().len())}</span>
        </div>
    }
}

/// One filter: a labelled `<select>` of `choices` (value, text) after "All"; a change sets the
/// filter with `set` and records it in the URL as `param`.
fn filter_select(
    filters: RwSignal<Filters>,
    id: &'static str,
    label: &'static str,
    choices: Vec<(String, String)>,
    set: fn(&mut Filters, &str),
    param: &'static str,
) -> impl IntoView {
    // The option shown as selected follows the filter (a permalink or back/forward sets it).
    let current = move || {
        filters.with(|f| run_report::filter_params(f).into_iter().find(|(k, _)| *k == param).and_then(|(_, v)| v))
    };
    view! {
        <label class="filter">
            {label} " "
            <select id=id on:change=move |ev| {
                let v = event_target_value(&ev);
                filters.update(|f| set(f, &v));
                browser::push_query(&filters.with_untracked(run_report::filter_params));
            }>
                <option value="" selected=move || current().is_none()>"All"</option>
                {choices
                    .into_iter()
                    .map(|(v, t)| {
                        let v2 = v.clone();
                        view! { <option value=v selected=move || current().as_deref() == Some(v2.as_str())>{t}</option> }
                    })
                    .collect_view()}
            </select>
        </label>
    }
}

/// The header cells: each a sort button with the key's direction (and rank, with several keys).
fn header_cells(cols: Memo<Vec<TableColumn>>, keys: Memo<Vec<SortKey>>, view: ViewState) -> impl IntoView {
    move || {
        let k = keys.get();
        cols.get()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let pos = k.iter().position(|x| x.column == i);
                let sort = pos.map(|p| (p, k[p].ascending));
                let aria = match sort {
                    Some((_, true)) => "ascending",
                    Some((_, false)) => "descending",
                    None => "none",
                };
                let indicator = match sort {
                    Some((p, asc)) if k.len() > 1 => format!("{}{}", if asc { "▲" } else { "▼" }, p + 1),
                    Some((_, asc)) => (if asc { "▲" } else { "▼" }).to_string(),
                    None => String::new(),
                };
                view! {
                    <th scope="col" class:num=c.numeric() data-col=c.id() aria-sort=aria>
                        <button
                            type="button"
                            class="sort"
                            on:click=move |ev: web_sys::MouseEvent| {
                                let shift = ev.shift_key();
                                let mut k = keys.get_untracked();
                                run_report::click_sort(&mut k, i, shift);
                                let ids = cols.with_untracked(|cs| run_report::sort_ids(cs, &k));
                                browser::push_query(&[("sort", run_report::encode_sort(&ids))]);
                                view.sort.set(ids);
                            }
                        >
                            {c.header()}
                            <span class="sort-ind">{indicator}</span>
                        </button>
                    </th>
                }
            })
            .collect_view()
    }
}

/// The rows kept by the filters, in sort order; a status cell's title says why.
fn body_rows(r: Arc<Results>, cols: Memo<Vec<TableColumn>>, order: Signal<Vec<usize>>) -> impl IntoView {
    move || {
        let cs = cols.get();
        let rs = rows(&r);
        order
            .get()
            .into_iter()
            .map(|i| {
                let row = rs[i];
                let reason = row.reason().map(str::to_string);
                view! {
                    <tr class=format!("st-{}", row.status().id())>
                        {cs
                            .iter()
                            .map(|c| {
                                // An empty figure with a known cause says so ("— none finished").
                                let empty = c.empty_why(&row, &r);
                                let explained = empty.is_some();
                                let text = match &empty {
                                    Some(e) => format!("{} {}", run_report::DASH, e.short),
                                    None => c.text(&row),
                                };
                                let title = match c {
                                    TableColumn::Status => reason.clone(),
                                    _ => empty.map(|e| e.reason),
                                };
                                view! {
                                    <td class:num=c.numeric() class:empty-why=explained data-col=c.id() title=title>
                                        {text}
                                    </td>
                                }
                            })
                            .collect_view()}
                    </tr>
                }
            })
            .collect_view()
    }
}
